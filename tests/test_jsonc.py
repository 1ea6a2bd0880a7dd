"""jsonc: orjson where it is installed, with the stdlib's exactness where it matters —
integers beyond 64 bits in a tool call's arguments go to another protocol unchanged
(orjson alone reads them as floats and loses digits)."""

from __future__ import annotations

import json

from tokunseba import jsonc, translate

BIG = -9223372036854775809  # one below int64's minimum (found by test_pair_properties)


def test_loads_exact_keeps_big_integers_and_everything_else():
    for text in ('{"0": -9223372036854775809}', '[1, 2.5, {"a": [18446744073709551616]}]', '{"a": 1e19}', '{}'):
        assert jsonc.loads_exact(text) == json.loads(text)
    assert jsonc.dumpb({"n": BIG}) == b'{"n":-9223372036854775809}'


def test_a_chat_tool_calls_big_integer_reaches_an_anthropic_client_exact():
    chat = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function",
                                                                      "function": {"name": "f", "arguments": json.dumps({"n": BIG})}}]}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
    out = json.loads(translate.reply("openai", "anthropic", json.dumps(chat).encode(), created=1).body)
    assert out["content"][0]["input"] == {"n": BIG}


def test_an_anthropic_streamed_tool_input_with_a_big_integer_reaches_a_gemini_client_exact():
    events = [
        ("message_start", {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
                                                                 "model": "m", "content": [], "stop_reason": None,
                                                                 "usage": {"input_tokens": 1, "output_tokens": 0}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "input_json_delta", "partial_json": '{"n": -92233720368'}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "input_json_delta", "partial_json": '54775809}'}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 3}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    sse = b"".join(b"event: %s\ndata: %s\n\n" % (k.encode(), json.dumps(v).encode()) for k, v in events)
    t = translate.stream("anthropic", "gemini")
    out = t.feed(sse) + t.close()
    calls = [p["functionCall"] for line in out.split(b"\n") if line.startswith(b"data: ")
             for c in json.loads(line[6:]).get("candidates", []) for p in c.get("content", {}).get("parts", [])
             if "functionCall" in p]
    assert calls and calls[0]["args"] == {"n": BIG}
