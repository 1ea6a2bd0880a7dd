"""The user's own price table: ``prices:`` in the rules file, or a file given with ``--prices``
(a price file, or a rules file: only its ``prices:`` is read). It overrides the library.

```yaml
prices:                      # USD per million tokens
  anthropic:claude-haiku-*: {input: 1.0, output: 5.0, cache_read: 0.1, cache_write: 1.25}
  local:*: {input: 0, output: 0}
```

Keys are ``ENDPOINT:MODEL_GLOB``; the first key (in file order) matching a turn's endpoint and
model prices it. ``input`` prices the uncached input (billed.py re-bases every counting to
it); a reported count with no price in the row is not guessed: it is listed as unpriced.
Prices are read as decimals from the file's text (never through a float). Pure but for
reading the file.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode

from ..routing import YamlReader
from .billed import Billed

PRICE_FIELDS = ("input", "output", "cache_read", "cache_write")
PER_TOKENS = 1_000_000


class PricesError(Exception):
    """A price table that cannot be used; ``str(e)`` is one line ``FILE:LINE: what is wrong``."""


@dataclass(frozen=True)
class Price:
    endpoint: str
    model_glob: str
    per_million: dict[str, Decimal]  # field -> USD per million tokens (only the fields given)
    source: str = "<prices>"
    line: int = 0

    def matches(self, endpoint: str | None, model: str | None) -> bool:
        return endpoint == self.endpoint and fnmatch.fnmatchcase(model or "", self.model_glob)

    def where(self) -> str:
        """``your table: prices.yaml line 3``"""
        return f"your table: {self.source} line {self.line}"


def load_prices(path: str | Path) -> list[Price]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PricesError(f"{path}: no such price file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise PricesError(f"{path}: cannot read the price file: {e}") from None
    return parse_prices(text, str(path))


def parse_prices(text: str, source: str = "<prices>", *, required: bool = True) -> list[Price]:
    """The ``prices:`` of a price file or a rules file (its other keys are the rules reader's);
    a file without one is an error when ``required`` (a price file), else no prices."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise PricesError(f"{source}:{mark.line + 1 if mark else 1}: YAML syntax error: "
                          f"{getattr(e, 'problem', None) or str(e).splitlines()[0]}") from None
    r = YamlReader(source)
    if not required and not isinstance(root, MappingNode):
        return []  # an empty rules file; anything else is the rules reader's to say
    if not isinstance(root, MappingNode):
        raise PricesError(f"{source}:1: a price file is a mapping with the key 'prices'")
    top = r.mapping(root, "the price file", None) or {}
    if "prices" not in top and required and not r.errors:
        r.error(root, "the price file has no 'prices' mapping")
    out = read_prices(r, top["prices"][1]) if "prices" in top else []
    if r.errors:
        raise PricesError(r.errors[0])
    return out


def read_prices(r: YamlReader, node: Node) -> list[Price]:
    """The ``prices:`` mapping's rows; each mistake is an error of ``r`` (with its line)."""
    out: list[Price] = []
    for key, (kn, vn) in (r.mapping(node, "prices", None) or {}).items():
        endpoint, sep, glob = key.partition(":")
        if not sep or not endpoint or not glob:
            r.error(kn, f"prices: key {key!r} must be ENDPOINT:MODEL_GLOB (e.g. anthropic:claude-haiku-*)")
            continue
        fields = r.mapping(vn, f"prices.{key}", PRICE_FIELDS) or {}
        per: dict[str, Decimal] = {}
        for name, (_, v) in fields.items():
            value = _decimal(r, v)
            if value is None or value < 0 or not value.is_finite():
                r.error(v, f"prices.{key}.{name} must be a number ≥ 0 (per million tokens), got {r.got(v)}")
            else:
                per[name] = value
        if not fields and isinstance(vn, MappingNode):
            r.error(vn, f"prices.{key} names no price (input, output, cache_read, cache_write)")
        out.append(Price(endpoint, glob, per, r.source, r.line(kn)))
    return out


def _decimal(r: YamlReader, node: Node) -> Decimal | None:
    """A YAML number as the decimal its text says (``0.1`` is 0.1, not the float nearest it)."""
    number = r.number(node)
    if number is None or not isinstance(node, ScalarNode):
        return None
    try:
        return Decimal(node.value.replace("_", ""))
    except InvalidOperation:  # a YAML spelling Decimal does not read (.inf, 0x10, 1:30)
        return Decimal(str(number))


def find_price(prices: list[Price], endpoint: str | None, model: str | None) -> Price | None:
    return next((p for p in prices if p.matches(endpoint, model)), None)


def usage_cost(price: Price, billed: Billed) -> tuple[Decimal, dict[str, Decimal], dict[str, int]]:
    """(cost of the priced counts, each count's part, the counts reported with no price)."""
    counts = {"input": billed.uncached, "cache_read": billed.cache_read, "cache_write": billed.cache_write,
              "output": billed.output}
    parts: dict[str, Decimal] = {}
    unpriced: dict[str, int] = {}
    for f, n in counts.items():
        if not n:
            continue
        if f in price.per_million:
            parts[f] = n * price.per_million[f] / PER_TOKENS
        else:
            unpriced[f] = n
    return sum(parts.values(), Decimal(0)), parts, unpriced



def rules_prices(path: str | Path | None) -> list[Price]:
    """The ``prices:`` of a rules file ([] when it has none, or no file is named)."""
    if path is None:
        return []
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise PricesError(f"{path}: cannot read the rules file: {e}") from None
    return parse_prices(text, str(path), required=False)
