"""Issue 28 end to end: a protocol shipped as its own package (Echo Meter,
tests/plugins/tokunseba_echo_protocol), installed beside tokunseba, is found by a real mitmdump
with the addon through the entry-point group ``tokunseba.protocols`` (no TOKUNSEBA_PLUGINS: as
a user runs it) and nothing in addon/ names it. The official Anthropic SDK's turns are routed
to a scripted Echo upstream that enforces Echo's wire rules, translated both ways, streamed
and whole; an Echo client's turn through the same proxy goes to an Anthropic-shaped upstream
and comes back in Echo's wire form; the ledger records each turn with the usage its upstream
reported, in that upstream's own counting (Echo's meter), and `tokunseba log` / `models`
list it."""

from __future__ import annotations

import json
import os
import sqlite3
import ssl
import subprocess
from importlib.metadata import entry_points

import anthropic
import httpx
import pytest

from tokunseba.sse import SSEDecoder

from .conftest import BIN, Mitmdump, ledger_settled
from tests.support.upstream import Recorded, Reply, Upstream

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(
    not any(ep.name == "echo" for ep in entry_points(group="tokunseba.protocols")),
    reason="the test plugin is not installed: run scripts/setup.sh")]

ECHO_KEY = "echo-endpoint-key-e2e-1"
ANT_KEY = "sk-ant-endpoint-e2e-2"
CLIENT_KEY = "sk-ant-client-CANARY-echo"
METER = {"fresh": 120, "reused": 880, "made": 42}
SPEAKERS = ("user", "assistant", "system")

RULES = """\
endpoints:
  ech:
    protocol: echo
    url: {echo}/e1
    key_env: TK_E2E_ECHO_KEY
  ant:
    protocol: anthropic
    url: {ant}/v1
    key_env: TK_E2E_ANT_KEY
    max_tokens: 256
routes:
  - name: claude-to-echo
    when: {{client: anthropic}}
    to: ech
    model: echo-small
  - name: echo-to-claude
    when: {{client: echo}}
    to: ant
    model: claude-x
"""


def _echo_error(status: int, message: str) -> Reply:
    return Reply.json({"echo_error": {"status": status, "message": message}}, status)


def echo_server(rec: Recorded) -> Reply:
    """Echo Meter as its documentation (the plugin's facts.py) says it behaves: one path, its
    key in x-echo-key, turns of known speakers with text, a positive limit, nothing else."""
    if rec.method != "POST" or rec.path != "/e1/converse":
        return _echo_error(404, f"no such route {rec.method} {rec.path}")
    if rec.headers.get("x-echo-key") != ECHO_KEY:
        return _echo_error(401, "a valid x-echo-key is required")
    try:
        body = json.loads(rec.body)
    except ValueError:
        return _echo_error(400, "the body is not JSON")
    turns = body.get("turns")
    unknown = set(body) - {"model", "turns", "limit", "stream"}
    if unknown or not isinstance(body.get("model"), str) or not isinstance(turns, list) or not turns \
            or not all(isinstance(t, dict) and t.get("speaker") in SPEAKERS and isinstance(t.get("text"), str)
                       and set(t) == {"speaker", "text"} for t in turns) \
            or not (isinstance(body.get("limit"), int) and body["limit"] >= 1 or "limit" not in body):
        return _echo_error(400, f"malformed request: {body!r}")
    if body.get("stream"):
        return Reply.sse([b'event: start\ndata: {"id":"echo-r1","model":"echo-small"}\n\n',
                          b'event: text\ndata: {"text":"hello "}\n\n',
                          b'event: text\ndata: {"text":"from echo"}\n\n',
                          b'event: end\ndata: ' + json.dumps({"end": "done", "meter": METER}).encode() + b'\n\n'],
                         delay=0.05)
    return Reply.json({"id": "echo-r2", "model": "echo-small", "text": "whole from echo", "end": "limit",
                       "meter": METER})


ANT_USAGE = {"input_tokens": 7, "cache_read_input_tokens": 50, "output_tokens": 4}


def ant_stream() -> bytes:
    events = [
        ("message_start", {"type": "message_start", "message": {
            "id": "msg_e2e", "type": "message", "role": "assistant", "model": "claude-x", "content": [],
            "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 7, "cache_read_input_tokens": 50, "output_tokens": 1}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": "hello from claude"}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                           "usage": {"output_tokens": 4}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    return b"".join(f"event: {n}\ndata: {json.dumps(d)}\n\n".encode() for n, d in events)


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TOKUNSEBA_PLUGINS"}
    return subprocess.run([str(BIN / "tokunseba"), *args], capture_output=True, text=True, timeout=120, env=env)


def test_a_protocol_from_its_own_package_is_routed_translated_recorded_and_listed(tmp_path, monkeypatch):
    monkeypatch.delenv("TOKUNSEBA_PLUGINS", raising=False)  # mitmdump loads every installed plugin
    with Upstream() as echo, Upstream() as ant:
        echo.responder = echo_server
        ant.script(Reply.sse(ant_stream(), delay=0.02))
        rules = tmp_path / "rules.yaml"
        rules.write_text(RULES.format(echo=echo.url, ant=ant.url))
        proxy = Mitmdump(tmp_path, rules, env={"TK_E2E_ECHO_KEY": ECHO_KEY, "TK_E2E_ANT_KEY": ANT_KEY})
        try:
            for k, v in proxy.client_env().items():
                monkeypatch.setenv(k, v)
            for k in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN"):
                monkeypatch.delenv(k, raising=False)
            client = anthropic.Anthropic(api_key=CLIENT_KEY, max_retries=0)
            # the Anthropic SDK's stream, from Echo's stream (the SDK's helper checks the grammar)
            with client.messages.stream(model="claude-sonnet-4-5", max_tokens=300, system="be brief",
                                        messages=[{"role": "user", "content": "hi"}]) as s:
                msg = s.get_final_message()
            assert msg.content[0].text == "hello from echo" and msg.stop_reason == "end_turn"
            assert (msg.usage.input_tokens, msg.usage.cache_read_input_tokens, msg.usage.output_tokens) == (120, 880, 42)
            # whole
            whole = client.messages.create(model="claude-sonnet-4-5", max_tokens=300,
                                           messages=[{"role": "user", "content": "hi again"}])
            assert whole.content[0].text == "whole from echo" and whole.stop_reason == "max_tokens"
            assert (whole.usage.input_tokens, whole.usage.output_tokens) == (120, 42)
            sent = [r.json() for r in echo.requests]
            assert len(sent) == 2 and all(r.headers["x-echo-key"] == ECHO_KEY for r in echo.requests)
            assert sent[0] == {"turns": [{"speaker": "system", "text": "be brief"}, {"speaker": "user", "text": "hi"}],
                               "model": "echo-small", "limit": 300, "stream": True}
            assert not any(CLIENT_KEY in v for r in echo.requests for v in r.headers.values())
            # an Echo client's turn, through the same proxy, to the Anthropic-shaped upstream
            with httpx.Client(proxy=proxy.url, verify=ssl.create_default_context(cafile=str(proxy.ca)), timeout=30) as h:
                with h.stream("POST", "https://api.echo.example/e1/converse", headers={"x-echo-key": "echo-CLIENT"},
                              json={"model": "echo-small", "turns": [{"speaker": "user", "text": "hi"}],
                                    "limit": 20, "stream": True}) as r:
                    assert r.status_code == 200, r.read()
                    rid = r.headers["x-tokunseba-request-id"]
                    raw = b"".join(r.iter_bytes())
            events = [(e.event, json.loads(e.data)) for e in SSEDecoder().feed(raw)]
            assert [n for n, _ in events] == ["start", "text", "end"]
            assert events[1][1] == {"text": "hello from claude"}
            assert events[2][1] == {"end": "done", "meter": {"fresh": 7, "reused": 50, "made": 4}}
            got = ant.requests[-1]
            assert got.path == "/v1/messages" and got.headers["x-api-key"] == ANT_KEY
            assert got.json()["model"] == "claude-x" and got.json()["max_tokens"] == 20
            assert "echo-CLIENT" not in json.dumps(got.headers)
            ledger_settled(proxy.ledger, 20.0, rid)
        finally:
            proxy.stop()
    con = sqlite3.connect(proxy.ledger)
    con.row_factory = sqlite3.Row
    try:
        rows = [dict(r) for r in con.execute("SELECT * FROM turns ORDER BY started_at")]
    finally:
        con.close()
    assert [(r["client_protocol"], r["target_protocol"], r["usage_protocol"]) for r in rows] == [
        ("anthropic", "echo", "echo-meter"), ("anthropic", "echo", "echo-meter"), ("echo", "anthropic", "anthropic")]
    assert [(r["usage_input"], r["usage_cache_read"], r["usage_output"]) for r in rows] == [
        (120, 880, 42), (120, 880, 42), (7, 50, 4)]
    assert json.loads(rows[0]["usage_reported"]) == METER and rows[2]["request_id"] == rid
    # `log` and `models`, as a user runs them
    log = _cli("log", "--ledger", str(proxy.ledger), "--json")
    assert log.returncode == 0, log.stderr
    assert [r["client_protocol"] for r in json.loads(log.stdout)].count("echo") == 1
    models = _cli("models", "--rules", str(rules), "--json")
    assert models.returncode == 0, models.stderr
    pairs = {(p["client"], p["endpoint"]): p["result"] for p in json.loads(models.stdout)["pairs"]}
    assert pairs[("anthropic", "ech")] == "translated" and pairs[("echo", "ant")] == "translated"
