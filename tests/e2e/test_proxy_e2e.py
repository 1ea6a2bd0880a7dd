"""End to end: real mitmdump + the addon, scripted upstreams on loopback, the official SDKs
through HTTPS_PROXY with the mitmproxy CA."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time

import anthropic
import httpx
import openai
import pytest

from .conftest import KEYS, ledger_settled
from tests.support.upstream import Reply

pytestmark = pytest.mark.e2e

CLIENT_KEY = "sk-ant-client-secret-DO-NOT-LEAK"
OAI_CLIENT_KEY = "sk-openai-client-secret-DO-NOT-LEAK"


def chat_chunk(cid: str, delta: dict | None = None, finish=None, usage=None, choices=True) -> bytes:
    obj = {"id": cid, "object": "chat.completion.chunk", "created": 1767225600, "model": "local-model",
           "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}] if choices else []}
    if usage is not None:
        obj["usage"] = usage
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


CHAT_USAGE = {"prompt_tokens": 2610, "completion_tokens": 58, "total_tokens": 2668,
              "prompt_tokens_details": {"cached_tokens": 2048}}


def chat_text_stream(cid="chatcmpl-E2Etext01", text=("Hel", "lo ", "wörld", "!")) -> list[bytes]:
    out = [chat_chunk(cid, {"role": "assistant", "content": ""})]
    out += [chat_chunk(cid, {"content": t}) for t in text]
    out += [chat_chunk(cid, {}, "stop"), chat_chunk(cid, usage=CHAT_USAGE, choices=False), b"data: [DONE]\n\n"]
    return out


def chat_reply(cid: str, text: str = "ok") -> dict:
    return {"id": cid, "object": "chat.completion", "created": 1767225600, "model": "local-model",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}}


def chat_tool_stream(cid="chatcmpl-E2Etool01", call_id="call_pQ0bLh1E9vRZ") -> list[bytes]:
    return [
        chat_chunk(cid, {"role": "assistant", "content": None}),
        chat_chunk(cid, {"tool_calls": [{"index": 0, "id": call_id, "type": "function",
                                         "function": {"name": "get_weather", "arguments": ""}}]}),
        chat_chunk(cid, {"tool_calls": [{"index": 0, "function": {"arguments": "{\"city\": \"Pa"}}]}),
        chat_chunk(cid, {"tool_calls": [{"index": 0, "function": {"arguments": "ris\", \"unit\": \"c"}}]}),
        chat_chunk(cid, {"tool_calls": [{"index": 0, "function": {"arguments": "elsius\"}"}}]}),
        chat_chunk(cid, {}, "tool_calls"),
        chat_chunk(cid, usage={"prompt_tokens": 300, "completion_tokens": 20, "total_tokens": 320}, choices=False),
        b"data: [DONE]\n\n",
    ]


TOOLS = [{"name": "get_weather", "description": "Weather for a city",
          "input_schema": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
                           "required": ["city"]}}]


def ant_client(**kw) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key=CLIENT_KEY, max_retries=0, **kw)


def oai_client(**kw) -> openai.OpenAI:
    return openai.OpenAI(api_key=OAI_CLIENT_KEY, max_retries=0, **kw)


def assert_no_client_key(upstream):
    for rec in upstream.requests:
        for v in rec.headers.values():
            assert CLIENT_KEY not in v and OAI_CLIENT_KEY not in v
        assert CLIENT_KEY.encode() not in rec.body


def ledger_rows(proxy, sql: str, *args):
    # records are written by the ledger's thread, just after the reply: wait for them (and for
    # the turns the query names, whose start may not be written yet)
    ledger_settled(proxy.ledger, 20.0, *(a for a in args if isinstance(a, str) and a.startswith("tk-")))
    con = sqlite3.connect(proxy.ledger)
    con.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in con.execute(sql, args)]
    finally:
        con.close()


# ---------------------------------------------------------------- anthropic SDK -> OpenAI upstream


def test_anthropic_stream_text_translated(client_env, upstreams):
    oai = upstreams["oai"]
    oai.script(Reply.sse(chat_text_stream(), delay=0.15))
    arrivals = []
    with ant_client().messages.stream(model="claude-sonnet-4-5", max_tokens=5000,
                                      messages=[{"role": "user", "content": "hi"}]) as s:
        for ev in s:
            arrivals.append((time.time(), ev.type))
        msg = s.get_final_message()
    assert msg.id == "chatcmpl-E2Etext01"
    assert [b.type for b in msg.content] == ["text"]
    assert msg.content[0].text == "Hello wörld!"
    assert msg.stop_reason == "end_turn" and msg.stop_sequence is None
    # usage exactly as reported, re-based: input excludes the cached tokens
    assert msg.usage.input_tokens == 2610 - 2048
    assert msg.usage.cache_read_input_tokens == 2048
    assert msg.usage.output_tokens == 58
    # the upstream got a Chat request with its own key, never the client's
    rec = oai.requests[-1]
    assert rec.path == "/v1/chat/completions"
    assert rec.headers["authorization"] == f"Bearer {KEYS['TK_TEST_OAI_KEY']}"
    assert "x-api-key" not in rec.headers and not any(k.startswith("anthropic-") for k in rec.headers)
    body = rec.json()
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["max_completion_tokens"] == 2048  # capped by the endpoint's max_tokens
    assert_no_client_key(oai)
    # streaming is real: the first text arrived before the upstream wrote its last piece
    first_text = next(t for t, kind in arrivals if kind == "text")
    assert first_text < rec.piece_times[-1]


def test_anthropic_stream_tool_call_then_tool_result(client_env, upstreams):
    oai = upstreams["oai"]
    oai.script(Reply.sse(chat_tool_stream(), delay=0.05))
    client = ant_client()
    with client.messages.stream(model="claude-sonnet-4-5", max_tokens=200, tools=TOOLS,
                                messages=[{"role": "user", "content": "weather in Paris?"}]) as s:
        msg = s.get_final_message()
    assert msg.stop_reason == "tool_use"
    tu = msg.content[-1]
    assert tu.type == "tool_use" and tu.id == "call_pQ0bLh1E9vRZ" and tu.name == "get_weather"
    assert tu.input == {"city": "Paris", "unit": "celsius"}
    assert msg.usage.input_tokens == 300 and msg.usage.output_tokens == 20
    # second turn carries the tool_result; the upstream sees a tool message with the same id
    oai.script(Reply.sse(chat_text_stream("chatcmpl-E2Etool02", ("It is ", "sunny.")), delay=0.02))
    with client.messages.stream(model="claude-sonnet-4-5", max_tokens=200, tools=TOOLS, messages=[
        {"role": "user", "content": "weather in Paris?"},
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in msg.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tu.id, "content": "22C"}]},
    ]) as s:
        final = s.get_final_message()
    assert final.content[0].text == "It is sunny."
    sent = oai.requests[-1].json()["messages"]
    assistant = next(m for m in sent if m["role"] == "assistant")
    assert assistant["tool_calls"][0]["id"] == "call_pQ0bLh1E9vRZ"
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"city": "Paris", "unit": "celsius"}
    tool_msg = next(m for m in sent if m["role"] == "tool")
    assert tool_msg == {"role": "tool", "tool_call_id": "call_pQ0bLh1E9vRZ", "content": "22C"}


def test_anthropic_create_non_streamed(client_env, upstreams):
    oai = upstreams["oai"]
    reply = {"id": "chatcmpl-E2Ewhole", "object": "chat.completion", "created": 1767225600, "model": "local-model",
             "choices": [{"index": 0, "finish_reason": "length", "message": {"role": "assistant", "content": "Partial"}}],
             "usage": {"prompt_tokens": 12, "completion_tokens": 6, "total_tokens": 18}}
    oai.script(Reply.json(reply))
    raw = ant_client().messages.with_raw_response.create(model="claude-haiku-4-5", max_tokens=6,
                                                         messages=[{"role": "user", "content": "Say hello."}])
    msg = raw.parse()
    assert raw.headers["x-tokunseba-request-id"].startswith("tk-")
    assert msg.id == "chatcmpl-E2Ewhole" and msg.model == "local-model"
    assert msg.content[0].text == "Partial" and msg.stop_reason == "max_tokens"
    assert msg.usage.input_tokens == 12 and msg.usage.output_tokens == 6
    assert msg.usage.cache_read_input_tokens is None  # not reported: absent, never zero
    sent = oai.requests[-1].json()
    assert sent.get("stream") in (None, False) and "stream_options" not in sent


# ---------------------------------------------------------------- openai SDK -> Anthropic upstream

ANT_TOOL_STREAM = b"""event: message_start
data: {"type":"message_start","message":{"id":"msg_01E2Eant","type":"message","role":"assistant","model":"claude-sonnet-4-6","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":472,"cache_creation_input_tokens":0,"cache_read_input_tokens":2048,"output_tokens":2}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Let me check"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"get_weather","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\\"city\\": \\"Pa"}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"ris\\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"input_tokens":472,"cache_creation_input_tokens":0,"cache_read_input_tokens":2048,"output_tokens":71}}

event: message_stop
data: {"type":"message_stop"}

"""

OAI_TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": TOOLS[0]["input_schema"]}}]


def test_openai_stream_tool_call_translated(client_env, upstreams):
    ant = upstreams["ant"]
    ant.script(Reply.sse(ANT_TOOL_STREAM, delay=0.05))
    with oai_client().chat.completions.stream(model="gpt-4.1", messages=[{"role": "user", "content": "weather?"}],
                                              tools=OAI_TOOLS, stream_options={"include_usage": True}) as s:
        comp = s.get_final_completion()
    ch = comp.choices[0]
    assert comp.id == "msg_01E2Eant"
    assert ch.message.content == "Let me check"
    assert ch.finish_reason == "tool_calls"
    tc = ch.message.tool_calls[0]
    assert tc.id == "toolu_01T1x1fJ34qAmk2tNTrN7Up6" and tc.function.name == "get_weather"
    assert json.loads(tc.function.arguments) == {"city": "Paris"}
    assert comp.usage.prompt_tokens == 472 + 2048 and comp.usage.completion_tokens == 71
    assert comp.usage.prompt_tokens_details.cached_tokens == 2048
    rec = ant.requests[-1]
    assert rec.path == "/v1/messages"
    assert rec.headers["x-api-key"] == KEYS["TK_TEST_ANT_KEY"] and "authorization" not in rec.headers
    assert rec.headers["anthropic-version"] == "2023-06-01"
    body = rec.json()
    assert body["max_tokens"] == 1024 and body["tools"][0]["input_schema"] == TOOLS[0]["input_schema"]
    assert_no_client_key(ant)


def test_openai_create_non_streamed(client_env, upstreams):
    ant = upstreams["ant"]
    ant.script(Reply.json({"id": "msg_whole01", "type": "message", "role": "assistant", "model": "claude-x",
                           "content": [{"type": "text", "text": "Bonjour"}], "stop_reason": "end_turn",
                           "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 3}}))
    comp = oai_client().chat.completions.create(model="gpt-4.1", max_tokens=50,
                                                 messages=[{"role": "system", "content": "Be French."},
                                                           {"role": "user", "content": "hello"}])
    assert comp.id == "msg_whole01" and comp.choices[0].message.content == "Bonjour"
    assert comp.choices[0].finish_reason == "stop"
    assert comp.usage.prompt_tokens == 10 and comp.usage.completion_tokens == 3
    sent = ant.requests[-1].json()
    assert sent["system"] == "Be French." and sent["max_tokens"] == 50


# ---------------------------------------------------------------- pass-through, refusals, errors


def test_pass_through_is_byte_identical(client_env, upstreams):
    """A provider call no rule matches goes out and comes back byte for byte."""
    ant = upstreams["ant"]
    ant.script(Reply.sse(ANT_TOOL_STREAM, delay=0.01))
    req = json.dumps({"model": "pass-me", "max_tokens": 10, "stream": True,
                      "messages": [{"role": "user", "content": "x  \u00e9"}]}, indent=1).encode()
    with httpx.Client(proxy=client_env.url, trust_env=False) as c:
        r = c.post(f"{ant.url}/v1/messages?beta=true", content=req,
                   headers={"x-api-key": CLIENT_KEY, "content-type": "application/json"})
    assert r.status_code == 200
    assert hashlib.sha256(r.content).digest() == hashlib.sha256(ANT_TOOL_STREAM).digest()
    rec = ant.requests[-1]
    assert rec.body == req and rec.path == "/v1/messages?beta=true"
    assert rec.headers["x-api-key"] == CLIENT_KEY  # same host: the client's own key stays
    assert r.headers["x-tokunseba-request-id"].startswith("tk-")


def test_non_provider_path_untouched(client_env, upstreams):
    ant = upstreams["ant"]
    ant.script(Reply.json({"settings": {"a": 1}}))
    with httpx.Client(proxy=client_env.url, trust_env=False) as c:
        r = c.get(f"{ant.url}/api/claude_code/settings", headers={"x-api-key": CLIENT_KEY})
    assert r.json() == {"settings": {"a": 1}}
    assert "x-tokunseba-request-id" not in r.headers
    assert ant.requests[-1].headers["x-api-key"] == CLIENT_KEY


# a tool whose name starts with a digit: valid for Anthropic, rejected by Gemini's
# FunctionDeclaration.name, so a Gemini endpoint refuses the turn before anything is sent
# (the other targets take it)
GEMINI_REJECTED_TOOLS = [{"name": "7zip", "description": "pack files", "input_schema": {"type": "object", "properties": {}}}]
HI = [{"role": "user", "content": "hi"}]
GEMINI_REFUSAL = "Gemini rejects the function name"


def test_refused_route_is_skipped_and_recorded(client_env, upstreams):
    gem, oai = upstreams["gem"], upstreams["oai"]
    gem.script(Reply.json({"never": "called"}))
    oai.script(Reply.json(chat_reply("chatcmpl-refused-fallback")))
    raw = ant_client().messages.with_raw_response.create(model="refuse-model", max_tokens=10, messages=HI, tools=GEMINI_REJECTED_TOOLS)
    rid = raw.headers["x-tokunseba-request-id"]
    assert gem.requests == []
    assert oai.requests  # the next matching rule served it
    ev = ledger_rows(client_env, "SELECT kind, data FROM events WHERE request_id = ? AND kind = 'route_refused'", rid)
    assert ev and GEMINI_REFUSAL in ev[0]["data"]


def test_refused_with_on_refused_error(client_env, upstreams):
    gem = upstreams["gem"]
    gem.script(Reply.json({"never": "called"}))
    with pytest.raises(anthropic.BadRequestError) as ei:
        ant_client().messages.create(model="error-model", max_tokens=10, messages=HI, tools=GEMINI_REJECTED_TOOLS)
    assert ei.value.status_code == 400
    assert ei.value.body["type"] == "error" and ei.value.body["error"]["type"] == "invalid_request_error"
    assert GEMINI_REFUSAL in ei.value.body["error"]["message"]
    assert gem.requests == []


def test_unreachable_endpoint_is_skipped(client_env, upstreams):
    oai = upstreams["oai"]
    oai.script(Reply.json(chat_reply("chatcmpl-after-down")))
    msg = ant_client().messages.create(model="down-model", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    assert msg.id == "chatcmpl-after-down"


@pytest.mark.parametrize("status,etype,cls", [(500, "api_error", anthropic.InternalServerError),
                                              (429, "rate_limit_error", anthropic.RateLimitError),
                                              (401, "authentication_error", anthropic.AuthenticationError)])
def test_upstream_error_status_in_client_protocol(client_env, upstreams, status, etype, cls):
    oai = upstreams["oai"]
    oai.script(Reply.json({"error": {"message": f"upstream said {status}", "type": "x", "param": None, "code": None}}, status))
    with pytest.raises(cls) as ei:
        ant_client().messages.create(model="claude-x", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    assert ei.value.status_code == status
    assert ei.value.body["error"]["type"] == etype and f"upstream said {status}" in ei.value.body["error"]["message"]
    # and the proxy serves the next turn
    oai.script(Reply.json(chat_reply("chatcmpl-next")))
    assert ant_client().messages.create(model="claude-x", max_tokens=10,
                                        messages=[{"role": "user", "content": "hi"}]).id == "chatcmpl-next"


def test_context_overflow_reaches_claude_code_wording(client_env, upstreams):
    oai = upstreams["oai"]
    oai.script(Reply.json({"error": {"message": "This model's maximum context length is 4096 tokens.",
                                     "type": "invalid_request_error", "param": "messages",
                                     "code": "context_length_exceeded"}}, 400))
    with pytest.raises(anthropic.BadRequestError) as ei:
        ant_client().messages.create(model="claude-x", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    msg = ei.value.body["error"]["message"]
    assert ei.value.body["error"]["type"] == "invalid_request_error"
    assert "prompt is too long" in msg.lower() and "maximum context length is 4096" in msg


def test_anthropic_529_reaches_openai_client_as_503(client_env, upstreams):
    ant = upstreams["ant"]
    ant.script(Reply.json({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, 529))
    with pytest.raises(openai.InternalServerError) as ei:
        oai_client().chat.completions.create(model="gpt-4.1", max_tokens=5, messages=[{"role": "user", "content": "x"}])
    assert ei.value.status_code == 503 and "Overloaded" in str(ei.value.body)


def test_stream_ending_early_becomes_error_event(client_env, upstreams):
    """An upstream that closes its (close-delimited) stream before finishing: the client
    gets an Anthropic `event: error`, never a silently truncated message."""
    oai = upstreams["oai"]
    oai.script(Reply.sse(chat_text_stream("chatcmpl-cut")[:3], delay=0.02, framing="close"))
    with pytest.raises(anthropic.APIStatusError) as ei:
        with ant_client().messages.stream(model="claude-x", max_tokens=10,
                                          messages=[{"role": "user", "content": "hi"}]) as s:
            s.get_final_message()
    assert "ended" in str(ei.value).lower() or "early" in str(ei.value).lower()
    oai.script(Reply.json(chat_reply("chatcmpl-after-cut")))
    assert ant_client().messages.create(model="claude-x", max_tokens=10,
                                        messages=[{"role": "user", "content": "hi"}]).id == "chatcmpl-after-cut"


def test_retarget_same_protocol_changes_only_model(client_env, upstreams):
    ant = upstreams["ant"]
    ant.script(Reply.json({"id": "msg_rt", "type": "message", "role": "assistant", "model": "retargeted-model",
                           "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
                           "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}))
    msg = ant_client().messages.create(model="retarget-me", max_tokens=7, messages=[{"role": "user", "content": "hi"}])
    assert msg.id == "msg_rt"
    rec = ant.requests[-1]
    sent = rec.json()
    assert sent["model"] == "retargeted-model" and sent["max_tokens"] == 7
    # another host: the client's key was replaced by the endpoint's own
    assert rec.headers["x-api-key"] == KEYS["TK_TEST_ANT_KEY"]
    assert rec.headers.get("anthropic-version")  # protocol header kept for a same-protocol target


def test_upstream_dying_mid_chunked_stream_becomes_error_event(client_env, upstreams):
    """The endpoint resets the connection in the middle of a chunked stream: the client
    still gets an error in its own protocol (via the relay), and the next turn works."""
    oai = upstreams["oai"]
    oai.script(Reply.sse(chat_text_stream("chatcmpl-die"), delay=0.05, framing="chunked", die_after=3))
    with pytest.raises(anthropic.APIStatusError) as ei:
        with ant_client().messages.stream(model="claude-x", max_tokens=10,
                                          messages=[{"role": "user", "content": "hi"}]) as s:
            s.get_final_message()
    assert ei.value.body is None or ei.value.body.get("type") == "error" or "error" in str(ei.value).lower()
    oai.script(Reply.json(chat_reply("chatcmpl-after-die")))
    assert ant_client().messages.create(model="claude-x", max_tokens=10,
                                        messages=[{"role": "user", "content": "hi"}]).id == "chatcmpl-after-die"


def test_count_tokens_routed_to_openai_gets_a_clear_anthropic_error(client_env, upstreams):
    """count_tokens cannot be answered by an OpenAI endpoint: never an estimate."""
    oai = upstreams["oai"]
    oai.script(Reply.json({"never": "called"}))
    before = len(oai.requests)
    with pytest.raises(anthropic.BadRequestError) as ei:
        ant_client().messages.count_tokens(model="claude-x", messages=[{"role": "user", "content": "hi"}])
    assert ei.value.body["error"]["type"] == "invalid_request_error"
    assert "does not estimate" in ei.value.body["error"]["message"]
    assert len(oai.requests) == before


def test_count_tokens_passes_through_when_no_rule_routes_it(client_env, upstreams):
    ant = upstreams["ant"]
    ant.script(Reply.json({"input_tokens": 42}))
    req = b'{"model":"pass-me","messages":[{"role":"user","content":"hi"}]}'
    with httpx.Client(proxy=client_env.url, trust_env=False) as c:
        r = c.post(f"{ant.url}/v1/messages/count_tokens?beta=true", content=req,
                   headers={"x-api-key": CLIENT_KEY, "content-type": "application/json"})
    assert r.json() == {"input_tokens": 42}
    assert ant.requests[-1].body == req and ant.requests[-1].path == "/v1/messages/count_tokens?beta=true"


def test_concurrent_translated_streams_do_not_cross(client_env, upstreams):
    """Eight streamed turns at once through one proxy: each client gets its own upstream
    stream back, complete, with its own id and usage (per-flow translator state)."""
    import threading

    oai = upstreams["oai"]
    n = 8
    oai.script(*[Reply.sse(chat_text_stream(f"chatcmpl-par-{i}", (f"turn {i} ", "part a ", "part b")), delay=0.03)
                 for i in range(n)], Reply.json({"unused": True}))
    results: dict[int, object] = {}

    def one(i: int) -> None:
        try:
            with ant_client().messages.stream(model="claude-par", max_tokens=20,
                                              messages=[{"role": "user", "content": f"q{i}"}]) as s:
                results[i] = s.get_final_message()
        except Exception as e:  # recorded, asserted below
            results[i] = e

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    msgs = list(results.values())
    assert len(msgs) == n and all(not isinstance(m, Exception) for m in msgs), msgs
    by_id = {m.id: m for m in msgs}
    assert set(by_id) == {f"chatcmpl-par-{i}" for i in range(n)}
    for i in range(n):
        m = by_id[f"chatcmpl-par-{i}"]
        assert m.content[0].text == f"turn {i} part a part b"
        assert m.usage.output_tokens == 58 and m.stop_reason == "end_turn"


def test_translated_stream_to_an_http2_client(client_env, upstreams):
    """An HTTP/2 client (as Codex is) gets the translated stream too: no chunked framing on h2,
    events complete, the request id header present (curl --http2 through the proxy)."""
    import shutil
    import subprocess

    if not shutil.which("curl"):
        pytest.skip("curl not installed")
    oai = upstreams["oai"]
    oai.script(Reply.sse(chat_text_stream("chatcmpl-h2"), delay=0.02))
    body = json.dumps({"model": "claude-h2", "max_tokens": 10, "stream": True,
                       "messages": [{"role": "user", "content": "hi"}]})
    p = subprocess.run(["curl", "-sS", "-N", "--http2", "-x", client_env.url, "--cacert", str(client_env.ca),
                        "-D", "-", "-H", f"x-api-key: {CLIENT_KEY}", "-H", "anthropic-version: 2023-06-01",
                        "-H", "content-type: application/json", "--data-binary", body,
                        "https://api.anthropic.com/v1/messages"], capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    if out.lower().startswith(b"http/1.1 200 connection established"):  # the proxy's CONNECT answer
        out = out.partition(b"\r\n\r\n")[2]
    head, _, raw = out.partition(b"\r\n\r\n")
    head = head.decode().lower()
    assert head.startswith("http/2 200") and "transfer-encoding" not in head and "x-tokunseba-request-id: tk-" in head
    text = raw.decode()
    names = [ln[7:] for ln in text.splitlines() if ln.startswith("event: ")]
    assert names[0] == "message_start" and names[-1] == "message_stop" and "content_block_delta" in names
    assert "".join(json.loads(ln[6:])["delta"]["text"] for ln in text.splitlines()
                   if ln.startswith("data: ") and '"text_delta"' in ln) == "Hello wörld!"
