"""The ledger's connection: one SQLite file or one PostgreSQL database, opened once.

- One database file (default ``$TOKUNSEBA_HOME/ledger.db``, ``location``), WAL mode so the
  CLI reads while the proxy writes; ``synchronous=NORMAL``. Opening writable applies the
  migrations not yet applied (``schema.migrate``), waiting for another process that holds
  the lock; a read-only ledger that does not exist is ``LedgerMissing``.
- A ``postgresql://`` ledger: a read-only one connects now (a clear error when it cannot);
  a writable one connects when it first writes (``writes``, ``shared``).
- ``LedgerConnection`` holds the connection and its lock; ``reads.LedgerReader`` and
  ``writes.LedgerWrites`` are its two halves, and ``store.Ledger`` both.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self
from urllib.parse import quote

from .dialect import POSTGRESQL_DIALECT, SQLITE, db_errors
from .location import PG_SCHEMES, default_ledger_target, url_scheme
from .private_files import create_private
from .schema import migrate
from ..credentials import redact_text, redact_url

if TYPE_CHECKING:  # imported when a PostgreSQL ledger opens (psycopg is optional)
    from .shared import SharedWriter

log = logging.getLogger("tokunseba.ledger")

BUSY_TIMEOUT_MS = 500  # short: a write waits at most this long for another process's lock
OPEN_BUSY_TIMEOUT_MS = 10_000  # opening (WAL switch, migrations) may wait for another process


class LedgerError(Exception):
    """The ledger cannot be opened or read (one-line message)."""


class LedgerMissing(LedgerError):
    """A read-only ledger that does not exist yet."""

    def __init__(self, path: Path):
        super().__init__(f"no ledger at {path} yet: run the proxy first")
        self.path = path


class LedgerConnection:
    """The ledger database's connection, shared by its read half (``reads``) and its write half
    (``writes``). Safe to share between threads (one connection, one lock).

    Opening raises ``LedgerError`` (``LedgerMissing`` for a read-only ledger that does not
    exist)."""

    def __init__(
        self,
        path: str | os.PathLike | None = None,
        *,
        store_bodies: bool = False,
        readonly: bool = False,
    ):
        if path is None:
            path = default_ledger_target()
        self.check_target(path)
        self.store_bodies = store_bodies
        self.readonly = readonly
        self.owner: str | None = None  # this proxy instance (instance_id()); written on start_turn
        self.instance: str | None = None  # the proxy's name (--instance); written on start_turn
        self._lock = threading.RLock()  # RLock: a batch builds its statements while holding it
        self._conn: Any = None  # sqlite3.Connection, or pg.PgConnection
        self.dialect = SQLITE
        self.shared: SharedWriter | None = None  # shared.SharedWriter: the PostgreSQL writer's connection and spool
        if url_scheme(path) in PG_SCHEMES:
            self._open_pg(os.fspath(path))
            return
        self.path = Path(path).expanduser()
        if readonly and not self.path.exists():
            raise LedgerMissing(self.path)
        try:
            self._conn = self._open()
        except (sqlite3.Error, OSError) as e:
            raise LedgerError(f"cannot open the ledger {self.path}: {e}") from None

    def _open_pg(self, url: str) -> None:
        """A PostgreSQL ledger: a read command connects now (a clear error if it cannot);
        the proxy's writer connects when it first writes, and spools while it cannot."""
        try:
            from .pg import Away, PgConnection
        except ImportError:
            raise LedgerError("a postgresql:// ledger needs psycopg: pip install 'tokunseba[postgresql]'") from None
        self.dialect = POSTGRESQL_DIALECT
        self._conn = PgConnection(url, readonly=self.readonly, on_connect=None if self.readonly else self._migrate_pg)
        self.path = self._conn.display
        if not self.readonly:
            self._open_shared()
            return
        try:
            self._conn.connect()
            missing = not self._has_table("turns")
        except (Away,) + db_errors() as e:
            self._conn.close()
            raise LedgerError(f"cannot open the ledger {self.path}: {redact_text(' '.join(str(e).split()))}") from None
        if missing:
            self._conn.close()
            raise LedgerMissing(self.path)

    def _migrate_pg(self, conn: Any) -> None:
        migrate(conn, POSTGRESQL_DIALECT)

    def _open_shared(self) -> None:
        """A writable shared ledger's writer (``writes.LedgerWrites`` opens it; a ledger that only
        reads has none)."""

    @staticmethod
    def check_target(target: str | os.PathLike | None) -> None:
        """Raise ``LedgerError`` for a ledger given as a URL this tokunseba cannot open: a URL
        is never taken for a file name."""
        if (scheme := url_scheme(target)) is not None and scheme not in PG_SCHEMES:
            assert target is not None  # it has a scheme
            raise LedgerError(f"cannot open the ledger {redact_url(os.fspath(target))}: a {scheme}: URL is not "
                              "a ledger tokunseba can open (give a SQLite file path or a postgresql:// URL)")

    def _open(self) -> sqlite3.Connection:
        if self.readonly:
            uri = f"file:{quote(str(self.path.resolve()))}?mode=ro"
            conn = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None)
        else:
            # created 0600 in a 0700 dir; SQLite gives -wal / -shm the main file's mode
            conn = create_private(self.path, lambda: sqlite3.connect(self.path, check_same_thread=False,
                                                                     isolation_level=None))
        try:
            if self.readonly:
                conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
                conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # is it a database?
            else:
                # Opening happens once: wait as long as another process needs to finish switching
                # to WAL or migrating (writes, on the proxy's loop, keep the short timeout).
                conn.execute(f"PRAGMA busy_timeout={OPEN_BUSY_TIMEOUT_MS}")
                _retry_busy(lambda: conn.execute("PRAGMA journal_mode=WAL"))
                conn.execute("PRAGMA synchronous=NORMAL")
                _retry_busy(lambda: migrate(conn, SQLITE))
                conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        except BaseException:
            conn.close()
            raise
        return conn

    # ---- lifecycle

    def close(self) -> None:
        with self._lock:
            if self.shared is not None:
                self.shared.close()
            if self._conn is not None:
                try:
                    self._conn.close()
                except db_errors() as e:  # pragma: no cover
                    log.warning("ledger close failed: %s", e)
                self._conn = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- queries (raise on failure)

    def _query(self, sql: str, params: tuple = ()) -> list[dict]:
        with self._lock:
            if self._conn is None:
                raise LedgerError("the ledger is closed")
            cur = self._conn.execute(sql, params)
            names = [d[0] for d in cur.description]
            return [dict(zip(names, row)) for row in cur.fetchall()]

    def _has_table(self, name: str) -> bool:
        return bool(self._query(self.dialect.has_table(), (name,)))

    def _columns(self, table: str) -> set[str]:
        return {r["name"] for r in self._query(self.dialect.columns(table))}


def is_busy(e: sqlite3.OperationalError) -> bool:
    m = str(e).lower()
    return "locked" in m or "busy" in m


def _retry_busy(step: Callable[[], Any], tries: int = 50) -> Any:
    """Run a one-time opening step, again while another process holds the lock: switching to
    WAL can report "locked" without waiting for the busy timeout."""
    for i in range(tries):
        try:
            return step()
        except sqlite3.OperationalError as e:
            if i == tries - 1 or ("locked" not in str(e) and "busy" not in str(e)):
                raise
            time.sleep(0.05 + 0.01 * i)
