"""Issue 4's end-to-end proof: a real mitmdump with the addon, scripted upstreams, the
anthropic SDK making a translated turn, a refused turn and a pass-through turn; then the
CLI's stats / log / explain show exactly those three, with usage as the upstream reported
it, byte for byte, and null usage where the upstream reported none."""

from __future__ import annotations

import json
import subprocess

import anthropic
import pytest

from .conftest import BIN, start_test_proxy
from .test_proxy_e2e import CLIENT_KEY, chat_text_stream
from tests.support.upstream import Reply

pytestmark = pytest.mark.e2e

REPORTED = {"prompt_tokens": 2610, "completion_tokens": 58, "total_tokens": 2668,
            "prompt_tokens_details": {"cached_tokens": 2048}}


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "tokunseba"), *args], capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def own_proxy(upstreams, tmp_path_factory):
    m = start_test_proxy(upstreams, tmp_path_factory.mktemp("ledger-e2e"))
    yield m
    m.stop()


def test_ledger_and_cli_tell_the_story_of_three_turns(own_proxy, upstreams, monkeypatch):
    for k, v in own_proxy.client_env().items():
        monkeypatch.setenv(k, v)
    oai, ant = upstreams["oai"], upstreams["ant"]
    # 1. translated: anthropic SDK -> OpenAI-compatible upstream that reports usage
    oai.script(Reply.sse(chat_text_stream("chatcmpl-ledger-1")))
    with anthropic.Anthropic(api_key=CLIENT_KEY, max_retries=0).messages.with_streaming_response.create(
            model="claude-sonnet-4-5", max_tokens=50, stream=True,
            messages=[{"role": "user", "content": "hi"}]) as resp:
        translated_id = resp.headers["x-tokunseba-request-id"]
        for _ in resp.iter_lines():
            pass
    # 2. refused (on_refused: error) -> never reaches the gemini endpoint (a tool result with
    #    no call in the history: Gemini needs the call's name)
    with pytest.raises(anthropic.BadRequestError) as ei:
        anthropic.Anthropic(api_key=CLIENT_KEY, max_retries=0).messages.with_raw_response.create(
            model="error-model", max_tokens=5,
            messages=[{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_x", "content": "4"}]}])
    refused_id = ei.value.response.headers["x-tokunseba-request-id"]
    # 3. pass-through: no rule matches; the upstream reports no usage at all
    ant.script(Reply.json({"id": "msg_pt", "type": "message", "role": "assistant", "model": "m",
                           "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn",
                           "stop_sequence": None}))
    raw = anthropic.Anthropic(api_key=CLIENT_KEY, max_retries=0, base_url=ant.url).messages.with_raw_response.create(
        model="pass-me", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
    passed_id = raw.headers["x-tokunseba-request-id"]
    ledger = str(own_proxy.ledger)

    log = json.loads(cli("log", "--ledger", ledger, "--json").stdout)
    assert [t["request_id"] for t in log] == [passed_id, refused_id, translated_id]  # newest first
    by_id = {t["request_id"]: t for t in log}
    assert by_id[translated_id]["outcome"] == "translated" and by_id[translated_id]["endpoint"] == "oai"
    assert by_id[translated_id]["usage_reported"] == REPORTED  # exactly as the upstream said
    assert by_id[translated_id]["usage_input"] == 2610 and by_id[translated_id]["usage_cache_read"] == 2048
    assert by_id[translated_id]["usage_client"]["input_tokens"] == 2610 - 2048
    assert by_id[refused_id]["outcome"] == "refused" and by_id[refused_id]["usage_reported"] is None
    assert by_id[passed_id]["outcome"] == "pass_through" and by_id[passed_id]["usage_reported"] is None
    assert by_id[passed_id]["usage_input"] is None and by_id[passed_id]["usage_output"] is None

    stats = json.loads(cli("stats", "--ledger", ledger, "--since", "1h", "--json").stdout)
    text = json.dumps(stats)
    assert stats["turns"] == 3 and stats["translated"] == 1 and stats["refused"] == 1
    assert "2610" in text and "2048" in text  # usage sums as reported

    ex = cli("explain", translated_id[:12], "--ledger", ledger, "--json")
    assert ex.returncode == 0, ex.stderr
    story = json.loads(ex.stdout)
    assert story["turn"]["request_id"] == translated_id and story["turn"]["usage_reported"] == REPORTED
    kinds = [e["kind"] for e in story["events"]]
    assert "routed" in kinds and "protocol_translated" in kinds and "completed" in kinds
    refused = json.loads(cli("explain", refused_id, "--ledger", ledger, "--json").stdout)
    assert [e["kind"] for e in refused["events"]] == ["route_refused", "completed"]
    assert refused["turn"]["outcome"] == "refused" and refused["turn"]["endpoint"] == "gem"
    bad = cli("explain", "tk-nonexistent", "--ledger", ledger)
    assert bad.returncode == 1 and len(bad.stderr.strip().splitlines()) == 1
    assert oai.requests and upstreams["gem"].requests == []


def test_ledger_bodies_are_opt_in_and_hold_no_keys(upstreams, tmp_path, monkeypatch):
    """With tokunseba_ledger_bodies (tokunseba run --ledger-bodies) the ledger keeps the
    client's request and the reply the client got; keys live in headers, never stored."""
    m = start_test_proxy(upstreams, tmp_path, "--set", "tokunseba_ledger_bodies=true")
    try:
        for k, v in m.client_env().items():
            monkeypatch.setenv(k, v)
        upstreams["oai"].script(Reply.sse(chat_text_stream("chatcmpl-bodies")))
        with anthropic.Anthropic(api_key=CLIENT_KEY, max_retries=0).messages.with_streaming_response.create(
                model="claude-sonnet-4-5", max_tokens=50, stream=True,
                messages=[{"role": "user", "content": "remember-this-text"}]) as resp:
            rid = resp.headers["x-tokunseba-request-id"]
            got = b"".join(resp.iter_bytes())
    finally:
        m.stop()
    import sqlite3

    con = sqlite3.connect(m.ledger)
    req, rep = con.execute("SELECT request_body, response_body FROM bodies WHERE request_id = ?", (rid,)).fetchone()
    con.close()
    req = bytes(req) if not isinstance(req, str) else req.encode()
    rep = bytes(rep) if not isinstance(rep, str) else rep.encode()
    assert b"remember-this-text" in req and rep == got and b"event: message_stop" in rep
    for f in m.ledger.parent.glob("ledger.db*"):  # the database, its WAL and shared memory
        assert CLIENT_KEY.encode() not in f.read_bytes()
