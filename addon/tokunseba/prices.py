"""A user's price table, and the cost of the usage each endpoint reported (pure but for reading the file).

```yaml
prices:                      # per million tokens, in the user's currency
  anthropic:claude-haiku-*: {input: 1.0, output: 5.0, cache_read: 0.1, cache_write: 1.25}
  local:*: {input: 0, output: 0}
```

Keys are ``ENDPOINT:MODEL_GLOB``; the first key (in file order) matching a turn's endpoint and
model prices it. Costs are computed only from usage as reported, in the counting of the
endpoint that reported it: OpenAI ``prompt_tokens`` include cached tokens, so the uncached
input is input − cache read − cache write; Anthropic ``input_tokens`` exclude them.
Reasoning tokens are part of output in both and are not priced apart. A reported token
field with no price is not guessed: it is listed as unpriced.

"What it would have cost at the original provider" exists only for a turn served
elsewhere for which the original provider itself reported usage (a shadow or a replay to
it): token counts of different models are not comparable, so it is never estimated from
another model's counts.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path

import yaml
from yaml.nodes import MappingNode

from .routing import BUILTIN_ENDPOINTS, YamlReader
from .neutral.usage import includes_cached

PRICE_FIELDS = ("input", "output", "cache_read", "cache_write")
PER_TOKENS = 1_000_000


class PricesError(Exception):
    """A price table that cannot be used; ``str(e)`` is one line ``FILE:LINE: what is wrong``."""


@dataclass(frozen=True)
class Price:
    endpoint: str
    model_glob: str
    per_million: dict  # field -> price per million tokens (only the fields given)

    def matches(self, endpoint: str | None, model: str | None) -> bool:
        return endpoint == self.endpoint and fnmatch.fnmatchcase(model or "", self.model_glob)


def load_prices(path: str | Path) -> list[Price]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PricesError(f"{path}: no such price file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise PricesError(f"{path}: cannot read the price file: {e}") from None
    return parse_prices(text, str(path))


def parse_prices(text: str, source: str = "<prices>") -> list[Price]:
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise PricesError(f"{source}:{mark.line + 1 if mark else 1}: YAML syntax error: "
                          f"{getattr(e, 'problem', None) or str(e).splitlines()[0]}") from None
    r = YamlReader(source)
    out: list[Price] = []
    if not isinstance(root, MappingNode):
        raise PricesError(f"{source}:1: a price file is a mapping with the key 'prices'")
    top = r.mapping(root, "the price file", ("prices",)) or {}
    if "prices" not in top and not r.errors:
        r.error(root, "the price file has no 'prices' mapping")
    entries = r.mapping(top["prices"][1], "prices", None) if "prices" in top else None
    for key, (kn, vn) in (entries or {}).items():
        endpoint, sep, glob = key.partition(":")
        if not sep or not endpoint or not glob:
            r.error(kn, f"prices: key {key!r} must be ENDPOINT:MODEL_GLOB (e.g. anthropic:claude-haiku-*)")
            continue
        fields = r.mapping(vn, f"prices.{key}", PRICE_FIELDS) or {}
        per: dict[str, float] = {}
        for name, (_, v) in fields.items():
            value = r.number(v)
            if value is None or not value >= 0 or value == float("inf"):
                r.error(v, f"prices.{key}.{name} must be a number ≥ 0 (per million tokens), got {r.got(v)}")
            else:
                per[name] = float(value)
        if not fields and isinstance(vn, MappingNode):
            r.error(vn, f"prices.{key} names no price (input, output, cache_read, cache_write)")
        out.append(Price(endpoint, glob, per))
    if r.errors:
        raise PricesError(r.errors[0])
    return out


def find_price(prices: list[Price], endpoint: str | None, model: str | None) -> Price | None:
    return next((p for p in prices if p.matches(endpoint, model)), None)


def usage_cost(price: Price, fields: dict, counting: str | None) -> tuple[float, dict[str, int]]:
    """(cost of the priced fields, tokens of reported fields that have no price)."""
    tokens = {f: fields.get(f) for f in PRICE_FIELDS}
    if includes_cached(counting) and tokens["input"] is not None:  # prompt counts include the cached ones
        tokens["input"] -= (tokens["cache_read"] or 0) + (tokens["cache_write"] or 0)
    cost, unpriced = 0.0, {}
    for f, n in tokens.items():
        if not n:
            continue
        if f in price.per_million:
            cost += n * price.per_million[f] / PER_TOKENS
        else:
            unpriced[f] = n
    return cost, unpriced


def endpoint_of(row: dict) -> str | None:
    """The endpoint that served a turn: its route's, else the built-in one of the host it went to."""
    if row.get("endpoint"):
        return row["endpoint"]
    host = row.get("host")
    return next((name for name, ep in BUILTIN_ENDPOINTS.items() if ep.host == host), host)


def _fields(row: dict) -> dict:
    return {f: row.get(f"usage_{f}") for f in ("input", "output", "cache_read", "cache_write")}


def _priced(prices: list[Price], endpoint: str | None, model: str | None, row: dict) -> tuple[float, dict] | None:
    """The cost of a row's reported usage; None when it reported none or has no price."""
    if row.get("usage_reported") is None or all(v is None for v in _fields(row).values()):
        return None
    price = find_price(prices, endpoint, model)
    if price is None:
        return None
    return usage_cost(price, _fields(row), row.get("usage_protocol"))


def _group(rows: list[tuple[str | None, str | None, dict]], prices: list[Price]) -> tuple[list[dict], float]:
    acc: dict[tuple, dict] = {}
    total = 0.0
    for endpoint, model, row in rows:
        g = acc.setdefault((endpoint, model), {"endpoint": endpoint, "model": model, "turns": 0, "priced": 0,
                                                "cost": 0.0, "no_usage": 0, "no_price": 0, "unpriced_tokens": {}})
        g["turns"] += 1
        if row.get("usage_reported") is None or all(v is None for v in _fields(row).values()):
            g["no_usage"] += 1
            continue
        got = _priced(prices, endpoint, model, row)
        if got is None:
            g["no_price"] += 1
            continue
        cost, unpriced = got
        g["priced"] += 1
        g["cost"] += cost
        total += cost
        for f, n in unpriced.items():
            g["unpriced_tokens"][f] = g["unpriced_tokens"].get(f, 0) + n
    groups = sorted(acc.values(), key=lambda g: (-g["cost"], str(g["endpoint"]), str(g["model"])))
    return groups, total


def price_report(turns: list[dict], shadows: list[dict], prices: list[Price]) -> dict:
    """Cost of the usage each endpoint reported, per endpoint and model: the turns served, the
    shadow and replay calls (they are paid calls too), and — only where the original provider
    reported usage for a turn served elsewhere — what that turn would have cost there."""
    served, served_total = _group([(endpoint_of(t), t.get("model_used") or t.get("requested_model"), t)
                                   for t in turns], prices)
    extra_rows = [(s["endpoint"], s["model"] or s.get("primary_requested_model"), s) for s in shadows
                  if s["kind"] in ("shadow", "replay")]
    extra, extra_total = _group(extra_rows, prices)
    elsewhere = [t for t in turns if t.get("outcome") in ("translated", "retargeted")]
    at_original: dict[str, dict] = {}
    for s in shadows:  # the latest figure from the original provider, per turn
        if s["kind"] in ("shadow", "replay") and s.get("at_original") and s.get("usage_reported") is not None:
            at_original[s["request_id"]] = s
    n, cost_served, cost_original = 0, 0.0, 0.0
    for t in elsewhere:
        orig = at_original.get(t["request_id"])
        if orig is None:
            continue
        mine = _priced(prices, endpoint_of(t), t.get("model_used") or t.get("requested_model"), t)
        theirs = _priced(prices, orig["endpoint"], orig["model"] or t.get("requested_model"), orig)
        if mine is None or theirs is None:
            continue
        n += 1
        cost_served += mine[0]
        cost_original += theirs[0]
    return {
        "served": served, "served_total": served_total,
        "shadow_and_replay_calls": extra, "shadow_and_replay_total": extra_total,
        "original_provider": {
            "turns_served_elsewhere": len(elsewhere), "turns_with_original_usage": n,
            "cost_served": cost_served, "would_have_cost": cost_original,
            "difference": cost_original - cost_served},
    }
