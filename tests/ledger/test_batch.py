"""A batch of ledger records written folded (one upsert per turn, one executemany of events,
no savepoints) leaves the database exactly as the records written one by one would; a
record that cannot be built is left out alone; an SQL failure redoes the batch one
savepoint per record; the writer lingers so a turn's records share a transaction, and a
flush does not wait for the linger.

Every test runs on both back ends (the ``target`` fixture: a SQLite file, or a database on
the real PostgreSQL server of tests/support/pg_server.py, skipped where it is not installed and a
failure under CI=true, as the other PostgreSQL tests): the shared ledger writes the same batches through
the same fold (ledger/shared.py). The statements a batch runs are counted as SQLite's trace
callback reports them, and on PostgreSQL as the ledger hands them to its connection
(ledger/pg.PgConnection, in the ledger's SQLite text), an executemany counted per row."""

from __future__ import annotations

import logging
import sqlite3
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokunseba.ledger import Later, Ledger, LedgerWriter
from tokunseba.ledger.batch import BUILD, EVENT, START, UPDATE

from tests.support.ledgers import SECRETS, raw_bytes

RIDS = ("tk-a", "tk-b", "tk-c")


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request, tmp_path):
    """``target(name="l.db")``: where a ledger of this test's back end lives — a SQLite file,
    or a new empty database on the real PostgreSQL server (the same name, the same place);
    ``target.reader(name)`` the same for a read-only reader (PostgreSQL's read-only role);
    ``target.empty(name)`` empties it again (tables dropped: ids start from 1)."""
    backend = request.param
    places: dict[str, str] = {}
    server = request.getfixturevalue("pg_server") if backend == "postgresql" else None

    def place(name: str = "l.db"):
        if server is None:
            return tmp_path / name
        if name not in places:
            places[name] = server.fresh_db()
        return server.url(db=places[name])

    def reader(name: str = "l.db"):
        if server is None:
            return tmp_path / name
        from tests.support.pg_server import READER_PASSWORD

        place(name)
        return server.url("tk_reader", READER_PASSWORD, places[name])

    def empty(name: str = "l.db") -> None:
        if server is None:
            for f in tmp_path.glob(name + "*"):
                f.unlink()
            return
        import psycopg

        with psycopg.connect(place(name), autocommit=True) as c:
            tables = [r[0] for r in c.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")]
            if tables:  # every table the migrations made (a new migration's too)
                c.execute("DROP TABLE IF EXISTS " + ", ".join(f'"{t}"' for t in tables))

    place.backend, place.reader, place.empty = backend, reader, empty
    return place


def start_rec(rid: str, at: float = 1000.0, path: str = "/v1/messages") -> tuple:
    return (START, rid, at, "anthropic", "api.anthropic.com", path, "claude-haiku-4-5", 1)


def dump(path) -> dict:
    con = sqlite3.connect(path)
    try:
        return {t: con.execute(f"SELECT rowid, * FROM {t} ORDER BY rowid").fetchall()
                for t in ("turns", "events", "bodies", "shadows")}
    finally:
        con.close()


class Traced:
    """The SQL a ledger's connection runs: as SQLite reports each statement it starts, or as
    the PostgreSQL ledger hands each to its connection (one per row of an executemany)."""

    def __init__(self, led: Ledger) -> None:
        self.sql: list[str] = []
        if led.shared is None:
            led._conn.set_trace_callback(self.sql.append)
            return
        conn = led._conn  # ledger/pg.PgConnection, shared with the writer (ledger/shared.py)
        execute, executemany = conn.execute, conn.executemany

        def traced_execute(sql, params=()):
            self.sql.append(sql)
            return execute(sql, params)

        def traced_executemany(sql, rows):
            rows = list(rows)
            self.sql.extend([sql] * len(rows))
            return executemany(sql, rows)

        conn.execute, conn.executemany = traced_execute, traced_executemany

    def count(self, prefix: str) -> int:
        return sum(s.lstrip().upper().startswith(prefix) for s in self.sql)


TABLES = {"turns": "request_id", "events": "id", "bodies": "request_id", "shadows": "id"}


def rows_of(led_or_path, backend: str) -> dict:
    """Every row of every table, in a form both back ends give alike (bytes, not memoryview)."""
    if backend == "sqlite":
        con = sqlite3.connect(led_or_path)
        try:
            return {t: con.execute(f"SELECT * FROM {t} ORDER BY {o}").fetchall() for t, o in TABLES.items()}
        finally:
            con.close()
    import psycopg

    with psycopg.connect(led_or_path) as c:
        return {t: [tuple(bytes(v) if isinstance(v, memoryview) else v for v in r)
                    for r in c.execute(f"SELECT * FROM {t} ORDER BY {o}").fetchall()] for t, o in TABLES.items()}


# ---------------------------------------------------------------- equivalence with one by one

fields = st.fixed_dictionaries({}, optional={
    "rule": st.sampled_from(["easy", None]),
    "endpoint": st.sampled_from(["local", "oai"]),
    "outcome": st.sampled_from(["translated", "error", None]),
    "status": st.sampled_from([200, 502, None]),
    "latency_ms": st.floats(0, 100, allow_nan=False),
    "error": st.sampled_from(["upstream broke: sk-ant-api03-SECRETSECRET", None]),
    "trace": st.sampled_from([[{"route": "r", "matched": True}], [], None]),
    "usage_reported": st.sampled_from([{"prompt_tokens": 7, "completion_tokens": 2}, {"input_tokens": 5}, None]),
    "usage_protocol": st.sampled_from(["openai", "anthropic", None]),
    "usage_client": st.sampled_from([{"input_tokens": 7}, None]),
    "request_body": st.sampled_from([b"{}", "req", None]),
    "response_body": st.sampled_from([b"[1]", None]),
})
records = st.lists(st.one_of(
    st.builds(start_rec, st.sampled_from(RIDS), st.floats(1000, 2000, allow_nan=False),
              st.sampled_from(["/v1/messages", "/v1/x?key=AIzaSyD-SECRET-GOOGLE-KEY-123"])),
    st.tuples(st.just(UPDATE), st.sampled_from(RIDS), fields),
    st.tuples(st.just(EVENT), st.sampled_from(RIDS), st.sampled_from(["routed", "completed"]),
              st.sampled_from([None, {"x": 1}, {"api_key": "sk-proj-SECRETSECRETSECRET42"}]),
              st.floats(1000, 2000, allow_nan=False)),
    st.sampled_from(["shadow", "interrupt", "failing build"]),
), max_size=30)


def concrete(led: Ledger, recs: list) -> list[tuple]:
    out = []
    for r in recs:
        if r == "shadow":
            out.append((BUILD, "shadow shadow", lambda: led.shadow_statements("tk-a", "shadow", started_at=1.0,
                                                                              route="r", status=200)))
        elif r == "interrupt":
            out.append((BUILD, "interrupt_own", lambda: led.interrupt_statements(lambda o: True,
                                                                                 only_owner=led.owner)))
        elif r == "failing build":
            out.append((BUILD, "broken", lambda: 1 / 0))
        else:
            out.append(r)
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(records, min_size=1, max_size=3))
def test_folded_batches_leave_what_one_by_one_leaves(tmp_path_factory, monkeypatch, target, batches):
    """On SQLite, the two ledgers compared row for row (rowids included). On PostgreSQL the
    folded batches (the shared writer's, one transaction each) leave the same rows as the
    same records written one by one into SQLite (ids, values, bytes, NULLs)."""
    monkeypatch.setattr(time, "time", lambda: 4242.0)  # an update's default started_at, an interrupt's ts
    d = tmp_path_factory.mktemp("fold")
    single = Ledger(d / "single.db", store_bodies=True)
    if target.backend == "sqlite":
        folded = Ledger(d / "folded.db", store_bodies=True)
    else:
        target.empty("folded")
        folded = Ledger(target("folded"), store_bodies=True)
        assert folded.schema()  # connected and migrated (the proxy's writer connects when it first writes)
    for led in (folded, single):
        led.owner = "host/1/owner"
    for recs in batches:
        assert folded.write_batch(concrete(folded, recs))
        with single._lock:
            assert single._write_one_by_one(single._conn, concrete(single, recs))
    folded.close()
    single.close()
    if target.backend == "sqlite":
        assert dump(d / "folded.db") == dump(d / "single.db")
    else:
        assert rows_of(target("folded"), "postgresql") == rows_of(d / "single.db", "sqlite")


# ---------------------------------------------------------------- fewer statements


def test_a_batch_of_turns_is_one_upsert_per_turn_and_no_savepoint(target):
    led = Ledger(target())
    batch = []
    for i in range(10):
        rid = f"tk-{i}"
        batch += [start_rec(rid), (UPDATE, rid, {"rule": "easy", "trace": [{"route": "easy"}]}),
                  (EVENT, rid, "routed", {"rule": "easy"}, 1000.0),
                  (UPDATE, rid, {"status": 200, "outcome": "translated", "usage_protocol": "openai",
                                 "usage_reported": {"prompt_tokens": i, "completion_tokens": 1}}),
                  (EVENT, rid, "completed", {"status": 200}, 1001.0)]
    assert led.schema()  # connected and migrated first (PostgreSQL's writer connects when it first writes)
    traced = Traced(led)
    assert led.write_batch(batch)
    assert traced.count("BEGIN") == 1 and traced.count("SAVEPOINT") == 0 and traced.count("UPDATE") == 0
    assert traced.count("INSERT INTO TURNS") == 10 and traced.count("INSERT INTO EVENTS") == 20
    t = led.get_turn("tk-7")
    assert (t["rule"], t["status"], t["usage_input"], t["started_at"]) == ("easy", 200, 7, 1000.0)
    assert [e["kind"] for e in led.events("tk-7")] == ["routed", "completed"]
    led.close()


def test_a_record_that_cannot_be_built_is_left_out_alone_and_logged_once(target, caplog):
    led = Ledger(target())
    assert led.schema()  # connected and migrated first
    traced = Traced(led)
    assert led.write_batch([start_rec("tk-a"), (UPDATE, "tk-a", {"trace": [object()]}),
                            (UPDATE, "tk-a", {"status": 200}), (BUILD, "broken", lambda: 1 / 0)])
    assert traced.count("SAVEPOINT") == 0  # no need to redo: nothing of it was written
    assert led.get_turn("tk-a")["status"] == 200
    msgs = [r.getMessage() for r in caplog.records]
    assert sum("update_turn failed" in m for m in msgs) == 1 and sum("broken failed" in m for m in msgs) == 1
    led.close()


def test_an_sql_failure_redoes_the_batch_one_savepoint_per_record(target, caplog):
    caplog.set_level(logging.WARNING, logger="tokunseba.ledger")
    led = Ledger(target())
    assert led.schema()  # connected and migrated first
    traced = Traced(led)
    # a list: SQLite cannot bind it; PostgreSQL takes it for an array, not the integer column's type
    assert led.write_batch([start_rec("tk-a"), (UPDATE, "tk-a", {"status": [1, 2]}),
                            (EVENT, "tk-a", "routed", None, 1000.0), start_rec("tk-b")])
    assert traced.count("SAVEPOINT") == 4
    assert {t["request_id"] for t in led.turns()} == {"tk-a", "tk-b"} and led.get_turn("tk-a")["status"] is None
    assert [e["kind"] for e in led.events("tk-a")] == ["routed"]
    assert sum("update_turn failed" in r.getMessage() for r in caplog.records) == 1
    led.close()


def test_a_record_left_out_and_an_sql_failure_in_one_batch_are_each_said_once(target, caplog):
    """The fold leaves out a record that cannot be built; a statement then fails and the batch
    is written again one by one: each failing record is logged once (by the second pass),
    and the turn keeps its start."""
    caplog.set_level(logging.WARNING, logger="tokunseba.ledger")
    led = Ledger(target())
    assert led.schema()
    assert led.write_batch([start_rec("tk-a"), (UPDATE, "tk-a", {"trace": [object()]}),  # cannot be built
                            (UPDATE, "tk-a", {"status": [1, 2]}),  # the statement fails
                            (UPDATE, "tk-a", {"rule": "easy"}), start_rec("tk-b")])
    assert {t["request_id"] for t in led.turns()} == {"tk-a", "tk-b"}
    t = led.get_turn("tk-a")
    assert (t["status"], t["rule"], t["started_at"]) == (None, "easy", 1000.0)
    assert sum("update_turn failed" in r.getMessage() for r in caplog.records) == 2, caplog.text
    led.close()


def test_no_secret_reaches_the_ledger_through_the_writer(target):
    path = target()
    w = LedgerWriter(Ledger(path))
    w.start_turn("tk-s", started_at=1000.0, client_protocol="gemini", host="generativelanguage.googleapis.com",
                 path="/v1beta/models/g:generateContent?key=AIzaSyD-SECRET-GOOGLE-KEY-123&alt=sse",
                 requested_model="g", stream=True)
    w.update_turn("tk-s", error="401: Incorrect API key provided: sk-proj-SECRETSECRETSECRET42",
                  trace=[{"route": "r", "reasons": ["header authorization is 'Bearer Bearer-SECRET-TOKEN-1'",
                                                    "header x-api-key is 'local-plain-secret', rule wants 'x'"]}])
    w.event("tk-s", "request_seen", {"headers": {"Cookie": "a=COOKIE-SECRET-2", "anthropic-auth-token": "sess-SECRET-3",
                                                 "x-api-key": "sk-ant-api03-SECRETSECRET"}})
    assert w.flush(30)
    w.close()
    if target.backend == "sqlite":
        disk = raw_bytes(path)  # the database, its WAL and shared memory
        for s in SECRETS:
            assert s.encode() not in disk, s
    else:
        every = repr(rows_of(path, "postgresql"))  # every row of every table
        for s in SECRETS[1:]:  # the first is a plain value redacted only as a known endpoint key (not here)
            assert s not in every, s
    with Ledger(target.reader(), readonly=True) as led:
        assert led.get_turn("tk-s")["error"].startswith("401: Incorrect API key provided: ")


# ---------------------------------------------------------------- the writer's linger


def test_turn_ends_queued_apart_share_one_transaction(target):
    w = LedgerWriter(Ledger(target()), linger_s=30.0)  # nothing but a start commits before a flush
    for i in range(20):
        w.start_turn(f"tk-{i}", started_at=1000.0, client_protocol="anthropic", host="h", path="/v1/messages",
                     requested_model="m", stream=False)
    assert w.flush(20)
    written, batches = w.written, w.batches
    for i in range(20):
        w.update_turn(f"tk-{i}", outcome="pass_through", status=200)
        time.sleep(0.001)  # the writer wakes and lingers
        w.event(f"tk-{i}", "completed", {"status": 200})
    assert w.written == written
    assert w.flush(20)  # hurries the linger: it would otherwise time out
    assert (w.written - written, w.batches - batches) == (40, 1)
    w.close()


def test_a_turns_start_is_not_held_back(target):
    """A linger of ten minutes. On SQLite the start is committed anyway, so a reader finds the
    turn open, never missing, while its end may wait. A shared (PostgreSQL) ledger holds a
    start with the rest on purpose (ledger/writer.py: a round trip per transaction): there it
    waits like the end, and a flush commits both in one transaction."""
    w = LedgerWriter(Ledger(target()), linger_s=600.0)
    w.update_turn("tk-0", outcome="pass_through")  # an end that lingers...
    w.start_turn("tk-1", started_at=1000.0, client_protocol="anthropic", host="h", path="/", requested_model="m",
                 stream=False)  # ...cut short by a start (SQLite)
    if target.backend == "sqlite":
        deadline = time.monotonic() + 30
        while w.written < 2:
            assert time.monotonic() < deadline, "the start waited for the linger"
            time.sleep(0.01)
    else:
        time.sleep(0.5)
        assert w.written == 0  # lingering, the start with it
        assert w.flush(30)
        assert (w.written, w.batches) == (2, 1)
    w.close()


def test_a_start_queued_with_its_end_lingers_with_it(target):
    """A short turn's start comes with its end (proxy/recorder.py): there is no open turn to
    show, so it does not cut the linger; a flush commits both in one transaction."""
    w = LedgerWriter(Ledger(target()), linger_s=600.0)
    w.start_turn("tk-1", started_at=1000.0, client_protocol="anthropic", host="h", path="/", requested_model="m",
                 stream=False, ended=True)
    w.update_turn("tk-1", outcome="pass_through", status=200)
    time.sleep(0.3)
    assert w.written == 0  # lingering
    assert w.flush(30)
    assert (w.written, w.batches) == (2, 1)
    w.close()
    with Ledger(target.reader(), readonly=True) as led:
        assert (led.get_turn("tk-1")["outcome"], led.get_turn("tk-1")["status"]) == ("pass_through", 200)


def test_a_later_value_is_computed_by_the_writers_thread(target, caplog):
    """``Later(fn)``: ``fn`` runs on the writer's thread as the record is written; one that fails
    leaves its column empty (said in the log) and the record's other fields written."""
    import threading

    ran_on: list[str] = []

    def hashes() -> str:
        ran_on.append(threading.current_thread().name)
        return '{"v":1}'

    def broken() -> str:
        raise ValueError("no hashes")

    w = LedgerWriter(Ledger(target()))
    w.start_turn("tk-1", started_at=1000.0, client_protocol="anthropic", host="h", path="/", requested_model="m",
                 stream=False)
    w.update_turn("tk-1", rule="r1", prefix_hashes=Later(hashes))
    w.start_turn("tk-2", started_at=1000.0, client_protocol="anthropic", host="h", path="/", requested_model="m",
                 stream=False)
    with caplog.at_level(logging.ERROR, logger="tokunseba.ledger"):
        w.update_turn("tk-2", rule="r2", prefix_hashes=Later(broken))
        assert w.flush(30)
    w.close()
    assert ran_on == ["tokunseba-ledger-writer"]
    assert "a value computed for a record failed" in caplog.text
    with Ledger(target.reader(), readonly=True) as led:
        one, two = led.get_turn("tk-1"), led.get_turn("tk-2")
        assert (one["rule"], one["prefix_hashes"]) == ("r1", '{"v":1}')
        assert (two["rule"], two["prefix_hashes"]) == ("r2", None)


def test_close_commits_at_once_what_lingers(target):
    w = LedgerWriter(Ledger(target()), linger_s=600.0)
    w.start_turn("tk-1", started_at=1000.0, client_protocol="anthropic", host="h", path="/", requested_model="m",
                 stream=False)
    w.close(timeout=20)
    assert (w.written, w.dropped) == (1, 0)
    with Ledger(target.reader(), readonly=True) as led:
        assert [t["request_id"] for t in led.turns()] == ["tk-1"]


@pytest.mark.parametrize("linger_s", [0.0, 0.005])
def test_records_queued_from_many_threads_all_arrive(target, linger_s):
    import threading

    w = LedgerWriter(Ledger(target()), linger_s=linger_s)

    def produce(k: int) -> None:
        for i in range(200):
            w.event(f"tk-{k}", "tick", {"i": i}, ts=float(i))
            if i % 50 == 0:
                time.sleep(0.002)  # let the writer fall asleep between bursts

    threads = [threading.Thread(target=produce, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert w.flush(30)
    assert (w.written, w.dropped) == (800, 0)
    w.close()
    with Ledger(target.reader(), readonly=True) as led:
        for k in range(4):
            assert [e["data"]["i"] for e in led.events(f"tk-{k}")] == list(range(200))
