"""A turn's records in the ledger, in order: its start, its events, how it completed.

Contract: ``TurnRecorder`` holds the ledger's writer (``ledger``; None: nothing recorded)
and writes a turn's records so that none can precede its start: ``start`` keeps the start
records (the turn, its decision and first events) for the turn's first ``START_AFTER_S``
(the request leaves first, and a short turn's start and end go to the writer together, once
its reply has left: the writer's thread never takes the interpreter while a short reply
streams); ``event`` and ``completion`` queue that start first if it still waits. A turn still
running after ``START_AFTER_S`` is in the ledger, open, from then on. ``completion`` builds the completion records (status, timings,
usage as reported, the attempts of a turn that failed over, the reply when bodies are
kept; ``attempts`` ``[]`` for a turn answered here before anything was sent: outcomes.was_sent)
and returns the callable that writes them; the adapter runs it at once or once the
reply's bytes are handed to the client (``after_sent``). Plain Python: no mitmproxy (a flow
is read by its ``live`` attribute only); the writer does the I/O on its own thread.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from ..ledger import MAX_STORED_BODY, Later, LedgerWriter, prefix_hashes
from ..neutral import Usage
from ..routing import Tried, records
from ..turn import Turn
from ..turn import Chain
from ..turn import Outcome

# how long a turn's start records wait for its next record (its end, for most short turns)
# before they go to the writer alone: 50 ms, nothing a reader of `log` sees; over a turn's
# first 50 ms the writer's thread is not woken (it measured +0.45 ms on a passed-on stream of
# 60 events: scripts/bench/bench_proxy.py)
START_AFTER_S = 0.05
from ..states import Action

log = logging.getLogger("tokunseba")

AFTER_SENT_MAX_TURNS = 100  # event-loop turns to wait for mitmproxy to finish a flow


class TurnRecorder:
    def __init__(self) -> None:
        self.ledger: LedgerWriter | None = None
        self.store_bodies = False  # tokunseba_ledger_bodies: request and reply bodies are kept
        # request id -> the records of its start, until queued (start: START_AFTER_S, or its next record)
        self.unstarted: dict[str, Callable[[bool], None]] = {}
        # request id -> the timer that queues them at START_AFTER_S, cancelled when they went with
        # an earlier record (a short turn's end): the loop is not woken 50 ms later for nothing
        self.start_timers: dict[str, asyncio.TimerHandle] = {}

    def start(self, turn: Turn) -> None:
        """Record the turn's start, decision and first events, as known now, ``START_AFTER_S``
        after the request hook has returned, or with the turn's next record if that comes
        first (``started``). Nothing of this turn is recorded before them."""
        ledger = self.ledger
        if ledger is None:
            return
        d = turn.decision
        rid, started_at = turn.request_id, turn.started_at
        start: dict[str, Any] = dict(started_at=started_at, client_protocol=turn.client_protocol, host=turn.host, path=turn.path,
                     requested_model=turn.requested_model, stream=turn.stream)
        # the outcome stays NULL (open) until the turn ends: completion writes it
        decided: dict[str, Any] = dict(rule=d.route.name if d and d.route else None,
                       endpoint=turn.endpoint.name if turn.endpoint else None, target_protocol=turn.target_protocol,
                       model_used=turn.model_used or turn.requested_model, trace=records(d.trace) if d else [],
                       error=turn.error, **({"request_body": turn.original_body} if self.store_bodies else {}),
                       via=turn.via, **({"retry_of": turn.retry_of} if turn.retry_of else {}),
                       **turn.who.ledger_fields(Later))  # a fingerprint: hashed on the writer's thread
        events = list(turn.events)
        prompt, protocol = turn.prompt, turn.target_protocol or turn.client_protocol

        def record(ended: bool = False) -> None:
            ledger.start_turn(rid, **start, ended=ended)
            # hashed on the writer's thread: ~50 µs of a 48.5 KB prompt the event loop does not spend
            ledger.update_turn(rid, **decided, prefix_hashes=Later(lambda: prefix_hashes(protocol, prompt)))
            for kind, data in events:
                ledger.event(rid, kind, data, ts=started_at)

        self.unstarted[rid] = record
        timer = soon(lambda: self.started(rid), after=START_AFTER_S)
        if timer is not None:
            self.start_timers[rid] = timer

    def start_all(self) -> None:
        for rid in list(self.unstarted):
            self.started(rid)

    def started(self, request_id: str, ended: bool = False) -> None:
        """Queue the turn's start records now if they still wait (``start``): every other
        record of a turn goes through here first, so none can precede its start. ``ended``:
        its end is queued right after (the writer need not hurry to show it open)."""
        record = self.unstarted.pop(request_id, None)
        timer = self.start_timers.pop(request_id, None)
        if timer is not None:
            timer.cancel()
        if record is not None:
            record(ended)

    def event(self, turn: Turn, kind: str, data: dict[str, Any]) -> None:
        if self.ledger is not None:
            self.started(turn.request_id)
            self.ledger.event(turn.request_id, kind, data)

    def next_attempt(self, nxt: Turn, trace: list[Tried]) -> None:
        """A turn failed over: its route, endpoint and trace become the next attempt's, and
        that attempt's planning events are recorded."""
        if self.ledger is None:
            return
        self.started(nxt.request_id)
        d = nxt.decision
        self.ledger.update_turn(nxt.request_id, rule=d.route.name if d and d.route else None,
                                endpoint=nxt.endpoint.name if nxt.endpoint and nxt.action != Action.PASS else None,
                                target_protocol=nxt.target_protocol, model_used=nxt.model_used or nxt.requested_model,
                                trace=records(trace))
        for kind, data in nxt.events:
            self.ledger.event(nxt.request_id, kind, data)

    def completion(self, turn: Turn, out: Outcome, *, outcome: str, details: dict[str, Any], now: float,
                   first_byte: float | None, chain: Chain | None, attempt_at: float,
                   body: bytes | None) -> Callable[[], None] | None:
        """What records how the turn ended (None: no ledger): its outcome, status, timings
        (``first_byte``: when the reply's first byte left) and usage as reported, the attempts
        when it failed over, and ``body`` (the reply the client got) when bodies are kept."""
        ledger = self.ledger
        if ledger is None:
            return None
        status, usage = out.status, out.usage
        latency = round((now - turn.started_at) * 1000, 3)
        ttfb = round((first_byte - turn.started_at) * 1000, 3) if first_byte else None
        fields: dict[str, Any] = dict(status=status, latency_ms=latency, ttfb_ms=ttfb,
                                      usage_reported=_reported(usage), usage_protocol=usage.counting if usage else None,
                                      usage_client=out.client_usage, outcome=outcome)
        if turn.error:
            fields["error"] = turn.error
        if chain is not None and chain.failed and chain.gave_up:  # the last failed attempt is what the client got
            fields["attempts"] = [a.record() for a in chain.failed]
        elif chain is not None and chain.failed:  # the attempts, the last one the attempt the client got
            d = turn.decision
            last = {"route": d.route.name if d and d.route else None,
                    "endpoint": turn.endpoint.name if turn.endpoint and turn.action != Action.PASS else None,
                    "kind": "answered", "status": status, "why": turn.error,
                    "ms": round((time.monotonic() - attempt_at) * 1000, 3)}
            fields["attempts"] = [a.record() for a in chain.failed] + [last]
        elif turn.action == Action.RESPOND:  # answered here: nothing was sent (outcomes.was_sent)
            fields["attempts"] = []
        if self.store_bodies and body is not None:
            fields["response_body"] = body[:MAX_STORED_BODY]
        done = {"status": status, "latency_ms": latency, "ttfb_ms": ttfb,
                "usage": _reported(usage), "usage_client": out.client_usage, **details}
        rid = turn.request_id

        def record() -> None:
            self.started(rid, ended=True)
            ledger.update_turn(rid, **fields)
            ledger.event(rid, "completed", done)

        return record


def _reported(usage: Usage | None) -> Any:
    return usage.reported if usage else None


def soon(fn: Callable[[], None], after: float = 0.0) -> asyncio.TimerHandle | None:
    """Run ``fn`` in the event loop's next step, or ``after`` seconds from now (at once outside
    a running loop); a failure is logged, never raised into mitmproxy. The timer of a call
    ``after`` seconds from now is returned (it may be cancelled); None otherwise."""
    def run() -> None:
        try:
            fn()
        except Exception:
            log.exception("tokunseba: recording a turn's start failed")

    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        run()
        return None
    if after > 0:
        return loop.call_later(after, run)
    loop.call_soon(run)
    return None


def after_sent(flow: Any, fn: Callable[[], None], turns: int = AFTER_SENT_MAX_TURNS) -> None:
    """Run ``fn`` once mitmproxy has handed the reply's last bytes to the client connection.

    mitmproxy calls the ``response`` hook before it writes a whole reply, and before the end
    of a streamed one (the chunked terminator); no hook comes later. Right after writing, in
    the same synchronous step, it sets ``flow.live = False`` (``HttpStream.flow_done``). So
    this waits, a loop turn at a time, for ``flow.live`` to drop (at most ``turns`` turns,
    then records anyway). What the kernel does with those bytes afterwards is not visible
    here: a client that vanishes in that instant is not seen."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        fn()
        return
    loop.call_soon(_after_sent_step, loop, flow, fn, turns)


def _after_sent_step(loop: asyncio.AbstractEventLoop, flow: Any, fn: Callable[[], None], left: int) -> None:
    """One loop turn of ``after_sent``'s wait. A plain function, not a closure calling itself:
    such a closure is a reference cycle that would keep the flow (its bodies, its turn) alive
    until the garbage collector finds it, instead of freeing it once recorded."""
    if flow.live and left > 0:
        loop.call_soon(_after_sent_step, loop, flow, fn, left - 1)
        return
    try:
        fn()
    except Exception:
        log.exception("tokunseba: recording a completed turn failed")
