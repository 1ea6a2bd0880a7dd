"""The ledger's schema: its migrations and the columns its tables hold.

- ``MIGRATIONS`` is append-only: a shipped migration is never edited nor reordered; a new
  one is added at the end, under a new name. A newer tokunseba opens an older ledger (the
  readers check for the columns they need); names a newer tokunseba applied are left alone.
- ``migrate`` applies the ones not yet applied: on SQLite each in its own immediate
  transaction, on PostgreSQL all in one under a lock.
- The column tuples name what the tables hold, for the writes (``writes``) and the reads
  (``reads``) alike.
"""

from __future__ import annotations

import time
from typing import Any

from .dialect import POSTGRESQL_DIALECT, SQLITE

# Append-only: never edit or reorder a shipped migration; add a new one at the end.
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
    (
        # spending caps (issue 40, budgets/store.py): each budget's window (spent and held, in
        # micro-dollars or tokens), the holds of turns in flight (with the lease their proxy
        # renews; only turns in flight, so a few rows: no index beyond the key, one page less
        # written per admission and per settlement), and every charge (reported, kept_hold,
        # swept, after_sweep)
        "0012_budgets",
        (
            """CREATE TABLE budget_windows (
                budget TEXT NOT NULL,
                scope_key TEXT NOT NULL,
                window_start REAL NOT NULL,
                window_end REAL NOT NULL,
                unit TEXT NOT NULL,
                limit_amount INTEGER NOT NULL,
                spent INTEGER NOT NULL DEFAULT 0,
                held INTEGER NOT NULL DEFAULT 0,
                PRIMARY KEY (budget, scope_key, window_start)
            )""",
            """CREATE TABLE budget_holds (
                hold_id TEXT PRIMARY KEY,
                budget TEXT NOT NULL,
                scope_key TEXT NOT NULL,
                window_start REAL NOT NULL,
                amount INTEGER NOT NULL,
                request_id TEXT,
                owner TEXT,
                expires_at REAL NOT NULL
            )""",
            """CREATE TABLE budget_charges (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                budget TEXT NOT NULL,
                scope_key TEXT NOT NULL,
                window_start REAL NOT NULL,
                request_id TEXT,
                amount INTEGER NOT NULL,
                kind TEXT NOT NULL,
                ts REAL NOT NULL
            )""",
        ),
    ),
    (
        # subscription windows (issue 42; ledger/quota.py): each window state a provider's reply
        # reported, per account (a one-way hash of its credential or account id, never the
        # credential), with the time seen; rows only appended, the newest per (account, window)
        # is the state now. The column is window_name: "window" is a reserved word in PostgreSQL
        "0013_quota_windows",
        (
            """CREATE TABLE quota_windows (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                account TEXT NOT NULL,
                host TEXT,
                account_by TEXT,
                provider TEXT,
                window_name TEXT NOT NULL,
                used REAL,
                status TEXT,
                resets_at REAL,
                minutes INTEGER,
                binding INTEGER,
                seen_at REAL NOT NULL,
                request_id TEXT
            )""",
            "CREATE INDEX quota_windows_latest ON quota_windows(account, window_name, seen_at)",
        ),
    ),
)


# Outcomes written when a turn ends (NULL while it is open).
INTERRUPTED = "interrupted"
INTERRUPTED_ERROR = "the proxy stopped before the turn completed"

USAGE_FIELDS = ("input", "output", "cache_read", "cache_write", "reasoning")

SESSION_COLUMNS = ("session_id", "session_fingerprint", "agent", "agent_id", "background", "client_name",
                   "client_version")
JSON_COLUMNS = ("usage_reported", "usage_client", "trace", "attempts")

# the turns table's columns, in table order (a folded write names them in this order)
TURN_COLUMNS = ("request_id", "started_at", "client_protocol", "host", "path", "requested_model", "stream", "rule",
                "endpoint", "target_protocol", "model_used", "outcome", "status", "latency_ms", "ttfb_ms",
                "usage_protocol", "usage_reported", "usage_input", "usage_output", "usage_cache_read",
                "usage_cache_write", "usage_reasoning", "usage_client", "error", "trace", "owner",
                *SESSION_COLUMNS, "attempts", "instance", "via", "retry_of", "prefix_hashes")
SHADOW_JSON_COLUMNS = ("usage_reported", "dropped", "facts", "primary_facts", "comparison")


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


def migrate_connection(conn: Any, *, postgresql: bool) -> list[str]:
    """``migrate`` on a connection opened outside the ledger's own (budgets/store.py's): a
    sqlite3 connection in autocommit mode, or a psycopg one in autocommit mode whose statements
    are rewritten by the PostgreSQL dialect here."""
    if not postgresql:
        return migrate(conn, SQLITE)

    class Rewriting:
        def execute(self, sql: str, params: tuple = ()) -> Any:
            return conn.execute(POSTGRESQL_DIALECT.sql(sql), params)

    return migrate(Rewriting(), POSTGRESQL_DIALECT)


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

