"""The side watch of replies passed on unchanged: usage as reported and a verdict — clean,
an upstream error event, cut mid-event, no terminal event, not the declared encoding — that
does not depend on how the bytes were split; and the whole-reply JSON check."""

from __future__ import annotations

import gzip
import json

import brotli
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokunseba.turn.stream_watch import CUT_MID_EVENT, NO_TERMINAL, StreamWatch, whole_verdict

ANT = (b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message",'
       b'"role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,'
       b'"usage":{"input_tokens":7,"output_tokens":1}}}\n\n'
       b'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n'
       b'event: ping\ndata: {"type":"ping"}\n\n'
       b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}\n\n'
       b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
       b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},'
       b'"usage":{"output_tokens":3}}\n\n')
ANT_STOP = b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
ANT_ERROR = b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n'


def chat(*chunks: dict) -> bytes:
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)


CHAT_OK = chat({"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi"}, "finish_reason": None}]},
               {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
               {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}}) + \
    b"data: [DONE]\n\n"
RESPONSES_OK = (b'event: response.created\ndata: {"type":"response.created","response":{"id":"r1"}}\n\n'
                b'event: response.completed\ndata: {"type":"response.completed","response":{"id":"r1",'
                b'"usage":{"input_tokens":4,"output_tokens":2,"total_tokens":6}}}\n\n')
RESPONSES_FAILED = (b'event: response.created\ndata: {"type":"response.created","response":{"id":"r1"}}\n\n'
                    b'event: response.failed\ndata: {"type":"response.failed","response":{"id":"r1",'
                    b'"error":{"code":"server_error","message":"boom"}}}\n\n')
RESPONSES_DELTAS = (b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","output_index":0,'
                    b'"content_index":0,"item_id":"m1","delta":"Hi"}\n\n'
                    b'event: response.function_call_arguments.delta\ndata: {"type":'
                    b'"response.function_call_arguments.delta","output_index":1,"item_id":"fc1","delta":"{\\"a\\""}\n\n')

CASES = [
    ("anthropic", ANT + ANT_STOP, None),
    ("anthropic", ANT, NO_TERMINAL),
    ("anthropic", ANT + ANT_STOP[:20], CUT_MID_EVENT),
    ("anthropic", ANT + ANT_ERROR, "upstream stream carried an error: Overloaded"),
    ("openai", CHAT_OK, None),
    ("openai", CHAT_OK.split(b'data: {"choices": [{"index": 0, "delta": {}')[0], NO_TERMINAL),
    ("openai", chat({"error": {"message": "quota", "type": "insufficient_quota"}}),
     "upstream stream carried an error: quota"),
    ("openai-responses", RESPONSES_OK, None),
    ("openai-responses", RESPONSES_OK[:60], CUT_MID_EVENT),
    ("openai-responses", RESPONSES_FAILED, "upstream stream carried an error: boom"),
    # read by the Responses codec's decoder: its deltas skipped, incomplete is an end, an
    # `error` event is the upstream's, a type carried only in the data still counts
    ("openai-responses", RESPONSES_OK.replace(b"event: response.completed", RESPONSES_DELTAS + b"event: response.completed"),
     None),
    ("openai-responses", RESPONSES_OK.replace(b"response.completed", b"response.incomplete"), None),
    ("openai-responses", RESPONSES_OK.split(b"event: response.completed")[0] + RESPONSES_DELTAS, NO_TERMINAL),
    ("openai-responses", RESPONSES_OK.split(b"event: response.completed")[0]
     + b'event: error\ndata: {"type":"error","code":"x","message":"Overloaded"}\n\n',
     "upstream stream carried an error: Overloaded"),
    ("openai-responses", RESPONSES_OK.replace(b"event: response.created\n", b"").replace(b"event: response.completed\n", b""),
     None),
]


def watch(protocol: str, data: bytes, cuts: list[int], encoding: str | None = None) -> StreamWatch:
    w = StreamWatch(protocol, encoding)
    prev = 0
    for c in sorted(set(cuts)) + [len(data)]:
        w.feed(data[prev:c])
        prev = c
    w.close()
    return w


@pytest.mark.parametrize(("protocol", "data", "verdict"), CASES)
def test_verdict_at_every_split_point(protocol, data, verdict):
    for i in range(len(data) + 1):
        assert watch(protocol, data, [i]).verdict() == verdict, i


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, len(ANT + ANT_STOP)), max_size=12))
def test_usage_and_verdict_do_not_depend_on_the_split(cuts):
    w = watch("anthropic", ANT + ANT_STOP, cuts)
    assert w.verdict() is None and w.usage.reported == {"input_tokens": 7, "output_tokens": 3}


def test_usage_as_reported_per_protocol():
    assert watch("openai", CHAT_OK, []).usage.reported == {"prompt_tokens": 5, "completion_tokens": 1,
                                                           "total_tokens": 6}
    assert watch("openai-responses", RESPONSES_OK, []).usage.reported == {"input_tokens": 4, "output_tokens": 2,
                                                                          "total_tokens": 6}


@pytest.mark.parametrize("encoding,pack", [("gzip", gzip.compress), ("br", brotli.compress)])
def test_compressed_streams_are_judged_on_their_decoded_bytes(encoding, pack):
    packed = pack(ANT + ANT_STOP)
    for i in range(0, len(packed) + 1, 7):
        w = watch("anthropic", packed, [i], encoding)
        assert w.verdict() is None and w.usage is not None
    assert watch("anthropic", pack(ANT), [], encoding).verdict() == NO_TERMINAL
    assert watch("anthropic", packed[:-8], [], encoding).verdict().startswith("unreadable upstream stream")


def test_what_cannot_be_judged_is_not_called_broken():
    assert watch("gemini", b'data: {"candidates": []}\n\n', []).verdict() is None
    assert StreamWatch("anthropic", "compress").verdict() == "unsupported content-encoding 'compress'"


def test_whole_reply_must_be_a_json_object():
    obj, why = whole_verdict("application/json", b'{"type":"message"}')
    assert obj == {"type": "message"} and why is None
    assert whole_verdict("text/html", b"<html>502 Bad Gateway</html>") == (
        None, "upstream reply is not valid JSON (text/html, 28 bytes)")
    assert whole_verdict("application/json", b'{"type":"mess') == (
        None, "upstream reply is not valid JSON (application/json, 13 bytes)")
    assert whole_verdict("application/json", b"[1]") == (None, "upstream reply is not a JSON object")
    assert whole_verdict("text/event-stream", b"data: {}\n\n")[1] == \
        "upstream sent a stream where a whole JSON reply was due"


ANT_BAD_JSON = b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"text":"w\n\n'
RESPONSES_BAD_JSON = b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":"w\n\n'


@pytest.mark.parametrize(("protocol", "data"), [
    ("anthropic", ANT[:ANT.index(b"event: content_block_stop")] + ANT_BAD_JSON + ANT_STOP),
    ("openai", CHAT_OK.replace(b'"content": "Hi"}', b'"content": "Hi', 1)),
    ("openai-responses", RESPONSES_OK.replace(b"event: response.completed",
                                              RESPONSES_BAD_JSON + b"event: response.completed")),
])
def test_an_event_that_is_not_json_is_fatal_at_every_split_point(protocol, data):
    """The client's SDK would raise a parse error on it: the stream cannot go on from there."""
    for i in range(len(data) + 1):
        w = watch(protocol, data, [i])
        assert w.fatal and "not valid JSON" in w.fatal and w.verdict() == w.fatal and not w.completed, i


def test_an_event_larger_than_the_cap_is_fatal():
    from tokunseba import sse
    sse.set_max_event_bytes(256)
    try:
        big = b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":' \
              b'"text_delta","text":"' + b"x" * 300 + b'"}}\n\n'
        for i in range(0, len(ANT) + len(big) + 1, 13):
            w = watch("anthropic", ANT + big + ANT_STOP, [i])
            assert w.fatal == "upstream sent an SSE event larger than 256 bytes (the cap; option " \
                              "tokunseba_max_event_bytes)" and w.verdict() == w.fatal, i
    finally:
        sse.set_max_event_bytes(sse.DEFAULT_MAX_EVENT_BYTES)


def test_a_cut_or_clean_stream_is_not_fatal():
    assert watch("anthropic", ANT + ANT_STOP[:20], []).fatal is None  # cut: its verdict says so
    assert watch("openai", CHAT_OK, []).fatal is None and watch("openai-responses", RESPONSES_OK, []).fatal is None


def test_anthropic_text_deltas_are_not_parsed(monkeypatch):
    """The watch skips an Anthropic stream's text deltas (no usage, end or error rides on
    them): a delta whose text mentions an error is not one, usage and the end still read."""
    seen = []

    def ev(name, obj):
        return f"event: {name}\ndata: {json.dumps(obj)}\n\n".encode()

    body = (ev("message_start", {"type": "message_start", "message": {"usage": {"input_tokens": 5, "output_tokens": 1}}})
            + ev("content_block_start", {"type": "content_block_start", "index": 0,
                                         "content_block": {"type": "text", "text": ""}})
            + ev("content_block_delta", {"type": "content_block_delta", "index": 0,
                                         "delta": {"type": "text_delta", "text": '{"error": "not really"}'}})
            + ev("content_block_stop", {"type": "content_block_stop", "index": 0})
            + ev("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                                   "usage": {"output_tokens": 7}})
            + ev("message_stop", {"type": "message_stop"}))
    w = StreamWatch("anthropic")
    orig = w._dec.on_event
    w._dec.on_event = lambda e: seen.append(e.event) or orig(e)
    w.feed(body)
    w.close()
    assert "content_block_delta" not in seen and "message_delta" in seen
    assert w.verdict() is None and w.error is None
    assert w.usage.reported["output_tokens"] == 7


GEMINI_CHUNKS = (b'data: {"candidates":[{"content":{"role":"model","parts":[{"text":"Hi"}]},"index":0}],'
                 b'"modelVersion":"gemini-2.5-flash-001"}\r\n\r\n'
                 b'data: {"candidates":[{"content":{"role":"model","parts":[{"text":"!"}]},"index":0,'
                 b'"finishReason":"STOP"}],"modelVersion":"gemini-2.5-flash-001"}\r\n\r\n')
NAMED = {  # protocol -> (a stream whose first event names the model, the model)
    "anthropic": (ANT.replace(b'"model":"m"', b'"model":"claude-x-1"') + ANT_STOP, "claude-x-1"),
    "openai": (chat({"model": "gpt-x-1", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi"},
                                                      "finish_reason": None}]},
                    {"model": "gpt-x-1", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
               + b"data: [DONE]\n\n", "gpt-x-1"),
    "openai-responses": (RESPONSES_OK.replace(b'"response":{"id":"r1"}}', b'"response":{"id":"r1","model":"gpt-r-1"}}',
                                              1), "gpt-r-1"),
    "gemini": (GEMINI_CHUNKS, "gemini-2.5-flash-001"),
}


@pytest.mark.parametrize("protocol", sorted(NAMED))
def test_the_model_a_passed_on_stream_names_at_every_split_point(protocol):
    """gen_ai.response.model of a reply passed on: its first event's model, read by the
    protocol's own decoder on the side (the stream itself is not held), whatever the split."""
    data, model = NAMED[protocol]
    for i in range(len(data) + 1):
        w = StreamWatch(protocol)
        w.feed(data[:i])
        w.feed(data[i:])
        w.close()
        assert w.model == model, (protocol, i)
    w = StreamWatch(protocol)
    w.feed(data[:20])
    assert w.model is None  # not yet said: nothing is guessed


def test_a_stream_that_names_no_model_has_none():
    w = StreamWatch("openai")
    w.feed(CHAT_OK)
    w.close()
    assert w.model is None and w.verdict() is None


@pytest.mark.parametrize("protocol,body,model", [
    ("anthropic", {"id": "msg_1", "type": "message", "model": "claude-x-1", "content": []}, "claude-x-1"),
    ("openai", {"id": "c1", "object": "chat.completion", "model": "gpt-x-1", "choices": []}, "gpt-x-1"),
    ("openai-responses", {"id": "r1", "object": "response", "model": "gpt-r-1", "output": []}, "gpt-r-1"),
    ("gemini", {"candidates": [], "modelVersion": "gemini-2.5-flash-001", "model": "not-this"}, "gemini-2.5-flash-001"),
    ("openai", {"id": "c1", "choices": []}, None),
    ("openai", {"id": "c1", "model": 7, "choices": []}, None),
])
def test_the_model_a_passed_on_whole_reply_names(protocol, body, model):
    from tokunseba.turn.outcome import Outcome

    out = Outcome.of_whole(protocol, 200, "application/json", json.dumps(body).encode())
    assert out.model == model
    assert Outcome.of_whole(protocol, 200, "text/html", b"<html>").model is None


@pytest.mark.parametrize(("protocol", "data"), [
    ("anthropic", ANT.replace(b'"text":"Hi"', b'"text":"H\xff\xfei"') + ANT_STOP),
    ("openai", CHAT_OK.replace(b'"content": "Hi"', b'"content": "H\xc3i"')),
    ("openai-responses", RESPONSES_OK.replace(b'"id":"r1"}}', b'"id":"r\xed\xa0\x80"}}', 1)),  # a lone surrogate
])
def test_bytes_that_are_not_utf8_are_fatal_at_every_split_point(protocol, data):
    """The official SDKs decode a stream as strict UTF-8 and raise on it (issue 29: a retargeted
    stream the Anthropic SDK crashed on was recorded as clean): the stream ends there."""
    for i in range(len(data) + 1):
        w = watch(protocol, data, [i])
        assert w.fatal and "not valid UTF-8" in w.fatal and w.verdict() == w.fatal, i


def test_utf8_cut_at_the_end_is_a_problem_and_multibyte_text_is_fine():
    ok = ANT.replace(b'"text":"Hi"', "\"text\":\"H\u00e9 \u4f60\u597d \U0001f600\"".encode()) + ANT_STOP
    for i in range(len(ok) + 1):
        assert watch("anthropic", ok, [i]).verdict() is None, i
    w = watch("anthropic", ANT + ANT_STOP + "\u4f60".encode()[:2], [])
    assert w.verdict() is not None and "UTF-8" in w.verdict()


# the skipped events in every shape the SSE spec allows (the plain one is read from the bytes, the
# others by the decoder), with comments and CRLF among them: the same verdict and usage however split
DELTA_SHAPES = [
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}}\n\n',
    b'event: content_block_delta\r\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"b"}}\r\n\r\n',
    b': a comment\nevent: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"c"}}\n\n',
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,\ndata: "delta":{"type":"text_delta","text":"d"}}\n\n',
    b'event:content_block_delta\ndata:{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"e"}}\n\n',
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"f\xc3\xa9"}}\n\n',
]
DELTA_BAD = b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":\n\n'


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(range(len(DELTA_SHAPES) + 1)), max_size=8), st.data())
def test_skipped_events_in_any_shape_and_split_give_the_same_verdict(picks, data):
    head = ANT[:ANT.index(b"event: content_block_stop")]
    body = b"".join(DELTA_SHAPES[i] if i < len(DELTA_SHAPES) else DELTA_BAD for i in picks)
    stream = head + body + ANT[ANT.index(b"event: content_block_stop"):] + ANT_STOP
    whole = watch("anthropic", stream, [])
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=10))
    w = watch("anthropic", stream, cuts)
    assert (w.verdict(), w.fatal, w.completed) == (whole.verdict(), whole.fatal, whole.completed)
    assert (w.usage.reported if w.usage else None) == (whole.usage.reported if whole.usage else None)
    bad = len(DELTA_SHAPES) in picks
    assert (whole.verdict() is None) is not bad and (not bad or "not valid JSON" in whole.fatal)


def test_chat_text_pieces_are_not_decoded():
    """The watch skips a Chat stream's text pieces (no usage, end or error rides on them) once its
    first chunk was decoded: a piece whose text mentions an error is not one; the first chunk (the
    model), the finish, the usage and ``[DONE]`` are decoded, usage read as reported."""
    head = {"id": "c1", "model": "gpt-x-1", "object": "chat.completion.chunk"}
    body = chat(head | {"choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": None}]},
                head | {"choices": [{"index": 0, "delta": {"content": '{"error": "not really"}'}, "finish_reason": None}],
                        "usage": None},
                head | {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                head | {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}}) \
        + b"data: [DONE]\n\n"
    seen = []
    w = StreamWatch("openai")
    orig = w._dec.on_event
    w._dec.on_event = lambda e: seen.append(e.data) or orig(e)
    w.feed(body)
    w.close()
    assert len(seen) == 4 and not any("not really" in d for d in seen) and seen[-1] == "[DONE]"
    assert (w.verdict(), w.error, w.model, w.completed) == (None, None, "gpt-x-1", True)
    assert w.usage.reported == {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}


# Chat chunks in the shapes servers send (text pieces among them, and what is not one: a role, a
# finish, tool-call fragments, reasoning, usage, errors, several choices, odd types, not JSON, CRLF,
# comments, two data lines)
_C = {"id": "c1", "model": "gpt-x-1", "object": "chat.completion.chunk"}
CHAT_SHAPES = [
    chat(_C | {"choices": [{"index": 0, "delta": {"content": "a"}, "finish_reason": None}]}),
    chat(_C | {"choices": [{"index": 0, "delta": {"content": "b"}}], "usage": None}),
    chat(_C | {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "c"}, "finish_reason": None}]}),
    chat(_C | {"choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": None}]}),
    chat(_C | {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                                                   "function": {"name": "f", "arguments": ""}}]}}]}),
    chat(_C | {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}}]}),
    chat(_C | {"choices": [{"index": 0, "delta": {"reasoning_content": "hm"}}]}),
    chat(_C | {"choices": [{"index": 0, "delta": {"content": "d"}, "finish_reason": "stop"}]}),
    chat(_C | {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}),
    chat(_C | {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}}),
    chat(_C | {"choices": [{"index": 0, "delta": {"content": "e"}}], "usage": {"prompt_tokens": 1}}),
    chat({"error": {"message": "quota", "type": "insufficient_quota"}}),
    chat(_C | {"object": "error", "choices": [{"index": 0, "delta": {"content": "f"}}]}),
    chat(_C | {"choices": [{"index": 1, "delta": {"content": "g"}}]}),
    chat(_C | {"choices": [{"index": 0, "delta": {"content": "h"}}, {"index": 1, "delta": {"content": "i"}}]}),
    chat(_C | {"choices": [{"index": 0, "delta": {"content": 7}}]}),
    chat(_C | {"choices": {"index": 0}}),
    chat([1, 2]),
    b'data: {"choices": [{"index": 0, "delta": {"content": "j"}}]}\r\n\r\n',
    b': keep-alive\n\ndata: {"choices": [{"index": 0, "delta": {"content": "k"}}]}\n\n',
    b'data: {"choices": [{"index": 0,\ndata: "delta": {"content": "l"}}]}\n\n',
    b'data: {"choices": [{"index": 0, "delta": {"content": "m"\n\n',
    b"data: [DONE]\n\n",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(range(len(CHAT_SHAPES))), max_size=10), st.data())
def test_chat_text_pieces_skipped_in_any_shape_and_split_read_as_if_every_chunk_were_decoded(picks, data):
    """What the watch says of a Chat stream (usage, model, end, error, verdict, fatal) is what it
    says when its decoder reads every chunk, however the stream is split."""
    stream = b"".join(CHAT_SHAPES[i] for i in picks)
    ref = StreamWatch("openai")
    ref._skip_chunk = None  # the decoder reads every chunk
    ref.feed(stream)
    ref.close()
    w = watch("openai", stream, data.draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    said = lambda x: (x.verdict(), x.fatal, x.completed, x.error, x.model, x.cut,  # noqa: E731
                      x.usage.reported if x.usage else None)
    assert said(w) == said(ref)
