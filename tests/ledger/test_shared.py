"""The shared (PostgreSQL) ledger's writes on a real server of this module's own (stopped
and started at will): a database away at start spools to a private bounded file and is
drained in order once it answers; a spool left by a proxy that stopped is drained by the next
one; a batch drained twice counts once; a failing statement costs only itself."""

from __future__ import annotations

import logging
import os
import shutil
import stat
import time
from pathlib import Path

import pytest

from tokunseba.ledger import Ledger, LedgerWriter, spool_note
from tokunseba.ledger.spool import ledger_key, spool_dir


@pytest.fixture(scope="module")
def own_server(pg_server):  # pg_server: skipped (or failed under CI) exactly as the others
    from tests.support.pg_server import PgServer

    server = PgServer(pg_server.bindir)
    server.start()
    server.setup_roles()
    yield server
    server.close()


@pytest.fixture
def db(own_server):
    if own_server.proc is None:
        own_server.start()
    return own_server.url(db=own_server.fresh_db())


def _turns(w, tag: str, n: int) -> list[str]:
    ids = [f"tk-{tag}-{i:04d}" for i in range(n)]
    for i, rid in enumerate(ids):
        w.start_turn(rid, started_at=1000.0 + i, client_protocol="anthropic", host="api.anthropic.com",
                     path="/v1/messages", requested_model="claude-x", stream=True)
        w.event(rid, "routed", {"i": i})
        w.update_turn(rid, outcome="translated", status=200, usage_protocol="openai",
                      usage_reported={"prompt_tokens": 10, "completion_tokens": i})
        w.event(rid, "completed", {"status": 200})
    return ids


def _wait(cond, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def _counts(url: str) -> tuple[int, int, dict[str, int]]:
    import psycopg

    with psycopg.connect(url) as c:
        turns = c.execute("SELECT count(*) FROM turns").fetchone()[0]
        events = c.execute("SELECT count(*) FROM events").fetchone()[0]
        per = dict(c.execute("SELECT request_id, count(*) FROM events WHERE kind='completed' GROUP BY 1").fetchall())
    return turns, events, per


def test_the_database_away_at_start_spools_then_drains_in_order_once(own_server, db, caplog, _tokunseba_home):
    own_server.stop()
    with caplog.at_level(logging.WARNING, logger="tokunseba.ledger"):
        led = Ledger(db)  # the proxy starts although the database does not answer
        led.instance = "p1"
        w = LedgerWriter(led)
        ids = _turns(w, "a", 40)
        assert w.flush(30)
        files = list(spool_dir(_tokunseba_home).glob(f"{ledger_key(db)}-*.jsonl"))
        assert len(files) == 1 and stat.S_IMODE(files[0].stat().st_mode) == 0o600
        assert b"tk-a-0039" in files[0].read_bytes() and b"s3cret" not in files[0].read_bytes()
        note = spool_note(db)
        assert note is not None and "160 ledger records wait in a local spool" in note
        own_server.start()
        _wait(lambda: not led.shared.waiting)  # the idle writer drains it (tried every 2 s)
        more = _turns(w, "b", 5)  # and goes on writing directly
        assert w.flush(30)
        w.close()
    turns, events, per = _counts(db)
    assert (turns, events) == (45, 90) and set(per) == {*ids, *more} and set(per.values()) == {1}
    assert "is away" in caplog.text and "reachable again" in caplog.text
    assert "tk-s3cret" not in caplog.text and spool_note(db) is None
    with Ledger(db, readonly=True) as r:  # in queue order: the first turn written first
        assert [t["request_id"] for t in r.turns()][-1] == "tk-a-0000"


def test_a_spool_left_by_a_stopped_proxy_is_drained_by_the_next_and_counted_once(own_server, db,
                                                                                  _tokunseba_home):
    own_server.stop()
    w = LedgerWriter(Ledger(db))
    ids = _turns(w, "c", 10)
    assert w.flush(30)
    w.close()  # the database still away: the spool stays for the next proxy
    (left,) = spool_dir(_tokunseba_home).glob(f"{ledger_key(db)}-*.jsonl")
    copy = left.with_name(f"{ledger_key(db)}-999999.jsonl.saved")
    shutil.copy(left, copy)
    own_server.start()
    w2 = LedgerWriter(Ledger(db))
    assert w2.ledger.shared.waiting  # adopted at start
    _wait(lambda: not w2.ledger.shared.waiting)
    w2.close()
    assert _counts(db)[:2] == (10, 20)
    # the same batches found again (say a drain cut short after its commits): applied once
    copy.rename(copy.with_suffix(""))
    w3 = LedgerWriter(Ledger(db))
    _wait(lambda: not w3.ledger.shared.waiting)
    w3.close()
    turns, events, per = _counts(db)
    assert (turns, events) == (10, 20) and set(per) == set(ids) and set(per.values()) == {1}
    assert not list(Path(spool_dir(_tokunseba_home)).glob("*.jsonl"))


def test_a_failing_statement_costs_only_itself(db, caplog):
    import psycopg

    led = Ledger(db)
    led.start_turn("tk-x", started_at=1.0, client_protocol="anthropic", host="h", path="/", requested_model="m",
                   stream=True)
    with psycopg.connect(db, autocommit=True) as c:
        c.execute("DROP TABLE events")
    with caplog.at_level(logging.WARNING, logger="tokunseba.ledger"):
        led.write_batch([("update", "tk-x", {"status": 201}), ("event", "tk-x", "completed", {"a": 1}, 2.0)])
    assert led.get_turn("tk-x")["status"] == 201
    assert 'relation "events" does not exist' in caplog.text
    led.close()


# (the same batches on both back ends: tests/ledger/test_batch.py runs each of its tests on
# SQLite and on PostgreSQL, the fold's property test included)


def test_four_proxies_starting_at_once_migrate_once(pg_server):
    """Proxies that start together on a new database: one creates the tables (under an
    advisory lock, in one transaction), the others find them; each migration applied once."""
    import subprocess
    import sys

    from tokunseba.ledger.schema import MIGRATIONS

    url = pg_server.url(db=pg_server.fresh_db())
    code = ("import sys; from tokunseba.ledger import Ledger; led = Ledger(sys.argv[1]); "
            "assert led.schema(); led.close()")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "addon")}
    procs = [subprocess.Popen([sys.executable, "-c", code, url], env=env, stderr=subprocess.PIPE, text=True)
             for _ in range(4)]
    outs = [p.communicate(timeout=60)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, outs
    with Ledger(url, readonly=True) as r:
        assert r.schema() == [n for n, _ in MIGRATIONS]


def test_no_secret_reaches_a_postgresql_ledger(pg_url):
    """What test_ledger proves for the SQLite file, for every table of a PostgreSQL ledger."""
    import psycopg

    from tests.support.ledgers import SECRETS

    led = Ledger(pg_url)
    led.start_turn("tk-s", started_at=1.0, client_protocol="gemini", host="generativelanguage.googleapis.com",
                   path="/v1beta/models/x:generateContent?key=AIzaSyD-SECRET-GOOGLE-KEY-123&alt=sse",
                   requested_model="x", stream=True)
    led.event("tk-s", "request_seen", {
        "headers": {"Authorization": "Bearer Bearer-SECRET-TOKEN-1", "x-api-key": "sk-ant-api03-SECRETSECRET",
                    "Cookie": "a=COOKIE-SECRET-2", "anthropic-auth-token": "sess-SECRET-3"},
        "api_key": "sk-proj-SECRETSECRETSECRET42"})
    led.update_turn("tk-s", error="401: Incorrect API key provided: sk-proj-SECRETSECRETSECRET42",
                    trace=[{"route": "r", "reasons": ["header authorization is 'Bearer Bearer-SECRET-TOKEN-1'"]}])
    led.add_shadow("tk-s", "shadow", started_at=2.0, error="bad key sk-ant-api03-SECRETSECRET")
    led.close()
    with psycopg.connect(pg_url) as c:
        dump = repr([c.execute(f"SELECT * FROM {t}").fetchall() for t in ("turns", "events", "bodies", "shadows")])
    for s in SECRETS[1:]:  # the first is a plain value redacted only as a known endpoint key (not here)
        assert s not in dump, s
    assert "tk-s" in dump and "<redacted>" in dump and "Incorrect API key provided" in dump
