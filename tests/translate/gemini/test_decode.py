"""Gemini requests through the codec registry (translate/gemini/decode.py; requests to Gemini are in
test_encode.py) (issue 11; docs/dev/clients.md
§5.2-§5.4, §6.1; docs/dev/protocols.md D.1, D.3, D.4): every field of the decode table, the
model and stream from the URL path, function-call ids (minted deterministically and recorded when absent; answered by name and
order; ids sent travel byte for byte), names from the history on the way to Gemini, the
active-loop bypass signature (plumbing), refusals before sending, nothing invented; and the
turn plumbing: the model path, the endpoint's x-goog-api-key, countTokens answered with a
Gemini error."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import given, settings, strategies as st

from tokunseba import translate
from tokunseba.errors import Refused, TranslationError
from tokunseba.translate.gemini import decode as gd, encode as ge

from tests.conftest import load_fixture
from tests.support.gemini_requests import plan
from tests.support.planning import plan_request

TARGETS = ("anthropic", "openai", "openai-responses")
STREAM = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
WHOLE = "/v1/models/gemini-2.5-flash:generateContent"


def fixture(name: str) -> tuple[dict, str]:
    fx = load_fixture(name)
    return fx["body"], fx["url"].split("googleapis.com", 1)[1]


def to(target: str, body: dict, path: str = WHOLE, **kw):
    return translate.request("gemini", target, body, path=path, max_tokens=kw.pop("max_tokens", 1024), **kw)


def user(text: str) -> dict:
    return {"role": "user", "parts": [{"text": text}]}


# ---------------------------------------------------------------- the tables


def test_every_table_row_says_why():
    for table in (gd.DECODE_FIELDS, gd.GENERATION_FIELDS, ge.ENCODE_FIELDS):
        for key, (action, _handler, why) in table.items():
            assert action in ("mapped", "converted", "dropped", "refused") and why, key
    # every field the issue lists has a row
    assert {"contents", "systemInstruction", "tools", "toolConfig", "generationConfig", "safetySettings",
            "cachedContent"} <= set(gd.DECODE_FIELDS)
    assert {"temperature", "topP", "topK", "maxOutputTokens", "stopSequences", "candidateCount", "responseMimeType",
            "responseSchema", "responseJsonSchema", "thinkingConfig"} <= set(gd.GENERATION_FIELDS)


@pytest.mark.parametrize("name", ["gemini-cli-main-turn-yolo.json", "gemini-cli-tool-result-followup.json",
                                  "gemini-cli-router-classifier.json", "google-genai-py-tool-followup.json",
                                  "google-genai-py-generate-content-tools.json", "google-genai-py-stream.json"])
@pytest.mark.parametrize("target", TARGETS)
def test_real_client_requests_translate_to_every_target(name, target):
    body, path = fixture(name)
    before = copy.deepcopy(body)
    rt = to(target, body, path)
    assert body == before  # the input is never mutated
    model = path.split("/models/")[1].split(":")[0]
    assert rt.body["model"] == model  # from the URL, never the body
    if target != "openai-responses":
        assert rt.body.get("stream") is ("streamGenerateContent" in path) or ("stream" not in rt.body)
    # Gemini's own knobs are dropped and recorded in the client's paths
    gc = body.get("generationConfig") or {}
    if "topK" in gc:
        assert "generationConfig.topK" in rt.dropped
    if "thinkingConfig" in gc:  # its level or budget travels as the target's effort (neutral/effort.py)
        assert any(c.startswith("generationConfig.thinkingConfig.") and "-> reasoning_effort" in c for c in rt.converted)


def test_cli_main_turn_to_chat():
    body, path = fixture("gemini-cli-main-turn-yolo.json")
    rt = to("openai", body, path)
    msgs = rt.body["messages"]
    assert msgs[0] == {"role": "system", "content": body["systemInstruction"]["parts"][0]["text"]}  # role ignored
    # the session context and the prompt: two text parts, one string (local servers drop arrays)
    assert msgs[1] == {"role": "user", "content": "\n\n".join(p["text"] for p in body["contents"][0]["parts"])}
    names = [t["function"]["name"] for t in rt.body["tools"]]
    assert names == [d["name"] for d in body["tools"][0]["functionDeclarations"]]
    shell = next(t for t in rt.body["tools"] if t["function"]["name"] == "run_shell_command")
    assert shell["function"]["parameters"] == next(d for d in body["tools"][0]["functionDeclarations"]
                                                   if d["name"] == "run_shell_command")["parametersJsonSchema"]
    assert rt.body["temperature"] == 1 and rt.body["top_p"] == 0.95 and rt.body["stream"] is True
    # Gemini CLI names no maxOutputTokens: the endpoint's max_tokens (1024 here) is the turn's, as plumbing
    assert rt.body["max_completion_tokens"] == 1024
    assert rt.plumbing == ["max_completion_tokens", "stream_options.include_usage"]


def test_cli_follow_up_keeps_its_minted_ids_and_drops_the_signature():
    body, path = fixture("gemini-cli-tool-result-followup.json")
    rt = to("anthropic", body, path)
    assistant, result = rt.body["messages"][-2], rt.body["messages"][-1]
    call = body["contents"][1]["parts"][1]["functionCall"]
    assert [b for b in assistant["content"] if b["type"] == "tool_use"] == [
        {"type": "tool_use", "id": call["id"], "name": call["name"], "input": call["args"]}]
    assert result["content"][0]["tool_use_id"] == call["id"]  # byte for byte
    assert "contents[1].parts[1].thoughtSignature" in rt.dropped


def test_python_follow_up_without_ids_matched_by_name_and_order():
    body, path = fixture("google-genai-py-tool-followup.json")
    rt = to("openai", body, path)
    msgs = rt.body["messages"]
    call = msgs[2]["tool_calls"][0]
    assert call["id"] == "call_1_0" and call["function"] == {
        "name": "run_shell_command", "arguments": json.dumps({"command": "echo hi", "description": "Run a command"},
                                                             separators=(",", ":"))}
    assert msgs[3] == {"role": "tool", "tool_call_id": "call_1_0", "content": "hi"}
    assert "id_synthesized: contents[1].parts[2].functionCall.id" in rt.warnings
    assert any(c.startswith("contents[2].parts[0].functionResponse.id: matched") for c in rt.converted)
    # the echoed thought part and the text signature are left behind, recorded
    assert {"contents[1].parts[0]", "contents[1].parts[1].thoughtSignature"} <= set(rt.dropped)
    assert msgs[2]["content"] == "Running it."
    # OpenAPI UPPERCASE types lowercased; snake_case parameters_json_schema read as is
    tools = {t["function"]["name"]: t["function"]["parameters"] for t in rt.body["tools"]}
    assert tools["run_shell_command"] == {"properties": {"command": {"type": "string"}}, "required": ["command"],
                                          "type": "object"}
    assert tools["read_file"]["properties"] == {"file_path": {"type": "string"}}


def test_parallel_responses_without_ids_by_name_then_order():
    body = {"contents": [user("go"), {"role": "model", "parts": [
        {"functionCall": {"name": "read", "args": {"p": "a"}}}, {"functionCall": {"name": "ls", "args": {}}},
        {"functionCall": {"name": "read", "args": {"p": "b"}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "read", "response": {"output": "A"}}},
                                   {"functionResponse": {"name": "read", "response": {"output": "B"}}},
                                   {"functionResponse": {"name": "ls", "response": {"error": "denied"}}}]}]}
    msgs = to("openai", body).body["messages"]
    ids = [c["id"] for c in msgs[1]["tool_calls"]]
    assert ids == ["call_1_0", "call_1_1", "call_1_2"]
    assert [(m["tool_call_id"], m["content"]) for m in msgs[2:]] == [
        ("call_1_0", "A"), ("call_1_2", "B"), ("call_1_1", '{"error":"denied"}')]  # the error key kept


def test_a_response_for_no_call_is_refused_before_sending():
    body = {"contents": [user("x"), {"role": "user", "parts": [{"functionResponse": {"name": "ghost", "response": {}}}]}]}
    with pytest.raises(TranslationError) as e:
        to("anthropic", body)
    assert isinstance(e.value, Refused) and "ghost" in e.value.message


def test_cached_content_and_several_candidates_are_refused():
    for extra, needle in (({"cachedContent": "cachedContents/abc"}, "cachedContent"),
                          ({"generationConfig": {"candidateCount": 2}}, "candidateCount")):
        with pytest.raises(TranslationError) as e:
            to("openai", {"contents": [user("hi")], **extra})
        assert isinstance(e.value, Refused) and needle in e.value.message


def test_tool_config_and_json_output():
    base = {"contents": [user("hi")], "tools": [{"functionDeclarations": [{"name": "f"}, {"name": "g"}]},
                                                {"googleSearch": {}}]}
    for mode, names, want in (("AUTO", None, "auto"), ("NONE", None, "none"), ("ANY", None, "required"),
                              ("ANY", ["g"], {"type": "function", "function": {"name": "g"}})):
        fcc = {"mode": mode, **({"allowedFunctionNames": names} if names else {})}
        rt = to("openai", {**base, "toolConfig": {"functionCallingConfig": fcc}})
        assert rt.body["tool_choice"] == want
        assert "tools[1].googleSearch" in rt.dropped  # Google's own tool
    rt = to("openai", {**base, "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["f", "g"]}}})
    assert rt.body["tool_choice"] == "required" and "toolConfig.functionCallingConfig.allowedFunctionNames" in rt.dropped
    body, path = fixture("gemini-cli-router-classifier.json")
    rt = to("openai", body, path)
    schema = rt.body["response_format"]["json_schema"]["schema"]
    assert rt.body["response_format"]["type"] == "json_schema" and schema["type"] == "object"
    assert schema["properties"]["complexity_score"]["type"] == "integer"  # UPPERCASE lowered
    assert rt.body["messages"][1]["role"] == rt.body["messages"][2]["role"] == "user"  # two user turns kept


def test_images_and_unreadable_files():
    png = "iVBORw0KGgo="
    body = {"contents": [{"role": "user", "parts": [
        {"text": "see"}, {"inlineData": {"mimeType": "image/png", "data": png}},
        {"inline_data": {"mime_type": "application/pdf", "data": "JVBE"}},
        {"inlineData": {"mimeType": "audio/wav", "data": "UklG"}},
        {"fileData": {"mimeType": "image/png", "fileUri": "https://generativelanguage.googleapis.com/v1beta/files/x"}}]}]}
    rt = to("openai", body)
    assert rt.body["messages"][0]["content"] == [
        {"type": "text", "text": "see"}, {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png}"}},
        {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBE"}}]
    assert {"contents[0].parts[3].inlineData", "contents[0].parts[4].fileData"} <= set(rt.dropped)
    ant = to("anthropic", body).body["messages"][0]["content"]
    assert ant[1] == {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}}


def test_streams_must_be_sse_and_unknown_fields_are_recorded():
    with pytest.raises(TranslationError) as e:
        to("openai", {"contents": [user("hi")]}, "/v1beta/models/m:streamGenerateContent")
    assert isinstance(e.value, Refused) and "alt=sse" in e.value.message
    rt = to("openai", {"contents": [user("hi")], "safetySettings": [{"category": "x"}], "brandNew": 1,
                       "generationConfig": {"topK": 3, "seed": 7, "responseModalities": ["TEXT"]}})
    assert {"safetySettings", "brandNew", "generationConfig.topK", "generationConfig.responseModalities"} <= set(
        rt.dropped)
    assert rt.body["seed"] == 7


# ---------------------------------------------------------------- nothing invented, ids untouched

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
ID = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789_-"), min_size=1, max_size=30)


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(TEXT, min_size=1, max_size=4), ids=st.lists(ID, min_size=1, max_size=3, unique=True))
def test_round_trip_through_gemini_keeps_ids_and_invents_nothing(texts, ids):
    """Chat -> Gemini -> Chat: every text and id comes back as it went; nothing appears that
    the client did not send (besides the recorded plumbing)."""
    calls = [{"id": i, "type": "function", "function": {"name": f"f{n}", "arguments": json.dumps({"t": texts[0]})}}
             for n, i in enumerate(ids)]
    body = {"model": "m", "messages": [{"role": "user", "content": t} for t in texts if t]
            + [{"role": "user", "content": "go"}, {"role": "assistant", "content": None, "tool_calls": calls}]
            + [{"role": "tool", "tool_call_id": i, "content": texts[-1]} for i in ids]}
    gem = translate.request("openai", "gemini", body)
    back = translate.request("gemini", "openai", gem.body, path=WHOLE)
    assert [c["id"] for c in back.body["messages"][-len(ids) - 1]["tool_calls"]] == ids
    assert [m["tool_call_id"] for m in back.body["messages"][-len(ids):]] == ids
    assert [m["content"] for m in back.body["messages"][-len(ids):]] == [texts[-1]] * len(ids)
    assert [m["content"] for m in back.body["messages"] if m["role"] == "user"] == [t for t in texts if t] + ["go"]
    sent = json.dumps(gem.body, ensure_ascii=False)
    assert sent.count("skip_thought_signature_validator") == 1  # the recorded plumbing, once


def test_gemini_client_to_a_chat_endpoint():
    t = plan("generativelanguage.googleapis.com", STREAM + "&key=AIzaCLIENT", {"contents": [user("hi")]},
             [("x-goog-api-key", "AIzaCLIENT"), ("content-type", "application/json")])
    assert (t.action, t.target_protocol) == ("translate", "openai")
    assert t.url == "http://127.0.0.1:8000/v1/chat/completions" and "AIzaCLIENT" not in t.url
    assert "x-goog-api-key" not in t.keep_headers and t.set_headers["authorization"] == "Bearer sk-local-SECRET"
    sent = json.loads(t.body)
    assert sent["model"] == "qwen3" and sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    # Chat needs none, but the endpoint says its max_tokens (512): a turn whose client names no limit gets it
    assert sent["max_completion_tokens"] == 512
    assert t.stream and sent["messages"] == [{"role": "user", "content": "hi"}]


def test_count_tokens_from_gemini_routed_elsewhere_is_a_clear_gemini_error():
    body, _ = fixture("gemini-cli-count-tokens.json")
    for c in body["contents"]:  # its image would refuse the text-only local endpoint (tests/routing/test_accepts.py)
        c["parts"] = [p for p in c["parts"] if "inlineData" not in p]
    t = plan("generativelanguage.googleapis.com", "/v1beta/models/gemini-2.5-flash:countTokens", body, [])
    assert (t.action, t.outcome) == ("respond", "refused") and t.url is None
    err = json.loads(t.local.body)["error"]
    assert t.local.status == 400 and err["status"] == "INVALID_ARGUMENT" and err["code"] == 400
    assert "endpoint local (openai), which cannot count tokens (OpenAI Chat Completions has no token counter)" \
        in err["message"] and "does not estimate" in err["message"]


# ---------------------------------------------------------------- the shipped example


def test_gemini_cli_easy_turns_example():
    from pathlib import Path

    from tokunseba.routing import load_rules

    rules = load_rules(Path(__file__).resolve().parents[3] / "rules" / "examples" / "gemini-cli-easy-turns.yaml")
    assert rules.warnings == []
    env = {}

    def plan_fixture(name):
        fx = load_fixture(name)
        path = fx["url"].split("googleapis.com", 1)[1]
        return plan_request(rules, method="POST", host="generativelanguage.googleapis.com", port=443, path=path,
                            headers=[("x-goog-api-key", "AIzaCLIENT")], body=json.dumps(fx["body"]).encode(), env=env)

    router = plan_fixture("gemini-cli-router-classifier.json")
    assert (router.action, router.decision.route.name, router.target_protocol) == ("translate", "gemini-cli-router",
                                                                                   "openai")
    sent = json.loads(router.body)
    assert router.url == "http://127.0.0.1:28431/v1/chat/completions" and sent["model"] == "gemma-3-270m"
    # a JSON turn takes none of the endpoint's stop strings: they would cut the object (tests/neutral/test_output_format.py)
    assert sent["response_format"]["type"] == "json_schema" and "stop" not in sent
    assert "x-goog-api-key" not in router.keep_headers
    for main in ("gemini-cli-main-turn-yolo.json", "gemini-cli-count-tokens.json"):
        t = plan_fixture(main)
        assert t.action == "pass" and t.url is None and t.body is None  # untouched, to Google


def test_a_gemini_call_id_anthropic_would_reject_is_refused_in_the_clients_path():
    """Gemini CLI mints ids from the tool's name (name_<ms>_<n>): an MCP tool named with a dot
    gives an id Anthropic rejects. Ids are never rewritten, so the turn is refused before
    sending, named by the Gemini client's own JSON path; Chat and Responses take it."""
    body = {"contents": [user("go"),
                         {"role": "model", "parts": [{"functionCall": {"id": "srv.tool_1796_0", "name": "srv.tool",
                                                                       "args": {}}}]},
                         {"role": "user", "parts": [{"functionResponse": {"id": "srv.tool_1796_0", "name": "srv.tool",
                                                                          "response": {"output": "x"}}}]}]}
    with pytest.raises(Refused) as e:
        to("anthropic", body)
    assert e.value.message.startswith("contents[1].parts[0].functionCall.id: ") and "srv.tool_1796_0" in e.value.message
    assert to("openai", body).body["messages"][-1]["tool_call_id"] == "srv.tool_1796_0"
    assert to("openai-responses", body).body["input"][-1]["call_id"] == "srv.tool_1796_0"
