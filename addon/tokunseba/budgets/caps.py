"""The caps of a running proxy: which budgets a turn falls under, its admission (one atomic
hold per budget, store.py), what a reached cap makes of the turn, and its settlement.

- ``Caps.admit(facts, request_id, now)`` -> ``Verdict``: the holds taken, or the budget that
  refused (``refused``; its ``on_limit`` says what the turn does: ``refuse`` — answered in the
  client's own "stop now" shape; ``reroute`` — the next route whose ``when`` matches; ``warn``
  budgets never refuse: they hold past the cap and say so), the console lines and ledger marks
  of soft lines crossed (``warn_at``) and caps passed under ``warn``. A budget not shared is
  counted per proxy (its scope key is this proxy's instance name); ``shared: true`` is one
  count for every proxy on the ledger (``team``).
- The ledger unreachable: ``on_ledger_unavailable`` decides (``serve``: no hold, said;
  ``refuse``: answered like a reached cap).
- ``Caps.settle(verdict, spent, request_id, now)``: each hold becomes the budget's charge — the
  reported cost (``cost.py``), the reported tokens, or, when nothing was reported (a cut
  stream, an unpriced model), the hold itself.
- ``reset_text`` and ``limit_message``: how a reached cap is said to people (its name, spent of
  limit, when it resets).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from zoneinfo import ZoneInfo

from ..routing import Budget, BudgetSettings, OnLedgerUnavailable, OnLimit, Unit
from .cost import CostOf, Spent, tokens_of
from .store import Admission, BudgetStore, LedgerAway

log = logging.getLogger("tokunseba")

SHARED_KEY = "team"
FACT_KEYS = ("endpoint", "route", "client", "model", "session", "agent")


@dataclass
class Verdict:
    """A turn's admission under the caps that apply to it."""

    held: list[Admission] = field(default_factory=list)  # holds taken (settled when the turn ends)
    refused: Admission | None = None  # the budget whose cap the hold would pass (on_limit refuse/reroute)
    away: str | None = None  # the ledger could not be reached (on_ledger_unavailable said what follows)
    refuse_away: bool = False  # ... and the rules say refuse
    lines: list[str] = field(default_factory=list)  # console lines (soft line, warn, ledger away)
    events: list[tuple[str, dict]] = field(default_factory=list)  # ledger marks
    rerouted_by: list[str] = field(default_factory=list)  # budgets that sent the turn to a later route

    @property
    def stops(self) -> bool:
        """The turn is answered here and never sent."""
        return self.refuse_away or (self.refused is not None and self.refused.budget.on_limit == OnLimit.REFUSE)

    @property
    def reroutes(self) -> bool:
        return self.refused is not None and self.refused.budget.on_limit == OnLimit.REROUTE


def reset_text(window_end: float, now: float, tz: str) -> str:
    """``at 2026-12-08 00:00 Europe/Berlin (in 3h12m)``"""
    at = datetime.fromtimestamp(window_end, ZoneInfo(tz)).strftime("%Y-%m-%d %H:%M")
    left = max(0, int(window_end - now))
    d, rest = divmod(left, 86400)
    h, rest = divmod(rest, 3600)
    m = rest // 60
    span = (f"{d}d" if d else "") + (f"{h}h" if h else "") + f"{m}m" if left >= 60 else f"{left}s"
    return f"at {at} {tz} (in {span})"


def limit_message(a: Admission, now: float, request_id: str) -> str:
    """What a client is told when a cap stops its turn."""
    b = a.budget
    tz = b.window.tz if b.window.kind != "rolling" else "UTC"
    held = f" and {b.amount(a.held)} held by turns in flight" if a.held else ""
    return (f"tokunseba: budget {b.name!r} reached: {b.amount(a.spent)} spent of {b.amount(b.limit)}{held} "
            f"this {b.window.text()} window; it resets {reset_text(a.window_end, now, tz)}. This turn was not sent "
            f"(request {request_id}); retrying before the reset will not help")


class Caps:
    """The budgets of the rules in force over their store."""

    def __init__(self, settings: BudgetSettings, store: BudgetStore | None, *, instance: str,
                 cost: CostOf) -> None:
        self.settings, self.store, self.instance, self.cost = settings, store, instance, cost

    @property
    def budgets(self) -> list[Budget]:
        return self.settings.budgets

    def applicable(self, facts: dict[str, str | None], *, skip: frozenset[str] = frozenset()) -> list[Budget]:
        return [b for b in self.budgets if b.name not in skip and b.matches(facts)]

    def scope_key(self, b: Budget) -> str:
        return SHARED_KEY if b.shared else f"proxy:{self.instance}"

    def admit(self, facts: dict[str, str | None], *, request_id: str, now: float) -> Verdict:
        v = Verdict()
        budgets = self.applicable(facts)
        if not budgets or self.store is None:
            return v
        try:
            got = self.store.admit([(b, self.scope_key(b), b.on_limit != OnLimit.WARN) for b in budgets],
                                   request_id=request_id, now=now)
        except LedgerAway as e:
            v.away = str(e)
            v.refuse_away = self.settings.on_ledger_unavailable == OnLedgerUnavailable.REFUSE
            then = "refused (on_ledger_unavailable: refuse)" if v.refuse_away else \
                "served without a hold (on_ledger_unavailable: serve)"
            v.lines.append(f"tokunseba: {request_id} {e}; the turn is {then}")
            v.events.append(("budget_ledger_away", {"error": str(e), "then": "refuse" if v.refuse_away else "serve",
                                                    "budgets": [b.name for b in budgets]}))
            return v
        for a in got:
            b = a.budget
            if not a.ok:
                v.refused = a
                v.events.append(("budget_reached", {"budget": b.name, "on_limit": str(b.on_limit),
                                                    "spent": a.spent, "held": a.held, "limit": b.limit,
                                                    "unit": str(b.unit), "window_end": a.window_end}))
                continue
            v.held.append(a)
            used = a.spent + a.held  # this turn's hold counted
            if b.on_limit == OnLimit.WARN and used > b.limit:
                v.lines.append(f"tokunseba: {request_id} budget {b.name!r} passed: {b.amount(used)} spent and held "
                               f"of {b.amount(b.limit)} this {b.window.text()} window (on_limit: warn: served)")
                v.events.append(("budget_passed", {"budget": b.name, "spent": a.spent, "held": a.held,
                                                   "limit": b.limit, "unit": str(b.unit)}))
            elif b.warn_at is not None and used >= b.warn_at * b.limit:
                v.lines.append(f"tokunseba: {request_id} budget {b.name!r} at {100 * used // b.limit}%: "
                               f"{b.amount(used)} spent and held of {b.amount(b.limit)} this {b.window.text()} "
                               f"window (warn_at {b.warn_at:g})")
                v.events.append(("budget_warning", {"budget": b.name, "spent": a.spent, "held": a.held,
                                                    "limit": b.limit, "unit": str(b.unit), "warn_at": b.warn_at}))
        if v.held:
            v.events.append(("budget_held", {"holds": [{"budget": a.budget.name, "hold": a.budget.hold,
                                                        "unit": str(a.budget.unit), "window_start": a.window_start}
                                                       for a in v.held]}))
        return v

    def release(self, v: Verdict) -> None:
        """The turn was not sent after all: its holds go back uncharged."""
        if self.store is not None and v.held:
            try:
                self.store.release(v.held)
            except LedgerAway as e:
                log.warning(f"tokunseba: could not give back budget holds: {e} (they expire with their lease)")
            v.held = []

    def charges(self, v: Verdict, spent: Spent) -> dict[str, int | None]:
        """Each held budget's charge for the finished turn (None: keep the hold)."""
        out: dict[str, int | None] = {}
        money: int | None = None
        priced = False
        for a in v.held:
            if a.budget.unit == Unit.TOKENS:
                out[a.budget.name] = tokens_of(spent.usage)
            else:
                if not priced:  # nothing reported: nothing to price (the hold is kept)
                    money, priced = (None if spent.usage is None else self.cost(spent)), True
                out[a.budget.name] = money
        return out

    def settle(self, v: Verdict, spent: Spent, *, request_id: str, now: float) -> dict[str, int | None]:
        """Settle the turn's holds; the charges (None: the hold was kept)."""
        if self.store is None or not v.held:
            return {}
        amounts = self.charges(v, spent)
        try:
            self.store.settle(v.held, amounts, request_id=request_id, now=now)
        except LedgerAway as e:
            log.warning(f"tokunseba: {request_id} could not settle its budget holds: {e} (they are charged at "
                        "their declared amount when their lease runs out)")
        v.held = []
        return amounts
