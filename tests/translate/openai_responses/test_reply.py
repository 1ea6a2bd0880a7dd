"""Whole replies and error replies for an OpenAI Responses client (docs/dev/protocols.md C.2, E.2-E.4,
E.6): a Chat Completions or Anthropic reply becomes a Responses ``response`` object, an
upstream error the OpenAI error envelope."""

from __future__ import annotations

import json

import pytest

from tests.suites.test_error_envelopes import ant, oai
from tests.translate.openai_chat.test_reply import ANTHROPIC_A5, CHAT_B4, chat
from tokunseba.errors import TranslationError
from tokunseba.translate import error as translate_error
from tokunseba.translate import reply as translate_reply
from tokunseba.neutral.usage import Usage

CLIENT = "openai-responses"
CREATED = 1767225600


def from_chat(body: bytes):
    rep = translate_reply("openai", CLIENT, body, created=CREATED)
    return json.loads(rep.body), rep


def from_anthropic(doc: dict):
    rep = translate_reply("anthropic", CLIENT, json.dumps(doc).encode(), created=CREATED)
    return json.loads(rep.body), rep


def call(iid: str, call_id: str, name: str, arguments: str) -> dict:
    return {"id": iid, "type": "function_call", "status": "completed", "arguments": arguments, "call_id": call_id,
            "name": name}


def message(iid: str, text: str) -> dict:
    return {"id": iid, "type": "message", "status": "completed",
            "content": [{"type": "output_text", "annotations": [], "text": text}], "role": "assistant"}


def tool_call(tid: str | None, name: str, arguments) -> dict:
    tc = {"type": "function", "function": {"name": name, "arguments": arguments}}
    return tc if tid is None else {"id": tid, **tc}


# ---- Chat -> Responses ----


def test_chat_reply_with_text_and_parallel_tool_calls():
    out, rep = from_chat(json.dumps(CHAT_B4).encode())
    assert out == {
        "id": "chatcmpl-C9xKq2mZ", "object": "response", "created_at": CREATED, "status": "completed",
        "model": "gpt-4.1-2025-04-14",
        "output": [message("msg_chatcmpl-C9xKq2mZ_0", "Checking both cities."),
                   call("fc_chatcmpl-C9xKq2mZ_1", "call_pQ0bLh1E9vRZ", "get_weather", "{\"city\": \"Paris\"}"),
                   call("fc_chatcmpl-C9xKq2mZ_2", "call_Yz7mW4kTfN2c", "get_weather", "{\"city\": \"Oslo\"}")],
        "usage": {"input_tokens": 2610, "input_tokens_details": {"cached_tokens": 2048}, "output_tokens": 58,
                  "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 2668}}
    assert rep.usage == Usage("openai", CHAT_B4["usage"]) and rep.client_usage == out["usage"]
    assert (rep.stop_reason, rep.dropped, rep.warnings) == ("tool_use", [], [])


def test_tool_call_only_reply_has_no_message_item():
    out, _ = from_chat(chat({"content": None, "tool_calls": [tool_call("call_1", "f", "{\"a\":[1,2]}")]}, "tool_calls"))
    assert out["output"] == [call("fc_chatcmpl-x1_0", "call_1", "f", "{\"a\":[1,2]}")]


@pytest.mark.parametrize("args,sent", [("{\"city\": \"Par", "{\"city\": \"Par"), ("[1, 2]", "[1, 2]"),
                                       ("", "{}"), (None, "{}"), ({"a": 1}, "{\"a\":1}")])
def test_arguments_are_the_upstream_string_verbatim(args, sent):
    """Responses arguments are a string: even invalid JSON travels as it is (Codex answers the
    model about it); no arguments are an empty object; an object some servers send is serialized."""
    out, _ = from_chat(chat({"content": None, "tool_calls": [tool_call("call_9", "f", args)]}, "tool_calls"))
    assert out["output"][0]["arguments"] == sent


def test_tool_ids_travel_byte_for_byte_even_ones_anthropic_refuses():
    out, _ = from_chat(chat({"content": None, "tool_calls": [tool_call("functions.get:0", "get", "{}")]}, "tool_calls"))
    assert out["output"][0]["call_id"] == "functions.get:0"


def test_missing_tool_id_is_synthesized_and_recorded():
    body = chat({"content": None, "tool_calls": [tool_call(None, "f", "{}")]}, "tool_calls")
    out, rep = from_chat(body)
    assert out["output"][0]["call_id"] == "call_chatcmpl-x1_0" == from_chat(body)[0]["output"][0]["call_id"]
    assert rep.warnings == ["id_synthesized: choices[0].message.tool_calls[0].id"]


@pytest.mark.parametrize("finish,stop,status,reason", [
    ("stop", "end_turn", "completed", None), ("tool_calls", "tool_use", "completed", None),
    ("length", "max_tokens", "incomplete", "max_output_tokens"),
    ("content_filter", "refusal", "incomplete", "content_filter")])
def test_finish_reason_to_status(finish, stop, status, reason):
    out, rep = from_chat(chat({"content": "x"}, finish))
    assert (out["status"], rep.stop_reason) == (status, stop)
    assert out.get("incomplete_details") == (reason and {"reason": reason})


def test_unknown_finish_reason_completes_with_a_warning():
    out, rep = from_chat(chat({"content": "x"}, "eos_token"))
    assert out["status"] == "completed" and rep.warnings


def test_tool_calls_with_finish_stop_still_say_tool_use():
    _, rep = from_chat(chat({"content": None, "tool_calls": [tool_call("call_1", "f", "{}")]}, "stop"))
    assert rep.stop_reason == "tool_use"


def test_vllm_stop_string_is_dropped_and_recorded():
    out, rep = from_chat(chat({"content": "1, 2"}, "stop", stop_reason="END"))
    assert out["status"] == "completed" and rep.stop_reason == "stop_sequence"
    assert rep.dropped == ["stop_sequence"] and "END" not in rep.body.decode()


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
def test_reasoning_is_dropped_and_recorded(key):
    out, rep = from_chat(chat({"content": "Bonjour", key: "The user greets me."}))
    assert out["output"] == [message("msg_chatcmpl-x1_0", "Bonjour")]
    assert rep.dropped == [f"choices[0].message.{key}"] and "greets" not in rep.body.decode()


def test_refusal_is_text():
    out, rep = from_chat(chat({"content": None, "refusal": "I can't help with that."}, "content_filter"))
    assert out["output"] == [message("msg_chatcmpl-x1_0", "I can't help with that.")]
    assert out["incomplete_details"] == {"reason": "content_filter"}


def test_text_parts_are_joined():
    out, _ = from_chat(chat({"content": [{"type": "text", "text": "héllo "}, {"type": "text", "text": "日本 🎉"}]}))
    assert out["output"][0]["content"][0]["text"] == "héllo 日本 🎉"


def test_usage_without_cache_details_has_no_details_object():
    out, _ = from_chat(chat({"content": "hi"}, usage={"prompt_tokens": 88, "completion_tokens": 21, "total_tokens": 109}))
    assert out["usage"] == {"input_tokens": 88, "output_tokens": 21, "total_tokens": 109}


def test_total_tokens_is_input_plus_output():
    out, _ = from_chat(chat({"content": "hi"}, usage={
        "prompt_tokens": 1000, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 600,
                                                                                "cache_write_tokens": 100}}))
    assert out["usage"] == {"input_tokens": 1000, "input_tokens_details": {"cached_tokens": 600,
                                                                           "cache_write_tokens": 100},
                            "output_tokens": 5, "total_tokens": 1005}


def test_no_usage_reported_gives_usage_null():
    out, rep = from_chat(chat({"content": "hi"}))
    assert "usage" in out and out["usage"] is None and rep.usage is None and rep.client_usage is None


def test_usage_without_output_tokens_is_null_but_recorded():
    out, rep = from_chat(chat({"content": "hi"}, usage={"prompt_tokens": 12}))
    assert out["usage"] is None and rep.client_usage is None
    assert rep.usage == Usage("openai", {"prompt_tokens": 12}) and rep.warnings


def test_ids_and_model_are_kept_and_a_missing_id_is_minted():
    out, _ = from_chat(chat({"content": "x"}))
    assert (out["id"], out["model"]) == ("chatcmpl-x1", "local-m")
    doc = json.loads(chat({"content": "x"}))
    del doc["id"]
    out, rep = from_chat(json.dumps(doc).encode())
    assert out["id"] == f"resp_tk_{CREATED}" and out["output"][0]["id"] == "msg_tk_0"
    assert rep.warnings == ["id_synthesized: response.id"]


def test_other_choices_ignored_with_a_warning():
    doc = json.loads(chat({"content": "A"}))
    doc["choices"].append({"index": 1, "message": {"role": "assistant", "content": "B"}, "finish_reason": "stop"})
    out, rep = from_chat(json.dumps(doc).encode())
    assert [i["content"][0]["text"] for i in out["output"]] == ["A"] and rep.warnings


@pytest.mark.parametrize("body", [b"not json", b"", b"[1]", b'{"object":"chat.completion"}', b'{"error":{"message":"x"}}'])
def test_bad_chat_reply_is_a_502(body):
    with pytest.raises(TranslationError) as exc:
        translate_reply("openai", CLIENT, body)
    assert exc.value.status == 502 and exc.value.message


# ---- Anthropic -> Responses ----


def test_anthropic_reply_with_text_and_tool_use():
    out, rep = from_anthropic(ANTHROPIC_A5)
    assert out == {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL", "object": "response", "created_at": CREATED, "status": "completed",
        "model": "claude-sonnet-4-6",
        "output": [message("msg_msg_01XFDUDYJgAACzvnptvVoYEL_0", "Let me check the weather."),
                   call("fc_msg_01XFDUDYJgAACzvnptvVoYEL_1", "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "get_weather",
                        "{\"city\":\"Paris\",\"unit\":\"celsius\"}")],
        # input_tokens includes the cache in Responses (E.4): 472 + 2048 + 0
        "usage": {"input_tokens": 2520, "input_tokens_details": {"cached_tokens": 2048, "cache_write_tokens": 0},
                  "output_tokens": 71, "total_tokens": 2591}}
    assert rep.usage == Usage("anthropic", ANTHROPIC_A5["usage"]) and rep.stop_reason == "tool_use"


def test_each_text_block_is_its_own_message_item():
    doc = {**ANTHROPIC_A5, "content": [{"type": "text", "text": "A"}, ANTHROPIC_A5["content"][1],
                                       {"type": "text", "text": "B"}]}
    out, _ = from_anthropic(doc)
    assert [(i["type"], i["id"]) for i in out["output"]] == [
        ("message", "msg_msg_01XFDUDYJgAACzvnptvVoYEL_0"), ("function_call", "fc_msg_01XFDUDYJgAACzvnptvVoYEL_1"),
        ("message", "msg_msg_01XFDUDYJgAACzvnptvVoYEL_2")]


@pytest.mark.parametrize("stop,status,reason", [
    ("end_turn", "completed", None), ("stop_sequence", "completed", None), ("tool_use", "completed", None),
    ("pause_turn", "completed", None), ("max_tokens", "incomplete", "max_output_tokens"),
    ("model_context_window_exceeded", "incomplete", "max_output_tokens"), ("refusal", "incomplete", "content_filter")])
def test_stop_reason_to_status(stop, status, reason):
    out, rep = from_anthropic({**ANTHROPIC_A5, "content": [{"type": "text", "text": "x"}], "stop_reason": stop})
    assert out["status"] == status and rep.stop_reason == stop
    assert out.get("incomplete_details") == (reason and {"reason": reason})


def test_thinking_server_tools_and_citations_dropped_and_recorded():
    doc = {**ANTHROPIC_A5, "content": [
        {"type": "thinking", "thinking": "hmm", "signature": "sig=="},
        {"type": "redacted_thinking", "data": "xx"},
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}},
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
        {"type": "text", "text": "Answer.", "citations": [{"type": "web_search_result_location", "url": "u"}]}],
        "stop_reason": "end_turn"}
    out, rep = from_anthropic(doc)
    assert out["output"] == [message("msg_msg_01XFDUDYJgAACzvnptvVoYEL_0", "Answer.")]
    assert sorted(rep.dropped) == sorted(["content[].thinking", "content[].redacted_thinking", "content[].server_tool_use",
                                          "content[].web_search_tool_result", "content[].citations"])
    body = rep.body.decode()
    assert "sig==" not in body and "hmm" not in body and "reasoning" not in body


def test_empty_input_is_an_empty_object():
    out, _ = from_anthropic({**ANTHROPIC_A5, "content": [{"type": "tool_use", "id": "toolu_1", "name": "now", "input": {}}]})
    assert out["output"][0]["arguments"] == "{}"


def test_tool_use_without_id_is_a_502():
    with pytest.raises(TranslationError) as exc:
        from_anthropic({**ANTHROPIC_A5, "content": [{"type": "tool_use", "name": "now", "input": {}}]})
    assert exc.value.status == 502


def test_stop_sequence_value_is_dropped_and_recorded():
    out, rep = from_anthropic({**ANTHROPIC_A5, "content": [{"type": "text", "text": "x"}],
                               "stop_reason": "stop_sequence", "stop_sequence": "###"})
    assert rep.dropped == ["stop_sequence"] and "###" not in rep.body.decode()


def test_anthropic_usage_missing_fields_stay_absent():
    out, _ = from_anthropic({**ANTHROPIC_A5, "usage": {"input_tokens": 26, "output_tokens": 4}})
    assert out["usage"] == {"input_tokens": 26, "output_tokens": 4, "total_tokens": 30}
    out, rep = from_anthropic({**ANTHROPIC_A5, "usage": {}})
    assert out["usage"] is None and rep.usage is None and rep.client_usage is None


def test_thinking_tokens_become_reasoning_tokens():
    out, _ = from_anthropic({**ANTHROPIC_A5, "usage": {"input_tokens": 10, "output_tokens": 50,
                                                       "output_tokens_details": {"thinking_tokens": 30}}})
    assert out["usage"] == {"input_tokens": 10, "output_tokens": 50, "output_tokens_details": {"reasoning_tokens": 30},
                            "total_tokens": 60}


@pytest.mark.parametrize("body", [b"<html>", b'{"type":"error","error":{"type":"api_error","message":"x"}}',
                                  b'{"id":"msg_1","content":"text"}'])
def test_bad_anthropic_reply_is_a_502(body):
    with pytest.raises(TranslationError) as exc:
        translate_reply("anthropic", CLIENT, body)
    assert exc.value.status == 502


def test_pairs_without_a_translator_are_refused():
    with pytest.raises(ValueError):
        translate_reply("nope", CLIENT, b"{}")
    with pytest.raises(ValueError):
        translate_reply(CLIENT, "nope", b"{}")


# ---- errors ----


def envelope(message: str, etype: str, code: str | None = None) -> dict:
    return {"error": {"message": message, "type": etype, "param": None, "code": code}}


@pytest.mark.parametrize("upstream,status,body,want_status,want", [
    ("anthropic", 529, ant("overloaded_error", "Overloaded"), 503, envelope("Overloaded", "server_error")),
    ("anthropic", 429, ant("rate_limit_error", "Number of requests exceeded"), 429,
     envelope("Number of requests exceeded", "rate_limit_error", "rate_limit_exceeded")),
    ("anthropic", 400, ant("invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"), 400,
     envelope("prompt is too long: 210000 tokens > 200000 maximum", "invalid_request_error", "context_length_exceeded")),
    ("anthropic", 401, ant("authentication_error", "invalid x-api-key"), 401,
     envelope("invalid x-api-key", "authentication_error")),
    ("openai", 400, oai("This model's maximum context length is 4096 tokens.", code="context_length_exceeded"), 400,
     envelope("This model's maximum context length is 4096 tokens.", "invalid_request_error", "context_length_exceeded")),
    ("openai", 400, json.dumps({"error": {"code": 400, "message": "the request exceeds the available context size",
                                          "type": "exceed_context_size_error"}}).encode(), 400,
     envelope("the request exceeds the available context size", "invalid_request_error", "context_length_exceeded")),
    ("openai", 429, oai("You exceeded your current quota", "insufficient_quota", "insufficient_quota"), 429,
     envelope("You exceeded your current quota", "rate_limit_error", "insufficient_quota")),
    ("openai", 404, json.dumps({"error": "model 'x' not found"}).encode(), 404,
     envelope("model 'x' not found", "not_found_error")),
    ("openai", 502, b"<html>Bad Gateway</html>", 502, envelope("<html>Bad Gateway</html>", "server_error")),
])
def test_errors_become_the_openai_envelope(upstream, status, body, want_status, want):
    st, out = translate_error(upstream, CLIENT, status, body)
    assert (st, json.loads(out)) == (want_status, want)


def test_same_protocol_error_is_untouched():
    body = b'{"error":{"message":"x"}}'
    assert translate_error(CLIENT, CLIENT, 418, body) == (418, body)
