"""Odd upstream replies never crash a reply translator: one Chat reply (text, reasoning, a
tool call, usage) translated to each protocol is that protocol's upstream reply; every
subtree of it (up to the fourth item of each list) replaced by an odd JSON value, one at a
time, is translated by ``translate.reply`` to every other protocol or refused with a
``TranslationError`` (a 502), never another exception (a 500 and a traceback). The same
reply, streamed by that protocol's own stream encoder, with every subtree of every event
replaced: ``translate.stream`` feeds and closes without any exception, and what it writes is
a well-formed stream of the client's protocol (its own decoder reads it to a clean end or to
an error event). Complements test_request_mutations for replies; it found a list as a
message id, a finish_reason or a stop_reason, a number as Chat tool_calls, Responses output
or a message item's content, a list as an output_text's text."""

from __future__ import annotations

import json

import pytest

from tokunseba import translate
from tokunseba.errors import TranslationError
from tokunseba.neutral.events import MessageStop, StreamError
from tokunseba.neutral.message import Message
from tokunseba.neutral.report import ReplyReport
from tokunseba.sse import SSEDecoder
from tests.support.mutations import ODD, PROTOCOLS, paths, replaced

CREATED = 1767225600
CHAT = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls",
                     "message": {"role": "assistant", "content": "hi there", "reasoning_content": "think",
                                 "tool_calls": [{"id": "call_1", "type": "function",
                                                 "function": {"name": "f", "arguments": "{\"a\": 1}"}}]}}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7,
                  "prompt_tokens_details": {"cached_tokens": 1}}}


def _whole(protocol: str) -> dict:
    """The Chat reply as ``protocol``'s whole reply."""
    if protocol == "openai":
        return CHAT
    return json.loads(translate.reply("openai", protocol, json.dumps(CHAT).encode(), created=CREATED).body)


def _stream_events(protocol: str) -> list[tuple[str | None, object]]:
    """The same reply as ``protocol`` streams it (its own stream encoder): (event name, data)
    with the data parsed when it is JSON."""
    body = json.dumps(_whole(protocol)).encode()
    codec = translate.CODECS[protocol]
    msg = Message.collect(codec.decode_reply(body, ReplyReport()))
    enc = codec.stream_encoder(ReplyReport(), True, CREATED)
    sse = SSEDecoder()
    data = b"".join(enc.encode(ev) for ev in msg.events())
    out = []
    for ev in sse.feed(data) + sse.close():
        try:
            out.append((ev.event, json.loads(ev.data)))
        except ValueError:
            out.append((ev.event, ev.data))  # [DONE]
    return out


def _sse(events: list[tuple[str | None, object]]) -> bytes:
    parts = []
    for name, data in events:
        head = f"event: {name}\n" if name is not None else ""
        text = data if isinstance(data, str) else json.dumps(data)
        parts.append(f"{head}data: {text}\n\n")
    return "".join(parts).encode()


def _ends_cleanly_or_in_error(protocol: str, out: bytes) -> bool:
    """``out`` read back by ``protocol``'s own stream decoder ends in a message stop or an
    error event, and every event of it is one the decoder reads (no exception)."""
    dec = translate.CODECS[protocol].stream_decoder(ReplyReport())
    sse = SSEDecoder()
    evs = [e for ev in sse.feed(out) + sse.close() for e in dec.on_event(ev)] + dec.close()
    return bool(evs) and isinstance(evs[-1], (MessageStop, StreamError))


@pytest.mark.parametrize("upstream", PROTOCOLS)
def test_every_subtree_of_a_whole_reply_replaced_by_an_odd_value_is_translated_or_refused(upstream):
    body = _whole(upstream)
    crashes = {}
    for where in list(paths(body))[1:]:
        for odd in ODD:
            raw = json.dumps(replaced(body, where, odd)).encode()
            for client in PROTOCOLS:
                if client == upstream:
                    continue
                try:
                    translate.reply(upstream, client, raw, created=CREATED)
                except TranslationError:
                    pass
                except Exception as e:  # noqa: BLE001 - the point of the test
                    crashes.setdefault(f"{type(e).__name__}: {e}", (client, where, odd))
    assert not crashes, crashes


@pytest.mark.parametrize("upstream", PROTOCOLS)
def test_every_subtree_of_a_streamed_reply_replaced_by_an_odd_value_ends_the_stream_well(upstream):
    events = _stream_events(upstream)
    assert len(events) > 3
    for client in PROTOCOLS:  # the unmutated stream reads to a clean end in every client protocol
        if client != upstream:
            st = translate.stream(upstream, client, created=CREATED)
            out = st.feed(_sse(events)) + st.close()
            assert _ends_cleanly_or_in_error(client, out) and not st.report.errors, (client, st.report.errors)
    crashes, broken = {}, {}
    for n, (name, data) in enumerate(events):
        if isinstance(data, str):
            continue
        for where in list(paths(data))[1:]:
            for odd in ODD:
                mutated = [*events[:n], (name, replaced(data, where, odd)), *events[n + 1:]]
                raw = _sse(mutated)
                for client in PROTOCOLS:
                    if client == upstream:
                        continue
                    try:
                        st = translate.stream(upstream, client, created=CREATED)
                        out = st.feed(raw) + st.close()
                    except Exception as e:  # noqa: BLE001 - the point of the test
                        crashes.setdefault(f"{type(e).__name__}: {e}", (client, n, name, where, odd))
                        continue
                    if not _ends_cleanly_or_in_error(client, out):
                        broken.setdefault((client, name, where), (odd, out[-300:]))
    assert not crashes, crashes
    assert not broken, broken
