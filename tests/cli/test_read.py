"""The read commands (models · stats · explain · log): whole human output with timestamps
scrubbed, --json structure, one-line errors with their exit codes, and `models --probe`
against real HTTP servers on loopback."""

from __future__ import annotations

import http.server
import re
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from tokunseba import jsonc
from tokunseba.cli.main import main
from tokunseba.cli.common import parse_since
from tokunseba.pricing import library_version
from tokunseba.ledger import Ledger
from tokunseba.protocols.anthropic import ANTHROPIC_VERSION

TIME = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def scrub(text: str, *paths: Path | str) -> str:
    """Timestamps -> a placeholder of the same width (keeps the alignment); paths -> names."""
    text = TIME.sub("YYYY-MM-DD hh:mm:ss", text)
    for p in paths:
        text = text.replace(str(p), "<PATH>")
    return text


def expected(s: str) -> str:
    return textwrap.dedent(s).lstrip("\n")


# ---------------------------------------------------------------- the story in the ledger

T1_TRACE = [
    {"route": "codex-local", "matched": False, "reasons": ["client 'anthropic' is not openai-responses"],
     "refused": None, "unreachable": False},
    {"route": "easy-turns", "matched": True,
     "reasons": ["client 'anthropic' is anthropic", "model 'claude-haiku-4-5' matches '*haiku*'",
                 "tools: request declares no tools, as the rule wants"],
     "refused": None, "unreachable": False},
]


def write_story(path: Path, now: float) -> None:
    """Four turns in the last hour (translated, passed through, refused, upstream error),
    one ten days old. Written through the same interface the proxy uses."""
    led = Ledger(path)
    t = now - 600
    led.start_turn("tk-0a1b2c3d", started_at=t, client_protocol="anthropic", host="api.anthropic.com",
                   path="/v1/messages?beta=true", requested_model="claude-haiku-4-5", stream=True)
    led.update_turn("tk-0a1b2c3d", rule="easy-turns", endpoint="local", target_protocol="openai",
                    model_used="gemma-3-270m", outcome="translated", trace=T1_TRACE)
    led.event("tk-0a1b2c3d", "routed", {"decision": "route", "rule": "easy-turns", "endpoint": "local",
                                        "url": "http://127.0.0.1:8080/v1"}, ts=t)
    led.event("tk-0a1b2c3d", "protocol_translated", {
        "from": "anthropic", "to": "openai", "dropped": ["thinking", "metadata.user_id"],
        "plumbing": ["stream_options.include_usage"], "converted": ["system -> messages[0]"], "warnings": []}, ts=t)
    led.update_turn("tk-0a1b2c3d", status=200, latency_ms=250.0, ttfb_ms=40.0, usage_protocol="openai",
                    usage_reported={"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150,
                                    "prompt_tokens_details": {"cached_tokens": 100}},
                    usage_client={"input_tokens": 20, "cache_read_input_tokens": 100, "output_tokens": 30})
    led.event("tk-0a1b2c3d", "completed", {"status": 200, "latency_ms": 250.0, "ttfb_ms": 40.0,
                                           "usage": {"prompt_tokens": 120, "completion_tokens": 30}}, ts=t + 0.25)

    t = now - 500
    led.start_turn("tk-0a9f8e7d", started_at=t, client_protocol="openai", host="api.openai.com",
                   path="/v1/chat/completions", requested_model="gpt-4o-mini", stream=False)
    led.update_turn("tk-0a9f8e7d", outcome="pass_through", model_used="gpt-4o-mini", trace=[
        {"route": "easy-turns", "matched": False, "reasons": ["client 'openai' is not anthropic"],
         "refused": None, "unreachable": False}])
    led.event("tk-0a9f8e7d", "routed", {"decision": "pass", "reason": "no route matched"}, ts=t)
    led.update_turn("tk-0a9f8e7d", status=200, latency_ms=100.0, ttfb_ms=100.0, usage_protocol="openai",
                    usage_reported={"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16})

    t = now - 400
    led.start_turn("tk-7c6d5e4f", started_at=t, client_protocol="anthropic", host="api.anthropic.com",
                   path="/v1/messages", requested_model="claude-sonnet-4-5", stream=True)
    led.update_turn("tk-7c6d5e4f", rule="to-gemini", endpoint="gemini", target_protocol="gemini", outcome="refused",
                    status=400, latency_ms=0.5, usage_reported=None,
                    error="route to-gemini refused: no translator from anthropic to gemini", trace=[
                        {"route": "to-gemini", "matched": True, "reasons": ["model 'claude-sonnet-4-5' matches '*sonnet*'"],
                         "refused": "no translator from anthropic to gemini", "unreachable": False}])
    led.event("tk-7c6d5e4f", "route_refused", {"rule": "to-gemini", "target": "gemini",
                                               "reason": "no translator from anthropic to gemini"}, ts=t)

    t = now - 300
    led.start_turn("tk-8d9e0f1a", started_at=t, client_protocol="anthropic", host="api.anthropic.com",
                   path="/v1/messages", requested_model="claude-opus-4-1", stream=True)
    led.update_turn("tk-8d9e0f1a", outcome="pass_through", model_used="claude-opus-4-1", trace=[])
    led.event("tk-8d9e0f1a", "upstream_error", {"status": 529, "message": "Overloaded"}, ts=t + 0.3)
    led.update_turn("tk-8d9e0f1a", status=529, latency_ms=300.0, ttfb_ms=300.0, usage_reported=None,
                    error="upstream 529: Overloaded")
    led.event("tk-8d9e0f1a", "completed", {"status": 529, "latency_ms": 300.0, "ttfb_ms": 300.0, "usage": None},
              ts=t + 0.3)

    t = now - 10 * 86400
    led.start_turn("tk-01dd01dd", started_at=t, client_protocol="anthropic", host="api.anthropic.com",
                   path="/v1/messages", requested_model="claude-haiku-4-5", stream=False)
    led.update_turn("tk-01dd01dd", outcome="pass_through", model_used="claude-haiku-4-5", status=200,
                    latency_ms=900.0, ttfb_ms=900.0, usage_protocol="anthropic",
                    usage_reported={"input_tokens": 5, "output_tokens": 1})
    led.close()


@pytest.fixture
def story(tmp_path) -> Path:
    path = tmp_path / "story.db"
    write_story(path, time.time())
    return path


# ---------------------------------------------------------------- log


def test_log_lists_turns_newest_first(capsys, story):
    rc, out, err = run(capsys, "log", "--ledger", str(story))
    assert (rc, err) == (0, "")
    assert scrub(out) == expected("""
        TIME                 REQUEST ID   CLIENT            MODEL                            ROUTE                         OUTCOME       STATUS  LATENCY  COST       ERROR
        YYYY-MM-DD hh:mm:ss  tk-8d9e0f1a  anthropic client  claude-opus-4-1                  no route → api.anthropic.com  error            529  0.30 s   -          upstream 529: Overloaded
        YYYY-MM-DD hh:mm:ss  tk-7c6d5e4f  anthropic client  claude-sonnet-4-5                to-gemini → gemini            refused          400  0.00 s   -          route to-gemini refused: no translator from anthropic to gemini
        YYYY-MM-DD hh:mm:ss  tk-0a9f8e7d  openai client     gpt-4o-mini                      no route → api.openai.com     pass-through     200  0.10 s   $0.000004
        YYYY-MM-DD hh:mm:ss  tk-0a1b2c3d  anthropic client  claude-haiku-4-5 → gemma-3-270m  easy-turns → local            translated       200  0.25 s   $0 local
        YYYY-MM-DD hh:mm:ss  tk-01dd01dd  anthropic client  claude-haiku-4-5                 no route → api.anthropic.com  pass-through     200  0.90 s   $0.000010
    """)


def test_log_limit_and_json(capsys, story):
    rc, out, _ = run(capsys, "log", "--ledger", str(story), "--limit", "2", "--json")
    assert rc == 0
    turns = jsonc.loads(out)
    assert [t["request_id"] for t in turns] == ["tk-8d9e0f1a", "tk-7c6d5e4f"]
    assert set(turns[0]) >= {"request_id", "started_at", "client_protocol", "host", "path", "requested_model",
                             "rule", "endpoint", "model_used", "outcome", "status", "latency_ms", "ttfb_ms",
                             "usage_reported", "usage_input", "error"}
    assert turns[0]["status"] == 529 and isinstance(turns[0]["started_at"], float)
    rc, out, _ = run(capsys, "log", "--ledger", str(story), "--limit", "1")
    assert len(out.splitlines()) == 3 and "tk-8d9e0f1a" in out
    assert out.splitlines()[-1] == "1 of 5 shown, newest first (--limit N shows more)"


@pytest.mark.parametrize("bad", ["0", "-3", "ten", "1.5"])
def test_log_bad_limit_is_one_line(capsys, story, bad):
    rc, out, err = run(capsys, "log", "--ledger", str(story), "--limit", bad)
    assert (rc, out) == (2, "")
    assert err == f"error: --limit: expected a positive integer, got {bad!r}\n"


def test_log_limit_up_to_the_largest_sqlite_integer(capsys, story):
    rc, out, err = run(capsys, "log", "--ledger", str(story), "--limit", str(2**63 - 1), "--json")
    assert (rc, err, len(jsonc.loads(out))) == (0, "", 5)
    for big in (str(2**63), "100000000000000000000000"):
        rc, out, err = run(capsys, "log", "--ledger", str(story), "--limit", big)
        assert (rc, out, err) == (2, "", f"error: --limit: {big} is too large (at most {2**63 - 1})\n")


def test_log_and_stats_without_a_ledger_say_so_in_one_line(capsys, tmp_path, _tokunseba_home):
    missing = tmp_path / "none.db"
    rc, out, err = run(capsys, "log", "--ledger", str(missing))
    assert (rc, out, err) == (0, f"no ledger at {missing} yet: run the proxy first\n", "")
    rc, out, err = run(capsys, "stats")  # the default ledger under TOKUNSEBA_HOME
    assert (rc, out, err) == (0, f"no ledger at {_tokunseba_home / 'ledger.db'} yet: run the proxy first\n", "")
    rc, out, err = run(capsys, "log", "--ledger", str(missing), "--json")
    assert (rc, jsonc.loads(out)) == (0, [])
    assert err == f"no ledger at {missing} yet: run the proxy first\n"
    rc, out, _ = run(capsys, "stats", "--ledger", str(missing), "--json")
    assert rc == 0 and jsonc.loads(out)["turns"] == 0
    assert not missing.exists()  # reading never creates a ledger


def test_an_empty_ledger(capsys, tmp_path):
    Ledger(tmp_path / "l.db").close()
    rc, out, _ = run(capsys, "log", "--ledger", str(tmp_path / "l.db"))
    assert (rc, out) == (0, f"no turns recorded yet in {tmp_path / 'l.db'}\n")
    rc, out, _ = run(capsys, "stats", "--ledger", str(tmp_path / "l.db"))
    assert (rc, out) == (0, "window: all time\nno turns in this window\n")


def test_a_file_that_is_not_a_ledger_is_one_line(capsys, tmp_path):
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not sqlite at all" * 200)
    for cmd in (["log"], ["stats"], ["explain", "tk-1"]):
        rc, out, err = run(capsys, *cmd, "--ledger", str(junk))
        assert (rc, out) == (1, "")
        assert err.startswith(f"error: cannot open the ledger {junk}: ") and err.count("\n") == 1


# ---------------------------------------------------------------- stats


def test_stats_whole_output(capsys, story):
    rc, out, err = run(capsys, "stats", "--ledger", str(story))
    assert (rc, err) == (0, "")
    assert out == expected("""
        window: all time
        turns 5 = served 3 (translated 1  ·  retargeted 0  ·  pass-through 2) + errors 1 + refused 1

        ROUTE       TURNS  TRANSLATED  REFUSED  ERRORS  CANCELLED  SHARE SERVED  CACHE READ  CACHE WRITE  INPUT FROM CACHE
        (no route)      3           0        0       1          0         66.7%           -            -                 -
        easy-turns      1           1        0       0          0         33.3%         100            -             83.3%
        to-gemini       1           0        1       0          0          0.0%           -            -                 -

        ENDPOINT           TURNS  TRANSLATED  REFUSED  ERRORS  CANCELLED  SHARE SERVED  CACHE READ  CACHE WRITE  INPUT FROM CACHE
        api.anthropic.com      2           0        0       1          0         33.3%           -            -                 -
        api.openai.com         1           0        0       0          0         33.3%           -            -                 -
        local                  1           1        0       0          0         33.3%         100            -             83.3%
        (nothing sent)         1           0        1       0          0          0.0%           -            -                 -

        MODEL             TURNS  TRANSLATED  REFUSED  ERRORS  CANCELLED  SHARE SERVED  CACHE READ  CACHE WRITE  INPUT FROM CACHE
        claude-haiku-4-5      1           0        0       0          0         33.3%           -            -                 -
        claude-opus-4-1       1           0        0       1          0          0.0%           -            -                 -
        gemma-3-270m          1           1        0       0          0         33.3%         100            -             83.3%
        gpt-4o-mini           1           0        0       0          0         33.3%           -            -                 -
        (unknown)             1           0        1       0          0          0.0%           -            -                 -

        usage as reported (openai input includes cache reads; anthropic input does not):
          COUNTING   TURNS  INPUT  OUTPUT  CACHE READ  CACHE WRITE  REASONING  INPUT FROM CACHE
          openai         2    132      34         100            -          -             75.8%
          anthropic      1      5       1           -            -          -                 -
          turns that reported usage: 3; reported none: 2

        TIMING      N       P50       P95
        latency     5  250.0 ms  900.0 ms
        first byte  4  100.0 ms  900.0 ms

        cost of the usage each endpoint reported (USD; a model nobody prices is counted under NO PRICE, never estimated):
          ENDPOINT   MODEL              TURNS  PRICED       COST  NO USAGE  NO PRICE  UNPRICED TOKENS  PRICE
          anthropic  claude-haiku-4-5       1       1  $0.000010         0         0  -                genai-prices 0.2.3 (anthropic claude-haiku-4-5)
          openai     gpt-4o-mini            1       1  $0.000004         0         0  -                genai-prices 0.2.3 (openai gpt-4o-mini)
          anthropic  claude-opus-4-1        1       0          -         1         0  -                -
          gemini     claude-sonnet-4-5      1       0          -         1         0  -                -
          local      gemma-3-270m           1       1  $0.000000         0         0  -                local: 0
          turns served: $0.000014

        turns served away from the provider the client addressed: 1; with that provider's own usage (a shadow or replay to it): 0
    """.replace("genai-prices 0.2.3", f"genai-prices {library_version()}"))


def test_stats_since_a_window(capsys, story):
    rc, out, _ = run(capsys, "stats", "--ledger", str(story), "--since", "24h")
    assert rc == 0
    lines = scrub(out).splitlines()
    assert lines[:2] == ["window: since YYYY-MM-DD hh:mm:ss (24h)",
                         "turns 4 = served 2 (translated 1  ·  retargeted 0  ·  pass-through 1) + errors 1 + refused 1"]
    usage = lines[lines.index("usage as reported (openai input includes cache reads; anthropic input does not):"):]
    assert not any(u.startswith("  anthropic") for u in usage[:usage.index("  turns that reported usage: 2; reported none: 2")])  # the only anthropic-counted usage is ten days old
    assert "  turns that reported usage: 2; reported none: 2" in lines
    rc, out, _ = run(capsys, "stats", "--ledger", str(story), "--since", "2m")
    assert out.splitlines()[1] == "no turns in this window"


def test_stats_json_structure(capsys, story):
    rc, out, _ = run(capsys, "stats", "--ledger", str(story), "--since", "7d", "--json")
    assert rc == 0
    st = jsonc.loads(out)
    assert abs(st["since"] - (time.time() - 7 * 86400)) < 60
    assert {k: st[k] for k in ("turns", "translated", "refused", "errors", "pass_through", "served")} == {
        "turns": 4, "translated": 1, "refused": 1, "errors": 1, "pass_through": 1, "served": 2}  # errors are not served
    assert st["by_route"][0] == {"route": None, "turns": 2, "translated": 0, "capped": 0, "refused": 0, "errors": 1,
                                  "cancelled": 0,
                                  "served": 1, "share": 0.5, "cache_read": None, "cache_write": None,
                                  "cache_read_share": None}  # no cache read reported: absent, never 0
    assert st["usage"] == {"by_counting": {"openai": {"turns": 2, "input": 132, "output": 34, "cache_read": 100,
                                                      "cache_write": None, "reasoning": None,
                                                      "cache_read_share": 0.7576}},
                           "turns_reported": 2, "turns_none": 2}
    assert st["timings"]["ttfb_ms"] == {"n": 3, "p50": 100.0, "p95": 300.0}


@pytest.mark.parametrize("bad,why", [
    ("yesterday", "expected a duration (30m, 24h, 7d) or a date (2026-12-01, 2026-12-01T08:00), got 'yesterday'"),
    ("0h", "the duration must be positive, got '0h'"),
    ("24x", "expected a duration (30m, 24h, 7d) or a date (2026-12-01, 2026-12-01T08:00), got '24x'"),
    ("2026-13-01", "expected a duration (30m, 24h, 7d) or a date (2026-12-01, 2026-12-01T08:00), got '2026-13-01'"),
    ("99999999999d", "'99999999999d' is out of the range of dates this system can handle"),
    ("9" * 400 + "w", f"'{'9' * 400}w' is out of the range of dates this system can handle"),
])
def test_stats_bad_since_is_one_line(capsys, story, bad, why):
    rc, out, err = run(capsys, "stats", "--ledger", str(story), "--since", bad)
    assert (rc, out, err) == (2, "", f"error: --since: {why}\n")


def test_parse_since():
    now = 1_000_000.0
    assert parse_since("30m", now) == now - 1800
    assert parse_since("24h", now) == now - 86400
    assert parse_since("7d", now) == now - 7 * 86400
    assert parse_since("1.5h", now) == now - 5400
    assert parse_since("2026-12-01T10:00:00+00:00") == 1796119200.0
    assert parse_since("2026-12-01T12:00:00+02:00") == 1796119200.0
    local_midnight = time.mktime((2026, 12, 1, 0, 0, 0, 0, 0, -1))
    assert parse_since("2026-12-01") == local_midnight
    later = 1_800_000_000.0  # 2027
    assert parse_since("700000d", later) == later - 700000 * 86400  # about 1917 years back: still a date
    for far in ("100000000d", "1e3d", "inf", "9999999999999999999999999s"):
        with pytest.raises(ValueError):
            parse_since(far, now)


# ---------------------------------------------------------------- explain


def test_explain_a_translated_turn(capsys, story):
    rc, out, err = run(capsys, "explain", "tk-0a1", "--ledger", str(story))
    assert (rc, err) == (0, "")
    assert scrub(out) == expected("""
        request      tk-0a1b2c3d
        time         YYYY-MM-DD hh:mm:ss
        client       anthropic · api.anthropic.com/v1/messages?beta=true · stream
        requested    claude-haiku-4-5

        rules tried
          1. codex-local: no match
               client 'anthropic' is not openai-responses
          2. easy-turns: matched
               client 'anthropic' is anthropic
               model 'claude-haiku-4-5' matches '*haiku*'
               tools: request declares no tools, as the rule wants

        decision     easy-turns → local (openai) · translated · model gemma-3-270m
        translation  anthropic → openai
          dropped    thinking
                     metadata.user_id
          added      stream_options.include_usage
          converted  system -> messages[0]

        upstream     status 200
        usage        as reported (openai counting): input 120 · output 30 · cache read 100  (not reported: cache write, reasoning)
                     raw {"prompt_tokens":120,"completion_tokens":30,"total_tokens":150,"prompt_tokens_details":{"cached_tokens":100}}
        client view  {"input_tokens":20,"cache_read_input_tokens":100,"output_tokens":30}
        cost         $0
        price        local: 0
        timings      latency 250.0 ms · first byte 40.0 ms
        errors       none

        events
          AT         KIND                 DATA
          +0.0 ms    routed               {"decision":"route","rule":"easy-turns","endpoint":"local","url":"http://127.0.0.1:8080/v1"}
          +0.0 ms    protocol_translated  {"from":"anthropic","to":"openai","dropped":["thinking","metadata.user_id"],"plumbing":["stream_options.include_usage"],"converted":["system -> messages[0]"],"warnings":[]}
          +250.0 ms  completed            {"status":200,"latency_ms":250.0,"ttfb_ms":40.0,"usage":{"prompt_tokens":120,"completion_tokens":30}}

        cache        read 100 · 83.3% of the input read from cache (as reported)
    """)


def test_explain_a_refused_turn(capsys, story):
    rc, out, _ = run(capsys, "explain", "tk-7c6d5e4f", "--ledger", str(story))
    assert rc == 0
    assert scrub(out) == expected("""
        request      tk-7c6d5e4f
        time         YYYY-MM-DD hh:mm:ss
        client       anthropic · api.anthropic.com/v1/messages · stream
        requested    claude-sonnet-4-5

        rules tried
          1. to-gemini: matched, but refused: no translator from anthropic to gemini
               model 'claude-sonnet-4-5' matches '*sonnet*'

        decision     to-gemini → gemini (gemini) · refused
        translation  none
        refused      to-gemini → gemini: no translator from anthropic to gemini

        upstream     status 400
        usage        none reported
        timings      latency 0.5 ms · first byte -
        errors       route to-gemini refused: no translator from anthropic to gemini

        events
          AT       KIND           DATA
          +0.0 ms  route_refused  {"rule":"to-gemini","target":"gemini","reason":"no translator from anthropic to gemini"}
    """)


def test_explain_an_upstream_error(capsys, story):
    rc, out, _ = run(capsys, "explain", "tk-8d", "--ledger", str(story))
    assert rc == 0
    assert scrub(out) == expected("""
        request      tk-8d9e0f1a
        time         YYYY-MM-DD hh:mm:ss
        client       anthropic · api.anthropic.com/v1/messages · stream
        requested    claude-opus-4-1

        rules tried
          (none: no routes in the rules, or the turn was not routable)

        decision     no route → api.anthropic.com · error · model claude-opus-4-1
        translation  none (same protocol, body untouched)

        upstream     status 529
        usage        none reported
        timings      latency 300.0 ms · first byte 300.0 ms
        errors       upstream 529: Overloaded
                     upstream_error: {"status":529,"message":"Overloaded"}

        events
          AT         KIND            DATA
          +300.0 ms  upstream_error  {"status":529,"message":"Overloaded"}
          +300.0 ms  completed       {"status":529,"latency_ms":300.0,"ttfb_ms":300.0,"usage":null}
    """)


def test_explain_json_structure(capsys, story):
    rc, out, _ = run(capsys, "explain", "tk-0a1b2c3d", "--ledger", str(story), "--json")
    assert rc == 0
    doc = jsonc.loads(out)
    assert set(doc) == {"turn", "events", "shadows", "session", "cache", "cost"} and doc["shadows"] == []  # cache: issue 32
    assert doc["cost"] == {"usd": "0", "kind": "local", "source": "local: 0", "parts": {}, "unpriced_tokens": {}}
    t = doc["turn"]
    assert (t["request_id"], t["client_protocol"], t["rule"], t["endpoint"], t["outcome"]) == (
        "tk-0a1b2c3d", "anthropic", "easy-turns", "local", "translated")
    assert t["trace"] == T1_TRACE
    assert t["usage_reported"]["prompt_tokens_details"] == {"cached_tokens": 100}
    assert (t["usage_input"], t["usage_output"], t["usage_cache_read"], t["usage_cache_write"]) == (120, 30, 100, None)
    assert [e["kind"] for e in doc["events"]] == ["routed", "protocol_translated", "completed"]
    assert doc["events"][1]["data"]["dropped"] == ["thinking", "metadata.user_id"]


def test_explain_shows_stored_bodies(capsys, tmp_path):
    path = tmp_path / "b.db"
    with Ledger(path, store_bodies=True) as led:
        led.start_turn("tk-body", started_at=1.0, client_protocol="openai", host="h", path="/v1/chat/completions",
                       requested_model="m", stream=None)
        led.update_turn("tk-body", request_body=b'{"model":"m"}')
    rc, out, _ = run(capsys, "explain", "tk-body", "--ledger", str(path))
    assert "request body 13 characters stored (see --json)" in out
    rc, out, _ = run(capsys, "explain", "tk-body", "--ledger", str(path), "--json")
    assert jsonc.loads(out)["turn"]["request_body"] == '{"model":"m"}'


@pytest.mark.parametrize("rid,msg", [
    ("tk-0a", "request id prefix 'tk-0a' is ambiguous: tk-0a9f8e7d, tk-0a1b2c3d"),
    ("tk-ffff", "no turn with request id 'tk-ffff'"),
])
def test_explain_unknown_or_ambiguous_id_is_one_line(capsys, story, rid, msg):
    rc, out, err = run(capsys, "explain", rid, "--ledger", str(story))
    assert (rc, out, err) == (1, "", f"error: {msg}\n")


def test_explain_an_id_that_is_not_utf8_is_one_line(capsys, story):
    rc, out, err = run(capsys, "explain", "tk-\udcff", "--ledger", str(story))  # argv byte 0xff
    assert (rc, out, err) == (1, "", "error: no turn with request id 'tk-\\udcff'\n")


def test_a_timestamp_no_date_can_show_is_printed_as_a_number(capsys, tmp_path):
    path = tmp_path / "odd.db"
    with Ledger(path) as led:
        led.start_turn("tk-odd", started_at=1e20, client_protocol="openai", host="api.openai.com",
                       path="/v1/chat/completions", requested_model="gpt-4o", stream=False)
    rc, out, err = run(capsys, "log", "--ledger", str(path))
    assert (rc, err) == (0, "") and out.splitlines()[1].startswith("1e+20  tk-odd")


def test_explain_without_a_ledger(capsys, tmp_path):
    rc, out, err = run(capsys, "explain", "tk-1", "--ledger", str(tmp_path / "none.db"))
    assert (rc, out, err) == (1, "", f"error: no ledger at {tmp_path / 'none.db'} yet: run the proxy first\n")


def test_reads_while_a_proxy_holds_the_ledger_open(capsys, story):
    writer = Ledger(story)  # the proxy: open, writing
    writer.start_turn("tk-live", started_at=time.time(), client_protocol="openai", host="h", path="/p",
                      requested_model="m", stream=True)
    rc, out, _ = run(capsys, "log", "--ledger", str(story), "--limit", "1")
    assert rc == 0 and "tk-live" in out
    writer.update_turn("tk-live", status=200)
    rc, out, _ = run(capsys, "explain", "tk-live", "--ledger", str(story), "--json")
    assert jsonc.loads(out)["turn"]["status"] == 200
    writer.close()


def test_the_console_script_never_shows_a_traceback(tmp_path):
    """Through a real process: bad arguments and a missing ledger are one line each."""
    for argv, code, line in [
        (["stats", "--since", "soon"], 2, "error: --since: expected a duration"),
        (["explain", "abc"], 1, "error: no ledger at"),
        (["log", "--limit", "x"], 2, "error: --limit: expected a positive integer, got 'x'"),
    ]:
        p = subprocess.run([sys.executable, "-m", "tokunseba.cli", *argv, "--ledger", str(tmp_path / "x.db")],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == code, p.stderr
        assert p.stderr.startswith(line) and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr


@pytest.mark.parametrize("argv,line", [
    (["log", "--limit", "100000000000000000000000"], "error: --limit: 100000000000000000000000 is too large"),
    (["log", "--limit", "9" * 5000], "error: --limit: expected a positive integer"),
    (["stats", "--since", "99999999999d"], "error: --since: '99999999999d' is out of the range"),
    (["stats", "--since", "9" * 400 + "d"], "error: --since: '999"),
    (["stats", "--since", "99999-01-01"], "error: --since: expected a duration"),
    (["models", "--timeout", "1e400"], "error: --timeout: expected a positive number of seconds up to 3600"),
    (["models", "--timeout", "99999999999", "--probe"], "error: --timeout: expected a positive number"),
    (["models", "--timeout", "nan", "--probe"], "error: --timeout: expected a positive number"),
    (["models", "--timeout=-inf"], "error: --timeout: expected a positive number"),
])
def test_absurd_numbers_are_one_line_through_the_console_script(tmp_path, argv, line):
    """The installed `tokunseba` script, with a real ledger to read: no input reaches SQLite,
    the clock or a socket timeout unchecked (an OverflowError would be a traceback)."""
    path = tmp_path / "l.db"
    with Ledger(path) as led:
        led.start_turn("tk-1", started_at=time.time(), client_protocol="openai", host="api.openai.com",
                       path="/v1/chat/completions", requested_model="gpt-4o", stream=False)
    ledger = ["--ledger", str(path)] if argv[0] != "models" else []
    p = subprocess.run([str(Path(sys.executable).parent / "tokunseba"), *argv, *ledger],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2, p.stderr
    assert p.stdout == "" and "Traceback" not in p.stderr
    assert p.stderr.startswith(line) and p.stderr.count("\n") == 1, p.stderr


# ---------------------------------------------------------------- models

RULES = """\
endpoints:
  local:
    protocol: openai
    url: http://127.0.0.1:{port}/v1
    key_env: TK_TEST_LOCAL_KEY
    model: gemma-3-270m
  claude-proxy:
    protocol: anthropic
    url: http://127.0.0.1:{closed}/v1
routes:
  - name: easy-turns
    when:
      client: anthropic
      model: "*haiku*"
    to: local
    model: qwen3-0.6b
  - name: codex-to-local
    when:
      client: [openai-responses, openai]
    to: local
    model: gpt-oss-20b
    on_unreachable: error
  - name: all-to-gemini
    to: gemini
    on_refused: error
"""


def rules_file(tmp_path: Path, port: int = 8000, closed: int = 8001, text: str = RULES) -> Path:
    p = tmp_path / "rules.yaml"
    p.write_text(text.format(port=port, closed=closed))
    return p


def test_models_whole_output(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("TK_TEST_LOCAL_KEY", "sk-test-not-shown")
    for k in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(k, raising=False)
    rules = rules_file(tmp_path)
    rc, out, err = run(capsys, "models", "--rules", str(rules))
    assert (rc, err) == (0, "")
    assert "sk-test-not-shown" not in out
    assert scrub(out, rules) == expected("""
        rules: <PATH>
        unmatched: pass (turns no route takes: pass through to the host the client asked for)

        ENDPOINT      PROTOCOL   URL                                               MODELS IN RULES                        KEY                        TOKEN COUNTER           ACCEPTS
        anthropic     anthropic  https://api.anthropic.com/v1                      -                                      ANTHROPIC_API_KEY (unset)  Anthropic count_tokens  text, images, documents, server_tools (default)
        openai        openai     https://api.openai.com/v1                         -                                      OPENAI_API_KEY (unset)     none                    text, images, documents, server_tools (default)
        gemini        gemini     https://generativelanguage.googleapis.com/v1beta  -                                      GEMINI_API_KEY (unset)     Gemini countTokens      text, images, documents, server_tools (default)
        local         openai     http://127.0.0.1:8000/v1                          gemma-3-270m, qwen3-0.6b, gpt-oss-20b  TK_TEST_LOCAL_KEY (set)    none                    text (default)
        claude-proxy  anthropic  http://127.0.0.1:8001/v1                          -                                      -                          Anthropic count_tokens  text (default)

        Token counts routed to openai (OpenAI Chat Completions has no token counter); local (OpenAI Chat Completions has no token counter) are answered with an error naming the endpoint: a count is never estimated.

        CLIENT            ENDPOINT      RESULT
        anthropic         anthropic     retarget
        anthropic         openai        translated
        anthropic         gemini        translated
        anthropic         local         translated
        anthropic         claude-proxy  retarget
        openai            anthropic     translated
        openai            openai        retarget
        openai            gemini        translated
        openai            local         retarget
        openai            claude-proxy  translated
        openai-responses  anthropic     translated
        openai-responses  openai        translated
        openai-responses  gemini        translated
        openai-responses  local         translated
        openai-responses  claude-proxy  translated
        gemini            anthropic     translated
        gemini            openai        translated
        gemini            gemini        retarget
        gemini            local         translated
        gemini            claude-proxy  translated

        A translated turn is still refused, before anything is sent, when it carries what the target cannot take without inventing (`explain` names the JSON path):
          turns of openai clients, to another protocol: n above 1 (every other protocol returns exactly one choice)
          turns of openai-responses clients, to another protocol: built-in tool calls in the history (local shell, shell, apply_patch_call, computer, MCP server calls, ...), items or state stored by the provider (previous_response_id, item_reference, encrypted compaction); two tools that would share one flat name (freeform tools and namespaced tools travel as declared encodings)
          turns of gemini clients, to another protocol: cachedContent (content stored at Google); candidateCount above 1; a functionResponse that answers no call in the history; streamGenerateContent without alt=sse
          turns translated to anthropic endpoints: tool call ids that do not match ^[a-zA-Z0-9_-]+$ (ids are never rewritten)
          turns translated to openai endpoints: tool names longer than 64 characters (renaming would invent a tool)
          turns translated to openai-responses endpoints: tool names longer than 64 characters (renaming would invent a tool)
          turns translated to gemini endpoints: function names Gemini rejects (not [A-Za-z_][A-Za-z0-9_.:-]{0,63}); a tool result that answers no call in the history (Gemini needs the function's name); function-call arguments that are not a JSON object

        ROUTE           LINE  TO      MODEL        CLIENTS                                      RESULT  IF IT FAILS
        easy-turns        11  local   qwen3-0.6b   anthropic                                    ok      next route
        codex-to-local    17  local   gpt-oss-20b  openai-responses, openai                     ok      error to the client
        all-to-gemini     23  gemini  -            anthropic, openai, openai-responses, gemini  ok      next route
    """)


def test_models_json_lists_what_each_translated_pair_still_refuses_per_turn(capsys):
    rc, out, _ = run(capsys, "models", "--json")
    rep = jsonc.loads(out)
    by = {(p["client"], p["endpoint"]): p for p in rep["pairs"]}
    assert by[("anthropic", "anthropic")]["refused_per_turn"] == []  # a retarget carries everything
    gem = by[("openai-responses", "gemini")]["refused_per_turn"]
    assert any("freeform" in r for r in gem) and any("function names Gemini rejects" in r for r in gem)
    assert rep["refused_per_turn"]["anthropic"]["arriving"] and rep["refused_per_turn"]["anthropic"]["leaving"] == []


def test_models_without_rules_uses_the_builtins_and_the_env_rules(capsys, tmp_path, monkeypatch):
    rc, out, _ = run(capsys, "models", "--json")
    rep = jsonc.loads(out)
    assert rep["rules"] is None and rep["routes"] == []
    assert [e["name"] for e in rep["endpoints"]] == ["anthropic", "openai", "gemini"]
    assert len(rep["pairs"]) == 4 * 3
    monkeypatch.setenv("TOKUNSEBA_RULES", str(rules_file(tmp_path)))
    rc, out, _ = run(capsys, "models", "--json", "--endpoint", "local")
    rep = jsonc.loads(out)
    assert rep["rules"] == str(tmp_path / "rules.yaml")
    assert rep["endpoints"] == [{"name": "local", "protocol": "openai", "url": "http://127.0.0.1:8000/v1",
                                 "builtin": False, "key_env": "TK_TEST_LOCAL_KEY", "key_set": False,
                                 "models_in_rules": ["gemma-3-270m", "qwen3-0.6b", "gpt-oss-20b"],
                                 "count_tokens": "none", "counter": None,
                                 "no_counter_why": "OpenAI Chat Completions has no token counter",
                                 "accepts": ["text"], "accepts_said": False, "cache": "off",
                                 "context_tokens": None, "budgets": []}]
    assert [(p["client"], p["result"], p["reason"]) for p in rep["pairs"]] == [
        ("anthropic", "translated", None), ("openai", "retarget", None),
        ("openai-responses", "translated", None),
        ("gemini", "translated", None)]
    assert [r["name"] for r in rep["routes"]] == ["easy-turns", "codex-to-local"]
    assert rep["routes"][1]["refused"] == {}


def test_models_errors_are_one_line(capsys, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("routes:\n  - name: x\n    to: nowhere\n")
    rc, out, err = run(capsys, "models", "--rules", str(bad))
    assert (rc, out) == (1, "")
    assert err.startswith(f"error: {bad}:3: ") and "nowhere" in err and err.count("\n") == 1
    rc, out, err = run(capsys, "models", "--endpoint", "nope")
    assert (rc, err) == (2, "error: --endpoint: unknown endpoint 'nope' (known: anthropic, openai, gemini)\n")
    rc, out, err = run(capsys, "models", "--timeout", "-1")
    assert (rc, err) == (2, "error: --timeout: expected a positive number of seconds up to 3600, got '-1'\n")
    rc, out, err = run(capsys, "models", "--rules", str(tmp_path / "missing.yaml"))
    assert (rc, err) == (1, f"error: {tmp_path / 'missing.yaml'}: no such rules file\n")


# ---------------------------------------------------------------- models --probe, against real servers


class ModelsAPI(http.server.BaseHTTPRequestHandler):
    """A tiny models API: one answer per path prefix; records what it was sent."""

    seen: list[tuple[str, dict]] = []
    REPLIES = {
        "/v1/models": (200, "application/json",
                       b'{"object":"list","data":[{"id":"gemma-3-270m","object":"model"},{"id":"qwen3-0.6b"}]}'),
        "/locked/v1/models": (401, "application/json", b'{"type":"error","error":{"type":"authentication_error"}}'),
        "/html/v1/models": (200, "text/html", b"<html>hello</html>"),
        "/gem/v1beta/models": (200, "application/json", b'{"models":[{"name":"models/gemini-2.0-flash"}]}'),
    }

    def do_GET(self) -> None:  # noqa: N802
        ModelsAPI.seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
        if self.path.startswith("/slow/"):
            time.sleep(1.5)
        status, ctype, body = self.REPLIES.get(self.path, (404, "text/plain", b"no"))
        try:
            self.send_response(status)
            self.send_header("content-type", ctype)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # the slow path: the probe timed out and left
            pass

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def models_api():
    ModelsAPI.seen = []
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), ModelsAPI)
    srv.daemon_threads = True
    th = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    th.start()
    yield srv.server_address[1]
    srv.shutdown()
    srv.server_close()


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


PROBE_RULES = """\
endpoints:
  local:
    protocol: openai
    url: http://127.0.0.1:{port}/v1
    key_env: TK_TEST_LOCAL_KEY
    model: gemma-3-270m
  locked:
    protocol: anthropic
    url: http://127.0.0.1:{port}/locked/v1
    key_env: TK_TEST_LOCKED_KEY
  html:
    protocol: openai
    url: http://127.0.0.1:{port}/html/v1
  gem:
    protocol: gemini
    url: http://127.0.0.1:{port}/gem/v1beta
  root:                    # the server's root, not its API base
    protocol: openai
    url: http://127.0.0.1:{port}
  slow:
    protocol: openai
    url: http://127.0.0.1:{port}/slow/v1
  down:
    protocol: openai
    url: http://127.0.0.1:{closed}/v1
routes:
  - name: r
    to: local
    model: gpt-oss-20b
"""


def test_models_probe_shows_what_each_endpoint_serves(capsys, tmp_path, monkeypatch, models_api):
    closed = closed_port()
    rules = rules_file(tmp_path, models_api, closed, PROBE_RULES)
    monkeypatch.setenv("TK_TEST_LOCAL_KEY", "local-key-123")
    monkeypatch.delenv("TK_TEST_LOCKED_KEY", raising=False)
    for var in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY"):
        monkeypatch.setenv(var, f"http://127.0.0.1:{closed}")  # the probe must not use a proxy
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    names = ["local", "locked", "html", "gem", "root", "slow", "down"]
    rc, out, err = run(capsys, "models", "--rules", str(rules), "--probe", "--timeout", "0.5",
                       *(a for n in names for a in ("--endpoint", n)))
    assert (rc, err) == (1, "")  # some probed endpoints gave no models list
    # the slow endpoint answers after 1.5 s: --timeout cut it short (its row says so below; no
    # wall-clock bound here: this machine's load decides the elapsed time)
    probe = out[out.index("ENDPOINT  PROBED"):].replace(str(models_api), "PORT").replace(str(closed), "CLOSED")
    # compared cell by cell: the column widths follow the (random) port numbers
    assert [re.split(r"  +", line) for line in probe.splitlines()] == [
        ["ENDPOINT", "PROBED", "STATE", "MODELS SERVED"],
        ["local", "http://127.0.0.1:PORT/v1/models", "reachable, 2 models", "gemma-3-270m, qwen3-0.6b",
         "[not served: gpt-oss-20b]"],
        ["locked", "http://127.0.0.1:PORT/locked/v1/models",
         "reachable, but HTTP 401 (no key: set TK_TEST_LOCKED_KEY)", "-"],
        ["html", "http://127.0.0.1:PORT/html/v1/models", "reachable, but unexpected reply (not JSON)", "-"],
        ["gem", "http://127.0.0.1:PORT/gem/v1beta/models", "reachable, 1 model", "gemini-2.0-flash"],
        ["root", "http://127.0.0.1:PORT/models",
         "reachable, but HTTP 404 (no models API here: does the url end with the API's base, e.g. /v1?)", "-"],
        ["slow", "http://127.0.0.1:PORT/slow/v1/models", "unreachable: timed out after 0.5s", "-"],
        ["down", "http://127.0.0.1:CLOSED/v1/models", "unreachable: connection refused", "-"],
    ]
    assert out.index("ROUTE ") < out.index("ENDPOINT  PROBED")  # the probe comes after the rules' view
    # each endpoint got only its own key, in its protocol's header; the others got none
    sent = dict(ModelsAPI.seen)
    assert sent["/v1/models"]["authorization"] == "Bearer local-key-123"
    assert "authorization" not in sent["/locked/v1/models"] and "x-api-key" not in sent["/locked/v1/models"]
    assert sent["/locked/v1/models"]["anthropic-version"] == ANTHROPIC_VERSION == "2023-06-01"
    assert all("local-key-123" not in str(h) for p, h in ModelsAPI.seen if p != "/v1/models")


def test_models_probe_json(capsys, tmp_path, models_api):
    closed = closed_port()
    rules = rules_file(tmp_path, models_api, closed, PROBE_RULES)
    rc, out, _ = run(capsys, "models", "--rules", str(rules), "--probe", "--json", "--endpoint", "local",
                     "--endpoint", "down")
    rep = jsonc.loads(out)
    local, down = rep["endpoints"]
    assert rc == 1  # "down" gave no models list
    assert local["probe"] == {"url": f"http://127.0.0.1:{models_api}/v1/models", "reachable": True, "ok": True,
                              "status": 200, "models": ["gemma-3-270m", "qwen3-0.6b"], "error": None,
                              "not_served": ["gpt-oss-20b"]}
    assert down["probe"] == {"url": f"http://127.0.0.1:{closed}/v1/models", "reachable": False, "ok": False,
                             "status": None, "models": None, "error": "connection refused", "not_served": []}
    rc, out, _ = run(capsys, "models", "--rules", str(rules), "--probe", "--json", "--endpoint", "local")
    assert rc == 0  # every probed endpoint answered with its models: a script can rely on the status


def test_models_probe_asks_the_rules_own_endpoints_by_default(capsys, tmp_path, models_api):
    """With a rules file that declares endpoints, `--probe` alone asks those (the local server
    the demo names), not the built-in cloud ones, and says which it left out (issue 31)."""
    rules = tmp_path / "one.yaml"
    rules.write_text(f"endpoints:\n  local:\n    protocol: openai\n    url: http://127.0.0.1:{models_api}/v1\n"
                     "routes:\n  - name: r\n    when: {client: anthropic}\n    to: local\n")
    rc, out, _ = run(capsys, "models", "--rules", str(rules), "--probe", "--json")
    rep = jsonc.loads(out)
    assert rc == 0 and [e["name"] for e in rep["endpoints"] if "probe" in e] == ["local"]
    assert rep["not_probed"] == ["anthropic", "openai", "gemini"]
    rc, out, _ = run(capsys, "models", "--rules", str(rules), "--probe")
    assert rc == 0 and "not probed (built in): anthropic, openai, gemini; probe one with --endpoint NAME" in out
    assert "api.anthropic.com/v1/models" not in out


def test_explain_shows_the_reply_side_of_a_translation(capsys, tmp_path):
    path = tmp_path / "r.db"
    with Ledger(path) as led:
        led.start_turn("tk-r", started_at=100.0, client_protocol="openai", host="api.openai.com",
                       path="/v1/chat/completions", requested_model="gpt-4o", stream=False)
        led.update_turn("tk-r", rule="to-claude", endpoint="anthropic", target_protocol="anthropic",
                        model_used="claude-haiku-4-5", outcome="translated", status=200, latency_ms=80.0,
                        usage_protocol="anthropic", usage_reported={"input_tokens": 9, "output_tokens": 3},
                        usage_client={"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12})
        led.event("tk-r", "completed", {"status": 200, "stop_reason": "end_turn",
                                        "dropped": ["content[0] (thinking)"], "usage": {"input_tokens": 9}}, ts=100.08)
    rc, out, _ = run(capsys, "explain", "tk-r", "--ledger", str(path))
    lines = out.splitlines()
    i = lines.index("upstream     status 200")
    assert lines[i:i + 8] == [
        "upstream     status 200",
        "stop reason  end_turn",
        "reply drops  content[0] (thinking)",
        "usage        as reported (anthropic counting): input 9 · output 3  (not reported: cache read, cache write, reasoning)",
        '             raw {"input_tokens":9,"output_tokens":3}',
        'client view  {"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}',
        "cost         $0.000024 = input $0.000009 + output $0.000015",  # the library's $1 / $5 per MTok
        f"price        genai-prices {library_version()} (anthropic claude-haiku-4-5): $1/input MTok, $5/output MTok, "
        "$0.1/input cache read MTok, $1.25/input cache write MTok, $2/input 1h cache write MTok, $10/web searches K",
    ]
    assert "translation  no details recorded" in lines


def test_explain_names_the_refused_target_when_the_turn_row_has_none(capsys, tmp_path):
    path = tmp_path / "x.db"
    with Ledger(path) as led:
        led.start_turn("tk-x", started_at=1.0, client_protocol="anthropic", host="api.anthropic.com",
                       path="/v1/messages", requested_model="m", stream=False)
        led.update_turn("tk-x", rule="to-gem", outcome="refused", status=400)
        led.event("tk-x", "route_refused", {"rule": "to-gem", "target": "gem", "reason": "no translator"}, ts=1.0)
    rc, out, _ = run(capsys, "explain", "tk-x", "--ledger", str(path))
    assert "decision     to-gem → gem · refused · model m" not in out  # model_used was not recorded
    assert "decision     to-gem → gem · refused\n" in out


def test_explain_says_which_login_the_client_sent_the_turn_with(capsys, tmp_path):
    path = tmp_path / "l.db"
    with Ledger(path) as led:
        led.start_turn("tk-login", started_at=100.0, client_protocol="openai-responses", host="chatgpt.com",
                       path="/backend-api/codex/responses", requested_model="gpt-5-codex", stream=True)
        led.event("tk-login", "login", {"login": "chatgpt", "why": "a ChatGPT account's token"}, ts=100.0)
    rc, out, _ = run(capsys, "explain", "tk-login", "--ledger", str(path))
    lines = out.splitlines()
    assert rc == 0 and lines[lines.index("requested    gpt-5-codex") + 1] == "login        chatgpt (a ChatGPT account's token)"
