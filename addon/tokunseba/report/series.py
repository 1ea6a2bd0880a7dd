"""The report's figures from ledger rows (pure: no I/O, no plotting library).

- **Spend per day and endpoint**: the cost of each turn's reported usage (``cost_of``: the
  pricing the rest of the CLI uses), summed per calendar day (UTC, or the zone given) and per
  endpoint — the provider host for a turn passed through. A turn nobody prices is counted apart
  (``unpriced``), never as 0; a turn that reported no usage likewise (``no_usage``).
- **Local versus providers**: the share of served turns, and of reported tokens (input and
  output as each counting reports them), answered by a local endpoint (one whose URL is
  loopback: ``is_local``) versus by providers. A turn whose endpoint's locality is unknown (the
  rules that named it are not given) is counted as ``unknown``, never guessed.
- **Budgets**: each budget's use over its window, when the ledger has budgets (a list of
  ``{name, window, limit, points: [(ts, spent)]}`` given by the caller).

Money is summed in fixed point (``Decimal``), never floats.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

from ..outcomes import outcome_class, served


@dataclass(frozen=True)
class ReportInputs:
    cost_of: Callable[[dict[str, Any]], Decimal | None]  # None: unpriced
    is_local: Callable[[str | None], bool | None]  # endpoint name -> local? None: unknown
    tz: str = "UTC"


@dataclass
class Figures:
    days: list[str] = field(default_factory=list)
    spend: dict[str, dict[str, Decimal]] = field(default_factory=dict)  # where -> day -> cost
    turns: int = 0
    served: int = 0
    priced: int = 0
    unpriced: int = 0
    no_usage: int = 0
    total: Decimal = Decimal(0)
    turns_by_side: dict[str, int] = field(default_factory=dict)  # local / providers / unknown
    tokens_by_side: dict[str, int] = field(default_factory=dict)
    budgets: list[dict[str, Any]] = field(default_factory=list)
    local_places: set[str] = field(default_factory=set)  # the places of ``spend`` that are local endpoints
    first: float | None = None
    last: float | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "days": self.days,
            "spend": {w: {d: str(v) for d, v in by.items()} for w, by in self.spend.items()},
            "turns": self.turns, "served": self.served, "priced": self.priced, "unpriced": self.unpriced,
            "no_usage": self.no_usage, "total": str(self.total),
            "turns_by_side": self.turns_by_side, "tokens_by_side": self.tokens_by_side,
            "local_places": sorted(self.local_places),
            "budgets": [{**b, "points": [[t, str(v)] for t, v in b.get("points", [])]} for b in self.budgets],
            "first": self.first, "last": self.last,
        }


def where(row: dict[str, Any]) -> str:
    """Where a turn was served: its endpoint, else the host it passed through to."""
    return row.get("endpoint") or row.get("host") or "-"


def _tokens(row: dict[str, Any]) -> int | None:
    got = [row.get("usage_input"), row.get("usage_output")]
    if all(v is None for v in got):
        return None
    return sum(int(v) for v in got if v is not None)


def _side(row: dict[str, Any], is_local: Callable[[str | None], bool | None]) -> str:
    if not row.get("endpoint"):  # passed through to the provider the client addressed
        return "providers"
    local = is_local(row["endpoint"])
    return "unknown" if local is None else "local" if local else "providers"


MICROS = Decimal(1_000_000)  # budgets keep money in integer micro-dollars (routing/budgets.py)


def budget_series(charges: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each budget window's use over time from its charges (``LedgerReader.budget_use``): one
    line per (budget, window), the cumulative spend at each charge, in dollars (or tokens)."""
    lines: dict[tuple[str, float], dict[str, Any]] = {}
    for c in charges:
        key = (c["budget"], float(c["window_start"]))
        money = c["unit"] == "usd"
        scale = MICROS if money else Decimal(1)
        line = lines.setdefault(key, {"name": c["budget"], "unit": c["unit"], "window_start": key[1],
                                      "limit": Decimal(c["limit_amount"]) / scale, "points": [], "_spent": Decimal(0)})
        line["_spent"] += Decimal(c["amount"]) / scale
        line["points"].append((float(c["ts"]), line["_spent"]))
    out = []
    for line in lines.values():
        line.pop("_spent")
        line["limit"] = str(line["limit"])
        out.append(line)
    return out


def figures(rows: Iterable[dict[str, Any]], inputs: ReportInputs, budgets: list[dict[str, Any]] | None = None) -> Figures:
    """The report's figures over ``rows`` (ledger turns, any order)."""
    zone = ZoneInfo(inputs.tz)
    out = Figures(budgets=list(budgets or []))
    spend: dict[str, dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    days: set[str] = set()
    sides: dict[str, int] = defaultdict(int)
    tokens: dict[str, int] = defaultdict(int)
    for row in rows:
        out.turns += 1
        ts = float(row["started_at"])
        out.first = ts if out.first is None else min(out.first, ts)
        out.last = ts if out.last is None else max(out.last, ts)
        if not served(outcome_class(row.get("outcome"), row.get("status"), row.get("error"))):
            continue
        out.served += 1
        side = _side(row, inputs.is_local)
        sides[side] += 1
        n = _tokens(row)
        if n is None:
            out.no_usage += 1
            continue
        tokens[side] += n
        cost = inputs.cost_of(row)
        if cost is None:
            out.unpriced += 1
            continue
        out.priced += 1
        day = dt.datetime.fromtimestamp(ts, zone).date().isoformat()
        days.add(day)
        spend[where(row)][day] += cost
        if side == "local":
            out.local_places.add(where(row))
        out.total += cost
    out.days = sorted(days)
    out.spend = {w: dict(by) for w, by in sorted(spend.items())}
    out.turns_by_side = {k: sides[k] for k in ("local", "providers", "unknown") if sides[k]}
    out.tokens_by_side = {k: tokens[k] for k in ("local", "providers", "unknown") if tokens[k]}
    return out
