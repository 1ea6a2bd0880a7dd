"""Requests for the pairs issue 9 opened: Responses -> Anthropic (Codex to an Anthropic
endpoint), Anthropic -> Responses (Claude Code to a Responses endpoint) and Chat ->
Responses; and, across all six cross pairs, tool ids byte-identical and nothing invented
(hypothesis, with the generators of the per-pair tests)."""

from __future__ import annotations

import copy
import re

import pytest
from hypothesis import given

from tests.conftest import load_fixture
from tests.suites.test_request_properties import (
    ANY_ID,
    SETTINGS,
    VOCAB,
    _anthropic_ids,
    _assert_provenance,
    _chat_ids,
    anthropic_requests,
    chat_requests,
)
from tests.translate.openai_responses.test_decode import REASONING, R, _responses_ids, fc, fco, msg, responses_requests, text_parts
from tokunseba import translate
from tokunseba.errors import TranslationError

ANTHROPIC_ID = re.compile(r"[a-zA-Z0-9_-]+")
RESPONSES_VOCAB = {"message", "function_call", "function_call_output", "input_text", "output_text", "input_image",
                   "input_file"}
VOCAB |= RESPONSES_VOCAB  # the Responses item and part types are protocol vocabulary too (shared set)


def req(client: str, target: str, body: dict, **kw):
    before = copy.deepcopy(body)
    rt = translate.request(client, target, body, **kw)
    assert body == before, "input mutated"
    return rt


# ---- Codex -> an Anthropic endpoint ------------------------------------------------------

def test_codex_tool_followup_to_anthropic():
    body = load_fixture("codex-responses-gpt55-tool-followup.json")["body"]
    rt = req("openai-responses", "anthropic", body, max_tokens=4096)
    out = rt.body
    assert out["model"] == "gpt-5.5" and out["stream"] is True
    assert out["max_tokens"] == 4096 and "max_tokens" in rt.plumbing  # Anthropic requires it: endpoint default
    # the developer items lead: they are the system text, joined
    assert out["system"].startswith("You are Codex") and "<skills_instructions>" in out["system"]
    roles = [m["role"] for m in out["messages"]]
    assert roles == ["user", "user", "assistant", "user"]  # Anthropic joins consecutive user turns itself
    call = out["messages"][2]["content"][-1]
    assert call == {"type": "tool_use", "id": "call_91e3e748cad94115b873", "name": "exec_command",
                    "input": {"cmd": "echo hi-from-tool"}}
    result = out["messages"][3]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "call_91e3e748cad94115b873"
    assert result["content"].startswith("Chunk ID: 1b399a")
    assert [t["name"] for t in out["tools"]] == ["exec_command", "write_stdin", "request_user_input", "apply_patch",
                                                 "view_image", "get_goal", "create_goal", "update_goal"]
    assert all(set(t) <= {"name", "description", "input_schema"} for t in out["tools"])
    # what cannot travel is recorded in Codex's own paths
    assert out["tools"][3]["input_schema"]["required"] == ["input"]  # the freeform apply_patch, as a function
    for path in ("tools[8]", "tools[9]", "text.verbosity", "include",
                 "client_metadata", "input[].id", "store", "prompt_cache_key"):
        assert path in rt.dropped, path
    # Codex's reasoning effort reaches Anthropic as thinking (neutral/effort.py), recorded converted
    assert out["thinking"]["type"] == "enabled" and any("-> thinking.budget_tokens" in c for c in rt.converted)


def test_codex_reasoning_items_are_dropped_and_recorded_for_anthropic():
    body = R(input=[msg("user", "q"), REASONING, fc("c1", "f", '{"a":1}'), fco("c1", "done")])
    rt = req("openai-responses", "anthropic", body, max_tokens=100)
    assert "input[1]" in rt.dropped
    assert [b["type"] for m in rt.body["messages"] for b in (m["content"] if isinstance(m["content"], list) else [])] \
        == ["tool_use", "tool_result"]
    assert "encrypted" not in str(rt.body) and "gAAA" not in str(rt.body)


def test_codex_freeform_tool_history_reaches_anthropic_wrapped():
    body = R(input=[msg("user", "q"), {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch",
                                       "input": "*** Begin Patch"}, {"type": "custom_tool_call_output", "call_id": "c1",
                                                                     "output": "Done"}])
    out = translate.request("openai-responses", "anthropic", body, max_tokens=100).body
    assert out["messages"][1]["content"] == [{"type": "tool_use", "id": "c1", "name": "apply_patch",
                                              "input": {"input": "*** Begin Patch"}}]
    assert out["messages"][2]["content"][0] == {"type": "tool_result", "tool_use_id": "c1", "content": "Done"}


def test_codex_call_id_anthropic_rejects_refuses_the_turn_naming_codexs_path():
    body = R(input=[msg("user", "q"), fc("call.1"), fco("call.1")])
    with pytest.raises(TranslationError) as e:
        translate.request("openai-responses", "anthropic", body, max_tokens=100)
    assert e.value.kind == "refused"
    assert e.value.message.startswith("input[1].id: tool call id 'call.1'")  # Codex's item, not the neutral path


def test_temperature_above_one_from_codex_is_dropped_in_codexs_path():
    rt = req("openai-responses", "anthropic", R(temperature=1.5, max_output_tokens=50))
    assert "temperature" in rt.dropped and "temperature" not in rt.body
    assert rt.body["max_tokens"] == 50


# ---- Claude Code -> a Responses endpoint ---------------------------------------------------

def test_claude_code_main_turn_to_responses():
    body = load_fixture("claude-code-print-main-turn.json")["body"]
    rt = req("anthropic", "openai-responses", body, max_tokens=4096)
    out = rt.body
    assert out["model"] == body["model"] and out["stream"] is True
    assert out["max_output_tokens"] == 4096
    assert "x-anthropic-billing-header" not in out["instructions"] and "system[0]" in rt.dropped
    assert out["instructions"]
    assert all(t["type"] == "function" and t["strict"] is False for t in out["tools"])
    assert [t["name"] for t in out["tools"]] == [t["name"] for t in body["tools"]]
    assert all(f"tools[{i}].strict" in rt.plumbing for i in range(len(out["tools"])))
    assert {i["type"] for i in out["input"]} <= {"message", "function_call", "function_call_output"}
    assert "thinking" in rt.dropped and "metadata.user_id" in rt.dropped
    assert "max_tokens -> max_output_tokens (capped at 4096)" in rt.converted  # named in Claude Code's path


def test_claude_code_tool_loop_to_responses_keeps_ids_and_order():
    body = {"model": "claude-x", "max_tokens": 100, "system": "Be brief.", "messages": [
        {"role": "user", "content": "list files"},
        {"role": "assistant", "content": [{"type": "text", "text": "Listing."},
                                          {"type": "tool_use", "id": "toolu_01A", "name": "Bash", "input": {"command": "ls"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01A", "content": "a.txt"},
                                     {"type": "text", "text": "and now?"}]}],
        "tools": [{"name": "Bash", "description": "Run", "input_schema": {"type": "object"}}]}
    out = req("anthropic", "openai-responses", body).body
    assert out["instructions"] == "Be brief."
    assert out["input"] == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list files"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Listing."}]},
        {"type": "function_call", "call_id": "toolu_01A", "name": "Bash", "arguments": '{"command":"ls"}'},
        {"type": "function_call_output", "call_id": "toolu_01A", "output": "a.txt"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "and now?"}]}]
    assert out["tools"] == [{"type": "function", "name": "Bash", "description": "Run",
                             "parameters": {"type": "object"}, "strict": False}]
    assert out["max_output_tokens"] == 100


def test_stop_sequences_cannot_go_to_responses_and_are_recorded():
    body = {"model": "m", "max_tokens": 10, "stop_sequences": ["END"], "messages": [{"role": "user", "content": "hi"}]}
    rt = req("anthropic", "openai-responses", body)
    assert "stop" not in rt.body and "stop_sequences" in rt.dropped


def test_endpoint_stops_are_not_added_to_a_responses_request_and_say_why():
    rt = req("openai", "openai-responses", {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
             stop=["<end>"], endpoint="resp")
    assert "stop" not in rt.body and rt.plumbing == []
    assert rt.warnings == ["endpoint resp stop strings ['<end>'] not added: openai-responses has no stop sequences"]


# ---- a Chat client -> a Responses endpoint -------------------------------------------------

def test_chat_client_to_responses():
    body = {"model": "gpt-x", "messages": [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": [{"type": "text", "text": "see"},
                                     {"type": "image_url", "image_url": {"url": "https://x/y.png", "detail": "low"}}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": '{"x":1}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "r"}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}, "strict": True}}],
        "tool_choice": {"type": "function", "function": {"name": "f"}}, "max_completion_tokens": 77,
        "stream": True, "stream_options": {"include_usage": True}, "reasoning_effort": "low", "seed": 3,
        "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": {"type": "object"}}}}
    rt = req("openai", "openai-responses", body)
    out = rt.body
    assert out["instructions"] == "sys"
    assert out["input"] == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "see"},
                                                        {"type": "input_image", "image_url": "https://x/y.png",
                                                         "detail": "low"}]},
        {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": '{"x":1}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "r"}]
    assert out["tools"] == [{"type": "function", "name": "f", "parameters": {"type": "object"}, "strict": True}]
    assert out["tool_choice"] == {"type": "function", "name": "f"}
    assert out["max_output_tokens"] == 77 and out["stream"] is True and "stream_options" not in out
    assert out["reasoning"] == {"effort": "low"}
    assert out["text"] == {"format": {"type": "json_schema", "name": "s", "schema": {"type": "object"}}}
    assert rt.dropped == ["seed"] and rt.plumbing == [] and rt.client_wants_usage


def test_a_streaming_chat_client_without_include_usage_gets_no_usage_chunk_from_responses():
    rt = req("openai", "openai-responses", {"model": "m", "stream": True, "messages": [{"role": "user", "content": "x"}]})
    assert rt.client_wants_usage is False


# ---- all six pairs: ids byte-identical, nothing invented -----------------------------------

def _ids(protocol: str, body: dict) -> list[str]:
    return {"anthropic": _anthropic_ids, "openai": _chat_ids, "openai-responses": _responses_ids}[protocol](body)


def _check_pair(client: str, target: str, body: dict) -> None:
    ids = _ids(client, body)
    try:
        rt = req(client, target, body, **({"max_tokens": 512} if target == "anthropic" else {}))  # a default, no cap
    except TranslationError as e:  # only an id Anthropic rejects may refuse these well-formed turns
        assert target == "anthropic" and e.kind == "refused"
        assert any(not ANTHROPIC_ID.fullmatch(i) for i in ids)
        return
    assert _ids(target, rt.body) == ids  # byte for byte, in order
    _assert_provenance(body, rt)


@SETTINGS
@given(anthropic_requests(ids=ANY_ID, extras=True))
def test_anthropic_to_responses_ids_and_provenance(body):
    _check_pair("anthropic", "openai-responses", body)


@SETTINGS
@given(chat_requests())
def test_chat_to_responses_ids_and_provenance(body):
    _check_pair("openai", "openai-responses", body)


@SETTINGS
@given(responses_requests(extras=True))
def test_responses_to_anthropic_ids_and_provenance(body):
    _check_pair("openai-responses", "anthropic", body)


@SETTINGS
@given(responses_requests())
def test_responses_to_anthropic_with_valid_ids_never_refuses(body):
    for item in body["input"] if isinstance(body["input"], list) else ():
        if "call_id" in item:
            item["call_id"] = re.sub(r"[^a-zA-Z0-9_-]", "x", item["call_id"])
    rt = req("openai-responses", "anthropic", body, max_tokens=512)
    assert _anthropic_ids(rt.body) == _responses_ids(body)

