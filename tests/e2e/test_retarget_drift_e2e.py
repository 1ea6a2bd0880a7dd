"""Retargeted turns read every protocol's facts from the one registry (issue 23), through a
real mitmdump and the clients' official SDKs:

- a Gemini turn retargeted to another Gemini endpoint records the usage its upstream sent
  (``usageMetadata``), streamed and whole, in the ledger and in ``tokunseba explain`` (it was
  ``usage: null``: the passed-on readers left Gemini out of their tables);
- a retargeted endpoint's error with an empty body (500, 429, 401, 529) or an HTML page (502)
  reaches every client in its own protocol's envelope, with the upstream's status (it came
  through as it was: the SDKs then said "empty body" or showed HTML).
"""

from __future__ import annotations

import json
import os
import sqlite3
import ssl
import subprocess
import sys
from pathlib import Path

import anthropic
import httpx
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from .conftest import Mitmdump, ledger_settled
from tests.support.upstream import Reply, Upstream

pytestmark = pytest.mark.e2e

KEYS = {"TK_TEST_KEY": "sk-endpoint-retarget-0001"}

RULES = """\
endpoints:
  gem2:
    protocol: gemini
    url: {url}/v1beta
    key_env: TK_TEST_KEY
  ant2:
    protocol: anthropic
    url: {url}/v1
    key_env: TK_TEST_KEY
  chat2:
    protocol: openai
    url: {url}/v1
    key_env: TK_TEST_KEY
  resp2:
    protocol: openai-responses
    url: {url}/v1
    key_env: TK_TEST_KEY
routes:
  - name: gem-retarget
    when: {{client: gemini}}
    to: gem2
    on_failure: error  # the endpoint's error reaches the client (no failover to the provider)
    model: gemini-other
  - name: ant-retarget
    when: {{client: anthropic}}
    to: ant2
    on_failure: error  # the endpoint's error reaches the client (no failover to the provider)
  - name: chat-retarget
    when: {{client: openai}}
    to: chat2
    on_failure: error  # the endpoint's error reaches the client (no failover to the provider)
  - name: resp-retarget
    when: {{client: openai-responses}}
    to: resp2
    on_failure: error  # the endpoint's error reaches the client (no failover to the provider)
"""

USAGE = {"promptTokenCount": 1234, "candidatesTokenCount": 56, "totalTokenCount": 1290, "cachedContentTokenCount": 1000}


@pytest.fixture(scope="module")
def up():
    with Upstream() as u:
        yield u


@pytest.fixture(scope="module")
def px(up, tmp_path_factory):
    work = tmp_path_factory.mktemp("retarget-drift")
    rules = work / "rules.yaml"
    rules.write_text(RULES.format(url=up.url))
    m = Mitmdump(work, rules, env=KEYS)
    yield m
    m.stop()


@pytest.fixture
def env(px, monkeypatch):
    for k, v in px.client_env().items():
        monkeypatch.setenv(k, v)
    for k in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "GEMINI_API_KEY",
              "GOOGLE_API_KEY"):
        monkeypatch.delenv(k, raising=False)
    return px


def _row(px: Mitmdump, request_id: str) -> dict:
    ledger_settled(px.ledger, 20.0, request_id)
    with sqlite3.connect(px.ledger) as db:
        db.row_factory = sqlite3.Row
        rows = [dict(r) for r in db.execute("SELECT * FROM turns WHERE request_id = ?", (request_id,))]
    assert rows, px.log()[-3000:]
    return rows[0]


def _explain(px: Mitmdump, request_id: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "tokunseba.cli", "explain", request_id, "--json",
                          "--ledger", str(px.ledger)], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "addon")})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _gemini_chunk(text: str, finish: str | None = None, usage: dict | None = None) -> bytes:
    cand: dict = {"content": {"role": "model", "parts": [{"text": text}]}, "index": 0}
    if finish:
        cand["finishReason"] = finish
    doc: dict = {"candidates": [cand], "modelVersion": "gemini-other"}
    if usage:
        doc["usageMetadata"] = usage
    return b"data: " + json.dumps(doc).encode() + b"\r\n\r\n"


def _sdk() -> genai.Client:
    return genai.Client(api_key="AIza-client-key-0003", http_options=types.HttpOptions(api_version="v1beta"))


def test_gemini_retargeted_whole_turn_records_its_usage(env, up):
    body = {"candidates": [{"content": {"role": "model", "parts": [{"text": "hi there"}]}, "finishReason": "STOP",
                            "index": 0}], "usageMetadata": USAGE, "modelVersion": "gemini-other"}
    up.script(Reply.json(body))
    sdk = _sdk()  # kept: a client that is garbage-collected closes its connections
    resp = sdk.models.generate_content(model="gemini-2.5-flash", contents="hi")
    assert resp.text == "hi there"
    assert up.requests[-1].path == "/v1beta/models/gemini-other:generateContent"
    rid = resp.sdk_http_response.headers["x-tokunseba-request-id"]
    row = _row(env, rid)
    assert row["outcome"] == "retargeted" and row["usage_protocol"] == "gemini"
    assert json.loads(row["usage_reported"]) == USAGE
    assert (row["usage_input"], row["usage_output"], row["usage_cache_read"]) == (1234, 56, 1000)
    assert _explain(env, rid)["turn"]["usage_reported"] == USAGE


def test_gemini_retargeted_stream_records_its_usage(env, up):
    up.script(Reply.sse([_gemini_chunk("hi "), _gemini_chunk("there", "STOP", USAGE)]))
    rid = None
    text = ""
    sdk = _sdk()
    for chunk in sdk.models.generate_content_stream(model="gemini-2.5-flash", contents="hi"):
        text += chunk.text or ""
        rid = rid or chunk.sdk_http_response.headers.get("x-tokunseba-request-id")
    assert text == "hi there" and rid
    assert up.requests[-1].path == "/v1beta/models/gemini-other:streamGenerateContent?alt=sse"
    row = _row(env, rid)
    assert row["outcome"] == "retargeted" and row["error"] is None
    assert json.loads(row["usage_reported"]) == USAGE and row["usage_input"] == 1234
    assert _explain(env, rid)["turn"]["usage_reported"] == USAGE


# ---------------------------------------------------------------- error envelopes

EMPTY_AND_HTML = [(500, b""), (429, b""), (401, b""), (529, b""),
                  (502, b"<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>")]


def _reply(status: int, body: bytes) -> Reply:
    return Reply(status, {"content-type": "text/html" if body else "text/plain"}, [body] if body else [])


def _envelope_ok(client: str, status: int, body: bytes) -> str:
    """The error's message, after checking the body is the client protocol's envelope."""
    doc = json.loads(body)
    if client == "anthropic":
        assert doc["type"] == "error" and isinstance(doc["error"]["type"], str), doc
        return doc["error"]["message"]
    if client == "gemini":
        assert doc["error"]["code"] == status and isinstance(doc["error"]["status"], str), doc
        return doc["error"]["message"]
    assert set(doc["error"]) >= {"message", "type", "code"}, doc
    return doc["error"]["message"]


@pytest.mark.parametrize("status,body", EMPTY_AND_HTML, ids=[str(s) for s, _ in EMPTY_AND_HTML])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_retargeted_error_reaches_the_sdks_in_their_own_envelope(env, up, status, body, stream):
    up.script(_reply(status, body))
    with pytest.raises(anthropic.APIStatusError) as ae:
        c = anthropic.Anthropic(api_key="sk-ant-client", max_retries=0)
        if stream:
            with c.messages.stream(model="claude-x", max_tokens=10, messages=[{"role": "user", "content": "hi"}]) as s:
                list(s)
        else:
            c.messages.create(model="claude-x", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    assert ae.value.status_code == status and isinstance(ae.value.body, dict)
    assert _envelope_ok("anthropic", status, ae.value.response.content)

    up.script(_reply(status, body))
    oc = openai.OpenAI(api_key="sk-oai-client", max_retries=0)
    with pytest.raises(openai.APIStatusError) as oe:
        if stream:
            list(oc.chat.completions.create(model="gpt-x", messages=[{"role": "user", "content": "hi"}], stream=True))
        else:
            oc.chat.completions.create(model="gpt-x", messages=[{"role": "user", "content": "hi"}])
    assert oe.value.status_code == status and _envelope_ok("openai", status, oe.value.response.content)

    up.script(_reply(status, body))
    with pytest.raises(openai.APIStatusError) as re_:
        if stream:
            list(oc.responses.create(model="gpt-x", input="hi", stream=True))
        else:
            oc.responses.create(model="gpt-x", input="hi")
    assert re_.value.status_code == status and _envelope_ok("openai-responses", status, re_.value.response.content)

    up.script(_reply(status, body))
    sdk = _sdk()
    with pytest.raises(genai_errors.APIError) as ge:
        if stream:
            list(sdk.models.generate_content_stream(model="gemini-2.5-flash", contents="hi"))
        else:
            sdk.models.generate_content(model="gemini-2.5-flash", contents="hi")
    assert ge.value.code == status
    msg = _envelope_ok("gemini", status, json.dumps({"error": ge.value.details["error"]}).encode())
    if body:
        assert "502 Bad Gateway" in msg  # the upstream's own text, kept


def test_a_retargeted_json_error_still_goes_on_byte_for_byte(env, up):
    raw = b'{"type":"error","error":{"type":"rate_limit_error","message":"slow down"},"request_id":"req_1"}'
    up.script(Reply(429, {"content-type": "application/json"}, [raw]))
    with httpx.Client(proxy=env.url, verify=ssl.create_default_context(cafile=str(env.ca))) as c:
        r = c.post("https://api.anthropic.com/v1/messages", headers={"x-api-key": "sk-ant-client",
                                                                    "anthropic-version": "2023-06-01"},
                   json={"model": "claude-x", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 429 and r.content == raw
