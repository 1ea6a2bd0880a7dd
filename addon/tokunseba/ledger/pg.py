"""The ledger on PostgreSQL: psycopg 3 connections used as the ledger uses sqlite3's.

- ``PgConnection``: ``execute`` / ``executemany`` / ``close``, every statement given in the
  ledger's SQLite text and run as ``dialect.POSTGRESQL_DIALECT`` rewrites it, in
  autocommit mode so the ledger's own BEGIN / COMMIT / SAVEPOINT run as written. A read
  command connects once (``readonly``); the proxy takes its one connection from a
  ``psycopg_pool.ConnectionPool`` (checked before use, reconnected in the background, tried
  again at most every ``RETRY_S`` while the database is away: a call never waits longer
  than ``GET_TIMEOUT_S`` for it). ``Away`` is raised when the database cannot be reached or
  the connection broke; every other psycopg error is the statement's own.
- On each new connection of the proxy, ``on_connect`` runs first (the ledger migrates).
- Text parameters lose NUL characters (PostgreSQL text cannot hold them: U+FFFD instead);
  booleans go as integers (the columns are integers, as in SQLite).
- ``Recorder``: a stand-in connection that records the statements a batch would run (what
  the spool keeps and what ``run_program`` runs), reads answered by ``reader`` when given.
- ``run_program``: a recorded batch in one transaction, exactly once: its id is inserted
  into ``_ledger_batches`` in the same transaction, and a batch whose id is there already
  (committed before its connection broke, or drained from a spool twice) is skipped.
- The password is never part of what is shown (``display``): it goes to libpq apart from the
  URL; sslmode and every other libpq parameter in the URL pass through as given.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from .dialect import POSTGRESQL_DIALECT, DatabaseAway
from ..credentials import redact_text, split_url_password

log = logging.getLogger("tokunseba.ledger")
logging.getLogger("psycopg.pool").setLevel(logging.ERROR)  # its retries are ours to report, once

CONNECT_TIMEOUT_S = 5  # libpq's connect_timeout unless the URL sets one
GET_TIMEOUT_S = 2.0  # the writer waits at most this long for a connection
RETRY_S = 2.0  # while the database is away, try again at most this often
BATCHES_SQL = "INSERT INTO _ledger_batches (id, applied_at) VALUES (?, ?) ON CONFLICT (id) DO NOTHING"

Op = tuple  # (sql, params) or (sql, [params, ...], "many")


class Away(DatabaseAway):
    """The database cannot be reached, or the connection broke (one line, no password)."""


def _clean(v: Any) -> Any:
    if isinstance(v, str):
        return v.replace("\x00", "\ufffd") if "\x00" in v else v
    if v is True or v is False:
        return int(v)
    return v


def _params(params: Iterable[Any]) -> tuple:
    return tuple(_clean(v) for v in params)


def _reason(e: BaseException) -> str:
    return redact_text(" ".join(str(e).split()) or type(e).__name__)


class PgConnection:
    """A psycopg connection with sqlite3's surface, as the ledger uses it."""

    def __init__(self, url: str, *, readonly: bool, on_connect: Callable[[PgConnection], None] | None = None):
        self.url, self._password = split_url_password(url)
        self.display = self.url
        self.readonly = readonly
        self.on_connect = on_connect
        self.dialect = POSTGRESQL_DIALECT
        self._conn: psycopg.Connection | None = None
        self._pool: ConnectionPool | None = None
        self._next_try = 0.0
        self._lock = threading.RLock()
        self.away_reason: str | None = None

    def _kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {"autocommit": True, "application_name": "tokunseba"}
        if "connect_timeout" not in self.url:
            kw["connect_timeout"] = CONNECT_TIMEOUT_S
        if self._password is not None:
            kw["password"] = self._password
        return kw

    # ---- the connection

    def connect(self) -> psycopg.Connection:
        """The live connection (connected now if need be); raises ``Away``."""
        if self._conn is not None and not self._conn.broken:
            return self._conn
        self._drop()
        if self.readonly:
            try:
                self._conn = psycopg.connect(self.url, **self._kwargs())
            except psycopg.Error as e:
                raise Away(_reason(e)) from None
            return self._conn
        now = time.monotonic()
        if now < self._next_try:
            raise Away(self.away_reason or "the database is away")
        self._next_try = now + RETRY_S
        if self._pool is None:
            self._pool = ConnectionPool(self.url, kwargs=self._kwargs(), min_size=1, max_size=1, open=False,
                                        check=ConnectionPool.check_connection, reconnect_timeout=RETRY_S * 2,
                                        name="tokunseba-ledger")
            self._pool.open(wait=False)
        try:
            conn = self._pool.getconn(timeout=GET_TIMEOUT_S)
        except PoolTimeout:
            raise Away(self.away_reason or self._probe()) from None
        self._conn = conn
        try:
            if self.on_connect is not None:
                self.on_connect(self)
        except psycopg.OperationalError as e:
            self._drop()
            raise Away(_reason(e)) from None
        self.away_reason = None
        return conn

    def _probe(self) -> str:
        """Why the pool has no connection: one direct attempt, for the message."""
        try:
            psycopg.connect(self.url, **{**self._kwargs(), "connect_timeout": 2}).close()
            return "no connection available"
        except psycopg.Error as e:
            self.away_reason = _reason(e)
            return self.away_reason

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._pool is not None:
            try:
                self._pool.putconn(conn)  # a broken one is discarded, and replaced in the background
            except Exception:
                pass
        else:
            try:
                conn.close()
            except Exception:
                pass

    def close(self) -> None:
        self._drop()
        if self._pool is not None:
            try:
                self._pool.close(timeout=1.0)
            except Exception:
                pass
            self._pool = None

    # ---- sqlite3's surface

    def _run(self, fn: Callable[[psycopg.Connection], Any]) -> Any:
        conn = self.connect()
        try:
            return fn(conn)
        except psycopg.OperationalError as e:
            if conn.broken or isinstance(e, psycopg.errors.ConnectionTimeout):
                self._drop()
                self.away_reason = _reason(e)
                raise Away(self.away_reason) from None
            raise

    def execute(self, sql: str, params: Iterable[Any] = ()) -> psycopg.Cursor:
        return self._run(lambda c: c.execute(self.dialect.sql(sql), _params(params)))

    def executemany(self, sql: str, rows: Iterable[Iterable[Any]]) -> None:
        def many(c: psycopg.Connection) -> None:
            with c.cursor() as cur:
                cur.executemany(self.dialect.sql(sql), [_params(r) for r in rows])

        self._run(many)

    def pipeline(self):
        """psycopg's pipeline on the live connection: the statements inside go in one round trip."""
        return self.connect().pipeline()

    def lost(self, e: BaseException) -> bool:
        """Whether ``e`` (raised outside ``execute``: a pipeline's end) means the connection is gone."""
        conn = self._conn
        if isinstance(e, psycopg.OperationalError) and (conn is None or conn.broken):
            self._drop()
            self.away_reason = _reason(e)
            return True
        return False

    def in_transaction(self) -> bool:
        conn = self._conn
        return conn is not None and not conn.broken and \
            conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE


class _NoRows:
    description: list = []

    def fetchone(self) -> None:
        return None

    def fetchall(self) -> list:
        return []


class Recorder:
    """Records the statements written to it (reads go to ``reader``, else find nothing)."""

    def __init__(self, reader: Any = None) -> None:
        self.ops: list[Op] = []
        self.reader = reader

    def execute(self, sql: str, params: Iterable[Any] = ()) -> Any:
        if sql.lstrip()[:6].upper() == "SELECT":
            if self.reader is not None:
                try:
                    return self.reader.execute(sql, params)
                except Exception:
                    pass
            return _NoRows()
        self.ops.append((sql, tuple(params)))
        return _NoRows()

    def executemany(self, sql: str, rows: Iterable[Iterable[Any]]) -> None:
        self.ops.append((sql, [tuple(r) for r in rows], "many"))


def run_program(conn: PgConnection, batch_id: str, ops: list[Op], *, fresh: bool = False,
                redo: Callable[[PgConnection], list[str]] | None = None) -> list[str]:
    """Run a recorded batch once, in one transaction; skipped if ``batch_id`` was applied.
    A ``fresh`` batch (its id new: never sent before) goes as one pipeline (one round trip,
    its id recorded, nothing checked). Raises ``Away`` (nothing committed, or not known);
    any other failure of a statement rolls the batch back and runs it again: by ``redo``
    when given (the batch's records one savepoint each, as SQLite's ledger does: a record
    that fails costs only itself), else one savepoint per statement; each failure is
    returned as one line."""
    try:
        if fresh:
            with conn.pipeline():
                return _run_program(conn, batch_id, ops, one_by_one=False, check=False)
        return _run_program(conn, batch_id, ops, one_by_one=False)
    except Away:
        raise
    except psycopg.Error as e:
        if conn.lost(e):
            raise Away(conn.away_reason or _reason(e)) from None
        _rollback(conn)
    return _run_program(conn, batch_id, ops, one_by_one=True, redo=redo)


def _run_program(conn: PgConnection, batch_id: str, ops: list[Op], *, one_by_one: bool,
                 check: bool = True, redo: Callable[[PgConnection], list[str]] | None = None) -> list[str]:
    failed: list[str] = []
    conn.execute("BEGIN")
    try:
        recorded = conn.execute(BATCHES_SQL, (batch_id, time.time()))
        if check and recorded.rowcount == 0:
            conn.execute("ROLLBACK")
            return []  # applied already
        if one_by_one and redo is not None:
            failed = redo(conn)
            ops = []
        for op in ops:
            if one_by_one:
                conn.execute("SAVEPOINT op")
            try:
                if len(op) == 3:
                    conn.executemany(op[0], op[1])
                else:
                    conn.execute(op[0], op[1])
            except psycopg.Error as e:
                if not one_by_one or isinstance(e, psycopg.OperationalError) and conn._conn is None:
                    raise
                conn.execute("ROLLBACK TO SAVEPOINT op")
                failed.append(f"{op[0].split('(')[0].strip()[:60]}: {_reason(e)}")
            if one_by_one:
                conn.execute("RELEASE SAVEPOINT op")
        conn.execute("COMMIT")
    except BaseException:
        _rollback(conn)
        raise
    return failed


def _rollback(conn: PgConnection) -> None:
    try:
        if conn.in_transaction():
            conn.execute("ROLLBACK")
    except Exception:
        pass
