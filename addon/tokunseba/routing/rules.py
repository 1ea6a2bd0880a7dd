"""The rule model (``Route``, ``Rules``, the policies a file chooses) and ``decide(rules, facts)``
-> ``Decision`` with its trace (``Tried``, one per route looked at).

The file format is docs/dev/architecture.md §4; reading it is routing/rules_file.py, the
conditions a route's ``when`` tests are routing/facts.py, what ``check`` and ``models`` print
of it is routing/rules_text.py. A route whose target its client protocol cannot reach is
``refused`` at run time, where evaluation simply goes on with the next route
(docs/dev/architecture.md §2 rule 4).

Failing closed is the user's choice: a route with ``on_failure: error`` (alias:
``on_unreachable: error``) answers with an error when its endpoint is down, cooling down or
full (``decide`` returns an "error" decision), and when it fails (turn/failover.py), instead of
trying the next route (``on_failure: next``, the default; ``decide(after=...)`` finds
it), and top-level ``unmatched: refuse`` (``Rules.unmatched``, applied by
turn/plan.py) answers every provider turn no route takes instead of passing it through.

The policies are ``StrEnum``s whose values are the file's words (as states.py's states): a
member equals its word and prints as it, so the ledger, ``check`` and the tests read the
same text. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from .budgets import BudgetSettings
from .earn import Earn, EarnCall
from .endpoints import Endpoint
from .facts import TurnFacts, check_when, turn_refusal
from ..states import Decided


class OnRefused(StrEnum):
    """A route's ``on_refused``: what a turn its target cannot take does (docs/dev/architecture.md rule 4)."""

    SKIP = "skip"  # go on with the next route
    ERROR = "error"  # answer the client with an error


class OnFailure(StrEnum):
    """A route's ``on_failure``: what a turn does when the route's endpoint is unreachable,
    cooling down, full, or fails before the reply's first byte."""

    NEXT = "next"  # the next route whose when matches, then what unmatched says
    ERROR = "error"  # an error to the client


class OnUnreachable(StrEnum):
    """``on_failure``'s older name, and its stored form (``Route.on_unreachable``): skip = next."""

    SKIP = "skip"
    ERROR = "error"


class Unmatched(StrEnum):
    """The file's ``unmatched``: a provider turn no route takes."""

    PASS = "pass"  # to its original host, untouched
    REFUSE = "refuse"  # answered with an error in the client's protocol, never sent on


class ToolLoops(StrEnum):
    """The file's ``tool_loops``: a turn answering tool calls (turn/plan.py)."""

    FOLLOW = "follow"  # to the endpoint and model that made them, while a route to that endpoint takes this client
    ROUTE = "route"  # routed afresh, like any turn


class RulesError(Exception):
    """Rules that cannot be used. ``str(e)`` is the first problem, one line
    ``FILE:LINE: what is wrong``; ``e.errors`` holds every problem found."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__(errors[0])
        self.errors = errors



@dataclass
class Route:
    name: str
    when: dict  # condition -> value, as written (client/model normalised to lists, header names lower-case)
    to: str | None  # None: a shadow-only route (the turn passes through and is shadowed)
    model: str | None = None
    on_refused: OnRefused = OnRefused.SKIP
    line: int = 0
    on_unreachable: OnUnreachable = OnUnreachable.SKIP  # on_failure as stored (skip = next)
    shadow: str | None = None  # endpoint that also gets the turn, in the background (shadow/turns.py)
    shadow_sample: float = 1.0  # fraction of matching turns to shadow
    earn: Earn | None = None  # a candidate that takes the strata it has earned (routing/earn.py)

    @property
    def on_failure(self) -> OnFailure:
        """``next`` (a failed, unreachable, cooling or full endpoint: the next route whose
        ``when`` matches, then what ``unmatched`` says) | ``error`` (an error to the client).
        ``on_unreachable`` is its older name (``skip`` = ``next``)."""
        return OnFailure.ERROR if self.on_unreachable == OnUnreachable.ERROR else OnFailure.NEXT


@dataclass
class Rules:
    endpoints: dict[str, Endpoint]  # built-ins + the file's own
    routes: list[Route]
    source: str
    warnings: list[str] = field(default_factory=list)
    unmatched: Unmatched = Unmatched.PASS  # a provider turn no route takes
    tool_loops: ToolLoops = ToolLoops.FOLLOW  # a turn answering tool calls
    aliased: list[str] = field(default_factory=list)  # routes that say on_unreachable (on_failure's older name)
    budgets: BudgetSettings = field(default_factory=BudgetSettings)  # spending caps (routing/budgets.py)


# ---------------------------------------------------------------------------------------------
# Decision


@dataclass(eq=False)
class Tried:
    """One route as ``decide`` tried it (a decision's ``trace`` is these, in order): whether its
    ``when`` held and why (``reasons``), why the pair or the translation refused the turn
    (``refused``), or that the route's ``endpoint`` could not take it (``unreachable``;
    ``unavailable``: why not, when not simply down: cooling down, full). A tool loop followed
    or not (reasoning/loop_route.py) is one too, naming the loop (``loop``).

    ``record()`` is its recorded form (the ledger's JSON, the endpoint by name, only where the
    route was skipped). It also reads as that form (``t["refused"]``, ``t.get("route")``, equal
    to that dict), so what reads recorded traces reads a live one the same."""

    route: str
    matched: bool
    reasons: list[str]
    refused: str | None = None
    unreachable: bool = False
    endpoint: Endpoint | None = field(default=None, repr=False)  # the route's endpoint
    unavailable: str | None = None
    loop: str | None = None  # the tool loop: "tool loop: call_1 made by ds/m (tk-…)"

    def record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"route": self.route, "matched": self.matched, "reasons": self.reasons,
                               "refused": self.refused, "unreachable": self.unreachable}
        if self.loop is not None:
            out["loop"] = True
        if self.endpoint is not None and (self.refused or self.unreachable):
            out["endpoint"] = self.endpoint.name
        if self.unavailable is not None:
            out["unavailable"] = self.unavailable
        return out

    def __getitem__(self, key: str) -> Any:
        return self.record()[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.record().get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self.record()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Tried):
            return self.record() == other.record()
        return self.record() == other if isinstance(other, dict) else NotImplemented

    __hash__ = None  # type: ignore[assignment]


def records(trace: list[Tried]) -> list[dict[str, Any]]:
    """A trace as recorded (the ledger, the console line, explain)."""
    return [t.record() for t in trace]


@dataclass
class Decision:
    action: Decided  # PASS (no route: pass through untouched) | ROUTE | ERROR (refused, on_refused: error)
    route: Route | None  # with "pass": a shadow-only route that matched, else None
    endpoint: Endpoint | None
    model: str | None  # model to send; None = keep the client's
    trace: list[Tried]  # each route tried, in order
    reason: str  # one-line summary
    earn: EarnCall | None = None  # an earned route: its book's word on this turn (routing/earn.py)


def decide(
    rules: Rules,
    facts: TurnFacts,
    *,
    refusal: Callable[[Route, Endpoint], str | None] | None = None,
    reachable: Callable[[Endpoint], bool | str | None] | None = None,
    after: str | None = None,
    earned: Callable[[str, Earn, TurnFacts], EarnCall] | None = None,
) -> Decision:
    """First route whose conditions hold, whose pair is translatable and whose endpoint is
    available wins; no such route = pass through. A refused route with ``on_refused: error``
    or an unavailable one with ``on_failure: error`` ends the search with an "error".

    ``reachable(ep)``: True/None when ``ep`` may take the turn, else False (unreachable) or
    why not (cooling down, full). ``after``: only the routes after the route of that name
    are looked at (failover: the next route once that one's endpoint failed). ``earned``: the
    earned-route book (routing/earn.py ``EarnBook.status``): a route with ``earn:`` sends a turn
    of an earned stratum to its candidate when the candidate may take it, else to its own target."""
    if refusal is None:
        refusal = lambda route, ep: turn_refusal(facts, ep)  # noqa: E731
    trace: list[Tried] = []
    skipped: list[str] = []
    routes = rules.routes
    if after is not None:
        names = [r.name for r in routes]
        routes = routes[names.index(after) + 1:] if after in names else []
    for route in routes:
        results = check_when(route.when, facts)
        entry = Tried(route.name, all(ok for ok, _ in results),
                      [r for _, r in results] or ["no conditions: matches every turn"])
        trace.append(entry)
        if not entry.matched:
            continue
        if route.to is None:  # shadow-only: served as if unrouted, shadowed in the background
            return Decision(Decided.PASS, route, None, None, trace, f"{route.name}: shadow only, passed through")
        call = earned(route.name, route.earn, facts) if route.earn is not None and earned is not None else None
        if call is not None and call.to_candidate:
            if (to_candidate := _earned_candidate(rules, route, call, entry, trace, refusal, reachable)) is not None:
                return to_candidate
        ep = entry.endpoint = rules.endpoints[route.to]
        if why := refusal(route, ep):
            entry.refused = why
            if route.on_refused == OnRefused.ERROR:
                return Decision(Decided.ERROR, route, ep, None, trace, f"route {route.name} refused: {why}")
            skipped.append(f"{route.name} refused ({why})")
            continue
        ok = True if reachable is None else reachable(ep)
        if ok is not True and ok is not None:
            why = "unreachable" if ok is False else str(ok)
            entry.unreachable = True
            if ok is not False:
                entry.unavailable = why
            if route.on_failure == OnFailure.ERROR:
                return Decision(Decided.ERROR, route, ep, None, trace,
                                f"route {route.name}: endpoint {ep.name} is {why} (on_failure: error)")
            skipped.append(f"{route.name}: endpoint {ep.name} {why}")
            continue
        return Decision(Decided.ROUTE, route, ep, route.model or ep.model, trace, f"{route.name} → {ep.name}", call)
    reason = "no usable route: " + "; ".join(skipped) if skipped else "no route matched"
    return Decision(Decided.PASS, None, None, None, trace, reason)


def _earned_candidate(rules: Rules, route: Route, call: EarnCall, entry: Tried, trace: list[Tried],
                      refusal: Callable[[Route, Endpoint], str | None],
                      reachable: Callable[[Endpoint], bool | str | None] | None) -> Decision | None:
    """An earned stratum's turn to the route's candidate, when the candidate may take it; else
    None (the call says why, and the route's own target takes the turn)."""
    cand = rules.endpoints[call.candidate]
    ok = True if reachable is None else reachable(cand)
    why = refusal(route, cand) or (None if ok is True or ok is None else "unreachable" if ok is False else str(ok))
    if why is None:
        entry.endpoint = cand
        return Decision(Decided.ROUTE, route, cand, cand.model, trace, f"{route.name} → {cand.name} ({call.text})", call)
    call.text += f"; the candidate {cand.name} cannot take this turn ({why}): the route's own target does"
    return None
