"""The proxy's side of shadows: whether a turn is shadowed, and the hand-off of its reply.

Contract: ``maybe_shadow`` schedules the shadow of a planned turn whose route says
``shadow:`` (sampled by ``shadow_sample``; only for clients that may spend endpoint keys,
and kinds of turn that can be shadowed) on the ``ShadowSender``, in the background: it never
delays the client's turn, and a failure is logged, never raised. ``primary_done`` hands the
reply the client got to the shadow waiting to compare with it, once. Plain Python: no
mitmproxy; the sender does the I/O (shadow/sender.py).
"""

from __future__ import annotations

import logging
import random

from ..routing import Rules, shadowable
from ..shadow import ShadowJob, ShadowSender
from ..shadow import should_shadow
from ..turn import FlowState

log = logging.getLogger("tokunseba")


def maybe_shadow(shadows: ShadowSender | None, rules: Rules, state: FlowState, origin: tuple[str, int]) -> None:
    """A route with `shadow:` also sends this turn to its shadow endpoint (``origin``: the
    client's host and port, where the shadow's reply is compared from)."""
    turn = state.turn
    route = turn.decision.route if turn.decision else None
    if (route is None or route.shadow is None or shadows is None or turn.local is not None
            or not turn.may_shadow  # a shadow spends the shadow endpoint's key: loopback or opt-in only
            or not shadowable(turn.client_protocol, turn.detected.kind)
            or not should_shadow(route.shadow_sample, random.random())):
        return
    try:
        job = ShadowJob(turn.request_id, route.name, rules.endpoints[route.shadow], turn.client_protocol,
                        turn.detected.kind, turn.original_body, *origin)
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
    shadows.primary_done(turn.request_id, status, body or b"", error)
