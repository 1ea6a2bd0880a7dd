"""The ledger's queued records, and a batch of them written as few statements.

A record is a tuple, queued by ``LedgerWriter`` and written by ``Ledger.write_batch``:

  (START, request_id, started_at, client_protocol, host, path, requested_model, stream)
  (UPDATE, request_id, fields)               fields as ``Ledger.update_turn(**fields)``
  (EVENT, request_id, kind, data, ts)
  (BUILD, what, build)                        ``build()`` -> [(sql, params)], run in order

A field's value may be ``Later(fn)``: ``fn()`` is called by the writer's thread as it builds
the statements (work the event loop need not do: the prompt's prefix hashes), None if it fails.

``statements_of(ledger, record)`` gives a record's own statements (one record, one
savepoint: the slow path). ``write_folded`` writes a whole batch in fewer statements (the
fast path), leaving the database exactly as the records run one by one would:

- every START and UPDATE of one turn between two BUILD records folds into ONE
  ``INSERT … ON CONFLICT(request_id) DO UPDATE`` of the columns they set, the later value
  winning; a turn whose start is not among them keeps its ``started_at`` (a turn never
  started gets the time its update was written, as ``update_statements`` gives it);
- consecutive turns writing the same columns go in one ``executemany``, in the order of
  their first record (rowids as one by one); every event in one ``executemany``, in queue
  order (their ids keep the order); opted-in bodies one upsert per turn;
- a BUILD record runs where it was queued, after what was folded before it is written, so
  what it reads (open turns) is what the records before it wrote.

A record that cannot be built (a value JSON cannot encode, a scrub that fails) is left out
and returned with its error, for the caller to log. Any error while executing SQL is
raised: the caller rolls the batch back and writes it again one savepoint per record.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

START, UPDATE, EVENT, BUILD = "start", "update", "event", "build"

log = logging.getLogger("tokunseba.ledger")

Record = tuple
Statements = list[tuple[str, tuple]]


class Later:
    """A field's value computed when the writer builds its statements, on the writer's thread;
    None (said in the log) if ``fn`` fails: one column is never worth a turn's record."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn

    def __call__(self) -> Any:
        try:
            return self.fn()
        except Exception:
            log.exception("ledger: a value computed for a record failed")
            return None


class Executes(Protocol):  # a sqlite3.Connection, or ledger/pg.py's Recorder (which records what it is given)
    def execute(self, sql: str, params: Any = ..., /) -> Any: ...
    def executemany(self, sql: str, rows: Iterable[Any], /) -> Any: ...


class Writes(Protocol):  # what of ``Ledger`` the fold uses (ledger/writes.py imports this module)
    def start_columns(self, *values: Any) -> dict[str, Any]: ...
    def start_statements(self, *values: Any) -> Statements: ...
    def update_columns(self, request_id: str, fields: dict, protocol_of=None) -> tuple[dict, dict]: ...
    def update_statements(self, request_id: str, fields: dict) -> Statements: ...
    def event_row(self, request_id: str, kind: str, data: dict | None, ts: float | None) -> tuple: ...
    def event_statements(self, request_id: str, kind: str, data: dict | None, *, ts: float | None) -> Statements: ...
    def bodies_statement(self, request_id: str, bodies: dict[str, bytes]) -> tuple[str, tuple]: ...


def record_name(record: Record) -> str:
    """What a record is, for logs: ``start_turn``, ``update_turn``, ``event KIND``, or its own name."""
    op = record[0]
    if op == EVENT:
        return f"event {record[2]}"
    if op == BUILD:
        return record[1]
    return f"{op}_turn"


def statements_of(ledger: Writes, record: Record) -> Statements:
    """One record's own statements, as ``Ledger.start_turn`` / ``update_turn`` / ``event`` write them."""
    op = record[0]
    if op == START:
        return ledger.start_statements(*record[1:])
    if op == UPDATE:
        return ledger.update_statements(record[1], record[2])
    if op == EVENT:
        return ledger.event_statements(record[1], record[2], record[3], ts=record[4])
    return record[2]()


_ORDERS: dict[tuple[str, ...], dict[str, int]] = {}


def _column_order(turn_columns: tuple[str, ...]) -> dict[str, int]:
    """Each column's place in ``turn_columns`` (made once per tuple, not once per batch)."""
    order = _ORDERS.get(turn_columns)
    if order is None:
        order = _ORDERS[turn_columns] = {c: i for i, c in enumerate(turn_columns)}
    return order


class _Fold:
    """What one batch writes, folded, until the next BUILD record."""

    def __init__(self, conn: Executes, ledger: Writes, turn_columns: tuple[str, ...], upsert_sql,
                 event_sql: str) -> None:
        self.conn, self.ledger, self.upsert_sql, self.event_sql = conn, ledger, upsert_sql, event_sql
        self.order = _column_order(turn_columns)
        self.turns: dict[str, dict[str, Any]] = {}  # request id -> columns (first record's order)
        self.started: set[str] = set()
        self.bodies: dict[str, dict[str, bytes]] = {}
        self.events: list[tuple] = []
        # request id -> usage_protocol as written by this batch so far (outlives write(): what a
        # later record reads is what the earlier ones wrote, even before they ran: pg.Recorder)
        self.protocols: dict[str, str | None] = {}

    def _row(self, rid: str) -> dict[str, Any]:
        row = self.turns.get(rid)
        if row is None:
            row = self.turns[rid] = {"request_id": rid, "started_at": time.time()}
        return row

    def _protocol_of(self, rid: str) -> str | None:
        row = self.turns.get(rid)
        if row is not None and "usage_protocol" in row:
            return row["usage_protocol"]
        if rid in self.protocols:
            return self.protocols[rid]
        got = self.conn.execute("SELECT usage_protocol FROM turns WHERE request_id=?", (rid,)).fetchone()
        return got[0] if got else None

    def add(self, record: Record) -> None:
        """Fold one START / UPDATE / EVENT record (raises, having folded nothing, if it cannot be built)."""
        op, rid = record[0], record[1]
        if op == EVENT:
            self.events.append(self.ledger.event_row(rid, record[2], record[3], record[4]))
        elif op == UPDATE:
            cols, bodies = self.ledger.update_columns(rid, record[2], lambda: self._protocol_of(rid))
            self._row(rid).update(cols)
            if bodies:
                self.bodies.setdefault(rid, {}).update(bodies)
        else:
            cols = self.ledger.start_columns(*record[1:])
            self._row(rid).update(cols)
            self.started.add(rid)

    def write(self) -> None:
        """Execute what is folded (SQL errors raise) and start empty."""
        run_sql: str | None = None
        run: list[tuple] = []
        for rid, row in self.turns.items():
            if "usage_protocol" in row:
                self.protocols[rid] = row["usage_protocol"]
            names = tuple(sorted(row, key=self.order.__getitem__))
            sql = self.upsert_sql(names, rid in self.started)
            if sql != run_sql:
                if run:
                    assert run_sql is not None  # the statement of the rows in run
                    self.conn.executemany(run_sql, run)
                run_sql, run = sql, []
            run.append(tuple(row[n] for n in names))
        if run:
            assert run_sql is not None
            self.conn.executemany(run_sql, run)
        for rid, bodies in self.bodies.items():
            self.conn.execute(*self.ledger.bodies_statement(rid, bodies))
        if self.events:
            self.conn.executemany(self.event_sql, self.events)
        self.turns, self.started, self.bodies, self.events = {}, set(), {}, []


def write_folded(conn: Executes, ledger: Writes, records: Iterable[Record], *,
                 turn_columns: tuple[str, ...], upsert_sql, event_sql: str) -> list[tuple[str, Exception]]:
    """Write ``records`` folded, inside the caller's transaction; return the records left
    out as (name, error). SQL errors raise (the caller rolls back)."""
    fold = _Fold(conn, ledger, turn_columns, upsert_sql, event_sql)
    left_out: list[tuple[str, Exception]] = []
    for record in records:
        if record[0] != BUILD:
            try:
                fold.add(record)
            except sqlite3.Error:
                raise
            except Exception as e:  # this record alone is left out, as one by one
                left_out.append((record_name(record), e))
            continue
        fold.write()
        try:
            statements = record[2]()
        except sqlite3.Error:
            raise
        except Exception as e:
            left_out.append((record_name(record), e))
            continue
        for sql, params in statements:
            conn.execute(sql, params)
    fold.write()
    return left_out
