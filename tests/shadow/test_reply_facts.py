"""What a reply says, as facts (shadow/reply_facts.py): a stream and its whole reply give the same
facts, in every protocol; usage as reported, None when none was; errors are facts too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokunseba.shadow.reply_facts import reply_facts

STREAMS = Path(__file__).resolve().parents[1] / "data" / "streams"


def _reply(name: str) -> dict:
    return json.loads((STREAMS / f"{name}.reply.json").read_text())


@pytest.mark.parametrize("name,protocol", [("anthropic_validated_text_tool", "anthropic"),
                                           ("chat_validated_parallel_tools", "openai"),
                                           ("chat_interleaved_tools", "openai"),
                                           ("llamacpp_py_tool", "openai"),
                                           ("responses_validated_text_tool", "openai-responses"),
                                           ("responses_reasoning_parallel_tools", "openai-responses")])
def test_a_stream_and_its_whole_reply_have_the_same_facts(name, protocol):
    """The facts of a recorded stream equal those of the same reply whole (its .reply.json)."""
    streamed = reply_facts(protocol, (STREAMS / f"{name}.sse").read_bytes())
    whole = reply_facts(protocol, json.dumps(_reply(name)).encode())
    assert streamed.error is None and streamed == whole
    assert streamed.tool_calls and all(isinstance(c["arguments"], dict) for c in streamed.tool_calls)


def test_anthropic_stream_facts_are_usage_as_reported():
    f = reply_facts("anthropic", (STREAMS / "anthropic_validated_text_tool.sse").read_bytes())
    assert f.text == "Let me check the weather." and f.stop_reason == "tool_use"
    assert f.tool_calls == [{"id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "name": "get_weather",
                             "arguments": {"city": "Paris", "unit": "celsius"}}]
    assert f.usage["output_tokens"] == 71 and f.usage["cache_read_input_tokens"] == 2048  # message_delta wins
    assert f.usage_protocol == "anthropic"


def test_responses_facts_from_the_stream_and_whole():
    """Read by the Responses codec's own decoders: the stream's items and its terminal
    event's usage, the same as the whole reply's."""
    f = reply_facts("openai-responses", (STREAMS / "responses_validated_text_tool.sse").read_bytes())
    assert f == reply_facts("openai-responses", json.dumps(_reply("responses_validated_text_tool")).encode())
    assert f.stop_reason == "tool_use" and f.tool_calls and isinstance(f.tool_calls[0]["arguments"], dict)
    assert f.usage_protocol == "openai" and f.usage["input_tokens"] > 0


def test_gemini_facts_are_read_too():
    """Every protocol with a codec has facts (shadows and replays compare them), Gemini too."""
    body = json.dumps({"candidates": [{"content": {"role": "model", "parts": [{"text": "hi"}]}, "finishReason": "STOP"}],
                       "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 1, "totalTokenCount": 4}})
    f = reply_facts("gemini", body.encode())
    assert (f.text, f.stop_reason, f.usage_protocol, f.usage["totalTokenCount"]) == ("hi", "end_turn", "gemini", 4)


def test_no_usage_reported_stays_none_and_errors_are_facts():
    f = reply_facts("openai", json.dumps({"choices": [{"message": {"content": "x"}, "finish_reason": "stop"}]}).encode())
    assert f.usage is None and f.usage_protocol is None and f.stop_reason == "end_turn"
    assert reply_facts("openai", b'{"error": {"message": "no"}}', 500).error.startswith("HTTP 500")
    assert reply_facts("anthropic", (STREAMS / "anthropic_error_midstream.sse").read_bytes()).error
    assert reply_facts("openai", b"not json").error and reply_facts("gemini", b"{}").error
