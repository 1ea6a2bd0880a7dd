"""The stream translator (translate/streaming.py), sans-IO: every complete translated event returned
at once whatever the split of the input; keep-alives crossing as the client's own; an upstream that
never sent its end answered with an error in the client's protocol; a reply the endpoint's cap ended
told ``end_turn`` with the conversion recorded and the endpoint's ``max_tokens`` kept."""

from __future__ import annotations

import json

from tokunseba import translate
from tokunseba.neutral.conversation import Capped
from tokunseba.sse import SSEDecoder


def chunk(delta: dict | None = None, finish: str | None = None, **extra) -> bytes:
    doc = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "qwen3",
           "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
    return b"data: " + json.dumps(doc).encode() + b"\n\n"


STREAM = (chunk({"role": "assistant", "content": "Hel"}) + chunk({"content": "lo"}) + chunk({}, "length")
          + chunk(None, usage={"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}) + b"data: [DONE]\n\n")


def events(raw: bytes) -> list[tuple[str | None, dict]]:
    return [(e.event, json.loads(e.data)) for e in SSEDecoder().feed(raw)]


def test_the_output_does_not_depend_on_the_split():
    whole = translate.stream("openai", "anthropic")
    out = whole.feed(STREAM) + whole.close()
    bytewise = translate.stream("openai", "anthropic")
    out2 = b"".join(bytewise.feed(STREAM[i:i + 1]) for i in range(len(STREAM))) + bytewise.close()
    assert out == out2 and whole.started
    kinds = [k for k, _ in events(out)]
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    texts = [d["delta"]["text"] for k, d in events(out) if k == "content_block_delta"]
    assert "".join(texts) == "Hello"
    (stop,) = [d for k, d in events(out) if k == "message_delta"]
    assert stop["delta"]["stop_reason"] == "max_tokens"  # no cap of the endpoint's: told as it is
    assert whole.report.usage.reported == {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
    assert whole.report.model == "qwen3"


def test_nothing_complete_yet_is_nothing():
    t = translate.stream("openai", "anthropic")
    assert t.feed(STREAM[:10]) == b"" and t.feed(b"") == b"" and not t.started


def test_a_keep_alive_comment_becomes_the_clients_own():
    t = translate.stream("openai", "anthropic")
    t.feed(chunk({"role": "assistant", "content": "Hel"}))
    assert events(t.feed(b": keep-alive\n\n")) == [("ping", {"type": "ping"})]
    chat = translate.stream("anthropic", "openai")  # the other way: an Anthropic ping becomes an SSE comment
    chat.feed(b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message",'
              b'"role":"assistant","model":"claude","content":[],"stop_reason":null,'
              b'"usage":{"input_tokens":1,"output_tokens":0}}}\n\n')
    assert chat.feed(b'event: ping\ndata: {"type":"ping"}\n\n').startswith(b":")


def test_an_upstream_that_never_ended_is_an_error_in_the_clients_protocol():
    t = translate.stream("openai", "anthropic")
    t.feed(chunk({"role": "assistant", "content": "Hel"}))
    tail = events(t.close())
    assert tail[-1][0] == "error" and tail[-1][1]["error"]["type"] == "api_error"
    assert t.close() == b"" and t.feed(STREAM) == b""  # closed: nothing more


def test_a_broken_connection_is_an_error_event_once_and_none_after_the_end():
    t = translate.stream("openai", "openai-responses")
    t.feed(chunk({"role": "assistant", "content": "Hel"}))
    failed = t.fail("upstream connection broke")
    assert failed and b"upstream connection broke" in failed
    done = translate.stream("openai", "anthropic")
    done.feed(STREAM)
    done.close()
    assert done.fail("late") == b""


def test_a_reply_the_endpoints_cap_ended_is_told_end_turn():
    t = translate.stream("openai", "anthropic", capped=Capped(asked=64000, cap=2))
    out = t.feed(STREAM) + t.close()
    (stop,) = [d for k, d in events(out) if k == "message_delta"]
    assert stop["delta"]["stop_reason"] == "end_turn"
    assert t.report.stop_reason == "max_tokens"  # the ledger keeps the endpoint's own
    assert any("max_tokens -> end_turn" in c and "the client asked for 64000" in c for c in t.report.converted)
