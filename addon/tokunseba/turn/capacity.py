"""Which endpoints may take a turn now: cooldowns and concurrency slots (in memory, per proxy).

- Cooldown: an endpoint that answered with a hint (``retry-after`` seconds or HTTP date,
  ``retry-after-ms``, a used-up rate limit's reset: failover.retry_hint) is kept out of
  later turns for that long, capped by its ``cooldown_max_s`` (0: hints are not heeded),
  without any request to it. A failure without a hint backs the endpoint off (``back_off``:
  2 s, doubling per failure in a row, at most 30 s); a refused connect is
  endpoints.EndpointHealth's (per host and port).
- Slots: an endpoint with ``max_concurrency: N`` takes at most N turns in flight. A turn
  takes a slot when it is planned onto the endpoint (``acquire``; or ``wait`` up to the
  endpoint's ``queue_s`` for one) and gives it back once, when its attempt there ends
  (``Slot.release``: the reply ended, the client went away, or the turn failed over).

``unavailable(ep)`` says why an endpoint cannot take a turn now (the reason rules.decide
records in the trace), or None. ``say_when(turn)``: a turn answered 503 because its route's
endpoint is cooling down (``on_failure: error``) tells the client when to come back, in
``retry-after`` (whole seconds left, rounded up), as the endpoint itself would have. Runs in
mitmproxy's event loop; no locks.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..routing.endpoints import Endpoint
from ..states import Decided

if TYPE_CHECKING:
    from .plan import Turn

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


class Capacity:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.in_flight: dict[str, int] = {}  # endpoint name -> turns holding a slot
        self.cooling: dict[str, tuple[float, str]] = {}  # endpoint name -> (until, why)
        self.failures: dict[str, int] = {}  # endpoint name -> failures without a hint in a row
        self.waiters: dict[str, deque[asyncio.Future]] = {}

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
        if not (d.trace and d.trace[-1].get("unreachable")):  # decided on this endpoint's availability
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

    async def wait(self, ep: Endpoint, timeout: float) -> Slot | None:
        """A slot within ``timeout`` seconds (first come, first served), else None."""
        slot = self.acquire(ep)
        if slot is not None or timeout <= 0:
            return slot
        fut = asyncio.get_running_loop().create_future()
        q = self.waiters.setdefault(ep.name, deque())
        q.append(fut)
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout)
        except (TimeoutError, asyncio.CancelledError):
            if fut.done() and not fut.cancelled():  # handed a slot in the same instant: give it back
                self._release(ep.name)
            fut.cancel()
            try:
                q.remove(fut)
            except ValueError:
                pass
            return None
        return Slot(self, ep.name)

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
