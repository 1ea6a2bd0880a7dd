"""The ledger's writer thread: records queued in order and committed in batches; a busy
database delays records, never the caller; a full queue drops records, counted and logged;
one bad record costs no other; turns left open by a dead proxy become interrupted, and
`stats` counts interrupted, cancelled and errors apart."""

from __future__ import annotations

import logging
import os
import sqlite3
import subprocess
import sys
import time

import pytest

from tokunseba.ledger import INTERRUPTED, Ledger, LedgerWriter, compute_stats, instance_id, owner_alive


def start(w, rid: str, at: float = 1000.0) -> None:
    w.start_turn(rid, started_at=at, client_protocol="anthropic", host="api.anthropic.com", path="/v1/messages",
                 requested_model="claude-haiku-4-5", stream=True)


def writer(path, owner: str | None = None, **kw) -> LedgerWriter:
    led = Ledger(path)
    led.owner = owner
    return LedgerWriter(led, **kw)


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request, tmp_path):
    """The ledger of this test: a SQLite file, or a new database on the real PostgreSQL server."""
    if request.param == "sqlite":
        return tmp_path / "l.db"
    return request.getfixturevalue("pg_url")


def read(path) -> Ledger:
    return Ledger(path, readonly=True)


class HeldLock:
    """Another process's view: a connection holding the database's write lock."""

    def __init__(self, path) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.execute("BEGIN IMMEDIATE")

    def release(self) -> None:
        self.conn.execute("COMMIT")
        self.conn.close()


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_records_are_written_in_order_in_few_transactions(target):
    w = writer(target)
    for i in range(300):
        start(w, f"t{i}", at=1000.0 + i)
        w.update_turn(f"t{i}", outcome="translated", status=200, usage_protocol="openai",
                      usage_reported={"prompt_tokens": i, "completion_tokens": 1})
        w.event(f"t{i}", "completed", {"status": 200})
    assert w.flush(30)
    assert w.written == 900 and w.dropped == 0
    assert w.batches < 900  # batched: far fewer transactions than records
    w.close()
    with read(target) as led:
        turns = {t["request_id"]: t for t in led.turns()}
        assert len(turns) == 300
        # update_turn's usage columns read the row start_turn wrote in the same batch
        assert turns["t7"]["usage_input"] == 7 and turns["t7"]["outcome"] == "translated"
        assert [e["kind"] for e in led.events("t7")] == ["completed"]


def test_a_busy_database_delays_records_never_the_caller(tmp_path, caplog):
    path = tmp_path / "l.db"
    w = writer(path)
    lock = HeldLock(path)
    try:
        for i in range(50):  # every call returns while another process holds the write lock
            start(w, f"t{i}")
            w.update_turn(f"t{i}", outcome="pass_through", status=200)
        assert w.written == 0 and w.dropped == 0
        with read(path) as led:
            assert led.turns() == []  # nothing could be written yet
        deadline = time.monotonic() + 30
        while w.busy_retries == 0 and time.monotonic() < deadline:  # the writer met the lock and waits
            time.sleep(0.01)
        assert w.busy_retries >= 1 and w.written == 0
    finally:
        lock.release()
    assert w.flush(30)
    assert w.written == 100 and w.dropped == 0
    w.close()
    with read(path) as led:
        assert len(led.turns()) == 50
    assert any("locked by another process" in r.getMessage() for r in caplog.records)


def test_a_full_queue_drops_records_counted_and_logged(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="tokunseba.ledger")
    path = tmp_path / "l.db"
    w = writer(path, max_queue=5, max_batch=2)
    lock = HeldLock(path)
    try:
        for i in range(40):
            start(w, f"t{i}")
    finally:
        lock.release()
    assert w.flush(30)
    w.close()
    with read(path) as led:
        rows = len(led.turns())
    assert w.dropped > 0 and rows + w.dropped == 40 and w.written == rows
    assert any("dropped" in r.getMessage() and "records dropped so far" in r.getMessage() for r in caplog.records)


def test_one_bad_record_costs_no_other(target, caplog):
    w = writer(target)
    start(w, "good-1")
    w.update_turn("good-1", trace=[object()])  # cannot be encoded as JSON
    w.event("good-1", "routed", {"x": 1})
    start(w, "good-2")
    assert w.flush(10)
    w.close()
    with read(target) as led:
        assert {t["request_id"] for t in led.turns()} == {"good-1", "good-2"}
        assert [e["kind"] for e in led.events("good-1")] == ["routed"]
    assert any("update_turn failed" in r.getMessage() for r in caplog.records)


def test_close_writes_everything_queued_then_refuses_more(target, caplog):
    w = writer(target)
    for i in range(100):
        start(w, f"t{i}")
    w.close()
    start(w, "late")
    assert w.dropped == 1
    with read(target) as led:
        assert len(led.turns()) == 100


def test_turns_left_open_by_a_dead_proxy_become_interrupted(target):
    path = target
    host = instance_id().split("/")[0]
    dead = f"{host}/{dead_pid()}/dead0001"
    alive = instance_id()  # this process: still running
    elsewhere = "some-other-host/1/abcd"
    for owner, rids in ((dead, ["d1", "d2", "d-done"]), (alive, ["a1"]), (elsewhere, ["e1"])):
        w = writer(path, owner)
        for rid in rids:
            start(w, rid)
        w.close()
    w = writer(path, dead)
    w.update_turn("d-done", outcome="translated", status=200)  # this one had completed
    w.close()
    assert not owner_alive(dead) and owner_alive(alive) and owner_alive(elsewhere)

    w = writer(path, instance_id())
    w.recover_interrupted()
    w.close()
    with read(path) as led:
        by_id = {t["request_id"]: t for t in led.turns()}
        assert [by_id[r]["outcome"] for r in ("d1", "d2")] == [INTERRUPTED, INTERRUPTED]
        assert by_id["d1"]["error"] == "the proxy stopped before the turn completed"
        assert [e["kind"] for e in led.events("d1")] == ["interrupted"]
        assert (by_id["d-done"]["outcome"], by_id["d-done"]["status"]) == ("translated", 200)
        assert by_id["a1"]["outcome"] is None and by_id["e1"]["outcome"] is None  # may still be running
        st = led.stats()
    assert (st["interrupted"], st["unfinished"], st["errors"], st["served"]) == (2, 2, 0, 1)


def test_a_stopping_proxy_marks_its_own_open_turns_interrupted(target):
    path = target
    me = instance_id()
    w = writer(path, me)
    start(w, "open")
    start(w, "done")
    w.update_turn("done", outcome="pass_through", status=200)
    w.interrupt_own()
    w.close()
    with read(path) as led:
        by_id = {t["request_id"]: t for t in led.turns()}
    assert by_id["open"]["outcome"] == INTERRUPTED and by_id["done"]["outcome"] == "pass_through"


def row(outcome, status=None, error=None, **kw):
    base = {"request_id": "x", "rule": None, "endpoint": None, "host": "h", "model_used": None, "outcome": outcome,
            "status": status, "error": error, "latency_ms": None, "ttfb_ms": None, "usage_protocol": None,
            "usage_reported": None, **{f"usage_{f}": None for f in ("input", "output", "cache_read", "cache_write",
                                                                     "reasoning")}}
    return base | kw


def test_stats_count_unfinished_interrupted_cancelled_and_errors_apart():
    st = compute_stats([
        row("translated", 200),
        row("cancelled", None, "Client disconnected."),
        row("interrupted", None, "the proxy stopped before the turn completed"),
        row(None),  # in flight
        row("error", 200, "upstream stream ended without its terminal event"),
        row("retargeted", 502, "upstream connection broke"),
    ], None)
    assert (st["turns"], st["cancelled"], st["interrupted"], st["unfinished"], st["errors"]) == (6, 1, 1, 1, 2)
    assert st["served"] == 1  # the translated one: an error is not served (issue 29), whatever answer the client got
    assert st["translated"] + st["retargeted"] + st["pass_through"] + st["errors"] + st["refused"] + st["cancelled"] \
        + st["interrupted"] + st["unfinished"] == st["turns"]  # the classes partition the turns


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs a POSIX process model")
def test_owner_ids_name_this_host_and_process():
    host, pid, nonce = instance_id().split("/")
    assert pid == str(os.getpid()) and len(nonce) == 8 and host
