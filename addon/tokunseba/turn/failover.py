"""Everything about a failed attempt and the next one (issue 19; one module since issue 28).

Where to change what happens when an attempt fails before any byte of its reply reached the
client: the proxy (proxy/mitm.py, proxy/relay.py) only does the waiting and the sockets.

1. **Is it a failure?** ``Failure.of(status, body, protocol)`` -> a ``Failure`` or None. A failure
   is what protocols/failures.py lists: connection refused or reset before the status line
   (``unreachable`` / ``reset``, said by the relay), no status line within the endpoint's
   ``first_byte_timeout_s`` (``timeout``), a status of ``FAILOVER_STATUSES`` (408, 429, 5xx,
   529), or a context-window error read from the body (protocols/failures.is_context_window,
   the same table the error envelopes read). Anything else (a plain 400, 401, 404...) is the
   request's own fault: answered, never failed over. protocols/failures.py ``may_be_failure``
   says which replies the relay holds (up to its ``HOLD_MAX`` bytes: proxy/relay.py) until this is
   decided; every other reply is relayed at once, so the healthy path pays nothing.
2. **What it does to its endpoint.** ``note_failure`` records the attempt (``Attempted``) and
   cools the endpoint from its retry hint (``retry_hint``: ``retry-after`` seconds or HTTP date,
   ``retry-after-ms``, a used-up rate limit's reset), capped by its ``cooldown_max_s``, else
   backs it off (``Capacity.back_off``: 2 s, doubling per failure in a row, at most 30 s; a
   refused connect is routing/endpoints.EndpointHealth's, per host and port). A context window
   is the turn's size, not the endpoint's health: neither.
3. **Which endpoints may take a turn now.** ``Capacity``: cooldowns and ``max_concurrency``
   slots (a turn takes a ``Slot`` when planned onto the endpoint, or waits up to its ``queue_s``
   for one: the waiting is the proxy's, ``Capacity.hand_over`` its plain half; it gives the slot
   back once, when its attempt there ends). ``available(health, capacity, full)`` is
   ``decide``'s test of an endpoint; ``Capacity.say_when`` puts ``retry-after`` on a 503
   answered because the route's endpoint is cooling down.
4. **The next attempt.** ``next_turn`` plans it again from the client's own request
   (``Chain.prep``) through the same ``decide_request`` / ``build_turn`` as the first attempt:
   the next route whose ``when`` matches after the failed one, else what ``unmatched`` says (an
   earned route's candidate that failed: the route decided again without it, so its own target
   first: routing/earn.py); nothing of the previous attempt is reused (its body, headers and key stay with it). None:
   the client gets the failure (``on_failure: error``, no route left under ``unmatched:
   refuse``, a next route that refuses the turn). ``Chain.attempt_url`` / ``attempt_headers`` /
   ``attempt_body`` rebuild the request from the client's own (only the allow-listed headers to
   another host, plus that endpoint's key); ``replan_of`` is what the relay sends (``Replan``).
5. **Moving on.** ``moved_on(turn, chain, tried, failure, nxt)`` settles the chain: the log line
   (``failure_line``), the ``attempt_failed`` record, and either the next turn's ``Replan`` or
   the chain given up, with what the client is told (turn/last_word.py ``final``).

Plain Python: no mitmproxy, no sockets, no asyncio (``Capacity`` and ``EndpointHealth`` are
in-memory state, run on mitmproxy's event loop; no locks).
"""

from __future__ import annotations

import email.utils
import math
import re
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from .. import protocols
from ..neutral import UpstreamError, parse_error_body
from ..protocols import (
    CONTEXT_STATUSES,
    FAILOVER_STATUSES,
    RESET_HEADERS,
    RETRY_HEADERS,
    is_context_window,
)
from ..routing import Endpoint, EndpointHealth, OnFailure, Rules, Tried, Unmatched
from ..states import Action, Decided
from .plan import Prepared, Turn, build_turn, decide_request


# ---- 1. is it a failure?


KINDS = ("unreachable", "reset", "timeout", "status", "context_window", "busy")


@dataclass(frozen=True)
class Failure:
    kind: str  # one of KINDS
    why: str  # one line, for the ledger, explain and the mitmweb comment
    status: int | None = None  # the endpoint's status, when it sent one
    error: UpstreamError | None = field(default=None, compare=False)  # the endpoint's error, read (a status failure)

    @classmethod
    def of(cls, status: int, body: bytes, protocol: str | None = None) -> Failure | None:
        """A whole (held) reply of an endpoint of ``protocol``: a failure, or None when the client
        should get it. (A context-window error is read against every protocol's wordings, since
        servers borrow each other's: ``protocol`` does not narrow it.)"""
        if status in FAILOVER_STATUSES:
            err = parse_error_body(status, body)
            return cls("status", f"HTTP {status}: {_line(err.message)}", status, err)
        if status in CONTEXT_STATUSES:
            err = parse_error_body(status, body)
            if is_context_window(err):
                return cls("context_window", f"HTTP {status} context-window error: {_line(err.message)}", status, err)
        return None

    def short(self) -> str:
        """``503``, ``context window``, ``reset``... for the chain in a comment or a log line."""
        if self.kind == "status":
            return str(self.status)
        if self.kind == "context_window":
            return f"{self.status} context window" if self.status else "context window"
        return self.kind


@dataclass(frozen=True)
class Broken:
    """Why the relay saw an attempt's exchange break (its ``Target.broken``): ``kind`` is
    ``unreachable`` (the connect failed: the endpoint is marked down), ``timeout`` (no status
    line in time) or ``reset`` (the connection broke); ``message`` is the one line the logs,
    the ledger and the client are told (and what ``str()`` gives)."""

    kind: str
    message: str

    def __str__(self) -> str:
        return self.message

    @property
    def refused(self) -> bool:
        """The endpoint could not be connected to (not a break of a connection it had taken)."""
        return self.kind == "unreachable"


def _line(text: str, n: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def _seconds(value: str, fmt: str, now: float) -> float | None:
    v = value.strip()
    try:
        if fmt == "ms":
            return float(v) / 1000
        if fmt == "seconds-or-date":
            if re.fullmatch(r"\d+(\.\d+)?", v):
                return float(v)
            when = email.utils.parsedate_to_datetime(v)
            return when.timestamp() - now
        if fmt == "duration":
            parts = _DURATION.findall(v)
            if not parts or "".join(n + u for n, u in parts) != v:
                return None
            return sum(float(n) * _UNIT[u] for n, u in parts)
        if fmt == "rfc3339":
            return datetime.fromisoformat(v.replace("Z", "+00:00")).timestamp() - now
    except (ValueError, TypeError, OverflowError, IndexError):
        return None
    return None


def retry_hint(headers: Iterable[tuple[str, str]], now: float) -> tuple[float, str] | None:
    """How long (seconds, and the header that said it) the endpoint asked not to be sent turns:
    ``retry-after`` / ``retry-after-ms`` first, else the reset of a used-up rate limit. None
    without a usable hint (absent, unparseable, or already past)."""
    h = {k.lower(): v for k, v in headers}
    for name, fmt in RETRY_HEADERS.items():
        if name in h and (s := _seconds(h[name], fmt, now)) is not None and s > 0:
            return s, name
    resets = []
    for name, (remaining, fmt) in RESET_HEADERS.items():
        if name in h and h.get(remaining, "").strip() == "0" and (s := _seconds(h[name], fmt, now)) is not None:
            resets.append((s, name))
    resets = [r for r in resets if r[0] > 0]
    return max(resets) if resets else None


# ---- the attempts of a turn

@dataclass
class Attempted:
    """One attempt that failed: what ``explain`` and ``stats`` show, and the ledger keeps."""

    route: str | None
    endpoint: str | None  # None: the host the client asked for (unmatched: pass)
    kind: str  # failover.KINDS
    status: int | None
    why: str
    ms: float  # how long the attempt took, from its start to its failure
    cooled_s: float = 0.0  # the endpoint's cooldown from its retry-after / rate-limit hint
    backoff_s: float = 0.0  # the passive health back-off it started (no hint)
    host: str | None = None  # where it went: the endpoint's host, or the client's own host (passed on)
    retry_after_s: float | None = None  # how long the endpoint asked to be left alone (its hint, uncapped)
    error: UpstreamError | None = None  # the endpoint's error as it said it (a reply with a status)
    told: bool = False  # the client got this attempt's failure (turn/last_word.py: it said most)

    @property
    def name(self) -> str:
        """The attempt's endpoint, else the host it was passed on to."""
        return self.endpoint or self.host or "the original host"

    def record(self) -> dict:
        return {"route": self.route, "endpoint": self.endpoint, "kind": self.kind, "status": self.status,
                "why": self.why, "ms": round(self.ms, 3), "cooled_s": round(self.cooled_s, 3),
                "backoff_s": round(self.backoff_s, 3),
                **({"host": self.host} if self.endpoint is None and self.host else {}),
                **({"retry_after_s": round(self.retry_after_s, 3)} if self.retry_after_s is not None else {}),
                **({"told": True} if self.told else {})}


RELAY_SETS = {b"host", b"content-length", b"transfer-encoding"}  # the relay writes these for the attempt


@dataclass
class Chain:
    """What a flow keeps to plan its next attempt."""

    prep: Prepared
    client_url: str
    client_fields: tuple  # the client's header fields, raw (name, value) bytes
    failed: list[Attempted] = field(default_factory=list)
    trace: list[Tried] = field(default_factory=list)  # the decisions' traces, attempt after attempt
    gave_up: bool = False  # the last failure went to the client (no next attempt)
    told: Any = None  # what the client is told instead of the last failure as it came (turn/last_word.py)

    def text(self, last: str | None) -> str:
        """``small (503) → big`` for the mitmweb comment and the log."""
        parts = [f"{a.endpoint or a.host or 'original host'} ({_short(a)})" for a in self.failed]
        return " → ".join([*parts, last or "original host"])


    def failed_text(self) -> str:
        """``local (429) → api.anthropic.com (unreachable)``: every attempt, all of them failed."""
        return " → ".join(f"{a.name} ({_short(a)})" for a in self.failed)

    # the attempt ``turn``'s request, rebuilt from the client's own
    def attempt_url(self, turn: Turn) -> str:
        """Where the attempt goes: its endpoint's URL, or the client's own (passed through)."""
        return turn.url or self.client_url

    def attempt_headers(self, turn: Turn) -> list[tuple[bytes, bytes]]:
        """The attempt's request headers, from the client's own: the allow-listed ones when the
        endpoint is another host (``keep_headers``), then the endpoint's own ``set_headers``."""
        keep = turn.keep_headers
        drop = {k.lower().encode() for k in turn.set_headers} | RELAY_SETS
        out = [(k.lower(), v) for k, v in self.client_fields  # lower-case, as the relay reads mitmproxy's
               if (keep is None or k.decode("latin-1").lower() in keep) and k.lower() not in drop]
        out += [(k.encode(), v.encode()) for k, v in turn.set_headers.items()]
        return out

    def attempt_body(self, turn: Turn) -> bytes:
        return turn.body if turn.body is not None else self.prep.body


def _short(a: Attempted) -> str:
    return Failure(a.kind, a.why, a.status).short()


def may_fail_over(turn: Turn) -> bool:
    """Whether a failure of this attempt moves the turn on (its route says on_failure: next)."""
    route = turn.decision.route if turn.decision is not None else None
    return route is not None and route.to is not None and route.on_failure == OnFailure.NEXT


def next_turn(rules: Rules, chain: Chain, failed: Turn, *, reachable: Callable[[Endpoint], bool | str | None],
              env: Mapping[str, str]) -> Turn | None:
    """The plan of the next attempt after ``failed`` failed, or None (the client gets the failure)."""
    route = failed.decision.route if failed.decision is not None else None
    if not may_fail_over(failed) or chain.prep.req is None or route is None:
        return None
    call = failed.decision.earn if failed.decision is not None else None
    if call is not None and failed.endpoint is not None and failed.endpoint.name == call.candidate:
        # an earned route's candidate failed: the route's own target takes the turn (decided afresh,
        # the candidate ruled out), before any later route
        cand = failed.endpoint
        plan = decide_request(rules, chain.prep, lambda ep: "the candidate failed this turn" if ep is cand
                              else reachable(ep))
    else:
        plan = decide_request(rules, chain.prep, reachable, after=route.name)
    decision = plan.decision
    if decision.action == Decided.ERROR or (decision.action == Decided.PASS and rules.unmatched == Unmatched.REFUSE):
        return None
    turn = build_turn(rules, chain.prep, plan, env=env, now=failed.started_at)
    if turn.local is not None:  # refused, invalid for that target...: the client gets the failure it had
        return None
    turn.request_id, turn.may_shadow = failed.request_id, failed.may_shadow
    turn.budget = failed.budget  # its holds stay the turn's, settled when it ends
    if turn.capture is not None:  # the provider state this attempt's reply carries is this turn's
        turn.capture.request_id = failed.request_id
    return turn


# ---- 3. which endpoints may take a turn now: cooldowns and slots

BACKOFF_S, MAX_BACKOFF_S = 2.0, 30.0  # the passive back-off after a failure without a hint


class Slot:
    """One of an endpoint's ``max_concurrency`` places, held by one attempt."""

    __slots__ = ("capacity", "endpoint", "held")

    def __init__(self, capacity: Capacity, endpoint: str) -> None:
        self.capacity, self.endpoint, self.held = capacity, endpoint, True

    def release(self) -> None:
        """Give the place back (once; later calls do nothing)."""
        if self.held:
            self.held = False
            self.capacity._release(self.endpoint)


class Waiter(Protocol):
    """A turn waiting for a slot, as the proxy's event loop makes it (an ``asyncio.Future``)."""

    def done(self) -> bool: ...

    def cancelled(self) -> bool: ...

    def set_result(self, result: None, /) -> None: ...


class Capacity:
    """Cooldowns and slots of every endpoint, across reloads of the rules."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.in_flight: dict[str, int] = {}  # endpoint name -> turns holding a slot
        self.cooling: dict[str, tuple[float, str]] = {}  # endpoint name -> (until, why)
        self.failures: dict[str, int] = {}  # endpoint name -> failures without a hint in a row
        self.waiters: dict[str, deque[Waiter]] = {}

    # ---- cooldowns
    def cool(self, ep: Endpoint, seconds: float, why: str) -> float:
        """Keep ``ep`` out of turns for ``seconds`` (capped by its cooldown_max_s); the
        seconds applied (0: not cooled)."""
        wait = min(seconds, ep.cooldown_max_s)
        if wait <= 0:
            return 0.0
        until = self.clock() + wait
        if until > self.cooling.get(ep.name, (0.0, ""))[0]:
            self.cooling[ep.name] = (until, why)
        return wait

    def back_off(self, ep: Endpoint, why: str) -> float:
        """A failure without a hint (a 5xx, 529, a reset, no first byte): keep ``ep`` out for
        a passive back-off, as endpoints.EndpointHealth does for a refused connect (2 s,
        doubling with each failure in a row, at most 30 s), but per endpoint, not per host:
        another model on the same server may be fine. The seconds applied."""
        n = self.failures.get(ep.name, 0) + 1
        self.failures[ep.name] = n
        wait = min(BACKOFF_S * 2 ** (n - 1), MAX_BACKOFF_S)
        until = self.clock() + wait
        if until > self.cooling.get(ep.name, (0.0, ""))[0]:
            self.cooling[ep.name] = (until, f"backing off after {why}")
        return wait

    def ok(self, ep: Endpoint) -> None:
        """An attempt at ``ep`` was answered: its failures in a row start again from 0."""
        if self.failures:
            self.failures.pop(ep.name, None)

    def cooling_left(self, ep: Endpoint) -> float:
        state = self.cooling.get(ep.name)
        if state is None:
            return 0.0
        left = state[0] - self.clock()
        if left <= 0:
            del self.cooling[ep.name]
            return 0.0
        return left

    def retry_after(self, ep: Endpoint) -> int | None:
        """Whole seconds, rounded up, until a cooling ``ep`` takes turns again; None when it is
        not cooling."""
        left = self.cooling_left(ep)
        return math.ceil(left) if left > 0 else None

    def say_when(self, turn: Turn) -> None:
        """A turn answered 503 because the endpoint of its route (``on_failure: error``) is
        cooling down gets ``retry-after: <seconds left, rounded up>`` on that answer: the SDKs
        wait that long before they retry, instead of asking again at once into the same 503.
        Any other answer (a refusal, an endpoint down or full, a turn that is sent) is left as
        it is."""
        d, local = turn.decision, turn.local
        if local is None or local.status != 503 or d is None or d.action != Decided.ERROR or d.endpoint is None:
            return
        if not (d.trace and d.trace[-1].unreachable):  # decided on this endpoint's availability
            return
        if (seconds := self.retry_after(d.endpoint)) is not None:
            local.headers["retry-after"] = str(seconds)

    # ---- slots
    def full(self, ep: Endpoint) -> bool:
        return ep.max_concurrency is not None and self.in_flight.get(ep.name, 0) >= ep.max_concurrency

    def unavailable(self, ep: Endpoint, *, queue: bool = False) -> str | None:
        """Why ``ep`` cannot take a turn now; None when it can. With ``queue``, a full
        endpoint with ``queue_s`` is still available (the turn will wait for a slot)."""
        left = self.cooling_left(ep)
        if left > 0:
            return f"cooling down ({self.cooling[ep.name][1]}; {left:.1f} s left)"
        if self.full(ep) and not (queue and ep.queue_s > 0):
            return f"full ({self.in_flight[ep.name]} of max_concurrency {ep.max_concurrency} turns in flight)"
        return None

    def acquire(self, ep: Endpoint) -> Slot | None:
        """A slot now, or None when the endpoint is full. Endpoints without max_concurrency
        are never full (their slots are counted all the same)."""
        if self.full(ep):
            return None
        self.in_flight[ep.name] = self.in_flight.get(ep.name, 0) + 1
        return Slot(self, ep.name)

    def queue(self, ep: Endpoint, waiter: Waiter) -> None:
        """``waiter`` waits for a slot of ``ep`` (first come, first served); a released slot is
        handed to it as it is (``set_result(None)``; in_flight unchanged): it then holds
        ``Slot(self, ep.name)``. The proxy awaits it, up to the endpoint's queue_s."""
        self.waiters.setdefault(ep.name, deque()).append(waiter)

    def give_up(self, ep: Endpoint, waiter: Waiter) -> None:
        """``waiter`` stops waiting; a slot handed to it in the same instant is given back."""
        if waiter.done() and not waiter.cancelled():
            self._release(ep.name)
        try:
            self.waiters.get(ep.name, deque()).remove(waiter)
        except ValueError:
            pass

    def _release(self, name: str) -> None:
        q = self.waiters.get(name)
        while q:
            fut = q.popleft()
            if not fut.done():
                fut.set_result(None)  # the slot passes to the waiter as it is (in_flight unchanged)
                return
        n = self.in_flight.get(name, 0) - 1
        if n > 0:
            self.in_flight[name] = n
        else:
            self.in_flight.pop(name, None)


# ---- 2. what a failure does to its endpoint; 5. moving on

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


def available(health: EndpointHealth, capacity: Capacity, full: set[str]) -> Callable[[Endpoint], bool | str]:
    """``decide``'s test of an endpoint for one turn: False (down after a failed connect), why
    not (cooling down, full: ``full`` holds the endpoints this turn already found full after
    waiting for a slot), or True."""

    def test(ep: Endpoint) -> bool | str:
        if not health.reachable(ep):
            return False
        why = capacity.unavailable(ep, queue=ep.name not in full)
        return why or True
    return test


def note_attempt(turn: Turn, chain: Chain, failure: Failure, headers: Iterable[tuple[str, str]], *, ms: float,
                 now: float, capacity: Capacity, health: EndpointHealth) -> Attempted:
    """The attempt ``turn`` made failed: noted (``note_failure``) and added to ``chain``."""
    tried = note_failure(turn, failure, headers, ms=ms, now=now, capacity=capacity, health=health)
    chain.failed.append(tried)
    return tried


@dataclass
class MovedOn:
    """What follows a failed attempt: its log line, its ``attempt_failed`` record, and the next
    attempt as the relay sends it (None: the chain gave up; the client gets the failure)."""

    line: str
    record: dict
    replan: Replan | None


def move_on(turn: Turn, chain: Chain, tried: Attempted, failure: Failure, nxt: Turn | None) -> MovedOn:
    """Settle ``chain`` after ``tried`` failed: on to ``nxt`` (its ``failed_over`` text, its
    decision's trace added), or given up (``chain.gave_up``; what the client is told instead is
    turn/last_word.py ``final``'s)."""
    line = failure_line(turn, tried, failure, nxt)
    record = {**tried.record(), "next": None if nxt is None else where_next(nxt)}
    if nxt is None:
        chain.gave_up = True
        return MovedOn(line, record, None)
    nxt.failed_over = chain.text(where_next(nxt))
    if nxt.decision is not None:
        chain.trace += nxt.decision.trace
    return MovedOn(line, record, replan_of(nxt, chain))


@dataclass
class Replan:
    """The next attempt of a turn whose attempt failed before its first byte, as the relay sends it."""

    url: str
    headers: list[tuple[bytes, bytes]]  # as they go (the relay adds host and content-length)
    body: bytes
    first_byte_s: float | None = None
    keepalive: bool = True
    may_fail_over: bool = True  # this attempt may itself fail over (its route says on_failure: next)
    protocol: str | None = None  # the protocol of the endpoint it goes to
    conn: Any = None  # the relay's connection to it, when already open (proxy/relay.py UpstreamConn)


def replan_of(nxt: Turn, chain: Chain) -> Replan:
    """The next attempt as the relay sends it."""
    ep = nxt.endpoint if nxt.action != Action.PASS else None
    return Replan(chain.attempt_url(nxt), chain.attempt_headers(nxt), chain.attempt_body(nxt),
                  first_byte_s=ep.first_byte_timeout_s if ep else None,
                  protocol=nxt.target_protocol or nxt.client_protocol,
                  keepalive=nxt.action == Action.TRANSLATE or protocols.get(nxt.client_protocol).passthrough_keepalive)
