"""docs/dev/pitfalls.md 1-8, 11, 12, 13-16: bugs other translators shipped, each a test named after
the behaviour that proves tokunseba does not have it."""

from __future__ import annotations

import json

from tests.translate.openai_chat.test_stream import (
    CHAT_FIXTURES,
    FAILING,
    anthropic_events,
    blocks,
    chat_chunks,
    chat_message,
    raw,
    translate,
)
from tokunseba.translate import stream as make_stream_translator


def chunk(delta: dict | None = None, finish: str | None = None, **top) -> bytes:
    doc = {"id": "chatcmpl-p", "object": "chat.completion.chunk", "created": 1, "model": "local",
           "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}], **top}
    return b"data: " + json.dumps(doc).encode() + b"\n\n"


DONE = b"data: [DONE]\n\n"
ROLE = chunk({"role": "assistant", "content": ""})


def to_anthropic(*parts: bytes):
    out, t = translate(b"".join(parts), "openai", "anthropic")
    return anthropic_events(out), t


# ---- 1-6: streamed tool calls ----


def test_tool_arguments_are_streamed_into_input_json_deltas_not_lost():  # 1
    ev, _ = to_anthropic(raw("chat_validated_parallel_tools.sse"))
    tools = [b for b in blocks(ev) if b["type"] == "tool_use"]
    assert [json.loads(b["input"]) for b in tools] == [{"city": "Paris"}, {"city": "Oslo"}]


def test_fragments_with_null_name_stay_arguments_and_text_beside_empty_tool_calls_is_kept():  # 2
    ev, _ = to_anthropic(raw("chat_content_empty_toolcalls.sse"))
    assert blocks(ev) == [{"type": "text", "text": "Reading the file."},
                          {"type": "tool_use", "id": "call_R3ad", "name": "Read", "input": "{\"file_path\": \"/tmp/a.txt\"}"}]
    assert all(d["delta"].get("partial_json") != "" for n, d in ev if n == "content_block_delta")
    assert sum(1 for n, d in ev if n == "content_block_delta" and d["delta"]["type"] == "text_delta") == 1


def test_arguments_after_finish_reason_reach_their_block():  # 3
    ev, t = to_anthropic(raw("chat_args_after_finish.sse"))
    (tool,) = blocks(ev)
    assert json.loads(tool["input"]) == {"command": "ls -la"}
    names = [n for n, _ in ev]
    assert names.index("content_block_stop") > max(i for i, (n, d) in enumerate(ev) if n == "content_block_delta")
    assert t.report.warnings == []


def test_arguments_in_a_later_chunk_after_other_text_reach_their_block():  # 3
    ev, _ = to_anthropic(
        ROLE, chunk({"tool_calls": [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "f", "arguments": "{\"x\":"}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": " 1}"}}]}), chunk({}, "tool_calls"), DONE)
    assert json.loads(blocks(ev)[0]["input"]) == {"x": 1}


def test_missing_tool_id_is_synthesized_deterministically_and_recorded():  # 4
    stream = [ROLE, chunk({"tool_calls": [{"index": 0, "type": "function", "function": {"name": "f", "arguments": "{}"}}]}),
              chunk({}, "tool_calls"), DONE]
    ev1, t1 = to_anthropic(*stream)
    ev2, _ = to_anthropic(*stream)
    assert blocks(ev1)[0]["id"] == blocks(ev2)[0]["id"] == "call_chatcmpl-p_0"
    assert t1.report.warnings == ["id_synthesized: choices[0].delta.tool_calls[0].id"]


def test_second_fragment_for_the_same_index_in_one_chunk_is_kept():  # 4
    ev, _ = to_anthropic(ROLE, chunk({"tool_calls": [
        {"index": 0, "id": "call_b", "type": "function", "function": {"name": "g", "arguments": "{\"a\":"}},
        {"index": 0, "function": {"arguments": "\"z\"}"}}]}), chunk({}, "tool_calls"), DONE)
    assert blocks(ev) == [{"type": "tool_use", "id": "call_b", "name": "g", "input": "{\"a\":\"z\"}"}]


def test_arguments_are_forwarded_before_they_parse():  # 4: never buffered until valid JSON
    t = make_stream_translator("openai", "anthropic")
    t.feed(ROLE)
    out = t.feed(chunk({"tool_calls": [{"index": 0, "id": "call_c", "type": "function",
                                        "function": {"name": "h", "arguments": "{\"q\": \"hal"}}]}))
    assert b'"partial_json":"{\\"q\\": \\"hal"' in out  # not valid JSON yet, forwarded at once
    out = t.feed(chunk({"tool_calls": [{"index": 0, "function": {"arguments": "f\"}"}}]}))
    assert b'"partial_json":"f\\"}"' in out


def test_chat_client_gets_id_and_name_only_in_the_first_fragment():  # 5
    anth, _ = translate("llamacpp_py_tool.sse")  # ids and names repeated in every upstream delta
    back, _ = translate(anth, "anthropic", "openai")
    frags = [tc for c in chat_chunks(back)[:-1] for ch in c["choices"] for tc in ch["delta"].get("tool_calls", [])]
    assert sum("id" in f for f in frags) == 1 and sum("name" in f["function"] for f in frags) == 1
    m = chat_message(chat_chunks(back))
    assert m["tool_calls"][0]["id"] == "call__0_get_weather_cmpl-9f6e47d6-a94e-4d05-a0e0-ea413a804ace"  # not doubled
    assert m["tool_calls"][0]["name"] == "get_weather"


def test_repeated_id_and_name_do_not_start_a_new_block():  # 5, 6
    ev, _ = to_anthropic(raw("llamacpp_py_tool.sse"))
    assert [n for n, _ in ev].count("content_block_start") == 1


def test_ollama_whole_call_in_one_chunk_with_role_repeated():  # 6
    ev, t = to_anthropic(raw("ollama_whole_call.sse"))
    tools = [b for b in blocks(ev) if b["type"] == "tool_use"]
    assert [(b["id"], json.loads(b["input"])) for b in tools] == [("call_ab12cd34", {"city": "Paris"}),
                                                                   ("call_ef56gh78", {"city": "Tōkyō 東京"})]
    assert [n for n, _ in ev].count("message_start") == 1


# ---- 7, 8, 11, 12: stop reason, framing, ids ----


def test_tool_turn_says_tool_use_even_when_finish_reason_says_stop():  # 7
    ev, t = to_anthropic(raw("chat_args_after_finish.sse"))
    assert ev[-2][1]["delta"]["stop_reason"] == "tool_use" and t.report.stop_reason == "tool_use"


def test_no_spurious_empty_text_block_before_tools():  # 7
    ev, _ = to_anthropic(ROLE, chunk({"content": ""}),
                         chunk({"tool_calls": [{"index": 0, "id": "call_d", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}),
                         chunk({"content": ""}, "tool_calls"), DONE)
    assert [b["type"] for b in blocks(ev)] == ["tool_use"]


def test_first_block_follows_the_content_and_no_token_is_lost():  # 8
    ev, _ = to_anthropic(ROLE, chunk({"tool_calls": [{"index": 0, "id": "call_e", "type": "function",
                                                      "function": {"name": "f", "arguments": "{\"k\":1}"}}]}),
                         chunk({"content": "After"}), chunk({"content": " the call."}), chunk({}, "stop"), DONE)
    assert blocks(ev) == [{"type": "tool_use", "id": "call_e", "name": "f", "input": "{\"k\":1}"},
                          {"type": "text", "text": "After the call."}]


def test_message_id_and_model_are_the_upstreams():  # 8
    ev, _ = to_anthropic(raw("ollama_whole_call.sse"))
    msg = ev[0][1]["message"]
    assert (msg["id"], msg["model"]) == ("chatcmpl-721", "qwen3:0.6b")
    out, _ = translate("anthropic_validated_text_tool.sse")
    c = chat_chunks(out)[0]
    assert (c["id"], c["model"]) == ("msg_01XFDUDYJgAACzvnptvVoYEL", "claude-sonnet-4-6")


def test_every_anthropic_event_has_its_event_line():  # 11
    for name in CHAT_FIXTURES:
        out, _ = translate(name)
        frames = [f for f in out.split(b"\n\n") if f and not f.startswith(b":")]  # a comment is no event
        assert frames and all(f.startswith(b"event: ") and b"\ndata: " in f for f in frames), name


def test_every_block_gets_its_content_block_stop():  # 12
    for name in CHAT_FIXTURES:
        if name in FAILING:
            continue
        ev = anthropic_events(translate(name)[0])
        starts = [d["index"] for n, d in ev if n == "content_block_start"]
        stops = [d["index"] for n, d in ev if n == "content_block_stop"]
        assert starts == stops and starts, name


# ---- 13-16: usage ----


def test_usage_is_never_estimated_when_the_upstream_reports_none():  # 13
    ev, t = to_anthropic(raw("llamacpp_py_text.sse"))
    assert ev[0][1]["message"]["usage"] == {} and ev[-2][1]["usage"] == {}
    assert t.report.usage is None and t.client_usage is None


def test_cached_tokens_are_rebased_not_counted_as_fresh_input():  # 14
    ev, t = to_anthropic(raw("vllm_reasoning_stop_string.sse"))
    u = ev[-2][1]["usage"]
    assert u["input_tokens"] == 1200 - 1024 and u["cache_read_input_tokens"] == 1024
    out, t2 = translate("anthropic_thinking_signature.sse")
    assert chat_message(chat_chunks(out))["usage"]["prompt_tokens"] == 1200 + 300 + 5000
    assert t2.client_usage["prompt_tokens_details"] == {"cached_tokens": 5000, "cache_write_tokens": 300}


def test_anthropic_cumulative_usage_is_overwritten_not_added():  # 15
    out, t = translate("anthropic_validated_text_tool.sse")  # message_delta repeats input_tokens 472
    u = chat_message(chat_chunks(out))["usage"]
    assert u["prompt_tokens"] == 472 + 2048 and u["completion_tokens"] == 71
    assert t.report.usage.reported["input_tokens"] == 472 and t.report.usage.reported["output_tokens"] == 71
    out, t = translate("llama_server_messages.sse")  # message_delta has only output_tokens: input from message_start
    assert chat_message(chat_chunks(out))["usage"]["prompt_tokens"] == 26
    assert t.report.usage.reported == {"cache_read_input_tokens": 0, "input_tokens": 26, "output_tokens": 4}


def test_no_zero_usage_is_sent_when_the_upstream_said_nothing():  # 16
    for name in ("llamacpp_py_tool.sse", "chat_content_empty_toolcalls.sse"):
        out, t = translate(name)
        assert b'"input_tokens":0' not in out and b'"output_tokens":0' not in out
        assert anthropic_events(out)[-2][1]["usage"] == {}
