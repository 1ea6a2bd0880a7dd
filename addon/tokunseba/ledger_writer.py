"""The ledger's writer thread: the proxy records turns without ever waiting for SQLite.

Contract:
- ``start_turn`` / ``update_turn`` / ``event`` / ``interrupt`` only put a record on a
  bounded queue and return at once; they never block and never raise. One daemon thread
  takes every record waiting (up to ``max_batch``) and commits them in one transaction
  (``Ledger.write_batch``), in the order they were queued. A record's SQL is built in that
  thread (scrubbing and JSON encoding leave the event loop too, and a record reads what the
  records before it wrote).
- A busy database (another process holding the write lock) delays records, never flows:
  the batch is retried with a growing pause (up to ``MAX_BACKOFF_S``) while new records
  queue up. When the queue is full a record is dropped: every drop is counted (``dropped``)
  and logged (logger ``tokunseba.ledger``, at most once per ``DROP_LOG_EVERY_S``).
- ``flush(timeout)`` waits until everything queued so far is committed; ``close(timeout)``
  stops taking records, commits what is queued (records still waiting after ``timeout``
  are counted as dropped and logged) and closes the ledger.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from .ledger import INTERRUPTED_ERROR, Ledger, owner_alive

log = logging.getLogger("tokunseba.ledger")

DEFAULT_MAX_QUEUE = 20_000  # records (a turn makes about 5)
DEFAULT_MAX_BATCH = 1_000
MAX_BACKOFF_S = 0.5
DROP_LOG_EVERY_S = 5.0

Build = Callable[[], list[tuple[str, tuple]]]
_STOP = object()


class LedgerWriter:
    def __init__(self, ledger: Ledger, *, max_queue: int = DEFAULT_MAX_QUEUE, max_batch: int = DEFAULT_MAX_BATCH) -> None:
        self.ledger = ledger
        self.max_batch = max_batch
        self.dropped = 0
        self.written = 0
        self.batches = 0  # transactions committed
        self.busy_retries = 0
        self._q: queue.Queue = queue.Queue(maxsize=max_queue)
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

    @property
    def pending(self) -> int:
        return self._q.qsize()

    # ---- producers (any thread; never block, never raise)

    def start_turn(self, request_id: str, *, started_at: float, client_protocol: str, host: str, path: str,
                   requested_model: str | None, stream: bool | None) -> None:
        values = (request_id, started_at, client_protocol, host, path, requested_model,
                  None if stream is None else int(bool(stream)))
        self._put("start_turn", lambda: self.ledger.start_statements(*values))

    def update_turn(self, request_id: str, **fields: Any) -> None:
        self._put("update_turn", lambda: self.ledger.update_statements(request_id, fields))

    def event(self, request_id: str, kind: str, data: dict | None = None, *, ts: float | None = None) -> None:
        ts = time.time() if ts is None else ts
        self._put(f"event {kind}", lambda: self.ledger.event_statements(request_id, kind, data, ts=ts))

    def add_shadow(self, request_id: str, kind: str, *, started_at: float, usage=None, **fields: Any) -> None:
        """A shadow / shadow_skipped / replay row (``Ledger.add_shadow``), queued like the rest."""
        self._put(f"shadow {kind}", lambda: self.ledger.shadow_statements(request_id, kind, started_at=started_at,
                                                                          usage=usage, **fields))

    def recover_interrupted(self) -> None:
        """Mark the open turns of proxy instances that no longer run ``interrupted``."""
        self._put("recover_interrupted", lambda: self.ledger.interrupt_statements(owner_alive))

    def interrupt_own(self, reason: str = INTERRUPTED_ERROR) -> None:
        """Mark this instance's still-open turns ``interrupted`` (the proxy is stopping)."""
        owner = self.ledger.owner
        if owner is not None:
            self._put("interrupt_own", lambda: self.ledger.interrupt_statements(owner_alive, only_owner=owner,
                                                                                reason=reason))

    def _put(self, what: str, build: Build) -> None:
        if self._closing:
            self._drop(what, "the ledger is closing")
            return
        try:
            with self._done:
                self._q.put_nowait((what, build))
                self._queued += 1
        except queue.Full:
            self._drop(what, f"{self._q.maxsize} records waiting: the database is busy or slow")

    def _drop(self, what: str, why: str) -> None:
        self.dropped += 1
        now = time.monotonic()
        if now - self._last_drop_log >= DROP_LOG_EVERY_S:
            self._last_drop_log = now
            log.warning("ledger: dropped %s (%s); %d records dropped so far", what, why, self.dropped)

    # ---- waiting

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every record queued before this call is settled; False on timeout."""
        with self._done:
            target = self._queued
            return self._done.wait_for(lambda: self._settled >= target, timeout)

    def close(self, timeout: float = 5.0) -> None:
        if self._closing:
            return
        self._closing = True
        deadline = time.monotonic() + timeout
        try:
            self._q.put(_STOP, timeout=timeout)
        except queue.Full:  # still busy after `timeout`: what waits is dropped (and counted)
            self._stop_now = True
            self._q.put(_STOP)
        self._thread.join(max(0.0, deadline - time.monotonic()))
        if self._thread.is_alive():
            self._stop_now = True
            self._thread.join(5.0)
        self.ledger.close()

    # ---- the thread

    def _run(self) -> None:
        stop = False
        while not stop:
            item = self._q.get()
            batch: list[tuple[str, Build]] = []
            while True:
                if item is _STOP:
                    stop = True
                else:
                    batch.append(item)
                if stop or len(batch) >= self.max_batch:
                    break
                try:
                    item = self._q.get_nowait()
                except queue.Empty:
                    break
            if batch:
                self._commit(batch)
        while True:  # close() timed out or records raced the stop marker: count what is left
            try:
                item = self._q.get_nowait()
            except queue.Empty:
                break
            if item is not _STOP:
                self._settle(1, dropped=True)

    def _commit(self, batch: list[tuple[str, Build]]) -> None:
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
                            len(batch), self._q.qsize())
            time.sleep(pause)
            pause = min(pause * 2, MAX_BACKOFF_S)

    def _settle(self, n: int, dropped: bool = False) -> None:
        if dropped:
            self.dropped += n
            log.warning("ledger: %d records not written before the proxy stopped (%d dropped in all)", n, self.dropped)
        with self._done:
            self._settled += n
            self._done.notify_all()
