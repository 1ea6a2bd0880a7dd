"""The SQLite ledger: paths, migrations, usage as reported, no secrets, writes that never
raise, concurrent writers, WAL readers, and durability when the writer is killed."""

from __future__ import annotations

import logging
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tokunseba.credentials import scrub
from tokunseba.ledger import Ledger, LedgerError, LedgerMissing, default_ledger_path, percentile
from tokunseba.ledger import schema as ledger_mod
from tokunseba.ledger.schema import MIGRATIONS, SESSION_COLUMNS

ADDON = Path(__file__).resolve().parents[2] / "addon"


def start(led: Ledger, rid: str, at: float = 1000.0, **kw) -> None:
    args = dict(started_at=at, client_protocol="anthropic", host="api.anthropic.com", path="/v1/messages",
                requested_model="claude-haiku-4-5", stream=True)
    args.update(kw)
    led.start_turn(rid, **args)


def raw_bytes(path: Path) -> bytes:
    """Everything on disk for this ledger: the database, its WAL and shared memory."""
    return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))


@pytest.fixture(params=["sqlite", "postgresql"])
def make(request, tmp_path):
    """``make(name="l.db", **kw)`` opens a ledger on this test's back end: a SQLite file, or a
    database on the real PostgreSQL server (tests/support/pg_server.py); the same name, the same
    database. ``readonly=True`` reads PostgreSQL as the read-only role."""
    if request.param == "sqlite":
        def open_sqlite(name: str = "l.db", **kw) -> Ledger:
            return Ledger(tmp_path / name, **kw)
        opener = open_sqlite
    else:
        from tests.support.pg_server import READER_PASSWORD

        server = request.getfixturevalue("pg_server")
        dbs: dict[str, str] = {}

        def open_pg(name: str = "l.db", **kw) -> Ledger:
            if name not in dbs:
                dbs[name] = server.fresh_db()
            if kw.get("readonly"):
                return Ledger(server.url("tk_reader", READER_PASSWORD, dbs[name]), **kw)
            return Ledger(server.url(db=dbs[name]), **kw)
        opener = open_pg
    opener.backend, opener.tmp_path = request.param, tmp_path
    return opener


# ---------------------------------------------------------------- paths


def test_default_path_follows_tokunseba_home(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKUNSEBA_HOME", str(tmp_path / "th"))
    assert default_ledger_path() == tmp_path / "th" / "ledger.db"


def test_default_path_falls_back_to_xdg_then_home(tmp_path, monkeypatch):
    monkeypatch.delenv("TOKUNSEBA_HOME")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_ledger_path() == tmp_path / "xdg" / "tokunseba" / "ledger.db"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_ledger_path() == tmp_path / "home" / ".local" / "share" / "tokunseba" / "ledger.db"


def test_ledger_without_path_creates_the_default_under_tokunseba_home(_tokunseba_home):
    with Ledger() as led:
        start(led, "tk-a")
    assert (_tokunseba_home / "ledger.db").exists()
    assert Ledger(readonly=True).get_turn("tk-a")["request_id"] == "tk-a"


# ---------------------------------------------------------------- migrations


def test_migrates_an_empty_database(tmp_path):
    path = tmp_path / "deep" / "dir" / "ledger.db"
    with Ledger(path) as led:
        assert led.schema() == [name for name, _ in MIGRATIONS]
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"_migrations", "turns", "events", "bodies"} <= tables


def _older_ledger(path: Path, upto: int) -> None:
    """A ledger as an older tokunseba left it: only the first ``upto`` migrations, one turn."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
    for name, statements in MIGRATIONS[:upto]:
        for sql in statements:
            conn.execute(sql)
        conn.execute("INSERT INTO _migrations VALUES (?, 1.0)", (name,))
    conn.execute("INSERT INTO turns (request_id, started_at, client_protocol, status) VALUES ('tk-old', 5.0, 'openai', 200)")
    conn.execute("INSERT INTO events (request_id, ts, kind, data) VALUES ('tk-old', 5.5, 'completed', '{\"status\":200}')")
    conn.close()


def test_reads_an_older_ledger_readonly_and_migrates_it_when_opened_for_writing(tmp_path):
    path = tmp_path / "ledger.db"
    _older_ledger(path, upto=1)
    # a reader copes with the older schema without changing it
    with Ledger(path, readonly=True) as ro:
        assert ro.schema() == [MIGRATIONS[0][0]]
        assert ro.get_turn("tk-old")["status"] == 200
        assert [e["kind"] for e in ro.events("tk-old")] == ["completed"]
    # a writer applies the missing migrations, keeping the old rows
    with Ledger(path, store_bodies=True) as led:
        assert led.schema() == [name for name, _ in MIGRATIONS]
        led.update_turn("tk-old", request_body=b'{"model":"m"}')
        old = led.get_turn("tk-old")
    assert old["client_protocol"] == "openai" and old["status"] == 200
    assert old["request_body"] == b'{"model":"m"}'
    # opening again applies nothing twice
    conn = sqlite3.connect(path)
    assert ledger_mod.migrate(conn) == []
    assert conn.execute("SELECT count(*) FROM _migrations").fetchone()[0] == len(MIGRATIONS)


def test_opens_a_ledger_written_by_a_newer_tokunseba(tmp_path):
    path = tmp_path / "ledger.db"
    Ledger(path).close()
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO _migrations VALUES ('9999_from_the_future', 1.0)")
    conn.execute("ALTER TABLE turns ADD COLUMN future_column TEXT")
    conn.commit()
    conn.close()
    with Ledger(path) as led:
        start(led, "tk-new")
        assert led.get_turn("tk-new")["future_column"] is None
        assert led.schema()[-1] == "9999_from_the_future"


def test_two_processes_migrating_at_once_apply_each_migration_once(tmp_path):
    path = tmp_path / "ledger.db"
    code = "import sys; from tokunseba.ledger import Ledger; Ledger(sys.argv[1]).close()"
    procs = [subprocess.Popen([sys.executable, "-c", code, str(path)]) for _ in range(4)]
    assert [p.wait(timeout=30) for p in procs] == [0] * 4
    conn = sqlite3.connect(path)
    assert [r[0] for r in conn.execute("SELECT name FROM _migrations ORDER BY rowid")] == [n for n, _ in MIGRATIONS]


def test_open_failures_are_one_line_errors(tmp_path):
    with pytest.raises(LedgerMissing, match=r"^no ledger at .*nope\.db yet: run the proxy first$"):
        Ledger(tmp_path / "nope.db", readonly=True)
    (tmp_path / "dir.db").mkdir()
    with pytest.raises(LedgerError, match=r"^cannot open the ledger .*dir\.db: "):
        Ledger(tmp_path / "dir.db")
    (tmp_path / "junk.db").write_bytes(b"this is not a database" * 100)
    with pytest.raises(LedgerError, match="not a database"):
        Ledger(tmp_path / "junk.db", readonly=True)


# ---------------------------------------------------------------- turns and usage


def test_turn_row_holds_every_field(make):
    with make() as led:
        start(led, "tk-1", at=1234.5, path="/v1/messages?beta=true")
        trace = [{"route": "easy", "matched": True, "reasons": ["client 'anthropic' is anthropic"],
                  "refused": None, "unreachable": False}]
        led.update_turn("tk-1", rule="easy", endpoint="local", target_protocol="openai", model_used="gemma",
                        outcome="translated", trace=trace, via="base_url")
        led.update_turn("tk-1", status=200, latency_ms=250.5, ttfb_ms=40.25, error=None)
        t = led.get_turn("tk-1")
    assert t == {
        "request_id": "tk-1", "started_at": 1234.5, "client_protocol": "anthropic", "host": "api.anthropic.com",
        "path": "/v1/messages?beta=true", "requested_model": "claude-haiku-4-5", "stream": True, "rule": "easy",
        "endpoint": "local", "target_protocol": "openai", "model_used": "gemma", "outcome": "translated",
        "status": 200, "latency_ms": 250.5, "ttfb_ms": 40.25, "usage_protocol": None, "usage_reported": None,
        "usage_input": None, "usage_output": None, "usage_cache_read": None, "usage_cache_write": None,
        "usage_reasoning": None, "usage_client": None, "error": None, "trace": trace, "owner": None, "attempts": None,
        **dict.fromkeys(SESSION_COLUMNS),  # no session known (who is talking: tests/cli/test_sessions.py)
        "instance": None, "via": "base_url",  # how it came in (issue 30): proxy | base_url
        "retry_of": None,  # not a retry of an earlier request (turn/retries.py)
        "prefix_hashes": None,  # per-block hashes of the prompt's prefix (ledger/prefix.py, issue 32)
    }


USAGE_CASES = [
    # (protocol, reported, expected columns input/output/cache_read/cache_write/reasoning)
    ("anthropic", {"input_tokens": 12, "output_tokens": 5, "cache_read_input_tokens": 100,
                   "cache_creation_input_tokens": 7}, (12, 5, 100, 7, None)),
    # OpenAI's prompt_tokens include the cached ones: stored as the upstream counted them
    ("openai", {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150,
                "prompt_tokens_details": {"cached_tokens": 100},
                "completion_tokens_details": {"reasoning_tokens": 9}}, (120, 30, 100, None, 9)),
    ("openai-responses", {"input_tokens": 50, "output_tokens": 4, "input_tokens_details": {"cached_tokens": 0}},
     (50, 4, 0, None, None)),
    # only what was reported: output alone stays output alone, input is NULL not 0
    ("anthropic", {"output_tokens": 15}, (None, 15, None, None, None)),
    ("openai", {}, (None, None, None, None, None)),
]


@pytest.mark.parametrize("protocol,reported,expected", USAGE_CASES)
def test_usage_is_stored_exactly_as_reported(make, protocol, reported, expected):
    with make() as led:
        start(led, "tk-u")
        led.update_turn("tk-u", usage_reported=reported, usage_protocol=protocol,
                        usage_client={"input_tokens": 20})
        t = led.get_turn("tk-u")
    assert t["usage_reported"] == reported
    assert t["usage_protocol"] == protocol
    assert (t["usage_input"], t["usage_output"], t["usage_cache_read"], t["usage_cache_write"],
            t["usage_reasoning"]) == expected
    assert t["usage_client"] == {"input_tokens": 20}


def test_no_usage_is_null_everywhere(make):
    with make() as led:
        start(led, "tk-n")
        led.update_turn("tk-n", usage_reported=None, usage_protocol=None, usage_client=None, status=200)
        t = led.get_turn("tk-n")
        st = led.stats()
    assert [t[k] for k in ("usage_reported", "usage_input", "usage_output", "usage_cache_read",
                           "usage_cache_write", "usage_reasoning", "usage_client")] == [None] * 7
    assert st["usage"] == {"by_counting": {}, "turns_reported": 0, "turns_none": 1}


def test_usage_protocol_given_earlier_is_used_for_the_fields(make):
    with make() as led:
        start(led, "tk-p")
        led.update_turn("tk-p", usage_protocol="openai")
        led.update_turn("tk-p", usage_reported={"prompt_tokens": 3})
        assert led.get_turn("tk-p")["usage_input"] == 3


def test_update_before_start_keeps_the_record(make):
    with make() as led:
        led.update_turn("tk-late", status=502, error="upstream down")
        start(led, "tk-late", at=42.0)
        t = led.get_turn("tk-late")
    assert (t["started_at"], t["status"], t["error"], t["client_protocol"]) == (42.0, 502, "upstream down", "anthropic")


def test_unknown_fields_are_ignored_with_a_warning(make, caplog):
    with make() as led:
        start(led, "tk-f")
        with caplog.at_level(logging.WARNING, logger="tokunseba.ledger"):
            led.update_turn("tk-f", status=200, colour="blue")
        assert led.get_turn("tk-f")["status"] == 200
    assert "unknown field 'colour'" in caplog.text


def test_events_keep_order_kind_and_data(make):
    with make() as led:
        start(led, "tk-e")
        led.event("tk-e", "routed", {"rule": "easy", "endpoint": "local"}, ts=1000.0)
        led.event("tk-e", "protocol_translated", {"from": "anthropic", "to": "openai", "dropped": ["/thinking"],
                                                  "plumbing": ["/stream_options/include_usage"], "converted": []}, ts=1000.0)
        led.event("tk-e", "completed", {"status": 200, "latency_ms": 12.5, "ttfb_ms": 3.0, "usage": None})
        led.event("tk-e", "something_new")
        evs = led.events("tk-e")
    assert [e["kind"] for e in evs] == ["routed", "protocol_translated", "completed", "something_new"]
    assert evs[1]["data"]["dropped"] == ["/thinking"]
    assert evs[2]["data"]["usage"] is None
    assert evs[3]["data"] is None
    assert evs[0]["ts"] == 1000.0 and evs[2]["ts"] > 1000.0


def test_bodies_are_stored_only_when_opted_in(make):
    body = b'{"model":"claude-haiku-4-5","messages":[]}'
    with make("a.db") as led:
        start(led, "tk-b")
        led.update_turn("tk-b", request_body=body, response_body="{}")
        t = led.get_turn("tk-b")
        assert "request_body" not in t and "response_body" not in t
    if make.backend == "sqlite":
        assert b"claude-haiku-4-5\",\"messages" not in raw_bytes(make.tmp_path / "a.db")
    with make("b.db", store_bodies=True) as led:
        start(led, "tk-b")
        led.update_turn("tk-b", request_body=body)
        led.update_turn("tk-b", response_body="{}")
        t = led.get_turn("tk-b")
    assert (t["request_body"], t["response_body"]) == (body, b"{}")


# ---------------------------------------------------------------- secrets

SECRETS = ["local-plain-secret", "sk-ant-api03-SECRETSECRET", "Bearer-SECRET-TOKEN-1", "COOKIE-SECRET-2", "AIzaSyD-SECRET-GOOGLE-KEY-123",
           "sess-SECRET-3", "sk-proj-SECRETSECRETSECRET42"]


def test_no_secret_ever_reaches_the_ledger(tmp_path):
    path = tmp_path / "l.db"
    with Ledger(path) as led:
        start(led, "tk-s", path="/v1beta/models/gemini-2.0-flash:generateContent?key=AIzaSyD-SECRET-GOOGLE-KEY-123&alt=sse",
              host="generativelanguage.googleapis.com", client_protocol="gemini")
        led.event("tk-s", "request_seen", {
            "headers": {"Authorization": "Bearer Bearer-SECRET-TOKEN-1", "x-api-key": "sk-ant-api03-SECRETSECRET",
                        "Cookie": "a=COOKIE-SECRET-2", "x-goog-api-key": "AIzaSyD-SECRET-GOOGLE-KEY-123",
                        "anthropic-auth-token": "sess-SECRET-3", "x-app": "cli", "content-type": "application/json"},
            "response_headers": [["Set-Cookie", "COOKIE-SECRET-2"], ["x-request-id", "req_1"]],
            "api_key": "sk-proj-SECRETSECRETSECRET42",
            "usage": {"input_tokens": 3, "cache_read_input_tokens": 1},
        })
        led.update_turn("tk-s", error="401: Incorrect API key provided: sk-proj-SECRETSECRETSECRET42",
                        trace=[{"route": "r", "reasons": ["header authorization is 'Bearer Bearer-SECRET-TOKEN-1'",
                                                          "header x-api-key is 'local-plain-secret', rule wants 'x'",
                                                          "header x-app is 'cli'"]}])
        led.event("tk-s", "upstream_error", {"status": 401, "message": "bad key sk-ant-api03-SECRETSECRET"})
        t = led.get_turn("tk-s")
        data = led.events("tk-s")[0]["data"]
    disk = raw_bytes(path)
    for s in SECRETS:
        assert s.encode() not in disk, s
    # what is not a secret is kept
    assert data["headers"]["x-app"] == "cli" and data["headers"]["content-type"] == "application/json"
    assert data["headers"]["Authorization"] == "<redacted>"
    assert data["response_headers"] == [["Set-Cookie", "<redacted>"], ["x-request-id", "req_1"]]
    assert data["usage"] == {"input_tokens": 3, "cache_read_input_tokens": 1}
    assert t["path"] == "/v1beta/models/gemini-2.0-flash:generateContent?key=<redacted>&alt=sse"
    assert t["error"] == "401: Incorrect API key provided: <redacted>"
    assert t["trace"][0]["reasons"] == ["header authorization is '<redacted>'",
                                        "header x-api-key is '<redacted>', rule wants 'x'", "header x-app is 'cli'"]


@pytest.mark.parametrize("text,scrubbed", [
    ("Authorization: Bearer abc.def", "Authorization: <redacted>"),
    ("proxy-authorization: Basic dXNlcjpwYXNz", "proxy-authorization: <redacted>"),
    ("x-api-key=foo&b=1", "x-api-key=<redacted>&b=1"),
    ("cookie is 'a=b; c=d'", "cookie is '<redacted>'"),
    ("api-key: sk-ant-xxxxxxxxxxxxx", "api-key: <redacted>"),
    ("GET /v1beta/models?key=AIza123&alt=sse", "GET /v1beta/models?key=<redacted>&alt=sse"),
    ("header x-app is 'cli'", "header x-app is 'cli'"),
    ("the cookie jar is full", "the cookie jar is full"),
])
def test_scrub_text(text, scrubbed):
    assert scrub(text) == scrubbed


def test_scrub_leaves_ordinary_text_alone():
    text = "task-management-system-alpha; a basic tokenizer; desk-lamp-with-a-very-long-name"
    assert scrub({"message": text, "max_tokens": 5, "tokens": 3}) == {"message": text, "max_tokens": 5, "tokens": 3}


# ---------------------------------------------------------------- writes never raise


def test_a_failing_write_is_logged_and_swallowed(tmp_path, caplog):
    path = tmp_path / "l.db"
    led = Ledger(path)
    start(led, "tk-x")
    other = sqlite3.connect(path)
    other.execute("DROP TABLE events")
    other.commit()
    with caplog.at_level(logging.WARNING, logger="tokunseba.ledger"):
        led.event("tk-x", "completed", {"status": 200})  # no such table: must not raise
        led.event("tk-x", "weird", {"value": object()})  # not JSON-encodable: must not raise
        led.update_turn("tk-x", trace=[object()])
    msgs = [r.getMessage() for r in caplog.records if r.name == "tokunseba.ledger"]
    assert any("event completed failed" in m and "no such table" in m for m in msgs)
    assert any("event weird failed" in m for m in msgs)
    assert any("update_turn failed" in m for m in msgs)
    led.update_turn("tk-x", status=200)  # the turns table still works
    assert led.get_turn("tk-x")["status"] == 200
    led.close()
    led.event("tk-x", "after_close")  # a closed ledger ignores writes


def test_a_locked_database_delays_a_write_only_briefly(tmp_path, caplog):
    path = tmp_path / "l.db"
    led = Ledger(path)
    start(led, "tk-l")
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    try:
        t0 = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="tokunseba.ledger"):
            led.update_turn("tk-l", status=200)
        waited = time.monotonic() - t0
    finally:
        other.execute("ROLLBACK")
    assert waited < 2.0
    assert "database is locked" in caplog.text
    led.update_turn("tk-l", status=201)
    assert led.get_turn("tk-l")["status"] == 201


def test_readonly_ledger_refuses_writes_quietly(tmp_path, caplog):
    Ledger(tmp_path / "l.db").close()
    ro = Ledger(tmp_path / "l.db", readonly=True)
    with caplog.at_level(logging.WARNING, logger="tokunseba.ledger"):
        start(ro, "tk-r")
    assert "readonly" in caplog.text
    assert ro.turns() == []


# ---------------------------------------------------------------- concurrency


def test_concurrent_writers_from_many_threads_lose_nothing(make, caplog):
    shared = make()
    own = [make() for _ in range(3)]  # separate connections, as a second process would have
    per_thread = 60

    def work(led: Ledger, tag: str) -> None:
        for i in range(per_thread):
            rid = f"tk-{tag}-{i}"
            start(led, rid, at=float(i))
            led.event(rid, "routed", {"i": i})
            led.update_turn(rid, status=200, usage_reported={"output_tokens": i}, usage_protocol="anthropic")
            led.event(rid, "completed", {"status": 200})

    threads = [threading.Thread(target=work, args=(shared, f"s{n}")) for n in range(5)]
    threads += [threading.Thread(target=work, args=(led, f"o{n}")) for n, led in enumerate(own)]
    with caplog.at_level(logging.WARNING, logger="tokunseba.ledger"):
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert caplog.records == []
    turns = shared.turns()
    assert len(turns) == 8 * per_thread
    assert all(t["status"] == 200 for t in turns)
    assert sum(t["usage_output"] for t in turns) == 8 * sum(range(per_thread))
    assert all([e["kind"] for e in shared.events(t["request_id"])] == ["routed", "completed"] for t in turns[:50])
    for led in [shared, *own]:
        led.close()


def test_wal_reader_reads_while_the_writer_writes(tmp_path):
    path = tmp_path / "l.db"
    writer = Ledger(path)
    start(writer, "tk-0")
    reader = Ledger(path, readonly=True)
    # a reader in the middle of a read transaction does not block the writer
    raw = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
    raw.execute("BEGIN")
    assert raw.execute("SELECT count(*) FROM turns").fetchone()[0] == 1
    t0 = time.monotonic()
    start(writer, "tk-1")
    assert time.monotonic() - t0 < 0.4
    assert raw.execute("SELECT count(*) FROM turns").fetchone()[0] == 1  # its snapshot
    raw.execute("COMMIT")
    assert raw.execute("SELECT count(*) FROM turns").fetchone()[0] == 2
    raw.close()

    done = threading.Event()

    def write() -> None:
        for i in range(2, 300):
            start(writer, f"tk-{i}", at=float(i))
        done.set()

    th = threading.Thread(target=write)
    th.start()
    seen = []
    while not done.is_set():
        seen.append(len(reader.turns()))
    th.join()
    seen.append(len(reader.turns()))
    assert seen == sorted(seen)  # never goes back, never errors
    assert seen[-1] == 300
    reader.close()
    writer.close()


# ---------------------------------------------------------------- reads


def test_turns_are_newest_first_with_since_and_limit(make):
    with make() as led:
        for i, at in enumerate([100.0, 300.0, 200.0, 300.0]):
            start(led, f"tk-{i}", at=at)
        assert [t["request_id"] for t in led.turns()] == ["tk-3", "tk-1", "tk-2", "tk-0"]
        assert [t["request_id"] for t in led.turns(limit=2)] == ["tk-3", "tk-1"]
        assert [t["request_id"] for t in led.turns(since=200.0)] == ["tk-3", "tk-1", "tk-2"]


def test_get_turn_by_prefix(make):
    with make() as led:
        for rid in ("tk-abc", "tk-abd", "tk-ab", "tk-xyz"):
            start(led, rid)
        assert led.get_turn("tk-x")["request_id"] == "tk-xyz"
        assert led.get_turn("tk-ab")["request_id"] == "tk-ab"  # an exact id wins over longer ones
        assert led.get_turn("  tk-abc ")["request_id"] == "tk-abc"
        with pytest.raises(LookupError, match=r"^request id prefix 'tk-a' is ambiguous: tk-ab.*$"):
            led.get_turn("tk-a")
        with pytest.raises(LookupError, match=r"^no turn with request id 'nope'$"):
            led.get_turn("nope")
        with pytest.raises(LookupError, match="empty request id"):
            led.get_turn("")
        with pytest.raises(LookupError, match="no turn"):
            led.get_turn("tk-%")  # LIKE wildcards are not wildcards here


def test_percentile_is_nearest_rank():
    vals = [float(v) for v in range(1, 21)]
    assert (percentile(vals, 50), percentile(vals, 95), percentile(vals, 100)) == (10.0, 19.0, 20.0)
    assert percentile([7.0], 95) == 7.0
    assert percentile([], 50) is None


def test_stats(make):
    with make() as led:
        # 1 old turn outside the window, 5 inside
        start(led, "old", at=10.0)
        led.update_turn("old", outcome="pass_through", status=200, latency_ms=999.0)
        start(led, "t1", at=100.0)
        led.update_turn("t1", rule="easy", endpoint="local", model_used="gemma", outcome="translated", status=200,
                        latency_ms=100.0, ttfb_ms=10.0, usage_protocol="openai",
                        usage_reported={"prompt_tokens": 120, "completion_tokens": 30,
                                        "prompt_tokens_details": {"cached_tokens": 100}})
        start(led, "t2", at=101.0)
        led.update_turn("t2", rule="easy", endpoint="local", model_used="gemma", outcome="translated", status=200,
                        latency_ms=300.0, ttfb_ms=30.0, usage_protocol="openai",
                        usage_reported={"completion_tokens": 5})
        start(led, "t3", at=102.0)
        led.update_turn("t3", outcome="pass_through", model_used="claude-haiku-4-5", status=200, latency_ms=200.0,
                        ttfb_ms=20.0, usage_protocol="anthropic",
                        usage_reported={"input_tokens": 7, "output_tokens": 2})
        start(led, "t4", at=103.0)
        led.update_turn("t4", rule="to-gemini", endpoint="gemini", outcome="refused", status=400,
                        error="no translator from anthropic to gemini")
        start(led, "t5", at=104.0)
        led.update_turn("t5", outcome="pass_through", model_used="claude-haiku-4-5", status=529, latency_ms=50.0)
        st = led.stats(since=100.0)
    assert {k: st[k] for k in ("turns", "translated", "refused", "errors", "pass_through", "retargeted",
                               "unfinished", "served")} == {
        "turns": 5, "translated": 2, "refused": 1, "errors": 1, "pass_through": 1, "retargeted": 0,
        "unfinished": 0, "served": 3}  # the classes add up to the turns; an error (a 529) is not served
    assert sum(st[k] for k in ("translated", "retargeted", "pass_through", "errors", "refused", "cancelled",
                               "interrupted", "unfinished")) == st["turns"]
    # most turns first; on a tie by name, "no route" last
    assert st["by_route"] == [
        {"route": "easy", "turns": 2, "translated": 2, "capped": 0, "refused": 0, "errors": 0, "cancelled": 0, "served": 2,
         "share": 0.6667, "cache_read": 100, "cache_write": None, "cache_read_share": 0.8333},  # as reported (issue 32)
        {"route": None, "turns": 2, "translated": 0, "capped": 0, "refused": 0, "errors": 1, "cancelled": 0, "served": 1,
         "share": 0.3333, "cache_read": None, "cache_write": None, "cache_read_share": None},
        {"route": "to-gemini", "turns": 1, "translated": 0, "capped": 0, "refused": 1, "errors": 0, "cancelled": 0, "served": 0,
         "share": 0.0, "cache_read": None, "cache_write": None, "cache_read_share": None},
    ]
    # a refused turn sent nothing to its endpoint: not counted there
    assert [(g["endpoint"], g["turns"], g["share"]) for g in st["by_endpoint"]] == [
        ("api.anthropic.com", 2, 0.3333), ("local", 2, 0.6667), (None, 1, 0.0)]
    assert [(g["model"], g["turns"]) for g in st["by_model"]] == [("claude-haiku-4-5", 2), ("gemma", 2), (None, 1)]
    assert st["usage"] == {
        "by_counting": {
            "openai": {"turns": 2, "input": 120, "output": 35, "cache_read": 100, "cache_write": None, "reasoning": None,
                       "cache_read_share": 0.8333},  # of the whole input (openai's includes the cache reads)
            "anthropic": {"turns": 1, "input": 7, "output": 2, "cache_read": None, "cache_write": None,
                          "reasoning": None, "cache_read_share": None},
        },
        "turns_reported": 3,
        "turns_none": 2,
    }
    assert st["timings"] == {"latency_ms": {"n": 4, "p50": 100.0, "p95": 300.0},
                             "ttfb_ms": {"n": 3, "p50": 20.0, "p95": 30.0}}


def test_stats_of_an_empty_window(make):
    with make() as led:
        st = led.stats(since=time.time())
    assert st["turns"] == 0 and st["by_route"] == [] and st["usage"]["by_counting"] == {}
    assert st["timings"]["latency_ms"] == {"n": 0, "p50": None, "p95": None}


# ---------------------------------------------------------------- durability

WRITER = """
import sys, time
from tokunseba.ledger import Ledger
led = Ledger(sys.argv[1])
i = 0
while True:
    rid = f"tk-kill-{i}"
    led.start_turn(rid, started_at=time.time(), client_protocol="anthropic", host="h", path="/v1/messages",
                   requested_model="m", stream=False)
    led.update_turn(rid, status=200, outcome="pass_through", usage_reported={"output_tokens": i},
                    usage_protocol="anthropic")
    led.event(rid, "completed", {"status": 200})
    print(rid, flush=True)
    i += 1
"""


def test_every_turn_reported_written_survives_sigkill(tmp_path):
    path = tmp_path / "l.db"
    env = dict(os.environ, PYTHONPATH=str(ADDON))
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, env=env, text=True)
    written: list[str] = []
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 30
        while len(written) < 300 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            written.append(line.strip())
        os.kill(proc.pid, signal.SIGKILL)  # mid-loop: no close, no checkpoint
        proc.wait(timeout=10)
        written += [ln.strip() for ln in proc.stdout.read().splitlines() if ln.strip()]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    assert len(written) >= 300
    with Ledger(path, readonly=True) as led:
        stored = {t["request_id"]: t for t in led.turns()}
        for rid in written:
            t = stored[rid]
            assert (t["status"], t["outcome"], t["usage_output"]) == (200, "pass_through", int(rid.rsplit("-", 1)[1]))
            assert [e["kind"] for e in led.events(rid)] == ["completed"]
