"""`explain` (cli/explain.py): a translated, refused and failed turn in whole, --json structure,
stored bodies, the reply side of a translation, the login the client used, one-line errors, and a
turn's cost by part with the source of its price."""

from __future__ import annotations

import pytest

from tokunseba import jsonc
from tokunseba.ledger import Ledger
from tokunseba.pricing import library_version

from tests.support.prices import cc_session, cli, no_env_rules, written
from tests.support.read_story import expected, run, scrub, story, T1_TRACE


def test_explain_names_the_price_source(capsys, tmp_path, no_env_rules):
    cc_session(tmp_path / "l.db")
    out = cli(capsys, "explain", "tk-main", "--ledger", str(tmp_path / "l.db"))
    (cost,) = [ln for ln in out.splitlines() if ln.startswith("cost ")]
    assert " = input $" in cost and " + cache read $" in cost and " + cache write $" in cost and " + output $" in cost
    assert f"price        genai-prices {library_version()} (anthropic claude-sonnet-4-5): $3/input MTok" in out
    prices = written(tmp_path / "prices.yaml", "prices:\n  anthropic:claude-sonnet-*: {input: 1, output: 1}\n")
    out = cli(capsys, "explain", "tk-main", "--ledger", str(tmp_path / "l.db"), "--prices", str(prices))
    assert f"price        your table: {prices} line 2" in out
    assert "not priced (no price in your row): cache read 23890, cache write 1536" in out
    out = cli(capsys, "explain", "tk-bg", "--ledger", str(tmp_path / "l.db"))
    assert "cost         $0\nprice        local: 0\n" in out


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


def test_explain_without_a_ledger(capsys, tmp_path):
    rc, out, err = run(capsys, "explain", "tk-1", "--ledger", str(tmp_path / "none.db"))
    assert (rc, out, err) == (1, "", f"error: no ledger at {tmp_path / 'none.db'} yet: run the proxy first\n")


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
