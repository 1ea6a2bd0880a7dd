"""The rules file: YAML -> validated endpoints and routes (``load_rules``, ``load_rules_text``),
the warnings said at load time, and ``check_file`` for ``tokunseba check``.

The file format is docs/dev/architecture.md §4. Every mistake is reported at load time as one line
``FILE:LINE: what is wrong`` (``RulesError``; the walker is routing/yaml_reader.py); a route
whose target its client protocol cannot reach is a warning at load time
(``FILE:LINE: warning: ...``) and ``refused`` at run time. A route's ``when`` keys and how each
value is read are routing/facts.py's ``PREDICATES``; the policies are routing/rules.py's enums.

This is the only module that composes YAML, with pricing/table.py (which reads the price table
— a price file, or this file's ``prices:``, which this reader leaves to it — with the same
``YamlReader``, for the same ``FILE:LINE`` errors).
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Any, TypeVar

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from .budgets import BudgetSettings, OnLedgerUnavailable, budget_scope_problems, read_budgets
from .earn import Earn
from .endpoints import BUILTIN_ENDPOINTS, FIELD_CHECKS, Endpoint, count_tokens_problem, custom_tools_problem
from .facts import read_when
from .rules import OnFailure, OnRefused, OnUnreachable, Route, Rules, RulesError, ToolLoops, Unmatched
from .rules_text import accepts_lines, budget_lines, counts_line, policy_lines, quota_lines, who_lines
from .shadowable import shadow_refusal
from .yaml_reader import BOOL_TAG, NULL_TAG, Entries, YamlReader, is_null
from .. import protocols
from ..protocols import NAMES as PROTOCOLS  # a live view of the registry
from ..translate import CODECS, pair_refusal

E = TypeVar("E", bound=StrEnum)  # a policy (routing/rules.py)

TOP_KEYS = ("endpoints", "routes", "unmatched", "tool_loops", "prices", "budgets", "on_ledger_unavailable")
# prices: pricing/table.py reads them; budgets and on_ledger_unavailable: routing/budgets.py
ROUTE_KEYS = ("name", "when", "to", "model", "on_refused", "on_failure", "on_unreachable", "shadow", "shadow_sample", "earn")
# endpoint key -> (YAML type, required)
ENDPOINT_KEYS: dict[str, tuple[str, bool]] = {
    "protocol": ("text", True),
    "url": ("text", True),
    "key_env": ("text", False),
    "model": ("text", False),
    "max_tokens": ("int", False),
    "system_role": ("text", False),
    "max_tokens_field": ("text", False),
    "stop": ("texts", False),
    "first_byte_timeout_s": ("number", False),
    "cooldown_max_s": ("number", False),
    "max_concurrency": ("int", False),
    "queue_s": ("number", False),
    "effort": ("text", False),
    "max_effort": ("text", False),
    "count_tokens": ("text", False),
    "custom_tools": ("text", False),
    "accepts": ("texts", False),
    "cache": ("text", False),
    "context_tokens": ("int", False),
}


def _endpoints(r: YamlReader, node: Node) -> tuple[dict[str, Endpoint], set[str]]:
    """The file's endpoints, and every name it declares (valid or not)."""
    out: dict[str, Endpoint] = {}
    declared: set[str] = set()
    for name, (kn, vn) in (r.mapping(node, "endpoints", None) or {}).items():
        declared.add(name)
        where = f"endpoint {name!r}"
        if name in BUILTIN_ENDPOINTS:
            r.error(kn, f"{where} shadows the built-in endpoint of that name; choose another name")
            continue
        m = r.mapping(vn, where, tuple(ENDPOINT_KEYS))
        if m is None:
            continue
        before = len(r.problems)
        kwargs: dict[str, Any] = {}
        for key, (kind, required) in ENDPOINT_KEYS.items():
            if key not in m:
                if required:
                    r.error(vn, f"{where} has no {key!r}")
                continue
            _, kv = m[key]
            if not required and isinstance(kv, ScalarNode) and kv.tag == NULL_TAG:
                continue  # `model:` left empty = not set
            if key == "cache" and isinstance(kv, ScalarNode) and kv.tag == BOOL_TAG:  # YAML reads off/on as booleans
                kv = ScalarNode("tag:yaml.org,2002:str", kv.value.lower(), kv.start_mark, kv.end_mark)
            v = r.value(kv, kind, f"{where}: {key}")
            if kind == "number" and v is not None:
                v = float(v)
            if v is not None and key in FIELD_CHECKS and (problem := FIELD_CHECKS[key](v)):
                r.error(kv, f"{where}: {problem}")
            kwargs[key] = tuple(v) if key in ("stop", "accepts") and v is not None else v
        if "count_tokens" in m and isinstance(kwargs.get("protocol"), str) and (
                problem := count_tokens_problem(kwargs["protocol"], kwargs.get("count_tokens"))):
            r.error(m["count_tokens"][1], f"{where}: {problem}")
        if "custom_tools" in m and isinstance(kwargs.get("protocol"), str) and (
                problem := custom_tools_problem(kwargs["protocol"], kwargs.get("custom_tools"))):
            r.error(m["custom_tools"][0], f"{where}: {problem}")
        if "queue_s" in m and "max_concurrency" not in m:
            r.error(m["queue_s"][0], f"{where}: queue_s without max_concurrency (queue_s is how long a turn "
                                     "waits for one of the endpoint's max_concurrency slots)")
        if len(r.problems) == before:
            out[name] = Endpoint(name=name, **kwargs)
    return out, declared


def _route_label(node: Node, i: int) -> str:
    """How errors name a route: by its name when it has one, else by position."""
    if isinstance(node, MappingNode):
        for k, v in node.value:
            if k.value == "name" and isinstance(v, ScalarNode) and v.value:
                return f"route {v.value!r}"
    return f"route #{i}"


def _routes(r: YamlReader, node: Node, endpoints: dict[str, Endpoint], declared: set[str]) -> list[Route]:
    if not isinstance(node, SequenceNode):
        r.error(node, f"routes must be a list, got {r.got(node)}")
        return []
    routes: list[Route] = []
    first_line: dict[str, int] = {}
    for i, rn in enumerate(node.value, 1):
        m = r.mapping(rn, _route_label(rn, i), ROUTE_KEYS)
        if m is None:
            continue
        before = len(r.problems)
        name = r.entry_name(m, rn, "route", i, first_line)
        where = f"route {name!r}" if name else f"route #{i}"
        to = r.value(m["to"][1], "text", f"{where}: to") if "to" in m else None
        if "to" not in m and "shadow" not in m:
            r.error(rn, f"{where} has no 'to' (the endpoint to send matching turns to) and no 'shadow'")
        else:
            _endpoint_ref(r, m, "to", to, where, endpoints, declared)
        shadow, sample = _shadow_keys(r, m, where, endpoints, declared)
        earn = _earn_key(r, m, where, endpoints, declared) if "earn" in m else None
        model = None
        if "model" in m and m["model"][1].tag != NULL_TAG:
            model = r.value(m["model"][1], "text", f"{where}: model")
        on_refused = _choice(r, m, "on_refused", OnRefused, where)
        on_unreachable = _on_failure(r, m, where)
        when = read_when(r, m["when"][1], where) if "when" in m and not is_null(m["when"][1]) else {}
        if len(r.problems) == before and (to in endpoints or (to is None and shadow in endpoints)):
            assert name is not None  # a route without one has a problem
            routes.append(Route(name, when, to, model, on_refused, r.line(rn), on_unreachable, shadow, sample, earn))
    return routes


def _endpoint_ref(r: YamlReader, m: dict, key: str, name: str | None, where: str, endpoints: dict[str, Endpoint],
                  declared: set[str]) -> None:
    """An endpoint named by a route key must exist (an invalid declared one is reported at its own line)."""
    if key in m and name is not None and name not in endpoints and name not in declared:
        known = ", ".join(sorted(endpoints.keys() | declared))
        r.error(m[key][1], f"{where}: unknown endpoint {name!r} in '{key}' (known: {known})")


def _shadow_keys(r: YamlReader, m: dict, where: str, endpoints: dict[str, Endpoint],
                 declared: set[str]) -> tuple[str | None, float]:
    """``shadow: ENDPOINT`` and ``shadow_sample: 0..1`` (default 1.0; only with shadow)."""
    shadow = r.value(m["shadow"][1], "text", f"{where}: shadow") if "shadow" in m else None
    _endpoint_ref(r, m, "shadow", shadow, where, endpoints, declared)
    sample = 1.0
    if "shadow_sample" in m:
        node = m["shadow_sample"][1]
        value = r.number(node)
        if value is None or not 0 <= value <= 1:
            r.error(node, f"{where}: shadow_sample must be a number from 0 to 1, got {r.got(node)}")
        else:
            sample = float(value)
        if "shadow" not in m:
            r.error(m["shadow_sample"][0], f"{where}: shadow_sample without 'shadow' (the endpoint to shadow to)")
    return shadow, sample


EARN_KEYS = ("to", "bar", "min_turns", "canary")


def _earn_key(r: YamlReader, m: dict, where: str, endpoints: dict[str, Endpoint], declared: set[str]) -> Earn | None:
    """``earn: {to: ENDPOINT, bar: 0..1, min_turns: N, canary: 0..1}`` (routing/earn.py): needs
    the route's own ``to:`` (where learning turns go) and no ``shadow:`` (earn shadows itself)."""
    e = r.mapping(m["earn"][1], f"{where}: earn", EARN_KEYS)
    if e is None:
        return None
    before = len(r.problems)
    if "to" not in m:
        r.error(m["earn"][0], f"{where}: earn needs the route's own 'to:' (where its turns go while the candidate learns)")
    if "shadow" in m:
        r.error(m["shadow"][0], f"{where}: earn shadows its turns to its candidate itself; drop 'shadow:'")
    if "to" not in e:
        r.error(m["earn"][1], f"{where}: earn has no 'to' (the candidate endpoint)")
        return None
    to = r.value(e["to"][1], "text", f"{where}: earn.to")
    _endpoint_ref(r, e, "to", to, f"{where}: earn", endpoints, declared)
    if to is not None and "to" in m and m["to"][1].value == to:
        r.error(e["to"][1], f"{where}: earn.to is the route's own target {to!r}: name another endpoint")
    got: dict[str, float] = {}
    for key, lo, hi in (("bar", 0.0, 1.0), ("canary", 0.0, 1.0), ("min_turns", 1, None)):
        if key not in e:
            continue
        node = e[key][1]
        v = r.number(node)
        if v is None or v < lo or (hi is not None and v > hi) or (hi is None and not isinstance(v, int)):
            rng = f"a number from {lo:g} to {hi:g}" if hi is not None else f"a whole number of at least {lo}"
            r.error(node, f"{where}: earn.{key} must be {rng}, got {r.got(node)}")
        else:
            got[key] = v
    if len(r.problems) != before or to is None:
        return None
    return Earn(to, float(got.get("bar", 0.95)), int(got.get("min_turns", 200)), float(got.get("canary", 0.05)))


def _on_failure(r: YamlReader, m: Entries, where: str) -> OnUnreachable:
    """``on_failure: next|error``, or its older name ``on_unreachable: skip|error``; stored as
    ``Route.on_unreachable`` (skip | error). Both keys on one route must agree."""
    failure = _choice(r, m, "on_failure", OnFailure, where) if "on_failure" in m else None
    older = _choice(r, m, "on_unreachable", OnUnreachable, where) if "on_unreachable" in m else None
    if failure is not None and older is not None and (failure == OnFailure.ERROR) != (older == OnUnreachable.ERROR):
        r.error(m["on_unreachable"][1], f"{where}: on_unreachable: {older} contradicts on_failure: {failure} "
                                        "(on_unreachable is the older name of on_failure; keep one)")
    if older is not None:
        r.aliased.append(str(m["name"][1].value) if "name" in m else where)
    if failure is not None:
        return OnUnreachable.ERROR if failure == OnFailure.ERROR else OnUnreachable.SKIP
    return older or OnUnreachable.SKIP


def _choice(r: YamlReader, m: Entries, key: str, allowed: type[E], where: str) -> E:
    """A key whose value is one of ``allowed``'s (its first member is the default)."""
    default = next(iter(allowed))
    if key not in m:
        return default
    words = [a.value for a in allowed]
    v = r.value(m[key][1], "text", f"{where}: {key}")
    if v is not None and v not in words:
        r.error(m[key][1], f"{where}: {key} must be one of: {', '.join(words)}; got {v!r}")
    return allowed(v) if v in words else default


def _warnings(rules: Rules) -> list[str]:
    """Routes some of whose clients could never reach their target (refused at run time)."""
    out = []
    for route in rules.routes:
        if route.shadow is not None:
            out += _shadow_warnings(rules, route)
        if route.earn is not None:
            out += _shadow_warnings(rules, route, route.earn.to)
        if route.to is None:
            continue
        ep = rules.endpoints[route.to]
        why = [w for c in route.when.get("client") or PROTOCOLS if (w := pair_refusal(c, ep.protocol))]
        if why:
            then = "answered with an error" if route.on_refused == OnRefused.ERROR else "go on to the next route"
            out.append(
                f"{rules.source}:{route.line}: warning: route {route.name!r} → {ep.name} ({ep.protocol}): "
                f"{'; '.join(why)}; such turns are refused here and {then}"
            )
        out += _max_output_warnings(rules, route, ep)
    return out + _count_warnings(rules) + _cache_warnings(rules)


def _cache_warnings(rules: Rules) -> list[str]:
    """An endpoint whose ``cache`` asks for breakpoints its protocol has no way to take (Gemini):
    nothing is placed there (its translations say so too)."""
    out = []
    for ep in rules.endpoints.values():
        codec = CODECS.get(ep.protocol)
        if ep.cache != "off" and codec is not None and codec.place_cache is None and codec.carry_cache is None:
            out.append(f"{rules.source}: warning: endpoint {ep.name} ({ep.protocol}): cache: {ep.cache}, but "
                       f"{ep.protocol} requests take no cache breakpoints: none are placed or carried there")
    return out


def _count_warnings(rules: Rules) -> list[str]:
    """Each endpoint without a token counter that routes send clients who count to, once (at its
    first such route): their count requests follow their turns there and get an error (never an
    estimate). Not said when the endpoint says ``count_tokens: none`` (the user means it)."""
    seen: dict[str, tuple[Route, list[str], list[str]]] = {}
    for route in rules.routes:
        ep = rules.endpoints.get(route.to or "")
        if ep is None or ep.counter is not None or ep.count_tokens == "none":
            continue
        counting = [c for c in route.when.get("client") or PROTOCOLS
                    if (f := protocols.find(c)) is not None and f.count_kinds and pair_refusal(c, ep.protocol) is None]
        if counting:
            first, names, clients = seen.setdefault(ep.name, (route, [], []))
            names.append(route.name)
            clients += [c for c in counting if c not in clients]
    out = []
    for name, (route, names, clients) in seen.items():
        ep = rules.endpoints[name]
        out.append(f"{rules.source}:{route.line}: warning: route{'s' * (len(names) > 1)} {', '.join(map(repr, names))} "
                   f"→ {ep.name} ({ep.protocol}): count requests of {', '.join(clients)} clients follow their turns "
                   f"there and get an error ({ep.no_counter_why}): give it count_tokens: probe (each count is one turn "
                   "of at most 1 output token), the protocol whose counter the same server serves (llama-server: "
                   "count_tokens: anthropic), or count_tokens: none")
    return out


def _max_output_warnings(rules: Rules, route: Route, ep: Endpoint) -> list[str]:
    """An endpoint whose protocol requires a maximum output (Anthropic ``max_tokens``) with no
    ``max_tokens:`` of its own, taking clients whose protocol may omit it: every such turn
    that sets none would fail at run time."""
    target = protocols.find(ep.protocol)
    if target is None or not target.max_output_required or ep.max_tokens is not None:
        return []
    omitting = [c for c in route.when.get("client") or PROTOCOLS
                if c != ep.protocol and (f := protocols.find(c)) is not None and not f.max_output_required
                and pair_refusal(c, ep.protocol) is None]
    if not omitting:
        return []
    return [f"{rules.source}:{route.line}: warning: route {route.name!r} → {ep.name} ({ep.protocol}): "
            f"{target.title} requires {target.max_output_field} and endpoint {ep.name} sets no default; "
            f"turns of {', '.join(omitting)} clients that send none would fail: add `max_tokens:` to endpoint {ep.name}"]


def _shadow_warnings(rules: Rules, route: Route, candidate: str | None = None) -> list[str]:
    """A shadow endpoint (or an earned route's ``candidate``) some of the route's clients cannot
    reach: those turns are not shadowed (and never earned)."""
    target = candidate or route.shadow
    assert target is not None  # called for a route with a shadow or a candidate
    ep = rules.endpoints[target]
    why = [w for c in route.when.get("client") or PROTOCOLS
           if (w := shadow_refusal(c, ep.protocol) or pair_refusal(c, ep.protocol))]
    if not why:
        return []
    what, then = ("earn", "never earned") if candidate else ("shadow", "served but not shadowed")
    return [f"{rules.source}:{route.line}: warning: route {route.name!r} {what} → {ep.name} ({ep.protocol}): "
            f"{'; '.join(dict.fromkeys(why))}; such turns are {then}"]


def load_rules_text(text: str, source: str = "<rules>") -> Rules:
    """Parse and validate rules; RulesError (one line per problem, file and line) if unusable."""
    r = YamlReader(source)
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"{mark.line + 1}:{mark.column + 1}" if mark else "1"
        what = (
            f"{e.context}, {e.problem}"
            if e.context and e.problem and e.problem.startswith("but ")
            else " ".join(filter(None, (e.problem, e.context and f"({e.context})")))
        )
        raise RulesError([f"{source}:{where}: YAML syntax error: {what}"]) from None
    except yaml.YAMLError as e:
        raise RulesError([f"{source}:1: YAML error: {str(e).splitlines()[0]}"]) from None
    endpoints: dict[str, Endpoint] = dict(BUILTIN_ENDPOINTS)
    routes: list[Route] = []
    unmatched, tool_loops = Unmatched.PASS, ToolLoops.FOLLOW
    caps = BudgetSettings()
    if root is not None and not (isinstance(root, ScalarNode) and root.tag == NULL_TAG):
        top = r.mapping(root, "the rules file", TOP_KEYS)
        if top is not None:
            unmatched = _choice(r, top, "unmatched", Unmatched, "the rules file")
            tool_loops = _choice(r, top, "tool_loops", ToolLoops, "the rules file")
            declared: set[str] = set()
            if "endpoints" in top and top["endpoints"][1].tag != NULL_TAG:
                user, declared = _endpoints(r, top["endpoints"][1])
                endpoints.update(user)
            if "routes" in top and top["routes"][1].tag != NULL_TAG:
                routes = _routes(r, top["routes"][1], endpoints, declared)
            caps.on_ledger_unavailable = _choice(r, top, "on_ledger_unavailable", OnLedgerUnavailable, "the rules file")
            if "budgets" in top and not is_null(top["budgets"][1]):
                caps.budgets = read_budgets(r, top["budgets"][1])
                budget_scope_problems(r, caps.budgets, set(endpoints) | declared, {x.name for x in routes},
                                      set(PROTOCOLS))
    if r.errors:
        raise RulesError(r.errors)
    rules = Rules(endpoints, routes, source, unmatched=unmatched, tool_loops=tool_loops, aliased=r.aliased,
                  budgets=caps)
    rules.warnings = _warnings(rules)
    return rules


def load_rules(path: str | Path | None) -> Rules:
    """Rules from a file; None = no rules (every turn passes through)."""
    if path is None:
        return Rules(dict(BUILTIN_ENDPOINTS), [], "<no rules>")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RulesError([f"{path}: no such rules file"]) from None
    except (OSError, UnicodeDecodeError) as e:
        raise RulesError([f"{path}: cannot read rules file: {e}"]) from None
    return load_rules_text(text, str(path))


def check_file(path: str | Path | None) -> tuple[bool, list[str]]:
    """For ``tokunseba check``: (ok, lines to print)."""
    try:
        rules = load_rules(path)
    except RulesError as e:
        return False, e.errors
    return True, [counts_line(rules), *policy_lines(rules), *who_lines(rules), *quota_lines(rules), *accepts_lines(rules),
                  *budget_lines(rules), *rules.warnings]

