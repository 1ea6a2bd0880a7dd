"""The proxy's side of shadows: whether a turn is shadowed, and the hand-off of its reply.

Contract: ``maybe_shadow`` schedules the shadow of a planned turn whose route says
``shadow:`` (sampled by ``shadow_sample``) or ``earn:`` (a turn its route's own target took is
shadowed to the candidate; a ``canary`` share of the turns the candidate took is shadowed back to
the route's target: routing/earn.py), each with the turn's stratum (only for clients that may spend endpoint keys,
and kinds of turn that can be shadowed) on the ``ShadowSender``, in the background: it never
delays the client's turn, and a failure is logged, never raised. ``primary_done`` hands the
reply the client got to the shadow waiting to compare with it, once. Plain Python: no
mitmproxy; the sender does the I/O (shadow/sender.py).
"""

from __future__ import annotations

import logging
import random

from ..routing import Rules, shadowable, stratum_of
from ..shadow import ShadowJob, ShadowSender
from ..shadow import should_shadow
from ..turn import FlowState

log = logging.getLogger("tokunseba")


def maybe_shadow(shadows: ShadowSender | None, rules: Rules, state: FlowState, origin: tuple[str, int]) -> None:
    """A route with `shadow:` also sends this turn to its shadow endpoint (``origin``: the
    client's host and port, where the shadow's reply is compared from)."""
    turn = state.turn
    route = turn.decision.route if turn.decision else None
    if (route is None or shadows is None or turn.local is not None
            or not turn.may_shadow  # a shadow spends the shadow endpoint's key: loopback or opt-in only
            or not shadowable(turn.client_protocol, turn.detected.kind)):
        return
    if route.earn is not None:
        if turn.endpoint is None:
            return
        if turn.endpoint.name == route.earn.to:  # the candidate took it: a canary share goes back
            target, role, sample = route.to, "canary", route.earn.canary
        else:  # the route's own target took it: the candidate answers it too
            target, role, sample = route.earn.to, "learning", 1.0
    elif route.shadow is not None:
        target, role, sample = route.shadow, "shadow", route.shadow_sample
    else:
        return
    if target is None or not should_shadow(sample, random.random()):
        return
    try:
        facts = turn.facts
        job = ShadowJob(turn.request_id, route.name, rules.endpoints[target], turn.client_protocol,
                        turn.detected.kind, turn.original_body, *origin,
                        stratum=stratum_of(route.name, facts).record() if facts is not None else None,
                        schema=facts.output_schema if facts is not None else None,
                        tools_offered=facts.tools if facts is not None else False, role=role,
                        earn=route.earn.record() if route.earn is not None else None,
                        primary_endpoint=turn.endpoint.name if route.earn is not None and turn.endpoint else None)
        if shadows.submit(job):
            state.shadowed = True
    except Exception:
        log.exception("tokunseba: could not schedule the shadow of %s", turn.request_id)


def primary_done(shadows: ShadowSender | None, state: FlowState, status: int | None, body: bytes | None) -> None:
    """Hand the reply the client got to the shadow waiting to compare with it (once)."""
    if not state.shadowed or shadows is None:
        return
    state.shadowed = False
    turn = state.turn
    error = turn.error if status is None or turn.outcome in ("error", "cancelled") else None
    shadows.primary_done(turn.request_id, status, body or b"", error,
                         turn.endpoint.name if turn.endpoint is not None else None)
