"""``tokunseba check``'s word on money caps: a ``usd:`` budget whose scope can reach a model
nobody prices there is a warning (``FILE:LINE: warning: …``): such turns keep their declared
hold as their charge, never an estimate, so the cap counts holds, not cost.

Which models a budget can reach: for each route its scope lets through (``endpoint`` and
``route`` keys), the model the route or its endpoint sends, else the plain names of the
scope's ``model`` key or of the route's ``when: model`` (globs name no model). ``priced``
says whether an endpoint prices a model (the price table, a local endpoint at 0, the library).
Pure: no I/O.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable

from ..addresses import is_loopback
from ..routing import Budget, Endpoint, Rules, Unit


def _plain(names: object) -> list[str]:
    vals = [names] if isinstance(names, str) else list(names) if isinstance(names, (list, tuple)) else []
    return [n for n in vals if isinstance(n, str) and not any(c in n for c in "*?[")]


def _lets(b: Budget, key: str, value: str) -> bool:
    globs = b.scope.get(key)
    return globs is None or any(fnmatch.fnmatchcase(value, g) for g in globs)


def reachable_models(rules: Rules, b: Budget) -> list[tuple[Endpoint, str]]:
    """(endpoint, model) pairs the budget's scope can reach, as far as the file names them."""
    out: list[tuple[Endpoint, str]] = []
    for r in rules.routes:
        ep = rules.endpoints.get(r.to or "")
        if ep is None or not _lets(b, "endpoint", ep.name) or not _lets(b, "route", r.name):
            continue
        models = [r.model or ep.model] if (r.model or ep.model) else \
            _plain(b.scope.get("model", ())) or _plain(r.when.get("model"))
        out += [(ep, m) for m in models if m and _lets(b, "model", m) and (ep, m) not in out]
    if "route" not in b.scope:  # turns passed through to a built-in endpoint's host
        for ep in rules.endpoints.values():
            if ep.builtin and "endpoint" in b.scope and _lets(b, "endpoint", ep.name):
                out += [(ep, m) for m in _plain(b.scope.get("model", ())) if (ep, m) not in out]
    return out


def price_warnings(rules: Rules, priced: Callable[[Endpoint, str], bool]) -> list[str]:
    out = []
    for b in rules.budgets.budgets:
        if b.unit != Unit.USD:
            continue
        for ep, model in reachable_models(rules, b):
            if is_loopback(ep.host) or priced(ep, model):
                continue
            out.append(f"{rules.source}:{b.line}: warning: budget {b.name!r} ({b.amount(b.limit)}) can reach model "
                       f"{model} at endpoint {ep.name}, which nothing prices: its turns will keep their declared hold "
                       f"({b.amount(b.hold)}) as their charge; give it a price (prices: {{\"{ep.name}:{model}\": "
                       "{input: …, output: …}})")
    return out
