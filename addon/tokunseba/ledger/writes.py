"""The ledger's write half: what the proxy records (a turn's start and updates, its events,
shadows and replays, interrupted turns) and the transactions it is written in.

- The proxy never writes here from its event loop: ``writer.LedgerWriter`` queues records
  and one thread commits them in batches (``write_batch``: one transaction; the records
  folded into few statements (``batch``), or, should one fail, one savepoint per record). A
  shared (PostgreSQL) ledger hands its batches to ``shared.SharedWriter``.
- A turn's ``outcome`` is NULL while it is open; it is written when known. A turn is owned
  by the proxy instance that started it (``owner``, see ``location.instance_id``);
  ``interrupt_statements`` mark the open turns of instances that no longer run ``interrupted``.
- Usage is stored exactly as the upstream reported it (the raw object plus its fields as
  the upstream counted them, ``Usage.fields()``); NULL where nothing was reported.
- No secrets: credential-like keys and key-like strings are scrubbed before they are
  written (``scrub``). Bodies are stored only when the user opts in.
- Writes never raise: a failure is logged (logger ``tokunseba.ledger``) and swallowed, so a
  ledger problem never breaks a turn.
"""

from __future__ import annotations

import functools
import logging
import sqlite3
import time
from collections.abc import Callable, Iterable
from typing import Any

from .. import jsonc
from ..credentials import redact_text, scrub
from ..neutral import Usage
from .batch import Later, Record, record_name, statements_of, write_folded
from .connection import LedgerConnection, is_busy
from .location import tokunseba_home
from .schema import INTERRUPTED, INTERRUPTED_ERROR, TURN_COLUMNS, USAGE_FIELDS
from .scrub import scrubbed_json
from .stats import usage_counting

log = logging.getLogger("tokunseba.ledger")

MAX_STORED_BODY = 4 * 1024 * 1024  # a reply body kept (--ledger-bodies, a shadowed turn's comparison) is cut here

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


class LedgerWrites(LedgerConnection):
    """The write half of the ledger (the proxy's). After opening, writes never raise."""

    def _open_shared(self) -> None:
        """A writable shared (PostgreSQL) ledger's writer: its connection and local spool."""
        from .shared import SharedWriter

        self.shared = SharedWriter(self, home=tokunseba_home(), fold_args=dict(
            turn_columns=TURN_COLUMNS, upsert_sql=upsert_turn_sql, event_sql=EVENT_SQL))

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
                if isinstance(e, sqlite3.OperationalError) and is_busy(e):
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
            if is_busy(e):
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
                    if isinstance(e, sqlite3.OperationalError) and is_busy(e):
                        raise
                    log.warning("ledger %s failed: %s", record_name(record), e)
            conn.execute("COMMIT")
            return True
        except BaseException as e:
            self._rollback(conn)
            if isinstance(e, sqlite3.OperationalError) and is_busy(e):
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
            if type(value) is Later:
                value = value()
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
