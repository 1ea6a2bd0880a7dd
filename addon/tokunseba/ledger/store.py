"""The SQLite ledger: one row per provider turn plus the events of its story.

- One database file (default ``$TOKUNSEBA_HOME/ledger.db``), WAL mode so the CLI reads
  while the proxy writes; ``synchronous=NORMAL``. The proxy never writes here from its
  event loop: ``writer.LedgerWriter`` queues records and one thread commits them in
  batches (``write_batch``: one transaction; the records folded into few statements
  (``batch``), or, should one fail, one savepoint per record).
- A turn's ``outcome`` is NULL while it is open; it is written when known. A turn is owned
  by the proxy instance that started it (``owner``, see ``instance_id``); on start-up
  ``recover_interrupted`` marks the open turns of instances that no longer run
  ``interrupted``.
- Append-only named migrations (``MIGRATIONS``): a newer tokunseba opens an older ledger.
- Usage is stored exactly as the upstream reported it (the raw object plus its fields as
  the upstream counted them, ``Usage.fields()``); NULL where nothing was reported.
- No secrets: credential-like keys and key-like strings are scrubbed before they are
  written (``scrub``). Bodies are stored only when the user opts in.
- Writes never raise: a failure is logged (logger ``tokunseba.ledger``) and swallowed, so a
  ledger problem never breaks a turn. Reads raise (the CLI reports them).
"""

from __future__ import annotations

import functools
import getpass
import logging
import math
import os
import platform
import re
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload
from urllib.parse import quote

from .. import jsonc, protocols
from .scrub import scrubbed_json
from .quota import MIGRATION as QUOTA_MIGRATION, TABLE as QUOTA_TABLE, latest as quota_latest
from .batch import Record, record_name, statements_of, write_folded
from .dialect import POSTGRESQL_DIALECT, SQLITE, db_errors
from .private_files import create_private
from ..credentials import redact_text, redact_url, scrub, split_url_password
from ..neutral.usage import Usage, includes_cached
from ..outcomes import NOT_SENT_OR_FAILED, outcome_class, route_group, was_sent

if TYPE_CHECKING:  # imported when a PostgreSQL ledger opens (psycopg is optional)
    from .shared import SharedWriter

log = logging.getLogger("tokunseba.ledger")

BUSY_TIMEOUT_MS = 500  # short: a write waits at most this long for another process's lock
OPEN_BUSY_TIMEOUT_MS = 10_000  # opening (WAL switch, migrations) may wait for another process

# ---------------------------------------------------------------- paths


def tokunseba_home() -> Path:
    """``$TOKUNSEBA_HOME``, else the XDG data dir (``$XDG_DATA_HOME/tokunseba`` or
    ``~/.local/share/tokunseba``)."""
    if home := os.environ.get("TOKUNSEBA_HOME"):
        return Path(home).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg).expanduser() / "tokunseba"


def default_ledger_path() -> Path:
    return tokunseba_home() / "ledger.db"


LEDGER_ENV = "TOKUNSEBA_LEDGER"  # the ledger when --ledger is not given: a file path or a postgresql:// URL
PG_SCHEMES = ("postgresql", "postgres")


def default_ledger_target() -> str | Path:
    """``$TOKUNSEBA_LEDGER`` (a path or a URL), else ``default_ledger_path()``."""
    return os.environ.get(LEDGER_ENV) or default_ledger_path()


def take_password(target: str | None) -> str | None:
    """For a postgresql:// URL holding a password: the URL without it, the password moved to
    ``$PGPASSWORD`` (libpq's), so the URL can be shown (mitmweb's options, ``ps``); else None."""
    if not target or url_scheme(target) not in PG_SCHEMES:
        return None
    clean, password = split_url_password(target)
    if password is None:
        return None
    os.environ["PGPASSWORD"] = password
    return clean


def spool_note(target: str | os.PathLike | None) -> str | None:
    """A line saying what waits in the local spools of the shared ledger ``target`` (its
    database was away when they were written), or None."""
    if target is None or url_scheme(target) not in PG_SCHEMES:
        return None
    from .spool import ledger_key, spool_dir, waiting

    clean = split_url_password(os.fspath(target))[0]
    found = waiting(spool_dir(tokunseba_home()), ledger_key(clean))
    if not found:
        return None
    records = sum(r for _, _, r in found)
    files = ", ".join(str(p) for p, _, _ in found)
    return (f"tokunseba: {records} ledger records wait in a local spool ({files}): the database was away when they "
            "were written; a proxy of this ledger writes them once it reaches the database")


def default_instance() -> str:
    """The name a proxy records on its turns unless told another: ``user@host``."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return f"{user}@{platform.node()}"


# a URL (scheme://...), as opposed to a file path: never taken for a file name
URL_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):(//|$)")


def url_scheme(target: str | os.PathLike | None) -> str | None:
    """The scheme of a ledger given as a URL (``postgresql://…``), lowercased; None for a path."""
    if target is None or isinstance(target, Path):
        return None
    m = URL_SCHEME.match(os.fspath(target))
    return m.group(1).lower() if m else None


# ---------------------------------------------------------------- schema

# Append-only: never edit or reorder a shipped migration; add a new one at the end.
MIGRATIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "0001_turns_events",
        (
            """CREATE TABLE turns (
                request_id TEXT PRIMARY KEY,
                started_at REAL NOT NULL,
                client_protocol TEXT,
                host TEXT,
                path TEXT,
                requested_model TEXT,
                stream INTEGER,
                rule TEXT,
                endpoint TEXT,
                target_protocol TEXT,
                model_used TEXT,
                outcome TEXT,
                status INTEGER,
                latency_ms REAL,
                ttfb_ms REAL,
                usage_protocol TEXT,
                usage_reported TEXT,
                usage_input INTEGER,
                usage_output INTEGER,
                usage_cache_read INTEGER,
                usage_cache_write INTEGER,
                usage_reasoning INTEGER,
                usage_client TEXT,
                error TEXT,
                trace TEXT
            )""",
            "CREATE INDEX turns_started_at ON turns(started_at)",
            """CREATE TABLE events (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                request_id TEXT NOT NULL,
                ts REAL NOT NULL,
                kind TEXT NOT NULL,
                data TEXT
            )""",
            "CREATE INDEX events_request_id ON events(request_id, id)",
        ),
    ),
    (
        # opt-in request/response bodies (--ledger-bodies), kept apart from the turn rows
        "0002_bodies",
        (
            """CREATE TABLE bodies (
                request_id TEXT PRIMARY KEY,
                request_body BLOB,
                response_body BLOB
            )""",
        ),
    ),
    (
        # shadow turns, skipped shadows and replays, each linked to its primary turn's request id
        "0003_shadows",
        (
            """CREATE TABLE shadows (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                request_id TEXT NOT NULL,
                kind TEXT NOT NULL,
                started_at REAL NOT NULL,
                route TEXT,
                endpoint TEXT,
                target_protocol TEXT,
                model TEXT,
                origin TEXT,
                at_original INTEGER,
                status INTEGER,
                latency_ms REAL,
                error TEXT,
                usage_protocol TEXT,
                usage_reported TEXT,
                usage_input INTEGER,
                usage_output INTEGER,
                usage_cache_read INTEGER,
                usage_cache_write INTEGER,
                usage_reasoning INTEGER,
                dropped TEXT,
                facts TEXT,
                primary_facts TEXT,
                comparison TEXT,
                request_body BLOB,
                response_body BLOB,
                primary_body BLOB
            )""",
            "CREATE INDEX shadows_request_id ON shadows(request_id)",
            "CREATE INDEX shadows_started_at ON shadows(started_at)",
        ),
    ),
    (
        # the proxy instance that holds a turn open (host/pid/nonce): a crash leaves its open
        # turns behind, and the next start marks them interrupted
        "0004_turn_owner",
        (
            "ALTER TABLE turns ADD COLUMN owner TEXT",
            "CREATE INDEX turns_open ON turns(owner) WHERE outcome IS NULL",
        ),
    ),
    (
        # who is talking (routing/session_facts.py): the client's session id, or a fingerprint of the
        # conversation's start (session_fingerprint 1); agent main/subagent (+ id); background;
        # the client's name and version. Older rows have NULL: no session known
        "0005_turn_session",
        (
            "ALTER TABLE turns ADD COLUMN session_id TEXT",
            "ALTER TABLE turns ADD COLUMN session_fingerprint INTEGER",
            "ALTER TABLE turns ADD COLUMN agent TEXT",
            "ALTER TABLE turns ADD COLUMN agent_id TEXT",
            "ALTER TABLE turns ADD COLUMN background INTEGER",
            "ALTER TABLE turns ADD COLUMN client_name TEXT",
            "ALTER TABLE turns ADD COLUMN client_version TEXT",
            "CREATE INDEX turns_session ON turns(session_id, started_at) WHERE session_id IS NOT NULL",
        ),
    ),
    (
        # failover (issue 19): the attempts of a turn that failed over, in order (JSON list of
        # {route, endpoint, kind, status, why, ms, cooled_s, backoff_s}, the last one the attempt
        # that answered); NULL for a turn answered by its first attempt (the row itself says it)
        "0006_attempts",
        ("ALTER TABLE turns ADD COLUMN attempts TEXT",),
    ),
    (
        # which proxy wrote the turn (--instance; default user@host): one ledger for a team
        "0007_turn_instance",
        (
            "ALTER TABLE turns ADD COLUMN instance TEXT",
            "CREATE INDEX turns_instance ON turns(instance, started_at)",
        ),
    ),
    (
        # the batches a shared (PostgreSQL) ledger has applied: a batch spooled while the database
        # was away, or whose commit was not acknowledged, is applied once (pg.run_program)
        "0008_ledger_batches",
        ("CREATE TABLE _ledger_batches (id TEXT PRIMARY KEY, applied_at REAL NOT NULL)",),
    ),
    (
        # how the turn came in (issue 30): "proxy" (the HTTPS proxy, CONNECT + mitmproxy's CA) or
        # "base_url" (a reverse listener the client's base URL points at); NULL in older rows
        "0009_turn_via",
        ("ALTER TABLE turns ADD COLUMN via TEXT",),
    ),
    (
        # a request that repeats a recent one of the same session (same body, within the retry
        # window: turn/retries.py) names the first of them: `log` folds them, `stats` counts
        # requests and retries apart (issue 29)
        "0010_turn_retry_of",
        ("ALTER TABLE turns ADD COLUMN retry_of TEXT",),
    ),
    (
        # per-block hashes of the prompt's cacheable prefix as sent (ledger/prefix.py, issue 32):
        # `explain` names the block where a turn's prefix parted from the previous turn's of its
        # session when its cache reads fell; hashes only, never the text
        "0011_turn_prefix_hashes",
        ("ALTER TABLE turns ADD COLUMN prefix_hashes TEXT",),
    ),
    QUOTA_MIGRATION,  # 0012_quota_windows (ledger/quota.py)
)

# Outcomes written when a turn ends (NULL while it is open).
INTERRUPTED = "interrupted"
INTERRUPTED_ERROR = "the proxy stopped before the turn completed"

USAGE_FIELDS = ("input", "output", "cache_read", "cache_write", "reasoning")


@overload
def usage_counting(name: str | None, default: str) -> str: ...
@overload
def usage_counting(name: str | None, default: str | None = None) -> str | None: ...
def usage_counting(name: str | None, default: str | None = None) -> str | None:
    """The counting convention of a ``usage_protocol`` value (protocols.counting), else ``default``."""
    return protocols.counting(name) or default


def whole_input(counting: str | None, fields: Mapping[str, Any]) -> int | None:
    """A usage's whole input, the cached tokens counted once (OpenAI and Gemini input includes
    them; Anthropic's does not: input + cache read + cache write); None without an input."""
    inp = fields.get("input")
    if inp is None:
        return None
    if includes_cached(counting):
        return inp
    return inp + (fields.get("cache_read") or 0) + (fields.get("cache_write") or 0)


def cache_read_share(counting: str | None, fields: Mapping[str, Any]) -> float | None:
    """The share of a usage's whole input read from cache, as reported; None when no cache read
    (or no input) was reported: never a 0 that was not said."""
    read, total = fields.get("cache_read"), whole_input(counting, fields)
    return round(read / total, 4) if read is not None and total else None


# update_turn(**fields): field -> how it is stored ("plain" column, "json" column,
# "usage" (derives the usage_* columns), "body" (bodies table, opt-in)).
TURN_FIELDS: dict[str, str] = {
    "rule": "plain",
    "endpoint": "plain",
    "target_protocol": "plain",
    "model_used": "plain",
    "outcome": "plain",
    "status": "plain",
    "latency_ms": "plain",
    "ttfb_ms": "plain",
    "error": "text",
    "usage_reported": "usage",
    "usage_protocol": "usage",
    "usage_client": "json",
    "trace": "json",
    "attempts": "json",
    "request_body": "body",
    "response_body": "body",
    # who is talking (session_facts.Speaker.ledger_fields(): bounded and escaped there;
    # "text": key-like strings a client put there are scrubbed like any other text)
    "session_id": "text",
    "session_fingerprint": "plain",
    "agent": "plain",
    "agent_id": "text",
    "background": "plain",
    "client_name": "text",
    "client_version": "text",
    "via": "plain",  # how the turn came in: proxy | base_url (Turn.via)
    "retry_of": "plain",  # the request id of the first request this one repeats (turn/retries.py)
    "prefix_hashes": "plain",  # per-block hashes of the prompt's prefix as sent (ledger/prefix.py)
}
SESSION_COLUMNS = ("session_id", "session_fingerprint", "agent", "agent_id", "background", "client_name",
                   "client_version")
JSON_COLUMNS = ("usage_reported", "usage_client", "trace", "attempts")

# the turns table's columns, in table order (a folded write names them in this order)
TURN_COLUMNS = ("request_id", "started_at", "client_protocol", "host", "path", "requested_model", "stream", "rule",
                "endpoint", "target_protocol", "model_used", "outcome", "status", "latency_ms", "ttfb_ms",
                "usage_protocol", "usage_reported", "usage_input", "usage_output", "usage_cache_read",
                "usage_cache_write", "usage_reasoning", "usage_client", "error", "trace", "owner",
                *SESSION_COLUMNS, "attempts", "instance", "via", "retry_of", "prefix_hashes")
START_COLUMNS = ("request_id", "started_at", "client_protocol", "host", "path", "requested_model", "stream", "owner",
                 "instance")
EVENT_SQL = "INSERT INTO events (request_id, ts, kind, data) VALUES (?,?,?,?)"


@functools.lru_cache(maxsize=256)
def upsert_turn_sql(columns: tuple[str, ...], started: bool) -> str:
    """One statement writing ``columns`` (``request_id`` first) of a turn's row: inserted when
    missing, else those columns set. ``started_at`` is set only when ``started`` (the turn's
    start is among what is written); otherwise it is the default of a row never started."""
    assign = [f"{c}=excluded.{c}" for c in columns[1:] if started or c != "started_at"]
    return (f"INSERT INTO turns ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
            " ON CONFLICT(request_id) DO " + ("UPDATE SET " + ", ".join(assign) if assign else "NOTHING"))

# add_shadow(**fields): field -> how it is stored (as TURN_FIELDS; "body" columns are kept
# for every shadow and replay: the user asked for the comparison by writing `shadow:`)
SHADOW_FIELDS: dict[str, str] = {
    "route": "plain", "endpoint": "plain", "target_protocol": "plain", "model": "plain", "origin": "plain",
    "at_original": "plain",
    "status": "plain", "latency_ms": "plain", "error": "text",
    "dropped": "json", "facts": "json", "primary_facts": "json", "comparison": "json",
    "request_body": "body", "response_body": "body", "primary_body": "body",
}
SHADOW_JSON_COLUMNS = ("usage_reported", "dropped", "facts", "primary_facts", "comparison")

# ---------------------------------------------------------------- secrets: one module (credentials.py)


# ---------------------------------------------------------------- errors


class LedgerError(Exception):
    """The ledger cannot be opened or read (one-line message)."""


class LedgerMissing(LedgerError):
    """A read-only ledger that does not exist yet."""

    def __init__(self, path: Path):
        super().__init__(f"no ledger at {path} yet: run the proxy first")
        self.path = path


# ---------------------------------------------------------------- the ledger


class Ledger:
    """The ledger database. Safe to share between threads (one connection, one lock).

    Opening raises ``LedgerError`` (``LedgerMissing`` for a read-only ledger that does not
    exist); after that, writes never raise."""

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
            from .shared import SharedWriter

            self.shared = SharedWriter(self, home=tokunseba_home(), fold_args=dict(
                turn_columns=TURN_COLUMNS, upsert_sql=upsert_turn_sql, event_sql=EVENT_SQL))
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

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- writes (never raise)

    def _write(self, what: str, statements: Iterable[tuple[str, tuple]]) -> None:
        """Run ``statements`` in one immediate transaction; log and swallow any failure."""
        with self._lock:
            conn = self._conn
            if conn is None:
                return
            if self.shared is not None:
                try:
                    self.shared.send(list(statements), 1)
                except Exception as e:
                    log.warning("ledger %s failed: %s", what, e)
                return
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    for sql, params in statements:
                        conn.execute(sql, params)
                    conn.execute("COMMIT")
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
            except Exception as e:  # sqlite3.Error, encoding errors, anything: the turn goes on
                log.warning("ledger %s failed: %s", what, e)

    def write_batch(self, records: list[Record]) -> bool:
        """Write ``records`` (``batch``'s tuples, in queue order) in ONE immediate
        transaction: folded into few statements (``write_folded``); should any statement
        fail, the transaction is rolled back and the batch written again with one savepoint
        per record, so a record that fails is logged and rolled back alone. Returns False,
        having written nothing, when the database is busy or locked (the caller retries
        later); True once committed (or when the ledger is closed)."""
        with self._lock:
            conn = self._conn
            if conn is None:
                return True
            if self.shared is not None:
                return self.shared.write_batch(records)
            began = self._begin(conn, len(records))
            if began is not None:
                return began
            try:
                left_out = write_folded(conn, self, records, turn_columns=TURN_COLUMNS, upsert_sql=upsert_turn_sql,
                                        event_sql=EVENT_SQL)
                conn.execute("COMMIT")
            except BaseException as e:
                self._rollback(conn)
                if isinstance(e, sqlite3.OperationalError) and _busy(e):
                    return False
                if not isinstance(e, Exception):
                    raise
            else:
                for what, err in left_out:
                    log.warning("ledger %s failed: %s", what, err)
                return True
            return self._write_one_by_one(conn, records)

    def spool_retry_s(self) -> float | None:
        """Seconds after which an idle writer should try to drain the spool; None when none waits."""
        shared = self.shared
        return None if shared is None or not shared.waiting else shared.retry_s

    def drain_spool(self) -> None:
        with self._lock:
            if self.shared is not None:
                try:
                    self.shared.drain()
                except Exception as e:  # never let the writer thread die
                    log.warning("ledger: draining the spool failed: %s", e)

    @staticmethod
    def _begin(conn: sqlite3.Connection, n: int) -> bool | None:
        """BEGIN IMMEDIATE: None once begun, else what ``write_batch`` returns (False: busy)."""
        try:
            conn.execute("BEGIN IMMEDIATE")
            return None
        except sqlite3.OperationalError as e:
            if _busy(e):
                return False
            log.warning("ledger batch of %d failed: %s", n, e)
            return True

    @staticmethod
    def _rollback(conn: sqlite3.Connection) -> None:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass

    def _write_one_by_one(self, conn: sqlite3.Connection, records: list[Record]) -> bool:
        """``write_batch`` again, each record's statements in its own savepoint."""
        began = self._begin(conn, len(records))
        if began is not None:
            return began
        try:
            for record in records:
                conn.execute("SAVEPOINT rec")
                try:
                    for sql, params in statements_of(self, record):
                        conn.execute(sql, params)
                    conn.execute("RELEASE rec")
                except Exception as e:  # one bad record never costs the others
                    conn.execute("ROLLBACK TO rec")
                    conn.execute("RELEASE rec")
                    if isinstance(e, sqlite3.OperationalError) and _busy(e):
                        raise
                    log.warning("ledger %s failed: %s", record_name(record), e)
            conn.execute("COMMIT")
            return True
        except BaseException as e:
            self._rollback(conn)
            if isinstance(e, sqlite3.OperationalError) and _busy(e):
                return False
            if not isinstance(e, Exception):
                raise
            log.warning("ledger batch of %d failed: %s", len(records), e)
            return True

    def start_turn(
        self,
        request_id: str,
        *,
        started_at: float,
        client_protocol: str,
        host: str,
        path: str,
        requested_model: str | None,
        stream: bool | None,
    ) -> None:
        values = (request_id, started_at, client_protocol, host, path, requested_model,
                  None if stream is None else int(bool(stream)))
        self._write("start_turn", self.start_statements(*values))

    def start_columns(self, request_id: str, started_at: float, client_protocol: str, host: str, path: str,
                      requested_model: str | None, stream: int | None) -> dict[str, Any]:
        """The columns recording a turn's start (owned by this instance, outcome NULL)."""
        return dict(zip(START_COLUMNS, (request_id, started_at, client_protocol, host, scrub(path), requested_model,
                                        stream, self.owner, self.instance)))

    def start_statements(self, request_id: str, started_at: float, client_protocol: str, host: str, path: str,
                         requested_model: str | None, stream: int | None) -> list[tuple[str, tuple]]:
        """The statements recording a turn's start (owned by this instance, outcome NULL)."""
        cols = self.start_columns(request_id, started_at, client_protocol, host, path, requested_model, stream)
        return [(upsert_turn_sql(START_COLUMNS, True), tuple(cols.values()))]

    def update_turn(self, request_id: str, **fields: Any) -> None:
        try:
            statements = self.update_statements(request_id, fields)
        except Exception as e:
            log.warning("ledger update_turn failed: %s", e)
            return
        self._write("update_turn", statements)

    def update_statements(self, request_id: str, fields: dict[str, Any]) -> list[tuple[str, tuple]]:
        cols, bodies = self.update_columns(request_id, fields)
        statements: list[tuple[str, tuple]] = [
            # a turn whose start was never recorded still gets its row
            ("INSERT OR IGNORE INTO turns (request_id, started_at) VALUES (?, ?)", (request_id, time.time()))
        ]
        if cols:
            assign = ", ".join(f"{c}=?" for c in cols)
            statements.append((f"UPDATE turns SET {assign} WHERE request_id=?", (*cols.values(), request_id)))
        if bodies:
            statements.append(self.bodies_statement(request_id, bodies))
        return statements

    def update_columns(self, request_id: str, fields: dict[str, Any],
                       protocol_of: Callable[[], str | None] | None = None) -> tuple[dict[str, Any], dict[str, bytes]]:
        """``update_turn(**fields)`` as turn columns and (opted-in) bodies. Usage reported
        without its protocol is counted by the turn's ``usage_protocol``: ``protocol_of()``
        when given, else the one already in the ledger."""
        cols: dict[str, Any] = {}
        bodies: dict[str, bytes] = {}
        for name, value in fields.items():
            kind = TURN_FIELDS.get(name)
            if kind is None:
                log.warning("ledger update_turn: unknown field %r ignored", name)
            elif kind == "plain":
                cols[name] = value
            elif kind == "text":
                cols[name] = None if value is None else scrub(str(value))
            elif kind == "json":
                cols[name] = None if value is None else scrubbed_json(value)
            elif kind == "body" and self.store_bodies and value is not None:
                bodies[name] = value.encode() if isinstance(value, str) else bytes(value)
        if "usage_reported" in fields:
            cols.update(self._usage_columns(request_id, fields, protocol_of))
        elif "usage_protocol" in fields:
            cols["usage_protocol"] = fields["usage_protocol"]
        return cols, bodies

    @staticmethod
    def bodies_statement(request_id: str, bodies: dict[str, bytes]) -> tuple[str, tuple]:
        names = list(bodies)
        return (f"INSERT INTO bodies (request_id, {', '.join(names)}) VALUES (?{', ?' * len(names)})"
                " ON CONFLICT(request_id) DO UPDATE SET " + ", ".join(f"{n}=excluded.{n}" for n in names),
                (request_id, *bodies.values()))

    def _usage_columns(self, request_id: str, fields: dict[str, Any],
                       protocol_of: Callable[[], str | None] | None = None) -> dict[str, Any]:
        """The raw usage object and its per-field columns; NULL where not reported."""
        reported = fields["usage_reported"]
        protocol = fields.get("usage_protocol")
        if protocol is None and protocol_of is not None:
            protocol = protocol_of()
        elif protocol is None and self._conn is not None:
            with self._lock:
                row = self._conn.execute(
                    "SELECT usage_protocol FROM turns WHERE request_id=?", (request_id,)
                ).fetchone()
            protocol = row[0] if row else None
        cols: dict[str, Any] = {"usage_protocol": protocol}
        counted = usage_counting(protocol)
        if isinstance(reported, dict):
            cols["usage_reported"] = scrubbed_json(reported)
            if counted is None:
                log.warning("ledger: usage of turn %s has no known protocol (%r); fields left NULL", request_id, protocol)
            f = Usage(counted, reported).fields() if counted else {}
        else:
            cols["usage_reported"] = None
            f = {}
        for name in USAGE_FIELDS:
            cols[f"usage_{name}"] = f.get(name)
        return cols

    def event(self, request_id: str, kind: str, data: dict | None = None, *, ts: float | None = None) -> None:
        try:
            statements = self.event_statements(request_id, kind, data, ts=ts)
        except Exception as e:
            log.warning("ledger event %s failed: %s", kind, e)
            return
        self._write(f"event {kind}", statements)

    @staticmethod
    def event_row(request_id: str, kind: str, data: dict | None = None, ts: float | None = None) -> tuple:
        """The values of one ``events`` row (``EVENT_SQL``)."""
        payload = None if data is None else scrubbed_json(data)
        return (request_id, time.time() if ts is None else ts, kind, payload)

    @classmethod
    def event_statements(cls, request_id: str, kind: str, data: dict | None = None, *,
                         ts: float | None = None) -> list[tuple[str, tuple]]:
        return [(EVENT_SQL, cls.event_row(request_id, kind, data, ts))]

    def interrupt_statements(self, alive: Callable[[str], bool], *, only_owner: str | None = None,
                             reason: str = INTERRUPTED_ERROR) -> list[tuple[str, tuple]]:
        """Statements marking open turns ``interrupted``: those of ``only_owner``, or else of
        every owner for which ``alive(owner)`` is false (a proxy that crashed or was killed).
        Each gets an ``interrupted`` event. Turns without an owner (written before owners
        existed) are left alone. The statements select the turns themselves (no row is read
        here): they mark what is open when they run, records queued before them included."""
        with self._lock:
            if self._conn is None:
                return []
            owners = [only_owner] if only_owner is not None else [
                r[0] for r in self._conn.execute("SELECT DISTINCT owner FROM turns WHERE outcome IS NULL"
                                                 " AND owner IS NOT NULL")]
        dead = [o for o in owners if only_owner is not None or not alive(o)]
        now = time.time()
        out: list[tuple[str, tuple]] = []
        for owner in dead:
            data = scrubbed_json({"reason": reason, "owner": owner})
            out.append(("INSERT INTO events (request_id, ts, kind, data) SELECT request_id, ?, ?, ? FROM turns"
                        " WHERE outcome IS NULL AND owner = ? ORDER BY started_at, request_id",
                        (now, INTERRUPTED, data, owner)))
            out.append(("UPDATE turns SET outcome=?, error=coalesce(error, ?) WHERE outcome IS NULL AND owner = ?",
                        (INTERRUPTED, reason, owner)))
        return out

    def add_shadow(self, request_id: str, kind: str, *, started_at: float, usage: Usage | None = None,
                   **fields: Any) -> None:
        """One shadow / shadow_skipped / replay row linked to the primary turn ``request_id``;
        usage exactly as the shadow's endpoint reported it (NULL when it reported none)."""
        try:
            statements = self.shadow_statements(request_id, kind, started_at=started_at, usage=usage, **fields)
        except Exception as e:
            log.warning("ledger add_shadow failed: %s", e)
            return
        self._write(f"shadow {kind}", statements)

    @staticmethod
    def shadow_statements(request_id: str, kind: str, *, started_at: float, usage: Usage | None = None,
                          **fields: Any) -> list[tuple[str, tuple]]:
        cols: dict[str, Any] = {"request_id": request_id, "kind": kind, "started_at": started_at}
        for name, value in fields.items():
            how = SHADOW_FIELDS[name]
            if value is None:
                cols[name] = None
            elif how == "plain":
                cols[name] = value
            elif how == "text":
                cols[name] = scrub(str(value))
            elif how == "json":
                cols[name] = jsonc.dumps(scrub(value))
            else:  # body: key-like text redacted, as everywhere else
                text = value.decode("utf-8", "replace") if isinstance(value, (bytes, bytearray)) else str(value)
                cols[name] = redact_text(text).encode()
        cols["usage_protocol"] = usage.counting if usage else None
        cols["usage_reported"] = jsonc.dumps(scrub(usage.reported)) if usage else None
        counted = Usage(usage_counting(usage.counting) or usage.counting, usage.reported).fields() if usage else {}
        for name in USAGE_FIELDS:
            cols[f"usage_{name}"] = counted.get(name)
        return [(f"INSERT INTO shadows ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                 tuple(cols.values()))]

    # ---- reads (raise on failure)

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

    def schema(self) -> list[str]:
        """Names of the applied migrations, in order."""
        if not self._has_table("_migrations"):
            return []
        return [r["name"] for r in self._query("SELECT name FROM _migrations ORDER BY rowid")]

    @staticmethod
    def _decode(row: dict) -> dict:
        for c in JSON_COLUMNS:
            if row.get(c) is not None:
                row[c] = jsonc.loads(row[c])
        if row.get("stream") is not None:
            row["stream"] = bool(row["stream"])
        return row

    def turns(self, since: float | None = None, limit: int | None = None, *, session: str | None = None,
              instance: str | None = None) -> list[dict]:
        """Turns, newest first; only those of ``session`` (a session id) and of proxy
        ``instance`` when given."""
        if not self._has_table("turns"):
            return []
        sql = "SELECT * FROM turns"
        where: list[str] = []
        params: list[Any] = []
        if since is not None:
            where.append("started_at >= ?")
            params.append(since)
        if session is not None:
            if "0005_turn_session" not in self.schema():  # a ledger older than sessions: none known
                return []
            where.append("session_id = ?")
            params.append(session)
        if instance is not None:
            if "instance" not in self._columns("turns"):
                return []  # a ledger older than instances
            where.append("instance = ?")
            params.append(instance)
        if where:
            sql += " WHERE " + " AND ".join(where)
        args = tuple(params)
        sql += " ORDER BY started_at DESC, rowid DESC"
        if limit is not None:
            sql += " LIMIT ?"
            args = (*args, limit)
        return [self._decode(r) for r in self._query(sql, args)]

    def count_turns(self, *, instance: str | None = None) -> int:
        """How many turns the ledger holds (of proxy ``instance`` when given)."""
        if not self._has_table("turns"):
            return 0
        if instance is not None:
            if "instance" not in self._columns("turns"):
                return 0
            return int(self._query("SELECT count(*) AS n FROM turns WHERE instance = ?", (instance,))[0]["n"])
        return int(self._query("SELECT count(*) AS n FROM turns")[0]["n"])

    def get_turn(self, prefix: str) -> dict:
        """The turn whose request id is ``prefix`` or starts with it (when unique)."""
        prefix = prefix.strip()
        if not prefix:
            raise LookupError("empty request id")
        if not self._has_table("turns"):
            raise LookupError(f"no turn with request id {prefix!r}")
        rows = self._query("SELECT * FROM turns WHERE request_id=?", (prefix,))
        if not rows:
            # a range on the primary key (uses its index); ids compare as UTF-8 bytes
            match, params = self.dialect.prefix_match("request_id", prefix)
            rows = self._query(f"SELECT * FROM turns WHERE {match} ORDER BY started_at DESC LIMIT 6", params)
        if not rows:
            raise LookupError(f"no turn with request id {prefix!r}")
        if len(rows) > 1:
            ids = ", ".join(r["request_id"] for r in rows[:5])
            more = ", ..." if len(rows) > 5 else ""
            raise LookupError(f"request id prefix {prefix!r} is ambiguous: {ids}{more}")
        turn = self._decode(rows[0])
        if self._has_table("bodies"):
            for b in self._query(
                "SELECT request_body, response_body FROM bodies WHERE request_id=?", (turn["request_id"],)
            ):
                turn.update(b)
        return turn

    def events(self, request_id: str) -> list[dict]:
        if not self._has_table("events"):
            return []
        rows = self._query("SELECT id, ts, kind, data FROM events WHERE request_id=? ORDER BY id", (request_id,))
        for r in rows:
            r["data"] = None if r["data"] is None else jsonc.loads(r["data"])
        return rows

    def quota_windows(self) -> list[dict]:
        """Each account's windows now: the newest state of each (ledger/quota.py ``latest``)."""
        return quota_latest(self._query) if self._has_table(QUOTA_TABLE) else []

    def turns_with_event(self, kind: str, since: float | None = None) -> int:
        """How many turns (started since ``since``) have an event of ``kind``."""
        if not self._has_table("events"):
            return 0
        sql = "SELECT COUNT(DISTINCT e.request_id) AS n FROM events e"
        if since is None:
            return int(self._query(sql + " WHERE e.kind = ?", (kind,))[0]["n"])
        sql += " JOIN turns t ON t.request_id = e.request_id WHERE e.kind = ? AND t.started_at >= ?"
        return int(self._query(sql, (kind, since))[0]["n"])

    def shadows(self, *, since: float | None = None, request_id: str | None = None,
                bodies: bool = False) -> list[dict]:
        """Shadow / shadow_skipped / replay rows, oldest first, with their primary turn's
        latency, usage, host and route (``primary_*``)."""
        if not self._has_table("shadows"):
            return []
        cols = "s.*" if bodies else ", ".join(
            f"s.{c}" for c in ("id", "request_id", "kind", "started_at", "route", "endpoint", "target_protocol",
                               "model", "origin", "at_original", "status", "latency_ms", "error", "usage_protocol",
                               "usage_reported", *(f"usage_{f}" for f in USAGE_FIELDS), "dropped", "facts",
                               "primary_facts", "comparison"))
        prim = ", ".join(f"t.{c} AS primary_{c}" for c in (
            "rule", "endpoint", "host", "model_used", "requested_model", "outcome", "status", "latency_ms",
            "usage_protocol", "usage_reported", *(f"usage_{f}" for f in USAGE_FIELDS)))
        where: list[str] = []
        params: list[Any] = []
        if since is not None:
            where.append("s.started_at >= ?")
            params.append(since)
        if request_id is not None:
            where.append("s.request_id = ?")
            params.append(request_id)
        sql = (f"SELECT {cols}, {prim} FROM shadows s LEFT JOIN turns t ON t.request_id = s.request_id"
               + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY s.started_at, s.id")
        rows = self._query(sql, tuple(params))
        for r in rows:
            for c in (*SHADOW_JSON_COLUMNS, "primary_usage_reported"):
                if r.get(c) is not None:
                    r[c] = jsonc.loads(r[c])
        return rows

    def stats(self, since: float | None = None) -> dict:
        """Counts, groupings, usage sums as reported and timing percentiles."""
        cols = "request_id, rule, endpoint, host, model_used, outcome, status, error, latency_ms, ttfb_ms, " + ", ".join(
            ["usage_protocol", "usage_reported"] + [f"usage_{f}" for f in USAGE_FIELDS]
        )
        rows: list[dict] = []
        if self._has_table("turns"):
            if "instance" in self._columns("turns"):
                cols += ", instance"  # a ledger older than instances: every turn's instance unknown
            columns = self._columns("turns")
            if "attempts" in columns:
                cols += ", attempts"
            if "retry_of" in columns:  # a ledger older than retries: none recognised
                cols += ", retry_of"
            cols += ", CASE WHEN rule IS NULL THEN trace END AS trace"  # read only where no rule took the turn
            where, params = ("WHERE started_at >= ?", (since,)) if since is not None else ("", ())
            rows = self._query(f"SELECT {cols} FROM turns {where}", params)
        return compute_stats(rows, since)


def _busy(e: sqlite3.OperationalError) -> bool:
    m = str(e).lower()
    return "locked" in m or "busy" in m


def instance_id() -> str:
    """Who owns the turns this process opens: ``host/pid/nonce``."""
    return f"{platform.node()}/{os.getpid()}/{secrets.token_hex(4)}"


def owner_alive(owner: str) -> bool:
    """Whether the proxy instance ``owner`` may still be running: False only when it ran on
    this host and its process is gone. Another host's instance cannot be checked: alive."""
    host, _, rest = owner.partition("/")
    pid_text = rest.partition("/")[0]
    if host != platform.node() or not pid_text.isdigit():
        return True
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


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


def migrate(conn: Any, dialect=SQLITE) -> list[str]:
    """Apply every migration not yet applied: on SQLite each in its own immediate
    transaction; on PostgreSQL all in one, under a lock (proxies starting together).

    Returns the names applied now. Unknown names in the ledger (written by a newer
    tokunseba) are left alone."""
    if dialect.one_migration_transaction:
        conn.execute("BEGIN")
        try:
            conn.execute(dialect.migration_lock())
            applied = _migrate_steps(conn, in_one=True)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return applied
    return _migrate_steps(conn, in_one=False)


def _migrate_steps(conn: Any, *, in_one: bool) -> list[str]:
    conn.execute("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
    applied_now: list[str] = []
    for name, statements in MIGRATIONS:
        if in_one:
            if conn.execute("SELECT 1 FROM _migrations WHERE name=?", (name,)).fetchone() is None:
                for sql in statements:
                    conn.execute(sql)
                conn.execute("INSERT INTO _migrations (name, applied_at) VALUES (?, ?)", (name, time.time()))
                applied_now.append(name)
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            if conn.execute("SELECT 1 FROM _migrations WHERE name=?", (name,)).fetchone() is None:
                for sql in statements:
                    conn.execute(sql)
                conn.execute("INSERT INTO _migrations (name, applied_at) VALUES (?, ?)", (name, time.time()))
                applied_now.append(name)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return applied_now


# ---------------------------------------------------------------- statistics


def percentile(values: list[float], p: float) -> float | None:
    """Nearest-rank percentile (a value that was actually measured); None when empty."""
    if not values:
        return None
    s = sorted(values)
    return s[max(math.ceil(p / 100 * len(s)) - 1, 0)]


# classes that are not a served turn, each counted on its own (outcomes.CLASSES: errors are not served)
NOT_SERVED = NOT_SENT_OR_FAILED


def _kind(row: dict) -> str:
    """The turn's one class (outcomes.outcome_class): refused / cancelled / interrupted /
    error / unfinished, or the way it was served. An open turn (outcome NULL) is unfinished:
    in flight, or left by a proxy that has not restarted since it stopped."""
    return outcome_class(row["outcome"], row["status"], row["error"])


# stats group -> a turn's group key (None = no route / model unknown). A turn passed
# through without an endpoint counts as served by the host it went to.
GROUPS: dict[str, Any] = {
    "route": lambda r: route_group(r["rule"], r.get("trace"), r.get("attempts")),  # matched, skipped: not "no route"
    "endpoint": lambda r: (r["endpoint"] or r["host"]) if was_sent(r) else None,  # only where something was sent
    "model": lambda r: r["model_used"],
    "instance": lambda r: r.get("instance"),
}


def compute_stats(rows: list[dict], since: float | None) -> dict:
    kinds = [_kind(r) for r in rows]
    served_total = sum(1 for k in kinds if k not in NOT_SERVED)
    # the headline classes partition the turns (outcomes.CLASSES): they add up to "turns"
    totals = {
        "turns": len(rows),
        "translated": kinds.count("translated"),
        "retargeted": kinds.count("retargeted"),
        "pass_through": kinds.count("pass_through"),
        "errors": kinds.count("error"),
        "refused": kinds.count("refused"),
        "cancelled": kinds.count("cancelled"),
        "interrupted": kinds.count(INTERRUPTED),
        "unfinished": kinds.count("unfinished"),
        # a client's retries of a request (turns.retry_of) are turns of their own, counted apart
        "retries": sum(1 for r in rows if r.get("retry_of")),
    }
    totals["requests"] = totals["turns"] - totals["retries"]
    groups: dict[str, list[dict]] = {}
    for gname, key in GROUPS.items():
        acc: dict[str | None, dict] = {}
        for r, k in zip(rows, kinds):
            g = acc.setdefault(key(r), {"turns": 0, "translated": 0, "refused": 0, "errors": 0, "cancelled": 0,
                                        "served": 0, "cache_read": None, "cache_write": None, "_whole": 0})
            g["turns"] += 1
            g["translated"] += k == "translated"
            g["refused"] += k == "refused"
            g["errors"] += k == "error"
            g["cancelled"] += k == "cancelled"
            g["served"] += k not in NOT_SERVED
            if (read := r.get("usage_cache_read")) is not None and r.get("usage_input") is not None:  # as reported
                u = {f: r.get(f"usage_{f}") for f in USAGE_FIELDS}
                g["cache_read"] = (g["cache_read"] or 0) + read
                g["_whole"] += whole_input(usage_counting(r.get("usage_protocol")), u) or 0
            if r.get("usage_cache_write") is not None:
                g["cache_write"] = (g["cache_write"] or 0) + r["usage_cache_write"]
        for g in acc.values():  # the share of the input read from cache, over the turns that reported a cache read
            whole = g.pop("_whole")
            g["cache_read_share"] = round(g["cache_read"] / whole, 4) if g["cache_read"] is not None and whole else None
        groups[gname] = [
            {gname: name, **g, "share": round(g["served"] / served_total, 4) if served_total else None}
            for name, g in sorted(acc.items(), key=lambda kv: (-kv[1]["turns"], kv[0] is None, str(kv[0])))
        ]
    usage: dict[str, dict] = {}
    none_reported = 0
    for r in rows:
        vals = {f: r[f"usage_{f}"] for f in USAGE_FIELDS}
        if r["usage_reported"] is None or all(v is None for v in vals.values()):
            none_reported += 1
            continue
        counted = usage_counting(r["usage_protocol"], r["usage_protocol"] or "-")
        u = usage.setdefault(counted, {"turns": 0, **{f: None for f in USAGE_FIELDS}})
        u["turns"] += 1
        for f, v in vals.items():
            if v is not None:
                u[f] = (u[f] or 0) + v  # a field no turn reported stays None, never 0
    for counted, u in usage.items():
        u["cache_read_share"] = cache_read_share(counted, u)
    timings = {}
    for name in ("latency_ms", "ttfb_ms"):
        times = [r[name] for r in rows if r[name] is not None]
        timings[name] = {"n": len(times), "p50": percentile(times, 50), "p95": percentile(times, 95)}
    return {
        "since": since,
        **totals,
        "served": served_total,
        "by_route": groups["route"],
        "by_endpoint": groups["endpoint"],
        "by_model": groups["model"],
        "by_instance": groups["instance"],
        "usage": {"by_counting": usage, "turns_reported": len(rows) - none_reported, "turns_none": none_reported},
        "timings": timings,
        **failover_stats(rows),
    }


def failover_stats(rows: list[dict]) -> dict:
    """Failover (turns.attempts): how many turns failed over, and per endpoint its failed
    attempts, how many of them moved on to another attempt, and how many cooled it down."""
    per: dict[str, dict] = {}
    turns = 0
    for r in rows:
        raw = r.get("attempts")
        try:
            attempts = jsonc.loads(raw) if isinstance(raw, str) else raw
        except ValueError:
            attempts = None
        if not isinstance(attempts, list) or not attempts:
            continue
        turns += len(attempts) > 1
        for i, a in enumerate(attempts):
            if not isinstance(a, dict) or a.get("kind") == "answered":
                continue
            g = per.setdefault(a.get("endpoint") or "(original host)", {"failed": 0, "moved_on": 0, "cooled": 0})
            g["failed"] += 1
            g["moved_on"] += i < len(attempts) - 1
            g["cooled"] += bool(a.get("cooled_s"))
    return {"failed_over": turns,
            "failover_by_endpoint": [{"endpoint": k, **v} for k, v in sorted(per.items(), key=lambda kv: -kv[1]["failed"])]}
