"""Whole (non-streamed) replies, Chat Completions <-> Anthropic Messages (docs/dev/protocols.md E.2-E.4)."""

from __future__ import annotations

import json

import pytest

from tokunseba.errors import TranslationError
from tokunseba.translate import reply as translate_reply
from tokunseba.neutral.usage import Usage

# docs/dev/protocols.md B.4, verbatim
CHAT_B4 = {
    "id": "chatcmpl-C9xKq2mZ", "object": "chat.completion", "created": 1767225600, "model": "gpt-4.1-2025-04-14",
    "choices": [{"index": 0, "finish_reason": "tool_calls", "logprobs": None,
                 "message": {"role": "assistant", "content": "Checking both cities.", "refusal": None, "annotations": [],
                             "tool_calls": [
                                 {"id": "call_pQ0bLh1E9vRZ", "type": "function",
                                  "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
                                 {"id": "call_Yz7mW4kTfN2c", "type": "function",
                                  "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]}}],
    "usage": {"prompt_tokens": 2610, "completion_tokens": 58, "total_tokens": 2668,
              "prompt_tokens_details": {"cached_tokens": 2048, "audio_tokens": 0},
              "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0,
                                            "rejected_prediction_tokens": 0}},
    "service_tier": "default", "system_fingerprint": "fp_3e8b2a"}

# docs/dev/protocols.md A.5, verbatim
ANTHROPIC_A5 = {
    "id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
    "content": [{"type": "text", "text": "Let me check the weather."},
                {"type": "tool_use", "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "name": "get_weather",
                 "input": {"city": "Paris", "unit": "celsius"}}],
    "stop_reason": "tool_use", "stop_sequence": None,
    "usage": {"input_tokens": 472, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 2048,
              "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0}, "output_tokens": 71,
              "service_tier": "standard"}}


def chat(message: dict, finish: str | None = "stop", usage: dict | None = None, **choice) -> bytes:
    doc = {"id": "chatcmpl-x1", "object": "chat.completion", "created": 1, "model": "local-m",
           "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish, **choice}]}
    if usage is not None:
        doc["usage"] = usage
    return json.dumps(doc).encode()


def to_anthropic(body: bytes):
    rep = translate_reply("openai", "anthropic", body)
    return json.loads(rep.body), rep


def to_chat(doc: dict):
    rep = translate_reply("anthropic", "openai", json.dumps(doc).encode(), created=42)
    return json.loads(rep.body), rep


# ---- Chat -> Anthropic ----


def test_chat_reply_with_text_and_tool_calls():
    out, rep = to_anthropic(json.dumps(CHAT_B4).encode())
    assert out == {
        "id": "chatcmpl-C9xKq2mZ", "type": "message", "role": "assistant", "model": "gpt-4.1-2025-04-14",
        "content": [{"type": "text", "text": "Checking both cities."},
                    {"type": "tool_use", "id": "call_pQ0bLh1E9vRZ", "name": "get_weather", "input": {"city": "Paris"}},
                    {"type": "tool_use", "id": "call_Yz7mW4kTfN2c", "name": "get_weather", "input": {"city": "Oslo"}}],
        "stop_reason": "tool_use", "stop_sequence": None,
        "usage": {"input_tokens": 562, "cache_read_input_tokens": 2048, "output_tokens": 58,
                  "output_tokens_details": {"thinking_tokens": 0}}}
    assert rep.usage == Usage("openai", CHAT_B4["usage"])
    assert rep.client_usage == out["usage"] and rep.stop_reason == "tool_use"
    assert rep.dropped == [] and rep.warnings == []


def test_content_null_with_tool_calls():
    out, _ = to_anthropic(chat({"content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":[1,2]}"}}]}, "tool_calls"))
    assert out["content"] == [{"type": "tool_use", "id": "call_1", "name": "f", "input": {"a": [1, 2]}}]


def test_empty_arguments_mean_an_empty_object():
    out, _ = to_anthropic(chat({"content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "now", "arguments": ""}}]}, "tool_calls"))
    assert out["content"][0]["input"] == {}


@pytest.mark.parametrize("args", ["{\"city\": \"Par", "[1, 2]", "\"text\""])
def test_invalid_arguments_are_a_502_with_a_clear_message(args):
    with pytest.raises(TranslationError) as exc:
        to_anthropic(chat({"content": None, "tool_calls": [
            {"id": "call_9", "type": "function", "function": {"name": "f", "arguments": args}}]}, "tool_calls"))
    assert exc.value.status == 502
    assert "call_9" in exc.value.message and "arguments" in exc.value.message


def test_tool_id_anthropic_would_reject_is_a_502():
    with pytest.raises(TranslationError) as exc:
        to_anthropic(chat({"content": None, "tool_calls": [
            {"id": "functions.get:0", "type": "function", "function": {"name": "get", "arguments": "{}"}}]}, "tool_calls"))
    assert exc.value.status == 502 and "functions.get:0" in exc.value.message


def test_missing_tool_id_is_synthesized_and_recorded():
    body = chat({"content": None, "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                "tool_calls")
    out, rep = to_anthropic(body)
    assert out["content"][0]["id"] == to_anthropic(body)[0]["content"][0]["id"]  # deterministic
    assert out["content"][0]["id"] == "call_chatcmpl-x1_0"
    assert rep.warnings == ["id_synthesized: choices[0].message.tool_calls[0].id"]


@pytest.mark.parametrize("finish,stop", [("stop", "end_turn"), ("length", "max_tokens"), ("tool_calls", "tool_use"),
                                         ("content_filter", "refusal"), ("function_call", "tool_use")])
def test_finish_reason_to_stop_reason(finish, stop):
    out, rep = to_anthropic(chat({"content": "x"}, finish))
    assert out["stop_reason"] == stop == rep.stop_reason
    assert out["stop_sequence"] is None  # never invented


def test_tool_calls_with_finish_stop_still_say_tool_use():
    out, _ = to_anthropic(chat({"content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}, "stop"))
    assert out["stop_reason"] == "tool_use"


def test_vllm_stop_string_becomes_stop_sequence():
    out, _ = to_anthropic(chat({"content": "1, 2"}, "stop", stop_reason="END"))
    assert (out["stop_reason"], out["stop_sequence"]) == ("stop_sequence", "END")


def test_usage_without_cache_details_stays_without_cache_fields():
    out, rep = to_anthropic(chat({"content": "hi"}, usage={"prompt_tokens": 88, "completion_tokens": 21, "total_tokens": 109}))
    assert out["usage"] == {"input_tokens": 88, "output_tokens": 21}


def test_usage_cache_rebasing_with_cache_writes():
    out, _ = to_anthropic(chat({"content": "hi"}, usage={
        "prompt_tokens": 1000, "completion_tokens": 5,
        "prompt_tokens_details": {"cached_tokens": 600, "cache_write_tokens": 100}}))
    assert out["usage"] == {"input_tokens": 300, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 600,
                            "output_tokens": 5}


@pytest.mark.parametrize("counting,reported", [
    ("gemini", {"promptTokenCount": 2610, "candidatesTokenCount": 58, "totalTokenCount": 2668}),
    ("gemini", {"promptTokenCount": 7, "candidatesTokenCount": 3}),  # no total: none written
    ("gemini", {"promptTokenCount": 7, "candidatesTokenCount": 3, "thoughtsTokenCount": None,
                "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 7}]}),  # null counts as not reported
    ("openai", {"prompt_tokens": 88, "completion_tokens": 21, "total_tokens": 109}),
    ("openai", {"prompt_tokens": 88, "completion_tokens": 21, "total_tokens": None}),  # the sum
])
def test_a_plain_report_is_written_as_its_common_base_says(counting, reported, monkeypatch):
    """The writers' short way for a report of input and output alone (Usage.plain_counts) gives
    what the general way through the common base (Usage.tokens) gives, for every client."""
    import dataclasses

    from tokunseba.neutral import usage as nu

    u = Usage(counting, reported)
    pc, t = u.plain_counts(), u.tokens()
    assert pc == (t["input"], t["output"], t["total"])
    short = {name: c.write(u) for name, c in nu.COUNTINGS.items()}
    # the same report with its counting's plain_total taken away: every writer's general path
    monkeypatch.setitem(nu.COUNTINGS, counting, dataclasses.replace(nu.COUNTINGS[counting], plain_total=None))
    assert u.plain_counts() is None
    for name, c in nu.COUNTINGS.items():
        long_way = c.write(u)
        assert short[name] == long_way and list(short[name]) == list(long_way), name


def test_no_usage_reported_gives_an_empty_usage_object():
    out, rep = to_anthropic(chat({"content": "hi"}))
    assert out["usage"] == {} and rep.usage is None and rep.client_usage is None


def test_refusal_becomes_text():
    out, _ = to_anthropic(chat({"content": None, "refusal": "I can't help with that."}, "content_filter"))
    assert out["content"] == [{"type": "text", "text": "I can't help with that."}]
    assert out["stop_reason"] == "refusal"


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
def test_reasoning_is_dropped_and_recorded(key):
    out, rep = to_anthropic(chat({"content": "Bonjour", key: "The user greets me."}))
    assert out["content"] == [{"type": "text", "text": "Bonjour"}]
    assert rep.dropped == [f"choices[0].message.{key}"]
    assert "greets" not in rep.body.decode()


def test_ids_and_model_are_kept_as_they_are():
    out, _ = to_anthropic(chat({"content": "x"}))
    assert (out["id"], out["model"]) == ("chatcmpl-x1", "local-m")


def test_llama_cpp_python_legacy_function_call_duplicate_is_not_a_drop():
    msg = {"content": None, "function_call": {"name": "f", "arguments": "{}"},
           "tool_calls": [{"id": "call__0_f", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
    out, rep = to_anthropic(chat(msg, "tool_calls"))
    assert len(out["content"]) == 1 and rep.dropped == []


def test_other_choices_ignored_with_a_warning():
    doc = json.loads(chat({"content": "A"}))
    doc["choices"].append({"index": 1, "message": {"role": "assistant", "content": "B"}, "finish_reason": "stop"})
    out, rep = to_anthropic(json.dumps(doc).encode())
    assert out["content"] == [{"type": "text", "text": "A"}] and rep.warnings


@pytest.mark.parametrize("body", [b"not json", b"", b"[1]", b'{"object":"chat.completion"}', b'{"error":{"message":"x"}}'])
def test_bad_upstream_reply_is_a_502(body):
    with pytest.raises(TranslationError) as exc:
        translate_reply("openai", "anthropic", body)
    assert exc.value.status == 502 and exc.value.message


def test_non_ascii_is_kept():
    out, _ = to_anthropic(chat({"content": "héllo 日本 🎉"}))
    assert out["content"][0]["text"] == "héllo 日本 🎉"


# ---- Anthropic -> Chat ----


def test_anthropic_reply_with_text_and_tool_use():
    out, rep = to_chat(ANTHROPIC_A5)
    assert out == {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL", "object": "chat.completion", "created": 42, "model": "claude-sonnet-4-6",
        "choices": [{"index": 0, "message": {
            "role": "assistant", "content": "Let me check the weather.",
            "tool_calls": [{"id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "type": "function",
                            "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\",\"unit\":\"celsius\"}"}}]},
            "logprobs": None, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 2520, "completion_tokens": 71, "total_tokens": 2591,
                  "prompt_tokens_details": {"cached_tokens": 2048, "cache_write_tokens": 0}}}
    assert rep.usage == Usage("anthropic", ANTHROPIC_A5["usage"]) and rep.stop_reason == "tool_use"


def test_tool_use_only_gives_content_null():
    doc = {**ANTHROPIC_A5, "content": [ANTHROPIC_A5["content"][1]]}
    out, _ = to_chat(doc)
    assert out["choices"][0]["message"]["content"] is None


def test_empty_input_becomes_empty_object_arguments():
    doc = {**ANTHROPIC_A5, "content": [{"type": "tool_use", "id": "toolu_1", "name": "now", "input": {}}]}
    out, _ = to_chat(doc)
    assert out["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] == "{}"


@pytest.mark.parametrize("stop,finish", [("end_turn", "stop"), ("stop_sequence", "stop"), ("max_tokens", "length"),
                                         ("tool_use", "tool_calls"), ("refusal", "content_filter"),
                                         ("pause_turn", "stop"), ("model_context_window_exceeded", "length")])
def test_stop_reason_to_finish_reason(stop, finish):
    doc = {**ANTHROPIC_A5, "content": [{"type": "text", "text": "x"}], "stop_reason": stop}
    out, rep = to_chat(doc)
    assert out["choices"][0]["finish_reason"] == finish and rep.stop_reason == stop


def test_thinking_and_server_tools_dropped_and_recorded():
    doc = {**ANTHROPIC_A5, "content": [
        {"type": "thinking", "thinking": "hmm", "signature": "sig=="},
        {"type": "redacted_thinking", "data": "xx"},
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}},
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
        {"type": "text", "text": "Answer.", "citations": [{"type": "web_search_result_location", "url": "u"}]}],
        "stop_reason": "end_turn"}
    out, rep = to_chat(doc)
    # thinking shown as reasoning_content (Chat's unsigned place), its signature left behind
    assert out["choices"][0]["message"] == {"role": "assistant", "content": "Answer.", "reasoning_content": "hmm"}
    assert sorted(rep.dropped) == sorted(["content[].thinking.signature", "content[].redacted_thinking", "content[].server_tool_use",
                                          "content[].web_search_tool_result", "content[].citations"])
    assert "sig==" not in rep.body.decode()


def test_stop_sequence_value_is_dropped_and_recorded():
    doc = {**ANTHROPIC_A5, "content": [{"type": "text", "text": "x"}], "stop_reason": "stop_sequence", "stop_sequence": "###"}
    out, rep = to_chat(doc)
    assert rep.dropped == ["stop_sequence"] and "###" not in rep.body.decode()


def test_anthropic_usage_missing_fields_stay_absent():
    doc = {**ANTHROPIC_A5, "usage": {"input_tokens": 26, "output_tokens": 4}}
    out, rep = to_chat(doc)
    assert out["usage"] == {"prompt_tokens": 26, "completion_tokens": 4, "total_tokens": 30}
    doc = {**ANTHROPIC_A5, "usage": {}}
    out, rep = to_chat(doc)
    assert "usage" not in out and rep.usage is None and rep.client_usage is None


def test_anthropic_thinking_tokens_become_reasoning_tokens():
    doc = {**ANTHROPIC_A5, "usage": {"input_tokens": 10, "output_tokens": 50, "output_tokens_details": {"thinking_tokens": 30}}}
    out, _ = to_chat(doc)
    assert out["usage"]["completion_tokens_details"] == {"reasoning_tokens": 30}


@pytest.mark.parametrize("body", [b"<html>", b'{"type":"error","error":{"type":"api_error","message":"x"}}',
                                  b'{"id":"msg_1","content":"text"}'])
def test_bad_anthropic_reply_is_a_502(body):
    with pytest.raises(TranslationError) as exc:
        translate_reply("anthropic", "openai", body)
    assert exc.value.status == 502


def test_round_trip_keeps_content_and_usage():
    """Anthropic -> Chat -> Anthropic: text, tool calls, stop reason and usage survive."""
    chat_out, _ = to_chat(ANTHROPIC_A5)
    back, _ = to_anthropic(json.dumps(chat_out).encode())
    assert back["content"] == ANTHROPIC_A5["content"]
    assert back["stop_reason"] == "tool_use"
    assert back["usage"] == {"input_tokens": 472, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 2048,
                             "output_tokens": 71}


def test_unknown_pair_is_refused():
    with pytest.raises(ValueError):
        translate_reply("openai", "openai", b"{}")


def test_a_reply_the_endpoints_cap_ended_is_told_end_turn_unless_it_holds_a_call():
    """translate.reply with the request's ``capped``: a reply cut at the endpoint's cap is told
    end_turn (the conversion noted), the ledger's stop reason stays the endpoint's; one holding a
    tool call, or without a cap, is told as it is."""
    from tokunseba.neutral.conversation import Capped

    cut = chat({"content": "part"}, "length")
    rep = translate_reply("openai", "anthropic", cut, capped=Capped(asked=64000, cap=512))
    assert json.loads(rep.body)["stop_reason"] == "end_turn" and rep.stop_reason == "max_tokens"
    assert rep.message.stop_reason == "max_tokens" and len(rep.converted) == 1 and "512" in rep.converted[0]
    plain = translate_reply("openai", "anthropic", cut)
    assert json.loads(plain.body)["stop_reason"] == "max_tokens" and plain.converted == []
    call = chat({"content": None, "tool_calls": [{"id": "c1", "type": "function",
                                                  "function": {"name": "Bash", "arguments": "{}"}}]}, "length")
    held = translate_reply("openai", "anthropic", call, capped=Capped(asked=64000, cap=512))
    assert json.loads(held.body)["stop_reason"] == "max_tokens" and held.converted == []
