"""A failed attempt and the next one, as the proxy sees them: what a failure does to its
endpoint, what the log says, and what the relay sends next.

Contract: ``note_failure`` records one attempt that failed before any byte reached the client
(``Attempted``) and applies its consequence to the endpoint: a cooldown from its
retry-after / rate-limit hint, else the passive back-off (a context window is the turn's
size, not the endpoint's health: neither); ``failure_line`` is its log line;
``replan_of`` is what the relay sends as the next attempt (proxy/relay.py ``Replan``).
Choosing that next attempt is attempts.next_turn's. Plain Python: no mitmproxy, no I/O
(``Capacity`` and ``EndpointHealth`` are in-memory state).
"""

from __future__ import annotations

from collections.abc import Iterable

from .. import protocols
from ..routing.endpoints import EndpointHealth
from .plan import Turn
from .attempts import Attempted, Chain, attempt_body, attempt_headers, attempt_url, may_fail_over
from .capacity import Capacity
from .failover import Failure, retry_hint
from ..proxy.relay import Replan
from ..states import Action


def note_failure(turn: Turn, failure: Failure, headers: Iterable[tuple[str, str]], *, ms: float, now: float,
                 capacity: Capacity, health: EndpointHealth) -> Attempted:
    """The attempt ``turn`` made, failed after ``ms``; its endpoint cooled or backed off."""
    ep = turn.endpoint if turn.action != Action.PASS else None
    route = turn.decision.route.name if turn.decision and turn.decision.route else None
    tried = Attempted(route, ep.name if ep else None, failure.kind, failure.status, failure.why, ms,
                      host=ep.host if ep else turn.host, error=failure.error)
    hint = retry_hint(headers, now) if failure.kind == "status" else None
    if hint is not None:
        tried.retry_after_s = hint[0]
    if ep is not None:
        if hint is not None:
            tried.cooled_s = capacity.cool(ep, hint[0], f"HTTP {failure.status}, {hint[1]}")
        # no hint: the passive back-off, so later turns go to the next route at once (a route
        # that says on_failure: error keeps asking its endpoint; an unreachable one backs off as before)
        if tried.cooled_s or failure.kind == "context_window":
            pass  # a context window is this turn's size, not the endpoint's health
        elif failure.kind == "unreachable":
            tried.backoff_s = health.failed(ep, failure.why)
        elif may_fail_over(turn):
            tried.backoff_s = capacity.back_off(ep, failure.short())
    return tried


def where_next(nxt: Turn) -> str:
    """The endpoint the next attempt goes to, or the host the client asked for."""
    return nxt.endpoint.name if nxt.endpoint and nxt.action != Action.PASS else nxt.host


def failure_line(turn: Turn, tried: Attempted, failure: Failure, nxt: Turn | None) -> str:
    """``tokunseba: tk-…: small (route a) failed: HTTP 503; next: big``."""
    where = tried.name + (f" (route {tried.route})" if tried.route else "")
    if nxt is None:
        then = "; no next route: the client gets this failure"
    else:
        then = f"; next: {nxt.endpoint.name if nxt.endpoint and nxt.action != Action.PASS else nxt.host}"
    return (f"tokunseba: {turn.request_id}: {where} failed: {failure.why}"
            + (f"; cooled for {tried.cooled_s:g} s" if tried.cooled_s else "") + then)


def replan_of(nxt: Turn, chain: Chain) -> Replan:
    """The next attempt as the relay sends it."""
    ep = nxt.endpoint if nxt.action != Action.PASS else None
    return Replan(attempt_url(nxt, chain), attempt_headers(nxt, chain), attempt_body(nxt, chain),
                  first_byte_s=ep.first_byte_timeout_s if ep else None,
                  protocol=nxt.target_protocol or nxt.client_protocol,
                  keepalive=nxt.action == Action.TRANSLATE or protocols.get(nxt.client_protocol).passthrough_keepalive)
