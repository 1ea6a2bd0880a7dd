"""Endpoints say what they take, end to end (issue 32): a real mitmdump with the addon on a free
loopback port, scripted loopback upstreams, the official anthropic SDK as the client.

Routes, in order: a text-only local Chat server (loopback: text only by default), a Chat
endpoint that says it reads images and documents, an Anthropic endpoint that says it runs
provider tools. A PDF turn and an image turn are refused by the first (nothing is sent to it)
and translated for the second; Claude Code's WebSearch turn (web_search its only tool) is
refused by both and goes byte for byte to the third. ``explain`` names each refusal and why.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import anthropic
import pytest

from .conftest import Mitmdump, ledger_settled
from tests.support.upstream import Reply, Upstream

CLIENT_KEY = "sk-ant-client-accepts-SECRET"
RULES = """\
endpoints:
  local: {{protocol: openai, url: "{local}/v1", max_tokens_field: max_tokens}}
  vision: {{protocol: openai, url: "{vision}/v1", accepts: [text, images, documents]}}
  searcher: {{protocol: anthropic, url: "{ant}/v1", accepts: [text, images, documents, server_tools]}}
routes:
  - name: to-local
    to: local
  - name: to-vision
    to: vision
  - name: to-searcher
    to: searcher
unmatched: refuse
"""
PDF = {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjQK"}}
PNG = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
CHAT_REPLY = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1767225600, "model": "m",
              "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "seen"}}],
              "usage": {"prompt_tokens": 50, "completion_tokens": 1, "total_tokens": 51}}
ANT_REPLY = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
             "content": [{"type": "text", "text": "searched"}], "stop_reason": "end_turn", "stop_sequence": None,
             "usage": {"input_tokens": 9, "output_tokens": 1, "server_tool_use": {"web_search_requests": 1}}}


@pytest.fixture(scope="module")
def ups():
    with Upstream() as local, Upstream() as vision, Upstream() as ant:
        yield {"local": local, "vision": vision, "ant": ant}


@pytest.fixture(scope="module")
def proxy(ups, tmp_path_factory):
    work = tmp_path_factory.mktemp("accepts-proxy")
    rules = work / "rules.yaml"
    rules.write_text(RULES.format(local=ups["local"].url, vision=ups["vision"].url, ant=ups["ant"].url))
    m = Mitmdump(work, rules)
    yield m
    m.stop()


@pytest.fixture
def client(proxy, monkeypatch):
    for k, v in proxy.client_env().items():
        monkeypatch.setenv(k, v)
    for k in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(k, raising=False)
    return anthropic.Anthropic(api_key=CLIENT_KEY, max_retries=0)


def explain(proxy: Mitmdump, request_id: str) -> str:
    ledger_settled(proxy.ledger, 20.0, request_id)
    out = subprocess.run([str(Path(sys.executable).parent / "tokunseba"), "explain", "--ledger", str(proxy.ledger),
                          request_id], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def refused_events(proxy: Mitmdump, request_id: str) -> list[dict]:
    # the turn's planning records reach the ledger with its start, at most 50 ms after its request
    # or with its end, which the writer commits after the client has the reply: wait for them
    ledger_settled(proxy.ledger, 20.0, request_id)
    with sqlite3.connect(proxy.ledger) as db:
        rows = db.execute("SELECT data FROM events WHERE request_id = ? AND kind = 'route_refused' ORDER BY rowid",
                          (request_id,)).fetchall()
    return [json.loads(r[0]) for r in rows]


@pytest.mark.parametrize("block,kind", [(PDF, "documents"), (PNG, "images")])
def test_a_pdf_or_image_turn_skips_the_text_only_server_and_is_translated_for_the_one_that_reads_it(
        client, proxy, ups, block, kind):
    ups["vision"].script(Reply.json(CHAT_REPLY))
    ups["local"].script(Reply.json({"error": "must not be asked"}, 500))
    local_before = len(ups["local"].requests)
    raw = client.messages.with_raw_response.create(
        model="claude-sonnet-4-6", max_tokens=64,
        messages=[{"role": "user", "content": [{"type": "text", "text": "What is in it?"}, block]}])
    msg = raw.parse()
    assert msg.content[0].text == "seen"
    assert len(ups["local"].requests) == local_before  # refused before anything was sent
    (rec,) = ups["vision"].requests
    parts = rec.json()["messages"][-1]["content"]
    want = "file" if kind == "documents" else "image_url"
    assert [p["type"] for p in parts] == ["text", want]  # carried, translated, not dropped
    rid = raw.headers["x-tokunseba-request-id"]
    why = f"the turn has {kind}; endpoint local takes text (a local server unless it says accepts: …)"
    assert refused_events(proxy, rid) == [{"rule": "to-local", "target": "local", "reason": why}]
    said = explain(proxy, rid)
    assert f"to-local → local: {why}" in said and "to-vision" in said


def test_claude_codes_web_search_turn_goes_only_to_the_endpoint_that_runs_the_search(client, proxy, ups):
    ups["ant"].script(Reply.json(ANT_REPLY))
    before = {k: len(u.requests) for k, u in ups.items()}
    tools = [{"type": "web_search_20250305", "name": "web_search", "max_uses": 8}]
    raw = client.messages.with_raw_response.create(
        model="claude-sonnet-4-6", max_tokens=64, tools=tools,
        messages=[{"role": "user", "content": "Perform a web search for the query: mitmproxy 12"}])
    assert raw.parse().content[0].text == "searched"
    assert len(ups["local"].requests) == before["local"] and len(ups["vision"].requests) == before["vision"]
    (rec,) = ups["ant"].requests
    assert rec.json()["tools"] == tools  # byte for byte: the same protocol, retargeted
    rid = raw.headers["x-tokunseba-request-id"]
    reasons = {e["rule"]: e["reason"] for e in refused_events(proxy, rid)}
    assert reasons == {
        "to-local": "the turn has provider-run tools (web_search); endpoint local takes text "
                    "(a local server unless it says accepts: …)",
        "to-vision": "the turn has provider-run tools (web_search); endpoint vision takes text, images, documents"}
    said = explain(proxy, rid)
    assert "to-vision → vision: the turn has provider-run tools (web_search)" in said


def test_a_plain_text_turn_still_goes_to_the_local_server(client, ups):
    ups["local"].script(Reply.json(CHAT_REPLY))
    msg = client.messages.create(model="claude-sonnet-4-6", max_tokens=64,
                                 messages=[{"role": "user", "content": "hi"}])
    assert msg.content[0].text == "seen" and len(ups["local"].requests) == 1
