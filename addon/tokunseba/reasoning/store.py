"""The provider state store: reasoning a translated reply carried, kept for the later turns
of its conversation (docs/dev/architecture.md §4b; what is kept and how it is put back: reasoning/state.py).

One SQLite file beside the ledger (``reasoning.db`` in the ledger's directory unless given),
created 0600 in a 0700 dir (ledger/private_files.py): it holds model reasoning text, as private as
the ledger. Bounded: never more than ``max_entries`` rows (the oldest go first, in the write that would
pass the bound) and nothing older than ``retention_s`` (never restored; deleted at open and
every ``PRUNE_EVERY`` writes). A memory cache in front
answers a tool loop's lookups without touching the disk; the file makes a restarted proxy
restore what it captured before.

Fail soft, never a traceback: a store that cannot be opened or read (missing dir we cannot
create, a corrupted file) leaves the proxy working as without a store; ``problem`` says why,
and every turn that would have used it records that (reasoning.state.RestoreReport.problem).

``Keeper`` is what the adapter holds: ``restore(conv, endpoint, model, protocol)`` for the
request planning step (turn/plan.py), ``capture(...)`` for a translated reply, ``keep(capture)``
once the reply completed.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from pathlib import Path

from .. import jsonc
from ..ledger import create_private
from .state import Capture, Record, RestoreReport, restore

log = logging.getLogger("tokunseba")

DEFAULT_MAX_ENTRIES = 20_000
DEFAULT_RETENTION_S = 7 * 24 * 3600.0
PRUNE_EVERY = 200
STORE_NAME = "reasoning.db"

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS state (
        key TEXT NOT NULL, endpoint TEXT NOT NULL, model TEXT NOT NULL, protocol TEXT NOT NULL,
        payload TEXT NOT NULL, request_id TEXT NOT NULL, at REAL NOT NULL,
        PRIMARY KEY (key, endpoint, model))""",
    "CREATE INDEX IF NOT EXISTS state_at ON state(at)",
)


def store_path_beside(ledger_path: str | Path) -> Path:
    return Path(ledger_path).expanduser().parent / STORE_NAME


class ReasoningStore:
    """Keys -> records, in SQLite behind a bounded memory cache. Thread-safe."""

    def __init__(self, path: str | Path | None, *, max_entries: int = DEFAULT_MAX_ENTRIES,
                 retention_s: float = DEFAULT_RETENTION_S) -> None:
        if max_entries < 1 or retention_s <= 0:
            raise ValueError("the reasoning store needs max_entries >= 1 and a retention above 0")
        self.path = Path(path).expanduser() if path is not None else None
        self.max_entries, self.retention_s = max_entries, retention_s
        self.problem: str | None = None
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, list[Record]] = OrderedDict()  # key -> records (LRU)
        self._absent: set[str] = set()  # keys known not stored (bounded)
        self._db: sqlite3.Connection | None = None
        self._writes = 0
        self._rows = 0  # rows on disk, at least (an upper bound between prunes)
        if self.path is not None:
            self._open()

    # ---- disk ----
    def _open(self) -> None:
        assert self.path is not None
        try:
            path = self.path
            db = create_private(path, lambda: sqlite3.connect(path, check_same_thread=False,
                                                                   isolation_level=None, timeout=0.5))
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            for stmt in SCHEMA:
                db.execute(stmt)
            self._db = db
            self._prune(time.time())
        except (sqlite3.Error, OSError) as e:
            self._fail(f"cannot open the reasoning store {self.path}: {e}")

    def _fail(self, why: str) -> None:
        """Go on without the file (memory only), once said."""
        if self.problem is None:
            log.warning(f"tokunseba: {why}; going on without it (state kept in memory only)")
        self.problem = why
        if self._db is not None:
            try:
                self._db.close()
            except sqlite3.Error:
                pass
        self._db = None

    def _prune(self, now: float) -> None:
        db = self._db
        if db is None:
            return
        db.execute("DELETE FROM state WHERE at < ?", (now - self.retention_s,))
        (n,) = db.execute("SELECT count(*) FROM state").fetchone()
        if n > self.max_entries:
            db.execute("DELETE FROM state WHERE rowid IN (SELECT rowid FROM state ORDER BY at LIMIT ?)",
                       (n - self.max_entries,))
            n = self.max_entries
        self._rows = n

    # ---- API ----
    def get(self, keys: Iterable[str]) -> dict[str, list[Record]]:
        """The records of those keys that are stored (a key may have one per origin)."""
        out: dict[str, list[Record]] = {}
        missing: list[str] = []
        cutoff = time.time() - self.retention_s
        with self._lock:
            for k in keys:
                recs = self._cache.get(k)
                if recs is not None:
                    live = [r for r in recs if r.at >= cutoff]
                    if live:
                        out[k] = live
                elif k not in self._absent:
                    missing.append(k)
            if missing and self._db is not None:
                try:
                    self._load(missing, out, cutoff)
                except sqlite3.Error as e:
                    self._fail(f"cannot read the reasoning store {self.path}: {e}")
            if len(self._absent) > 4 * self.max_entries:
                self._absent.clear()
            self._absent.update(k for k in missing if k not in out)
        return out

    def _load(self, keys: list[str], out: dict[str, list[Record]], cutoff: float) -> None:
        assert self._db is not None
        for i in range(0, len(keys), 500):
            chunk = keys[i:i + 500]
            rows = self._db.execute(
                f"SELECT key, endpoint, model, protocol, payload, request_id, at FROM state WHERE at >= ? AND key IN "
                f"({','.join('?' * len(chunk))})", (cutoff, *chunk)).fetchall()
            for key, ep, model, proto, payload, rid, at in rows:
                try:
                    rec = Record(ep, model, proto, jsonc.loads(payload), rid, at)
                except jsonc.JSONDecodeError:
                    continue  # a damaged row: as if absent
                out.setdefault(key, []).append(rec)
                self._remember(key, rec)

    def _remember(self, key: str, rec: Record) -> None:
        recs = [r for r in self._cache.get(key, ()) if (r.endpoint, r.model) != (rec.endpoint, rec.model)]
        recs.append(rec)
        self._cache[key] = recs
        self._cache.move_to_end(key)
        self._absent.discard(key)
        while len(self._cache) > self.max_entries:
            self._cache.popitem(last=False)

    def put(self, items: list[tuple[str, Record]]) -> None:
        if not items:
            return
        with self._lock:
            for key, rec in items:
                self._remember(key, rec)
            if self._db is None:
                return
            try:
                self._db.execute("BEGIN")
                self._db.executemany(
                    "INSERT OR REPLACE INTO state (key, endpoint, model, protocol, payload, request_id, at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [(k, r.endpoint, r.model, r.protocol, jsonc.dumps(r.payload), r.request_id, r.at)
                     for k, r in items])
                self._writes += len(items)
                self._rows += len(items)
                if self._writes >= PRUNE_EVERY or self._rows > self.max_entries:  # never above the bound
                    self._writes = 0
                    self._prune(time.time())
                self._db.execute("COMMIT")
            except sqlite3.Error as e:
                try:
                    self._db.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
                self._fail(f"cannot write the reasoning store {self.path}: {e}")

    def count(self) -> int:
        """Keys stored on disk (memory-only: in the cache)."""
        with self._lock:
            if self._db is None:
                return len(self._cache)
            return self._db.execute("SELECT count(*) FROM state").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                try:
                    self._prune(time.time())
                    self._db.close()
                except sqlite3.Error:
                    pass
                self._db = None


class Keeper:
    """The store as the request and reply paths use it."""

    def __init__(self, store: ReasoningStore) -> None:
        self.store = store

    def restore(self, conv, endpoint: str, model: str | None, protocol: str) -> RestoreReport:
        if not model:
            return RestoreReport()
        report = restore(conv, self.store.get, endpoint, model, protocol)
        if report.problem is None and report.looked_up and self.store.problem is not None:
            report.problem = self.store.problem  # memory only: what this process captured still restores
        return report

    def capture(self, protocol: str, endpoint: str, model: str | None, request_id: str) -> Capture | None:
        """A capture for one translated reply; what it gathered is kept when its stop passes."""
        return Capture(protocol, endpoint, model, request_id, on_stop=self.keep) if model else None

    def keep(self, capture: Capture) -> list[str]:
        """Store what a completed reply carried; the keys stored (also ``capture.kept``)."""
        try:
            items = capture.records(time.time())
            self.store.put(items)
        except Exception:  # never break the reply over it
            log.exception("tokunseba: keeping a reply's provider state failed")
            return []
        capture.kept = [k for k, _ in items]
        return capture.kept

    def lookup(self, keys: Iterable[str]) -> Mapping[str, list[Record]]:
        return self.store.get(keys)


def open_keeper(where: str, ledger: str, *, retention_h: float, max_entries: int) -> Keeper | None:
    """The adapter's options as a Keeper: ``where`` "" = ``reasoning.db`` beside the ledger
    (``ledger``: its path, "" for the default one; a ledger URL: the default data dir),
    "off" = no store (translated tool loops lose their provider state, as before), "memory"
    = this process only, else a file path. ValueError names a bad setting."""
    where = where.strip()
    if where.lower() == "off":
        return None
    if retention_h <= 0 or max_entries < 1:
        raise ValueError("tokunseba_reasoning_retention_h must be above 0 and tokunseba_reasoning_max at least 1")
    if where.lower() == "memory":
        path = None
    elif where:
        path = Path(where)
    else:
        from ..ledger import default_ledger_target, tokunseba_home  # the ledger's own default, not a copy of it

        target = str(ledger or default_ledger_target())
        path = tokunseba_home() / STORE_NAME if "://" in target else store_path_beside(target)
    return Keeper(ReasoningStore(path, max_entries=max_entries, retention_s=retention_h * 3600.0))
