"""Keep-alives (issue 10 item 3): an upstream keep-alive (SSE comment line, Anthropic
``ping``) becomes a neutral ``KeepAlive`` and the client protocol's own keep-alive; it is
never content (same blocks, usage, stop and report as the stream without it). The relay
adds its own SSE comment to a stalled SSE reply, only at an event boundary. Split
invariance of the keep-alive fixtures is covered by tests/suites/test_split_invariance.py (they
are in tests/data/streams/)."""

from __future__ import annotations

import asyncio
import random
import re

import pytest
from google.genai import errors as genai_errors

from tokunseba.proxy.relay import KEEPALIVE, Relay
from tokunseba.neutral.events import KEEPALIVE as KA, KeepAlive, MessageStart, MessageStop
from tokunseba.neutral.report import ReplyReport
from tokunseba.protocols.anthropic import SSE_PING
from tokunseba.sse import KEEPALIVE_COMMENT, EventBoundary, SSEDecoder
from tokunseba.translate import CODECS
from tokunseba.translate import stream as make_stream

from tests.proxy.test_relay import _ask, _dechunk, _read_request, _serve
from tests.suites.test_gemini_sdk import _text, sdk_stream
from tests.translate.gemini.test_stream import run as run_gemini
from tests.translate.openai_chat.test_stream import STREAMS, raw, translate

PING = re.compile(rb'event: ping(\r\n|\r|\n)data: \{"type": ?"ping"\}(\r\n|\r|\n)')


def _without_keep_alives(data: bytes) -> bytes:
    """The stream with its comment lines and Anthropic pings taken out."""
    parts = re.split(rb"(\r\n|\r|\n)", PING.sub(b"", data))
    lines = zip(parts[0::2], parts[1::2] + [b""])
    return b"".join(line + end for line, end in lines if not line.startswith(b":"))


# ------------------------------------------------------------------ SSE layer


def test_sse_decoder_reports_comments_only_when_asked():
    data = b": keep-alive\n\ndata: 1\n: inside\ndata: 2\n\n:\r\n"
    assert [(e.data, e.comment) for e in SSEDecoder().feed(data)] == [("1\n2", False)]
    d = SSEDecoder(comments=True)
    got = [(e.data, e.comment) for e in d.feed(data) + d.close()]
    assert got == [("keep-alive", True), ("inside", True), ("1\n2", False), ("", True)]


@pytest.mark.parametrize("stream, boundary", [
    (b"", True),
    (b"data: x\n\n", True),
    (b"data: x\r\n\r\n", True),
    (b"data: x\r\r", True),
    (b"data: x\n\r", True),  # the \r ended the blank line; a \n after it is one more blank line
    (b": c\n\n", True),
    (b"data: x\n", False),
    (b"data: x\r\n", False),
    (b"data: x\r", False),
    (b"data: x", False),
    (b"event: a\ndata: x\n\nevent: b\n", False),
])
def test_event_boundary(stream, boundary):
    for cut in range(len(stream) + 1):  # the answer depends on the bytes, not on their split
        b = EventBoundary()
        b.feed(stream[:cut])
        b.feed(stream[cut:])
        assert b.at_boundary is boundary, cut


# ------------------------------------------------------------------ decoders and encoders


def test_anthropic_ping_decodes_to_keep_alive():
    dec = CODECS["anthropic"].stream_decoder(ReplyReport())
    d = SSEDecoder()
    events = d.feed(b'event: ping\ndata: {"type": "ping"}\n\n')
    assert [type(e) for ev in events for e in dec.on_event(ev)] == [KeepAlive]


START = {  # one upstream start event per protocol
    "openai": b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,'
              b'"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n',
    "anthropic": b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","model":"m",'
                 b'"usage":{"input_tokens":1}}}\n\n',
}


@pytest.mark.parametrize("client, before, after", [
    ("anthropic", KEEPALIVE_COMMENT, SSE_PING),  # a comment until message_start is out, then a ping
    ("openai", KEEPALIVE_COMMENT, KEEPALIVE_COMMENT),
    ("openai-responses", KEEPALIVE_COMMENT, KEEPALIVE_COMMENT),
    ("gemini", b"", b""),  # google-genai reads a comment line as JSON (below)
])
def test_each_encoder_writes_its_clients_keep_alive(client, before, after):
    upstream = "anthropic" if client == "openai" else "openai"
    tr = make_stream(upstream, client, created=1767225600)
    assert tr.feed(b": up\n\n") == before
    tr.feed(START[upstream])
    assert tr.feed(b": up\n\n") == after
    enc = CODECS[client].stream_encoder(ReplyReport(), True, 1767225600)
    enc.encode(MessageStart("msg_1", "m"))
    enc.encode(MessageStop("end_turn"))
    assert enc.finished and enc.encode(KA) == b""  # nothing after the end


def test_a_ping_reaches_an_anthropic_client_after_message_start():
    out, t = translate("chat_keepalive_comments.sse")
    names = [e.event for e in SSEDecoder().feed(out)]
    assert names[0] == "message_start" and names.count("ping") == 4
    assert out.startswith(KEEPALIVE_COMMENT)  # the upstream's first comment came before any chunk
    assert t.report.completed and not t.report.errors


@pytest.mark.parametrize("name, client", [
    ("chat_keepalive_comments.sse", "anthropic"), ("chat_keepalive_comments.sse", "openai-responses"),
    ("chat_keepalive_comments.sse", "gemini"), ("responses_keepalive_comments.sse", "anthropic"),
    ("responses_keepalive_comments.sse", "openai"), ("anthropic_ping_cr.sse", "openai"),
])
def test_keep_alives_are_never_content(name, client):
    data = raw(name)
    upstream = {"chat": "openai", "resp": "openai-responses", "anth": "anthropic"}[name[:4]]
    plain = _without_keep_alives(data)
    assert plain != data
    with_ka, t1 = translate(data, upstream, client)
    without, t2 = translate(plain, upstream, client)
    strip = with_ka.replace(SSE_PING, b"").replace(KEEPALIVE_COMMENT, b"")
    assert strip == without
    assert (t1.report.usage, t1.report.stop_reason, t1.report.completed, t1.report.dropped, t1.report.warnings,
            t1.client_usage) == (t2.report.usage, t2.report.stop_reason, t2.report.completed, t2.report.dropped,
                                 t2.report.warnings, t2.client_usage)
    if client != "gemini":
        assert with_ka != without


def test_google_genai_fails_on_a_comment_so_gemini_clients_get_none():
    out, t = run_gemini((STREAMS / "chat_keepalive_comments.sse").read_bytes(), "openai", "gemini")
    assert b"\n:" not in out and not out.startswith(b":")
    assert _text(sdk_stream(out)) == "Hi th\u00e9re \U0001f600"
    with pytest.raises(genai_errors.UnknownApiResponseError):
        sdk_stream(KEEPALIVE_COMMENT + out)


# ------------------------------------------------------------------ the relay's own keep-alive


def _stalling_upstream(pieces: list[bytes], pause: float, headers: bytes = b"content-type: text/event-stream\r\n"):
    async def handler(reader, writer):
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\n" + headers + b"transfer-encoding: chunked\r\n\r\n")
        for i, p in enumerate(pieces):
            if i:
                await asyncio.sleep(pause)
            writer.write(b"%x\r\n%s\r\n" % (len(p), p))
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        writer.close()
    return handler


async def _relay(pieces, pause=0.3, keepalive_s=0.05, headers=b"content-type: text/event-stream\r\n", **reg):
    server, port = await _serve(_stalling_upstream(pieces, pause, headers))
    relay = Relay(keepalive_s=keepalive_s)
    await relay.start()
    try:
        token, url = relay.register(f"http://127.0.0.1:{port}/v1/messages", **reg)
        _, body = _dechunk(await _ask(url))
        return body, relay.finish(token)
    finally:
        relay.stop()
        server.close()


async def test_relay_keeps_a_stalled_sse_reply_alive_at_event_boundaries_only():
    # silent once after a whole event, once inside an unfinished one
    pieces = [b"data: 1\n\n", b"data: 2\ndata: more", b"\n\ndata: 3\n\n"]
    body, target = await _relay(pieces)
    assert body.replace(KEEPALIVE, b"") == b"".join(pieces)
    first = body.index(KEEPALIVE)
    assert first == len(pieces[0])  # at the boundary after event 1
    assert body.count(KEEPALIVE) == target.keepalives >= 1
    # never inside event 2: the events a parser sees are exactly the upstream's
    d = SSEDecoder(comments=True)
    events = d.feed(body) + d.close()
    assert [e.data for e in events if not e.comment] == ["1", "2\nmore", "3"]
    assert all(e.data == "tokunseba keep-alive" for e in events if e.comment)
    inside = body.index(b"data: 2")
    assert KEEPALIVE not in body[inside:body.index(b"data: 3")]


@pytest.mark.parametrize("headers, reg, keepalive_s", [
    (b"content-type: application/json\r\n", {}, 0.05),  # not SSE
    (b"content-type: text/event-stream\r\ncontent-encoding: gzip\r\n", {}, 0.05),  # compressed bytes
    (b"content-type: text/event-stream\r\n", {"keepalive": False}, 0.05),  # an unchanged Gemini stream
    (b"content-type: text/event-stream\r\n", {}, 0),  # off
])
async def test_relay_adds_no_keep_alive_where_it_cannot(headers, reg, keepalive_s):
    pieces = [b"data: 1\n\n", b"data: 2\n\n"]
    body, target = await _relay(pieces, pause=0.2, keepalive_s=keepalive_s, headers=headers, **reg)
    assert body == b"".join(pieces) and target.keepalives == 0


async def test_silence_longer_than_the_idle_timeout_still_ends_the_turn():
    server, port = await _serve(_stalling_upstream([b"data: 1\n\n", b"data: 2\n\n"], 1.0))
    relay = Relay(keepalive_s=0.05, idle_timeout=0.3)
    await relay.start()
    try:
        token, url = relay.register(f"http://127.0.0.1:{port}/v1/messages")
        _, body = _dechunk(await _ask(url))
        target = relay.finish(token)
        assert body.startswith(b"data: 1\n\n" + KEEPALIVE) and b"data: 2" not in body
        assert target.broken and "upstream connection broke" in target.broken.message
    finally:
        relay.stop()
        server.close()


def test_random_splits_of_keep_alive_fixtures_match_whole():
    for name in ("chat_keepalive_comments.sse", "responses_keepalive_comments.sse"):
        whole, _ = translate(name)
        data = raw(name)
        rng = random.Random(name)
        for _ in range(50):
            cuts = sorted(rng.sample(range(1, len(data)), 15))
            assert translate(name, cuts=cuts)[0] == whole
