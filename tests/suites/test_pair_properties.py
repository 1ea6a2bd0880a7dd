"""Properties over every cross pair of the four protocols, with generated replies (hypothesis): a reply rendered in
the upstream's protocol (by that protocol's own encoder, which the SDK tests validate), then
translated for the client and read back with the client protocol's decoder, keeps every
tool id byte for byte, every tool name, argument object and text, and invents no block; the
stream in any split gives the same bytes; the whole reply and the stream agree."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokunseba import jsonc
from tokunseba import translate as tr
from tokunseba.neutral.events import BlockDelta, BlockStart, BlockStop, MessageStart, MessageStop
from tokunseba.neutral.message import Message
from tokunseba.neutral.report import ReplyReport
from tokunseba.neutral.usage import Usage
from tokunseba.protocols.openai_chat import COUNTING_NAME as OPENAI
from tokunseba.sse import SSEDecoder

THREE = ("anthropic", "openai", "openai-responses")
# every cross pair of the registered codecs: the three, and Gemini's six (issue 11)
PAIRS = [(u, c) for u in tr.PROTOCOLS for c in tr.PROTOCOLS if u != c]
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CREATED = 1767225600

ID = st.from_regex(r"[A-Za-z0-9_-]{1,24}", fullmatch=True)  # ids every protocol accepts
NAME = st.from_regex(r"[A-Za-z0-9_-]{1,20}", fullmatch=True)
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=20)
ARGS = st.dictionaries(st.text(min_size=1, max_size=6), st.integers() | st.text(max_size=8) | st.booleans(), max_size=3)


@st.composite
def replies(draw) -> tuple[list[tuple], dict | None]:
    """Blocks (("text", str) or ("tool", id, name, args)) with at most one text block first,
    as every protocol can carry it, and optionally a usage report (OpenAI counting)."""
    blocks: list[tuple] = []
    if draw(st.booleans()):
        blocks.append(("text", draw(TEXT)))
    ids = draw(st.lists(ID, max_size=3, unique=True))
    blocks += [("tool", i, draw(NAME), draw(ARGS)) for i in ids]
    if not blocks:
        blocks.append(("text", draw(TEXT)))
    usage = None
    if draw(st.booleans()):
        cached = draw(st.integers(0, 500))
        usage = {"prompt_tokens": cached + draw(st.integers(0, 5000)), "completion_tokens": draw(st.integers(0, 900)),
                 "prompt_tokens_details": {"cached_tokens": cached}}
    return blocks, usage


def _events(blocks: list[tuple], usage: dict | None, pieces: int) -> list:
    evs: list = [MessageStart("msg_gen01", "model-x")]
    for n, b in enumerate(blocks):
        if b[0] == "text":
            evs.append(BlockStart(n, "text"))
            text = b[1]
        else:
            evs.append(BlockStart(n, "tool_use", id=b[1], name=b[2]))
            text = jsonc.dumps(b[3]) if b[3] else ""
        step = max(1, len(text) // pieces)
        evs += [BlockDelta(n, text[k:k + step]) for k in range(0, len(text), step)]
        evs.append(BlockStop(n))
    stop = "tool_use" if any(b[0] == "tool" for b in blocks) else "end_turn"
    evs.append(MessageStop(stop, None, Usage(OPENAI, usage) if usage else None))
    return evs


def upstream_stream(protocol: str, blocks, usage) -> bytes:
    """The reply as the upstream protocol streams it (that protocol's own stream encoder)."""
    enc = tr.CODECS[protocol].stream_encoder(ReplyReport(), True, CREATED)
    return b"".join(enc.encode(e) for e in _events(blocks, usage, 3))


def upstream_whole(protocol: str, blocks, usage) -> bytes:
    body, _ = tr.CODECS[protocol].encode_reply(Message.collect(_events(blocks, usage, 1)), ReplyReport(), CREATED)
    return body


def read_stream(protocol: str, data: bytes) -> Message:
    """A client-protocol stream read back with that protocol's own decoder."""
    dec = tr.CODECS[protocol].stream_decoder(ReplyReport())
    sse = SSEDecoder()
    evs = [e for ev in sse.feed(data) + sse.close() for e in dec.on_event(ev)] + dec.close()
    return Message.collect(evs)


def read_whole(protocol: str, body: bytes) -> Message:
    return Message.collect(tr.CODECS[protocol].decode_reply(body, ReplyReport()))


def view(m: Message) -> list[tuple]:
    """Blocks as (kind, id, name, parsed arguments or text); empty text blocks carry nothing."""
    out = []
    for b in m.blocks:
        if b.kind == "tool_use":
            out.append(("tool", b.id, b.name, json.loads(b.text or "{}")))
        elif b.kind == "text" and b.text:
            out.append(("text", b.text))
        elif b.kind != "text":
            out.append((b.kind,))
    return out


def expected(blocks) -> list[tuple]:
    return [("text", b[1]) if b[0] == "text" else ("tool", b[1], b[2], b[3]) for b in blocks]


@SETTINGS
@given(replies(), st.sampled_from(PAIRS), st.data())
def test_streams_keep_ids_names_arguments_and_text_and_invent_nothing(reply, pair, data):
    blocks, usage = reply
    upstream, client = pair
    raw = upstream_stream(upstream, blocks, usage)
    t = tr.stream(upstream, client, created=CREATED)
    out = t.feed(raw) + t.close()
    assert t.report.completed and not t.report.errors and not t.report.dropped
    assert view(read_stream(client, out)) == expected(blocks)
    cuts = sorted(data.draw(st.lists(st.integers(1, max(1, len(raw) - 1)), max_size=6, unique=True)))
    t2 = tr.stream(upstream, client, created=CREATED)
    parts, last = [], 0
    for c in cuts:
        parts.append(t2.feed(raw[last:c]))
        last = c
    assert b"".join(parts) + t2.feed(raw[last:]) + t2.close() == out  # any split, same bytes


@SETTINGS
@given(replies(), st.sampled_from(PAIRS))
def test_whole_replies_keep_everything_and_agree_with_the_stream(reply, pair):
    blocks, usage = reply
    upstream, client = pair
    rep = tr.reply(upstream, client, upstream_whole(upstream, blocks, usage), created=CREATED)
    assert not rep.dropped
    assert view(read_whole(client, rep.body)) == expected(blocks)
    t = tr.stream(upstream, client, created=CREATED)
    t.feed(upstream_stream(upstream, blocks, usage))
    t.close()
    assert (t.report.stop_reason, t.client_usage) == (rep.stop_reason, rep.client_usage)
    assert (rep.usage is None) == (usage is None)
