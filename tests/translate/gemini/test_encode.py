"""Requests to a Gemini endpoint (translate/gemini/encode.py; docs/dev/protocols.md D.3, D.4): names
from the history, the active-loop bypass signature (plumbing), options into generationConfig,
refusals and malformed bodies named by the client's path, the endpoint's own key and model path."""

from __future__ import annotations

import json

import pytest

from tokunseba import translate
from tokunseba.errors import InvalidRequest, Refused, TranslationError

from tests.conftest import load_fixture
from tests.support.gemini_requests import plan


# ---------------------------------------------------------------- to a Gemini endpoint


def test_claude_code_turn_to_gemini():
    body = load_fixture("claude-code-print-main-turn.json")["body"]
    rt = translate.request("anthropic", "gemini", body, model="gemini-2.5-flash")
    out = rt.body
    assert "model" not in out and "stream" not in out  # both go in the URL
    assert out["systemInstruction"]["parts"][0]["text"]
    assert [c["role"] for c in out["contents"]] == ["user"]
    decls = out["tools"][0]["functionDeclarations"]
    assert [d["name"] for d in decls] == [t["name"] for t in body["tools"] if "input_schema" in t]
    assert all(d["parametersJsonSchema"] == t["input_schema"] for d, t in zip(decls, body["tools"]))
    assert out["generationConfig"]["maxOutputTokens"] == body["max_tokens"]


def test_tool_loop_to_gemini_names_results_from_history_and_signs_the_active_loop():
    body = {"model": "m", "max_tokens": 100, "messages": [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_old", "name": "Read", "input": {"p": 1}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_old", "content": "old"}]},
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "again"},
        {"role": "assistant", "content": [{"type": "text", "text": "ok"},
                                          {"type": "tool_use", "id": "toolu_A", "name": "Bash", "input": {"c": "ls"}},
                                          {"type": "tool_use", "id": "toolu_B", "name": "Read", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_A", "content": "a.txt"},
                                     {"type": "tool_result", "tool_use_id": "toolu_B", "content": "x", "is_error": True}]}]}
    rt = translate.request("anthropic", "gemini", body)
    contents = rt.body["contents"]
    loop_model, results = contents[-2], contents[-1]
    assert loop_model["parts"][1] == {"functionCall": {"name": "Bash", "args": {"c": "ls"}, "id": "toolu_A"},
                                      "thoughtSignature": "skip_thought_signature_validator"}
    assert "thoughtSignature" not in loop_model["parts"][2]  # only the first call of the turn
    assert "thoughtSignature" not in contents[1]["parts"][0]  # an earlier loop, closed by user text
    assert [p["functionResponse"]["name"] for p in results["parts"]] == ["Bash", "Read"]
    assert [p["functionResponse"]["id"] for p in results["parts"]] == ["toolu_A", "toolu_B"]
    assert results["parts"][0]["functionResponse"]["response"] == {"output": "a.txt"}
    assert any("thoughtSignature" in p for p in rt.plumbing) and any("response.output" in p for p in rt.plumbing)


def test_to_gemini_refusals_name_the_clients_path():
    orphan = {"model": "m", "max_tokens": 5, "messages": [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_gone", "content": "4"}]}]}
    with pytest.raises(TranslationError) as e:
        translate.request("anthropic", "gemini", orphan)
    assert isinstance(e.value, Refused) and "toolu_gone" in e.value.message
    bad_args = {"model": "m", "messages": [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "[1,2]"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "r"}]}
    with pytest.raises(TranslationError) as e:
        translate.request("openai", "gemini", bad_args)
    assert isinstance(e.value, Refused) and "JSON object" in e.value.message


def test_chat_options_to_gemini():
    body = {"model": "m", "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}],
            "max_completion_tokens": 5000, "stop": ["a", "b", "c", "d"], "tool_choice": "none",
            "response_format": {"type": "json_object"}, "top_p": 0.5, "user": "u1", "n": 1, "stream": True,
            "stream_options": {"include_usage": True}}
    rt = translate.request("openai", "gemini", body, max_tokens=1000)
    assert rt.body == {"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
                       "systemInstruction": {"parts": [{"text": "sys"}]},
                       "toolConfig": {"functionCallingConfig": {"mode": "NONE"}},
                       "generationConfig": {"maxOutputTokens": 1000, "topP": 0.5, "stopSequences": ["a", "b", "c", "d"],
                                            "responseMimeType": "application/json"}}
    assert "user" in rt.dropped and any("capped at 1000" in c for c in rt.converted)


def test_claude_code_to_a_gemini_endpoint_with_its_own_key():
    body = {"model": "claude-sonnet-4-5", "max_tokens": 64, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    t = plan("api.anthropic.com", "/v1/messages", body, [("x-api-key", "sk-ant-CLIENT")])
    assert t.url == "http://127.0.0.1:8002/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    assert t.set_headers["x-goog-api-key"] == "AIza-endpoint-SECRET" and "x-api-key" not in t.keep_headers
    assert "model" not in json.loads(t.body)


def test_endpoint_stop_strings_go_in_generation_config():
    body = {"model": "m", "max_tokens": 5, "stop_sequences": ["END"], "messages": [{"role": "user", "content": "hi"}]}
    rt = translate.request("anthropic", "gemini", body, stop=["<|im_end|>"], endpoint="gem")
    assert rt.body["generationConfig"]["stopSequences"] == ["END", "<|im_end|>"]
    assert "generationConfig.stopSequences += ['<|im_end|>'] (endpoint gem)" in rt.plumbing


CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
HI = {"role": "user", "content": "hi"}


@pytest.mark.parametrize(("messages", "path"), [
    ([HI, {"role": "assistant", "content": "a", "tool_calls": True}], "messages[1].tool_calls"),
    ([HI, {"role": "assistant", "tool_calls": [{**CALL, "id": {"x": 1}}]}], "messages[1].tool_calls[0].id"),
    ([HI, {"role": "assistant", "tool_calls": [{**CALL, "function": {"name": ["f"], "arguments": "{}"}}]}],
     "messages[1].tool_calls[0].function.name"),
    ([HI, {"role": "assistant", "tool_calls": [CALL]}, {"role": "tool", "tool_call_id": "c1", "content": 1.5}],
     "messages[2].content"),
    ([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": ["x"]}}]}],
     "messages[0].content[0].image_url.url"),
    ([{"role": "user", "content": [{"type": "file", "file": "data:application/pdf;base64,AA=="}]}],
     "messages[0].content[0].file"),
    ([{"role": "user", "content": [{"type": "file", "file": {"file_data": 2.0}}]}],
     "messages[0].content[0].file.file_data"),
    ([{"role": "user", "content": [{"type": "input_audio", "input_audio": 3.0}]}],
     "messages[0].content[0].input_audio"),
])
def test_a_malformed_chat_body_to_gemini_is_a_400_naming_its_path(messages, path):
    """A Chat client's body goes to the Gemini encoder as it came: a field of the wrong type is
    the client's error, named by its JSON path, never a Python error (found by a corpus of
    generated and mutated bodies run through every pair)."""
    with pytest.raises(InvalidRequest) as e:
        translate.request("openai", "gemini", {"model": "m", "messages": messages},
                          path="/v1beta/models/g:generateContent")
    assert e.value.status == 400 and e.value.message.startswith(f"{path}: ")
