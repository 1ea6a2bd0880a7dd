"""A turn under spending caps, as planning sees it (pure: the caps' store is the adapter's).

- ``budget_facts``: what a budget's scope looks at, for the decision as it stands: the endpoint
  the turn goes to (its route's; a turn passed through: the built-in endpoint of its host), the
  route, the client's protocol, the model sent, the session and the agent;
- ``rerouted``: a route a budget (``on_limit: reroute``) took the turn away from, marked in the
  trace as skipped (``explain``: "rerouted by budget X"), and the ledger event saying so;
- ``apply_verdict``: the verdict's marks on the turn, and, when a cap stops it, the client's own
  "stop now" answer (protocols' ``stop_now``: a 429 each client reads as final, naming the budget,
  spent of limit and when it resets), never sent upstream.
"""

from __future__ import annotations

from typing import Any

from .. import protocols
from ..budgets import Verdict, limit_message
from ..routing import BUILTIN_ENDPOINTS, Decision, Tried
from ..states import Action
from ..protocols import REQUEST_ID_HEADER
from .plan import LocalResponse, Plan, Prepared, Turn


def budget_facts(prep: Prepared, plan: Plan | None) -> dict[str, str | None]:
    d: Decision | None = plan.decision if plan is not None else None
    ep = d.endpoint if d is not None and d.endpoint is not None and d.route is not None and d.route.to else None
    if ep is None:  # passed through: the built-in endpoint of the host it goes to
        ep = next((e for e in BUILTIN_ENDPOINTS.values() if e.host == prep.host), None)
    requested = prep.req.get("model") if prep.req else None
    model = (d.model if d is not None and d.model else None) or (requested if isinstance(requested, str) else
                                                                 prep.det.model)
    return {"endpoint": ep.name if ep is not None else prep.host,
            "route": d.route.name if d is not None and d.route is not None else None,
            "client": prep.det.protocol, "model": model, "session": prep.who.session, "agent": prep.who.agent}


def rerouted(plan: Plan, verdict: Verdict) -> tuple[list[Tried], dict[str, Any]]:
    """The trace so far, its last route marked skipped by the budget, and the event's data."""
    assert verdict.refused is not None
    a = verdict.refused
    trace = list(plan.decision.trace)
    route = plan.decision.route.name if plan.decision.route is not None else None
    why = f"rerouted by budget {a.budget.name} ({a.budget.amount(a.spent)} spent of {a.budget.amount(a.budget.limit)})"
    if trace:
        trace[-1].unreachable, trace[-1].unavailable = True, why
    verdict.rerouted_by.append(a.budget.name)
    return trace, {"budget": a.budget.name, "from_route": route, "why": why}


def apply_verdict(turn: Turn, verdict: Verdict, now: float) -> None:
    """The verdict's marks on the turn, and its stop-now answer when a cap stops it."""
    turn.budget = verdict
    turn.events.extend(verdict.events)
    if not verdict.stops or turn.local is not None:
        return
    if verdict.refused is not None:
        message = limit_message(verdict.refused, now, turn.request_id)
        reset_in, reset_at = verdict.refused.window_end - now, verdict.refused.window_end
    else:  # the ledger is away and the rules say refuse
        message = (f"tokunseba: spending caps cannot be checked ({verdict.away}) and the rules say "
                   f"on_ledger_unavailable: refuse; this turn was not sent (request {turn.request_id})")
        reset_in, reset_at = 0.0, now
    facts = protocols.get(turn.client_protocol)
    if facts.stop_now is not None:
        status, headers, body = facts.stop_now(message, reset_in, reset_at)
    else:  # a protocol that brings no stop shape: its own 429
        status, headers, body = 429, {}, facts.error_body(429, message, "rate_limit_error")
    turn.action, turn.outcome, turn.error = Action.RESPOND, "refused", message
    turn.local = LocalResponse(status, {"content-type": "application/json", **headers,
                                        REQUEST_ID_HEADER: turn.request_id}, body)
