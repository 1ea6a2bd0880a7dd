"""What mitmweb shows of a turn, through the adapter's real hooks (issue 14): the client's
URL on the flow once the request has left, mark and comment updated when the turn ends
(error mark and text, plumbing next to drops, no key in sight), and Replay of a rewritten
flow going through the rules again, or refused plainly."""

from __future__ import annotations

import io
import json

from mitmproxy import http
from mitmproxy.io import FlowWriter
from mitmproxy.test import tflow, tutils

from tokunseba.proxy.relay import PREFIX
from tokunseba.proxy.mitm import MARKS, Tokunseba
from tokunseba.webview.view import RECORD_KEY

from tests.proxy.test_mitm import (ANT_BODY, CHAT_SSE, CLIENT_KEY, EP_KEY, _events, addon, anthropic_error,  # noqa: F401
                              context, endpoint_port, make_flow, rules_file)

CLIENT_URL = "https://api.anthropic.com/v1/messages"

def comment_of(f) -> str:
    """The flow's comment after its headline (the outcome's emoji and status word, a failed turn's
    error) and its request id: ``<headline> · <request id> · <details>``."""
    rid = f.metadata["tokunseba.request_id"]
    if f.comment.startswith(rid + " · "):  # in flight: no headline yet
        return f.comment[len(rid) + 3:]
    assert f" · {rid} · " in f.comment and f.comment[:1] in "⚪➡🔁⛔❌⏹", f.comment
    return f.comment.split(f" · {rid} · ", 1)[1]



def _chat_error(message: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": "invalid_request_error", "param": None,
                                 "code": "context_length_exceeded"}}).encode()


async def _whole_reply(addon, f, status: int, body: bytes) -> None:
    f.response = tutils.tresp(status_code=status, headers=http.Headers(content_type="application/json"), content=None)
    addon.responseheaders(f)
    f.response.content = body
    addon.response(f)


async def test_translated_turn_shows_the_clients_url_and_where_it_went(addon, endpoint_port):
    f = make_flow({**ANT_BODY, "stream": True})
    await addon.request(f)
    assert f.request.path.startswith(PREFIX)  # while in flight the request goes through the relay
    f.response = tutils.tresp(headers=http.Headers(content_type="text/event-stream"), content=None)
    addon.responseheaders(f)
    [c for c in f.response.stream(CHAT_SSE)] + f.response.stream(b"")
    addon.response(f)
    assert f.request.url == CLIENT_URL and f.request.host == "api.anthropic.com"
    assert f.marked == MARKS["translated"]
    assert comment_of(f) == ("easy-turns → oai · anthropic→openai · dropped: thinking, metadata.user_id"
                         " · added: stream_options.include_usage"
                         f" · sent to http://127.0.0.1:{endpoint_port}/v1/chat/completions")
    rec = f.metadata[RECORD_KEY]
    assert rec["url"] == CLIENT_URL and rec["endpoint"] == "oai" and rec["rewritten"] is True
    assert ["x-api-key", "<redacted>"] in rec["headers"] and CLIENT_KEY not in json.dumps(rec)
    # the endpoint key tokunseba added is redacted once sent: neither mitmweb nor a saved flow file has a key
    assert f.request.headers["authorization"] == "Bearer <redacted>"
    saved = io.BytesIO()
    FlowWriter(saved).add(f)
    assert EP_KEY.encode() not in saved.getvalue() and CLIENT_KEY.encode() not in saved.getvalue()


async def test_context_overflow_ends_with_the_error_mark_and_text(addon):
    f = make_flow(ANT_BODY)
    await addon.request(f)
    assert f.marked == MARKS["translated"]  # the plan
    await _whole_reply(addon, f, 400, _chat_error("This model's maximum context length is 8192 tokens"))
    assert f.response.status_code == 400
    assert f.marked == MARKS["error"]
    assert comment_of(f).startswith("error 400: prompt is too long") and "maximum context length is 8192" in comment_of(f)
    assert "· easy-turns → oai · anthropic→openai" in comment_of(f)
    assert f.request.url == CLIENT_URL


async def test_stream_cut_mid_way_ends_with_the_error_mark(addon):
    f = make_flow({**ANT_BODY, "stream": True})
    await addon.request(f)
    f.response = tutils.tresp(headers=http.Headers(content_type="text/event-stream"), content=None)
    addon.responseheaders(f)
    out = f.response.stream(CHAT_SSE[:200]) + f.response.stream(b"")  # the relay ended the body early
    assert [e for e, _ in _events(out)][-1] == "error"
    addon.response(f)
    assert f.response.status_code == 200 and f.marked == MARKS["error"]
    assert comment_of(f).startswith("error mid-stream: upstream sent a chunk that is not valid JSON")


async def test_connection_error_and_cancel_update_the_mark(addon):
    f = make_flow(ANT_BODY)
    await addon.request(f)
    f.error = tflow.terr("[Errno 104] Connection reset by peer")
    addon.error(f)
    assert f.marked == MARKS["error"] and comment_of(f).startswith("error: upstream connection broke: [Errno 104] Connection reset by peer · easy-turns")
    assert f.request.url == CLIENT_URL
    g = make_flow(ANT_BODY)
    await addon.request(g)
    g.error = tflow.terr("Client disconnected.")
    addon.error(g)
    assert g.marked == MARKS["cancelled"] and comment_of(g).startswith("cancelled: Client disconnected. · easy-turns")


async def test_keys_never_reach_a_comment(addon):
    f = make_flow(ANT_BODY)
    await addon.request(f)
    await _whole_reply(addon, f, 401, _chat_error(f"Incorrect API key provided: {EP_KEY}"))
    assert f.marked == MARKS["error"] and "Incorrect API key provided: <redacted>" in f.comment
    assert EP_KEY not in f.comment and CLIENT_KEY not in f.comment


async def test_pass_through_turn_keeps_its_url_and_gets_the_final_mark(addon):
    f = make_flow({**ANT_BODY, "model": "opus-unrouted"})
    await addon.request(f)
    await _whole_reply(addon, f, 529, json.dumps({"type": "error", "error": {"type": "overloaded_error",
                                                                             "message": "Overloaded"}}).encode())
    assert f.request.url == CLIENT_URL and f.request.headers["x-api-key"] == CLIENT_KEY
    assert f.marked == MARKS["error"] and comment_of(f) == "error 529: Overloaded · pass-through (no route matched)"
    assert f.metadata[RECORD_KEY]["rewritten"] is False


def _for_replay(f: http.HTTPFlow) -> None:
    """What mitmweb's Replay (ClientPlayback.start_replay) does to the flow."""
    f.backup()
    f.is_replay = "request"
    f.response = None
    f.error = None


async def test_replay_of_a_translated_flow_goes_through_the_rules_again(addon, endpoint_port):
    f = make_flow(ANT_BODY)
    await addon.request(f)
    first_token, first_rid = addon.flows[f.id].relay_token, f.metadata["tokunseba.request_id"]
    first_sent = f.request.content
    await _whole_reply(addon, f, 200, json.dumps({
        "id": "c1", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10}}).encode())
    assert f.request.url == CLIENT_URL
    _for_replay(f)
    await addon.request(f)
    assert f.response is None  # not refused: translated again, through a fresh relay token
    token = addon.flows[f.id].relay_token
    assert token != first_token and f.request.path == PREFIX + token
    assert f.metadata["tokunseba.request_id"] != first_rid
    assert f.request.content == first_sent and f.request.headers["authorization"] == f"Bearer {EP_KEY}"
    assert "x-api-key" not in f.request.headers


async def test_replay_of_a_retargeted_flow_never_sends_the_endpoint_key_elsewhere(addon, endpoint_port):
    f = make_flow({**ANT_BODY, "model": "retarget-me"})
    await addon.request(f)
    assert f.request.headers["x-api-key"] == EP_KEY
    await _whole_reply(addon, f, 200, b'{"type":"message","content":[],"usage":{"input_tokens":1,"output_tokens":1}}')
    assert f.request.url == CLIENT_URL
    _for_replay(f)
    await addon.request(f)
    # the client's own request went through the rules again: retargeted again (through the
    # relay, like every routed turn), with the endpoint's key
    assert f.request.path == PREFIX + addon.flows[f.id].relay_token
    assert f.request.headers["x-api-key"] == EP_KEY and b'"other-model"' in f.request.content


async def test_replay_without_the_clients_request_is_refused_plainly(tmp_path, addon, rules_file):
    f = make_flow(ANT_BODY)
    await addon.request(f)
    await _whole_reply(addon, f, 400, _chat_error("too long"))
    other = Tokunseba()  # another proxy session: a flow loaded from a saved file
    with context(other) as tctx:
        tctx.configure(other, tokunseba_connect_timeout_ms=0, tokunseba_rules=str(rules_file), tokunseba_ledger=str(tmp_path / "other.db"))
        await other.running()
        _for_replay(f)
        await other.request(f)
        other.done()
    assert f.response.status_code == 400
    err = anthropic_error(f)
    assert err["type"] == "invalid_request_error"
    assert err["message"].startswith("tokunseba: this flow cannot be replayed: tokunseba rewrote it")
    assert f.marked == MARKS["refused"] and f.comment == err["message"]
    assert f.request.url == CLIENT_URL  # nothing was sent anywhere
