"""The ledger's write half (ledger/writes.py), on SQLite and PostgreSQL: every field of a turn row,
usage stored exactly as reported, events in order, bodies only when opted in, no secret ever
written, writes that never raise, concurrent writers losing nothing."""

from __future__ import annotations

import logging
import sqlite3
import threading

import pytest

from tokunseba.ledger import Ledger
from tokunseba.ledger.schema import SESSION_COLUMNS

from tests.support.ledgers import SECRETS, make, raw_bytes, start


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
