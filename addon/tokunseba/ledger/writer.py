"""The ledger's writer thread: the proxy records turns without ever waiting for SQLite.

Contract:
- ``start_turn`` / ``update_turn`` / ``event`` / ``add_shadow`` / ``recover_interrupted`` /
  ``interrupt_own`` only append a record (``batch``'s tuples) to a bounded queue
  and return at once; they never block and never raise, and wake the writer only when it
  sleeps (once per batch, not once per record). One daemon thread takes the records
  waiting (up to ``max_batch``) and commits them in one transaction
  (``Ledger.write_batch``: folded into few statements), in the order they were queued.
  A record's SQL is built in that thread (scrubbing and JSON encoding leave the event loop
  too, and a record reads what the records before it wrote).
- Woken by a record, the thread first lingers ``linger_s`` (default ``DEFAULT_LINGER_S``,
  sleeping, without the GIL) so that the records queued meanwhile (a turn's end with the
  next turns' records) land in the same transaction: a record is committed at most about
  ``linger_s`` after it was queued, unless the database is busy. A shared (PostgreSQL)
  ledger lingers ``SHARED_LINGER_S``, starts included (a round trip per transaction). On
  SQLite a turn's start is not
  held back: a START record ends the linger, so a turn's row shows it open (outcome NULL)
  as soon as the thread gets to it; only what comes after may wait. A start queued with its
  turn's end (``ended``: a short turn) does not: that turn is never open. (The proxy hands a turn's
  start over ``proxy/recorder.START_AFTER_S`` after its request, or with its end when that
  comes sooner: a short turn never wakes this thread while its reply streams.)
- Idle while a shared ledger's spool waits (``Ledger.spool_retry_s``), the thread wakes
  every so often to drain it (``Ledger.drain_spool``).
- A busy database (another process holding the write lock) delays records, never flows:
  the batch is retried with a growing pause (up to ``MAX_BACKOFF_S``) while new records
  queue up. When the queue is full a record is dropped: every drop is counted (``dropped``)
  and logged (logger ``tokunseba.ledger``, at most once per ``DROP_LOG_EVERY_S``).
- ``flush(timeout)`` waits until everything queued so far is committed (without lingering);
  ``close(timeout)`` stops taking records, commits what is queued (records still waiting
  after ``timeout`` are counted as dropped and logged) and closes the ledger.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Any

from .location import owner_alive
from .schema import INTERRUPTED_ERROR
from .store import Ledger
from .batch import BUILD, EVENT, START, UPDATE, Record, record_name
from .quota import statements as quota_statements

log = logging.getLogger("tokunseba.ledger")

DEFAULT_MAX_QUEUE = 20_000  # records (a turn makes about 7)
DEFAULT_MAX_BATCH = 1_000
# a transaction costs ~0.17 ms of CPU beyond its records' (scripts/bench/bench_ledger.py, paced vs burst):
# under load the turns ending within 50 ms share one; a quiet proxy's turn is in the ledger 50 ms after its end
DEFAULT_LINGER_S = 0.05
# a shared (PostgreSQL) ledger: each transaction costs a round trip and the driver's work,
# so records gather longer, a turn's start with them (it shows in the ledger this much later)
SHARED_LINGER_S = 0.05
MAX_BACKOFF_S = 0.5
DROP_LOG_EVERY_S = 5.0


class _Signal:
    """Wakes one waiting thread. ``set`` (any thread) costs one lock release, where
    ``threading.Event.set`` runs Python code under a Condition: producers call it on the
    event loop. ``wait`` consumes the signal; ``clear`` drops one that is pending."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()  # held = not signalled

    def set(self) -> None:
        try:
            self._lock.release()
        except RuntimeError:  # already signalled
            pass

    def wait(self, timeout: float = -1) -> bool:
        return self._lock.acquire(timeout=timeout)

    def clear(self) -> None:
        self._lock.acquire(blocking=False)


class LedgerWriter:
    def __init__(self, ledger: Ledger, *, max_queue: int = DEFAULT_MAX_QUEUE, max_batch: int = DEFAULT_MAX_BATCH,
                 linger_s: float | None = None) -> None:
        self.ledger = ledger
        self.max_queue = max_queue
        self.max_batch = max_batch
        shared = getattr(ledger, "shared", None) is not None
        self.linger_s = linger_s if linger_s is not None else SHARED_LINGER_S if shared else DEFAULT_LINGER_S
        self.starts_cut = not shared  # a turn's start ends the linger (SQLite: its row shows the turn open at once)
        self.dropped = 0
        self.written = 0
        self.batches = 0  # transactions committed
        self.busy_retries = 0
        self._q: deque[Record] = deque()
        self._put_lock = threading.Lock()  # the queue's bound and count, for producers on any thread
        self._wake = _Signal()  # a record waits: set by the first record the sleeping writer misses
        self._sleeping = False
        self._hurry = False  # flush() / close(): commit without lingering until idle
        self._cut = _Signal()  # ends the current linger: a turn's start, flush(), close()
        self._lingering = False
        self._start_waiting = False  # a START was queued since the last batch was taken
        self._closing = False
        self._stop_now = False  # close() ran out of time: stop retrying a busy database
        self._last_drop_log = 0.0
        self._done = threading.Condition()
        self._queued = 0  # records accepted so far
        self._settled = 0  # records committed, failed or dropped at close, in queue order
        self._thread = threading.Thread(target=self._run, name="tokunseba-ledger-writer", daemon=True)
        self._thread.start()

    @property
    def path(self):
        return self.ledger.path

    # ---- producers (any thread; never block, never raise)

    def start_turn(self, request_id: str, *, started_at: float, client_protocol: str, host: str, path: str,
                   requested_model: str | None, stream: bool | None, ended: bool = False) -> None:
        """``ended``: the turn's end follows at once (queued with it): its start does not cut the
        writer's linger, as there is no open turn to show."""
        self._put((START, request_id, started_at, client_protocol, host, path, requested_model,
                   None if stream is None else int(bool(stream))), cut=not ended)

    def update_turn(self, request_id: str, **fields: Any) -> None:
        self._put((UPDATE, request_id, fields))

    def event(self, request_id: str, kind: str, data: dict | None = None, *, ts: float | None = None) -> None:
        self._put((EVENT, request_id, kind, data, time.time() if ts is None else ts))

    def add_shadow(self, request_id: str, kind: str, *, started_at: float, usage=None, **fields: Any) -> None:
        """A shadow / shadow_skipped / replay row (``Ledger.add_shadow``), queued like the rest."""
        self._put((BUILD, f"shadow {kind}", lambda: self.ledger.shadow_statements(
            request_id, kind, started_at=started_at, usage=usage, **fields)))

    def quota_windows(self, rows: list[tuple]) -> None:
        """Window states a reply reported (ledger/quota.py ``rows_of``), queued like the rest."""
        self._put((BUILD, "quota windows", lambda: quota_statements(rows)))

    def recover_interrupted(self) -> None:
        """Mark the open turns of proxy instances that no longer run ``interrupted``."""
        self._put((BUILD, "recover_interrupted", lambda: self.ledger.interrupt_statements(owner_alive)))

    def interrupt_own(self, reason: str = INTERRUPTED_ERROR) -> None:
        """Mark this instance's still-open turns ``interrupted`` (the proxy is stopping)."""
        owner = self.ledger.owner
        if owner is not None:
            self._put((BUILD, "interrupt_own", lambda: self.ledger.interrupt_statements(
                owner_alive, only_owner=owner, reason=reason)))

    def _put(self, record: Record, cut: bool = True) -> None:
        if self._closing:
            self._drop(record, "the ledger is closing")
            return
        with self._put_lock:
            full = len(self._q) >= self.max_queue
            if not full:
                self._q.append(record)
                self._queued += 1
        if full:
            self._drop(record, f"{self.max_queue} records waiting: the database is busy or slow")
            return
        if cut and record[0] == START and self.starts_cut:  # a turn's start is not held back: its row shows the turn open at once
            self._start_waiting = True
            if self._lingering:
                self._cut.set()
        if self._sleeping:
            self._sleeping = False
            self._wake.set()

    def _drop(self, record: Record, why: str) -> None:
        self.dropped += 1
        now = time.monotonic()
        if now - self._last_drop_log >= DROP_LOG_EVERY_S:
            self._last_drop_log = now
            log.warning("ledger: dropped %s (%s); %d records dropped so far", record_name(record), why, self.dropped)

    # ---- waiting

    @property
    def pending(self) -> int:
        return len(self._q)

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every record queued before this call is settled; False on timeout."""
        with self._done:
            target = self._queued
            if self._settled >= target:
                return True
            self._hurry = True
            self._cut.set()
            self._wake.set()
            return self._done.wait_for(lambda: self._settled >= target, timeout)

    def close(self, timeout: float = 5.0) -> None:
        if self._closing:
            return
        self._closing = True
        self._hurry = True
        self._cut.set()
        self._wake.set()
        self._thread.join(timeout)
        if self._thread.is_alive():  # still busy after `timeout`: what waits is dropped (and counted)
            self._stop_now = True
            self._thread.join(5.0)
        self._settle_left_over()
        self.ledger.close()

    # ---- the thread

    def _run(self) -> None:
        while True:
            if not self._q:
                if self._closing:
                    return
                self._hurry = False  # every record queued before a flush() is settled
                self._wake.clear()
                self._sleeping = True
                if not self._q and not self._closing:
                    self._idle()
                self._sleeping = False
                continue
            if self._stop_now:
                self._settle_left_over()
                return
            if self.linger_s > 0 and not self._hurry and not self._start_waiting:
                self._lingering = True
                if not self._start_waiting:  # checked again once producers can see it lingers
                    self._cut.wait(self.linger_s)  # let the records queued meanwhile join this batch
                self._lingering = False
            self._cut.clear()
            self._start_waiting = False  # a start queued from now on cuts the next linger
            batch = [self._q.popleft() for _ in range(min(self.max_batch, len(self._q)))]
            self._commit(batch)

    def _idle(self) -> None:
        """Sleep until a record comes; while a shared ledger's spool waits, wake to drain it."""
        retry = self.ledger.spool_retry_s()
        if retry is None:
            self._wake.wait()
        elif not self._wake.wait(retry):
            self.ledger.drain_spool()

    def _settle_left_over(self) -> None:
        """close() timed out, or records raced it: count what is left as dropped."""
        n = 0
        while True:
            try:
                self._q.popleft()
            except IndexError:
                break
            n += 1
        if n:
            self._settle(n, dropped=True)

    def _commit(self, batch: list[Record]) -> None:
        pause = 0.01
        while True:
            try:
                ok = self.ledger.write_batch(batch)
            except Exception as e:  # never let the thread die: the records are lost, and said so
                log.warning("ledger: batch of %d records failed: %s", len(batch), e)
                ok = True
            if ok:
                self.batches += 1
                self.written += len(batch)
                self._settle(len(batch))
                return
            if self._stop_now:
                self._settle(len(batch), dropped=True)
                return
            self.busy_retries += 1
            if self.busy_retries == 1 or self.busy_retries % 20 == 0:
                log.warning("ledger: the database is locked by another process; %d records wait (%d queued)",
                            len(batch), len(self._q))
            time.sleep(pause)
            pause = min(pause * 2, MAX_BACKOFF_S)

    def _settle(self, n: int, dropped: bool = False) -> None:
        if dropped:
            self.dropped += n
            log.warning("ledger: %d records not written before the proxy stopped (%d dropped in all)", n, self.dropped)
        with self._done:
            self._settled += n
            self._done.notify_all()
