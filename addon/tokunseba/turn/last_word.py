"""What the client hears when no attempt of its turn could serve it (pure, no I/O).

Contract — after a chain of attempts (turn/failover.py ``Attempted``, in order):

- ``choose(attempts)`` is the index of the attempt that says most about the turn, by
  ``RANK``: a context-window error wins over everything (the client can act on it: Claude
  Code compacts); an endpoint's real answer (a 429 with its retry hint, then a 5xx / 529 /
  408) wins over a hop that sent no status (no first byte in time, a reset, unreachable).
  Among equals, the soonest retry hint, then the earliest attempt.
- ``story(attempts)`` names every attempt in order: ``local answered 429 (retry after 7 s):
  Rate limit reached; then api.anthropic.com could not be reached: cannot connect to …``.
  It never says "not sent": every attempt in it was sent, or tried.
- ``answer(client, attempts, request_id)`` is the reply: the chosen attempt's status and
  error, in the client's protocol and its own words (``Protocol.upstream_error``: a context
  window is Anthropic's "prompt is too long", OpenAI's ``context_length_exceeded``, Gemini's
  INVALID_ARGUMENT), the story as its message, and ``retry-after`` = the chosen attempt's
  hint (whole seconds, rounded up). A chosen attempt with no status is 504 (no first byte in
  time) or 502.

Before anything is sent — every route that matched is cooling down, full or unreachable
(``waits``), and no other way is open (``unmatched: refuse``, or the client's own host cannot
be reached either) — ``busy`` answers 429 when one of them was rate-limited, else 503, with
``retry-after`` = the soonest one frees up: "busy, come back", never a 400 (which says the
request is malformed: a client neither waits nor retries it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .. import protocols
from ..neutral import UpstreamError
from ..routing import Endpoint, EndpointHealth, Rules
from ..protocols import REQUEST_ID_HEADER
from .plan import LocalResponse, Turn
from .failover import Attempted, Capacity
from ..states import Action, Decided

# how much an attempt's failure says about the turn (higher wins)
RANK: dict[str, int] = {
    "context_window": 5,  # the turn does not fit: the client can act (compact, trim)
    "rate_limited": 4,  # a 429: the endpoint's own "come back in N s"
    "status": 3,  # any other status an endpoint answered (5xx, 529, 408)
    "timeout": 2,  # connected, no status line within first_byte_timeout_s
    "reset": 1,  # the connection broke before the status line
    "unreachable": 0,  # nothing answered
}
NO_STATUS = {"timeout": 504, "reset": 502, "unreachable": 502}  # a chosen attempt that sent no status
FULL_WAIT_S = 1.0  # a full endpoint (max_concurrency): a slot frees when a turn ends; ask again soon


def rank(a: Attempted) -> int:
    if a.kind == "status" and a.status == 429:
        return RANK["rate_limited"]
    return RANK.get(a.kind, 0)


def choose(attempts: Sequence[Attempted]) -> int:
    """The index of the attempt whose failure the client gets."""
    def key(i: int) -> tuple:
        a = attempts[i]
        return (-rank(a), a.retry_after_s if a.retry_after_s is not None else math.inf, i)
    return min(range(len(attempts)), key=key)


def _message(a: Attempted) -> str:
    if a.error is not None and a.error.message:
        return " ".join(a.error.message.split())
    return a.why


def said(a: Attempted) -> str:
    """One attempt, as the story says it."""
    name = a.name
    if a.kind in ("status", "context_window"):
        hint = f" (retry after {math.ceil(a.retry_after_s)} s)" if a.retry_after_s else ""
        what = "a context-window error " if a.kind == "context_window" else ""
        return f"{name} answered {what}{a.status}{hint}: {_message(a)}"
    if a.kind == "unreachable":
        return f"{name} could not be reached: {a.why}"
    if a.kind == "timeout":
        return f"{name} did not answer in time: {a.why}"
    return f"{name} broke the connection: {a.why}"


def story(attempts: Sequence[Attempted]) -> str:
    return "; then ".join(said(a) for a in attempts)


@dataclass(frozen=True)
class Told:
    """What the client was told, and which attempt it stands for (the ledger keeps it)."""

    reply: LocalResponse
    chosen: int
    message: str

    def record(self) -> dict:
        return {"chosen": self.chosen, "status": self.reply.status,
                "retry_after": self.reply.headers.get("retry-after"), "message": self.message}


def answer(client: str, attempts: Sequence[Attempted], request_id: str | None = None) -> Told:
    """The reply for a turn none of whose ``attempts`` served it (see the module's contract)."""
    i = choose(attempts)
    a = attempts[i]
    a.told = True
    message = f"tokunseba: {story(attempts)}" + (f" (request {request_id})" if request_id else "")
    status = a.status if a.kind in ("status", "context_window") and a.status else NO_STATUS.get(a.kind, 502)
    err = UpstreamError(status, message, a.error.type if a.error else None, a.error.code if a.error else None)
    facts = protocols.for_errors(client)
    if facts.upstream_error is not None:
        status, body = facts.upstream_error(err)
    else:  # a protocol without its own wording: its envelope, the chosen status
        body = facts.error_body(status, message, None)
    headers = {"content-type": "application/json"}
    if request_id:
        headers[REQUEST_ID_HEADER] = request_id
    if a.retry_after_s:
        headers["retry-after"] = str(max(1, math.ceil(a.retry_after_s)))
    return Told(LocalResponse(status, headers, body), i, message)


def final(client: str, attempts: Sequence[Attempted], request_id: str | None = None) -> Told | None:
    """What the client is told when the last of ``attempts`` failed and no next attempt is made:
    with two or more attempts, ``answer``; with one (its next route refused the turn, its
    endpoint is known down, on_failure: error, unmatched: refuse), None: that failure goes to
    the client as it came, in its protocol (its status, its headers, its words)."""
    return answer(client, attempts, request_id) if len(attempts) > 1 else None


# ---- before anything is sent: every way is busy

@dataclass(frozen=True)
class Wait:
    """A route that matched but whose endpoint cannot take the turn now."""

    route: str
    endpoint: str
    why: str  # cooling down (…), full (…), unreachable
    left_s: float  # seconds until it may take turns again (a guess for a full one)
    rate_limited: bool  # it is cooling down after a 429


def waits(trace: Sequence[Any], rules: Rules, capacity: Capacity, health: EndpointHealth) -> list[Wait]:
    """The routes of a decision's ``trace`` (``rules.Tried``, or their recorded form) skipped
    because their endpoint was unavailable (cooling down, full, unreachable: rules.decide's
    ``unreachable`` entries)."""
    out: list[Wait] = []
    for t in trace:
        if not t.get("unreachable") or t.get("loop"):
            continue
        route = next((r for r in rules.routes if r.name == t.get("route")), None)
        ep: Endpoint | None = rules.endpoints.get(route.to) if route is not None and route.to else None
        if ep is None:
            continue
        cooling = capacity.cooling.get(ep.name)
        left = max(capacity.cooling_left(ep), health.left(ep))
        if left <= 0 and capacity.full(ep):
            left = FULL_WAIT_S
        out.append(Wait(t["route"], ep.name, t.get("unavailable") or f"unreachable ({health.why(ep) or 'in its back-off'})",
                        left, cooling is not None and "HTTP 429" in cooling[1]))
    return out


def busy(client: str, ws: Sequence[Wait], *, then: str | None = None,
         request_id: str | None = None) -> tuple[LocalResponse, str]:
    """429 (one of ``ws`` was rate-limited) or 503, ``retry-after`` = the soonest one frees up,
    and its message; ``then``: what else was tried and failed (the client's own host could not
    be reached)."""
    status = 429 if any(w.rate_limited for w in ws) else 503
    soonest = max(1, math.ceil(min((w.left_s for w in ws), default=FULL_WAIT_S)))
    parts = [f"route {w.route}: {w.endpoint} is {w.why}" for w in ws]
    msg = ("tokunseba: no endpoint can take this turn now: " + "; ".join(parts) + (f"; then {then}" if then else "")
           + f"; retry after {soonest} s" + (f" (request {request_id})" if request_id else ""))
    reply = LocalResponse.error(client, status, msg, "rate_limit_error" if status == 429 else "overloaded_error",
                         request_id=request_id)
    reply.headers["retry-after"] = str(soonest)
    return reply, msg


def say_busy(turn: Turn, rules: Rules, capacity: Capacity, health: EndpointHealth, *, then: str | None = None) -> bool:
    """A turn answered without being sent — refused under ``unmatched: refuse`` after every
    route that matched was skipped as cooling, full or unreachable, or (``then``) passed on
    to a host that cannot be reached either — is answered ``busy`` instead (429/503 with
    retry-after), recorded as an error; whether it was."""
    d = turn.decision
    if turn.local is None or d is None or d.action != Decided.PASS:
        return False
    ws = waits(d.trace, rules, capacity, health)
    if not ws:
        return False
    reply, msg = busy(turn.client_protocol, ws, then=then, request_id=turn.request_id)
    turn.action, turn.outcome, turn.error, turn.local, turn.url = Action.RESPOND, "error", msg, reply, None
    turn.events.append(("busy", {"status": reply.status, "retry_after": int(reply.headers["retry-after"]),
                                 "waits": [w.__dict__ for w in ws], **({"then": then} if then else {})}))
    return True
