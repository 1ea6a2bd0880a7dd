"""Structured output crosses every pair it can (issue 41; neutral/output_format.py; docs/dev/protocols.md F):
Anthropic ``output_config.format`` <-> Chat ``response_format`` <-> Responses ``text.format`` <-> Gemini
``responseMimeType`` + ``responseJsonSchema`` / ``responseSchema``, each direction, from the clients'
own requests: Claude Code's title turn, Gemini CLI's router call, a Codex ``--output-schema`` turn
and an OpenAI SDK ``response_format``. Schemas are converted where the dialects differ (each
conversion recorded), left behind where a target cannot take them (each drop recorded), and the
reply stays the model's text."""

from __future__ import annotations

import copy
import json

import pytest

from tests.conftest import load_fixture
from tokunseba import jsonc, translate
from tokunseba.errors import InvalidRequest

PROTOCOLS = ("anthropic", "openai", "openai-responses", "gemini")
GEMINI_PATH = "/v1beta/models/gemini-2.5-flash:generateContent"


def go(client: str, target: str, body: dict, *, path: str = GEMINI_PATH):
    before = copy.deepcopy(body)
    rt = translate.request(client, target, body, model=None if target == "gemini" else "m", max_tokens=256,
                           path=path)
    assert body == before, "input mutated"
    jsonc.dumpb(rt.body)
    return rt


def target_format(target: str, body: dict):
    """The output format of a translated body, in the target's own place."""
    return {"openai": lambda: body.get("response_format"),
            "openai-responses": lambda: (body.get("text") or {}).get("format"),
            "anthropic": lambda: (body.get("output_config") or {}).get("format"),
            "gemini": lambda: {k: v for k, v in (body.get("generationConfig") or {}).items()
                               if k.startswith("response")} or None}[target]()


# ---------------------------------------------------------------------------------------
# the clients' own requests
# ---------------------------------------------------------------------------------------

def claude_code_title() -> dict:
    return load_fixture("claude-code-title-haiku.json")["body"]


TITLE_SCHEMA = {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"],
                "additionalProperties": False}


def gemini_router() -> tuple[dict, str]:
    fx = load_fixture("gemini-cli-router-classifier.json")
    return fx["body"], fx["url"].split("googleapis.com", 1)[1]


# Codex `exec --output-schema FILE`: the file's schema as text.format, named "codex_output_schema", strict
# (openai/codex codex-rs, create_text_param_for_request: TextFormat {type: json_schema, strict, schema, name});
# --output-schema wants OpenAI's strict form (every object closed, every property required).
CODEX_SCHEMA = {"type": "object", "properties": {
    "summary": {"type": "string"},
    "files": {"type": "array", "items": {"type": "object", "properties": {"path": {"type": "string"},
                                                                          "lines": {"type": "integer"}},
                                         "required": ["path", "lines"], "additionalProperties": False}}},
    "required": ["summary", "files"], "additionalProperties": False}


def codex_output_schema_turn() -> dict:
    body = copy.deepcopy(load_fixture("codex-responses-custom-provider.json")["body"])
    body["text"] = {"format": {"type": "json_schema", "strict": True, "schema": CODEX_SCHEMA,
                               "name": "codex_output_schema"}}
    return body


# openai-python's `client.chat.completions.parse(response_format=CalendarEvent)` (a pydantic model) sends
# the model's strict JSON Schema, named after the class
EVENT_SCHEMA = {"type": "object", "title": "CalendarEvent", "properties": {
    "name": {"type": "string", "title": "Name"}, "date": {"type": "string", "title": "Date"},
    "participants": {"type": "array", "items": {"type": "string"}, "title": "Participants"}},
    "required": ["name", "date", "participants"], "additionalProperties": False}


def sdk_chat(response_format: dict | None = None) -> dict:
    return {"model": "gpt-4o-2024-08-06", "messages": [
        {"role": "system", "content": "Extract the event information."},
        {"role": "user", "content": "Alice and Bob are going to a science fair on Friday."}],
        "response_format": response_format or {"type": "json_schema", "json_schema": {
            "name": "CalendarEvent", "schema": EVENT_SCHEMA, "strict": True}}}


# ---------------------------------------------------------------------------------------
# each client's format at every target
# ---------------------------------------------------------------------------------------

def test_claude_code_title_turn_at_every_target():
    body = claude_code_title()
    assert body["output_config"]["format"] == {"type": "json_schema", "schema": TITLE_SCHEMA}
    chat = go("anthropic", "openai", body)
    assert chat.body["response_format"] == {"type": "json_schema",
                                            "json_schema": {"name": "response", "schema": TITLE_SCHEMA}}
    assert "response_format.json_schema.name" in chat.plumbing  # Chat requires a name; Anthropic has none
    resp = go("anthropic", "openai-responses", body)
    assert resp.body["text"] == {"format": {"type": "json_schema", "name": "response", "schema": TITLE_SCHEMA}}
    assert "text.format.name" in resp.plumbing
    gem = go("anthropic", "gemini", body)
    assert target_format("gemini", gem.body) == {"responseMimeType": "application/json",
                                                 "responseJsonSchema": TITLE_SCHEMA}
    for rt in (chat, resp, gem):
        assert not [p for p in rt.dropped if p.startswith("output_config")], rt.dropped


def test_gemini_cli_router_call_at_every_target():
    body, path = gemini_router()
    gc = body["generationConfig"]
    assert gc["responseMimeType"] == "application/json" and gc["responseJsonSchema"]["type"] == "OBJECT"
    lowered = {"type": "object", "properties": {
        "complexity_reasoning": {"type": "string", "description": "Brief explanation for the score."},
        "complexity_score": {"type": "integer", "description": "Complexity score from 1-100."}},
        "required": ["complexity_reasoning", "complexity_score"]}
    upper_case = "generationConfig.responseJsonSchema: upper-case type names as JSON Schema's (OBJECT -> object)"
    chat = go("gemini", "openai", body, path=path)
    assert chat.body["response_format"] == {"type": "json_schema",
                                            "json_schema": {"name": "response", "schema": lowered}}
    resp = go("gemini", "openai-responses", body, path=path)
    assert resp.body["text"]["format"] == {"type": "json_schema", "name": "response", "schema": lowered}
    claude = go("gemini", "anthropic", body, path=path)
    # Anthropic takes closed objects only: the one object closed, recorded in the client's path
    assert claude.body["output_config"] == {"format": {"type": "json_schema",
                                                       "schema": {**lowered, "additionalProperties": False}}}
    assert any(c.startswith("generationConfig.responseJsonSchema: + additionalProperties: false on 1 object")
               for c in claude.converted), claude.converted
    for rt in (chat, resp, claude):
        assert upper_case in rt.converted
        assert not [p for p in rt.dropped if p.startswith(("generationConfig.response"))], rt.dropped


def test_codex_output_schema_turn_at_every_target():
    body = codex_output_schema_turn()
    chat = go("openai-responses", "openai", body)
    assert chat.body["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "codex_output_schema", "schema": CODEX_SCHEMA, "strict": True}}
    assert not [p for p in chat.dropped + chat.plumbing if "format" in p]
    claude = go("openai-responses", "anthropic", body)
    assert claude.body["output_config"] == {"format": {"type": "json_schema", "schema": CODEX_SCHEMA}}
    # Anthropic always constrains and names no format: strict and name left behind, in Codex's own paths
    assert {"text.format.name", "text.format.strict"} <= set(claude.dropped)
    gem = go("openai-responses", "gemini", body)
    assert target_format("gemini", gem.body) == {"responseMimeType": "application/json",
                                                 "responseJsonSchema": CODEX_SCHEMA}
    assert {"text.format.name", "text.format.strict"} <= set(gem.dropped)


def test_sdk_response_format_at_every_target():
    body = sdk_chat()
    resp = go("openai", "openai-responses", body)
    assert resp.body["text"] == {"format": {"type": "json_schema", "name": "CalendarEvent", "schema": EVENT_SCHEMA,
                                            "strict": True}}
    claude = go("openai", "anthropic", body)
    assert claude.body["output_config"] == {"format": {"type": "json_schema", "schema": EVENT_SCHEMA}}
    assert {"response_format.json_schema.name", "response_format.json_schema.strict"} <= set(claude.dropped)
    gem = go("openai", "gemini", body)
    assert target_format("gemini", gem.body) == {"responseMimeType": "application/json",
                                                 "responseJsonSchema": EVENT_SCHEMA}


# ---------------------------------------------------------------------------------------
# both ways: a format that crosses and comes back is the format that left
# ---------------------------------------------------------------------------------------

def _back(client: str, via: str, body: dict, path: str = GEMINI_PATH) -> dict:
    there = go(client, via, body, path=path)
    back_body = dict(there.body)
    if via == "gemini":
        return go(via, client, back_body, path=path).body
    back_body.setdefault("model", "m")
    return go(via, client, back_body).body


@pytest.mark.parametrize("via", [p for p in PROTOCOLS if p != "anthropic"])
def test_anthropic_format_round_trips(via):
    out = _back("anthropic", via, claude_code_title())
    assert out["output_config"] == {"format": {"type": "json_schema", "schema": TITLE_SCHEMA}}


def test_codex_format_round_trips_through_chat_whole():
    # name, schema and strict all carried (through Anthropic or Gemini the schema comes back, unnamed: above)
    out = _back("openai-responses", "openai", codex_output_schema_turn())["text"]["format"]
    assert out == codex_output_schema_turn()["text"]["format"]


@pytest.mark.parametrize("via", ["anthropic", "gemini"])
def test_codex_schema_round_trips_through_the_others(via):
    out = _back("openai-responses", via, codex_output_schema_turn())
    assert out["text"]["format"] == {"type": "json_schema", "name": "response", "schema": CODEX_SCHEMA}


@pytest.mark.parametrize("via", ["anthropic", "openai-responses", "gemini"])
def test_sdk_format_round_trips_with_its_schema(via):
    out = _back("openai", via, sdk_chat())["response_format"]
    assert out["type"] == "json_schema" and out["json_schema"]["schema"] == EVENT_SCHEMA


@pytest.mark.parametrize("via", ["openai", "openai-responses", "anthropic"])
def test_gemini_format_round_trips_as_json_schema(via):
    body, path = gemini_router()
    out = _back("gemini", via, body, path)["generationConfig"]
    assert out["responseMimeType"] == "application/json"
    assert out["responseJsonSchema"]["properties"]["complexity_score"]["type"] == "integer"


# ---------------------------------------------------------------------------------------
# json_object and text
# ---------------------------------------------------------------------------------------

def test_json_object_crosses_where_a_target_has_it():
    body = sdk_chat({"type": "json_object"})
    assert go("openai", "openai-responses", body).body["text"] == {"format": {"type": "json_object"}}
    assert target_format("gemini", go("openai", "gemini", body).body) == {"responseMimeType": "application/json"}
    gemini_json = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
                   "generationConfig": {"responseMimeType": "application/json"}}
    assert go("gemini", "openai", gemini_json).body["response_format"] == {"type": "json_object"}
    responses = {"model": "m", "input": "hi", "text": {"format": {"type": "json_object"}}}
    assert go("openai-responses", "openai", responses).body["response_format"] == {"type": "json_object"}


def test_json_object_has_no_anthropic_counterpart_dropped_and_said():
    rt = go("openai", "anthropic", sdk_chat({"type": "json_object"}))
    assert "output_config" not in rt.body
    assert "response_format" in rt.dropped
    assert any("no JSON mode without one" in w for w in rt.warnings)


def test_a_json_schema_format_without_a_schema_is_any_json_object():
    body = sdk_chat({"type": "json_schema", "json_schema": {"name": "anything"}})  # schema is optional in Chat
    assert go("openai", "openai-responses", body).body["text"] == {"format": {"type": "json_schema",
                                                                          "name": "anything"}}
    assert target_format("gemini", go("openai", "gemini", body).body) == {"responseMimeType": "application/json"}
    rt = go("openai", "anthropic", body)
    assert "output_config" not in rt.body and "response_format" in rt.dropped


def test_text_format_is_every_target_s_default():
    body = sdk_chat({"type": "text"})
    assert go("openai", "openai-responses", body).body["text"] == {"format": {"type": "text"}}
    for target in ("anthropic", "gemini"):
        rt = go("openai", target, body)
        assert target_format(target, rt.body) is None and "response_format" not in rt.dropped


# ---------------------------------------------------------------------------------------
# schema dialects: converted where they differ, dropped where the target lacks a feature
# ---------------------------------------------------------------------------------------

def test_gemini_response_schema_dialect_becomes_json_schema_recorded():
    openapi = {"type": "OBJECT", "properties": {
        "name": {"type": "STRING", "nullable": True},
        "tags": {"type": "ARRAY", "items": {"type": "STRING", "format": "enum", "enum": ["a", "b"]}}},
        "required": ["name"], "propertyOrdering": ["name", "tags"]}
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
            "generationConfig": {"responseMimeType": "application/json", "responseSchema": openapi}}
    rt = go("gemini", "openai", body)
    assert rt.body["response_format"]["json_schema"]["schema"] == {"type": "object", "properties": {
        "name": {"type": ["string", "null"]},
        "tags": {"type": "array", "items": {"type": "string", "format": "enum", "enum": ["a", "b"]}}},
        "required": ["name"]}
    assert "generationConfig.responseSchema: upper-case type names as JSON Schema's (OBJECT -> object)" in rt.converted
    assert "generationConfig.responseSchema: nullable: true as \"null\" among the types" in rt.converted
    assert "generationConfig.responseSchema.propertyOrdering" in rt.dropped
    snake = {"contents": body["contents"], "generation_config": {"response_mime_type": "application/json",
                                                                 "response_schema": openapi}}
    assert go("gemini", "openai", snake).body["response_format"] == rt.body["response_format"]


def test_keywords_gemini_lacks_are_dropped_by_path():
    schema = {"type": "object", "properties": {"id": {"type": "string", "pattern": "^[a-z]+$", "minLength": 2},
                                               "n": {"type": "integer", "minimum": 1, "multipleOf": 2}},
              "required": ["id"], "additionalProperties": False}
    rt = go("openai", "gemini", sdk_chat({"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}))
    sent = rt.body["generationConfig"]["responseJsonSchema"]
    assert sent["properties"] == {"id": {"type": "string"}, "n": {"type": "integer", "minimum": 1}}
    sp = "response_format.json_schema.schema.properties"
    assert {f"{sp}.id.pattern", f"{sp}.id.minLength", f"{sp}.n.multipleOf"} <= set(rt.dropped)
    assert sent["additionalProperties"] is False and sent["required"] == ["id"]


def test_keywords_anthropic_lacks_are_dropped_and_objects_closed():
    schema = {"type": "object", "properties": {
        "score": {"type": "integer", "minimum": 0, "maximum": 10},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "minItems": 2, "maxItems": 4},
        "owner": {"type": "object", "properties": {"name": {"type": "string"}}}},
        "required": ["score"]}
    rt = go("openai", "anthropic", sdk_chat({"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}))
    sent = rt.body["output_config"]["format"]["schema"]
    assert sent["properties"]["score"] == {"type": "integer"}
    assert sent["properties"]["tags"] == {"type": "array", "items": {"type": "string"}}
    assert sent["additionalProperties"] is False and sent["properties"]["owner"]["additionalProperties"] is False
    sp = "response_format.json_schema.schema.properties"
    assert {f"{sp}.score.minimum", f"{sp}.score.maximum", f"{sp}.tags.items.maxLength", f"{sp}.tags.minItems",
            f"{sp}.tags.maxItems"} <= set(rt.dropped)
    assert any("additionalProperties: false on 2 object(s)" in c for c in rt.converted), rt.converted


def test_an_open_object_anthropic_cannot_take_drops_the_format():
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}}
    rt = go("openai", "anthropic", sdk_chat({"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}))
    assert "output_config" not in rt.body and "response_format" in rt.dropped
    assert any("additionalProperties" in w for w in rt.warnings)


def test_formats_no_other_protocol_has_are_dropped_recorded():
    enum_mime = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
                 "generationConfig": {"responseMimeType": "text/x.enum",
                                      "responseSchema": {"type": "STRING", "enum": ["a", "b"]}}}
    rt = go("gemini", "openai", enum_mime)
    assert "response_format" not in rt.body
    assert {"generationConfig.responseMimeType", "generationConfig.responseSchema"} <= set(rt.dropped)
    future = {"model": "m", "input": "hi", "text": {"format": {"type": "some_new_format"}}}
    rt = go("openai-responses", "openai", future)
    assert "response_format" not in rt.body and "text.format" in rt.dropped


def test_the_beta_spelling_of_anthropic_output_format_is_read():
    body = {k: v for k, v in claude_code_title().items() if k != "output_config"}
    body["output_format"] = {"type": "json_schema", "schema": TITLE_SCHEMA}
    rt = go("anthropic", "openai", body)
    assert rt.body["response_format"]["json_schema"]["schema"] == TITLE_SCHEMA


def test_malformed_formats_are_400s_naming_the_path():
    with pytest.raises(InvalidRequest, match=r"^output_config\.format\.schema: required"):
        go("anthropic", "openai", {**claude_code_title(), "output_config": {"format": {"type": "json_schema"}}})
    with pytest.raises(InvalidRequest, match=r"^text\.format\.schema: expected a JSON Schema object"):
        go("openai-responses", "openai", {"model": "m", "input": "hi",
                                          "text": {"format": {"type": "json_schema", "name": "x", "schema": []}}})
    with pytest.raises(InvalidRequest, match=r"^response_format\.json_schema: required"):
        go("openai", "anthropic", sdk_chat({"type": "json_schema"}))


# ---------------------------------------------------------------------------------------
# the reply stays the model's text: asked for, never enforced
# ---------------------------------------------------------------------------------------

def test_the_reply_is_the_model_s_text_as_it_came():
    text = '{"title": "Fix the parser"'  # not even valid JSON: the proxy never checks it
    chat_reply = {"id": "c1", "object": "chat.completion", "created": 1, "model": "m", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}}
    out = json.loads(translate.reply("openai", "anthropic", jsonc.dumpb(chat_reply)).body)
    assert out["content"] == [{"type": "text", "text": text}]


# ---------------------------------------------------------------------------------------
# an endpoint's stop strings never cut the JSON the turn asks for
# ---------------------------------------------------------------------------------------

def test_endpoint_stop_strings_are_not_added_to_a_json_turn():
    """On the real llama-server the shipped local endpoint's stops (agents-local.yaml) cut Claude Code's
    title object: "\n\n" after "{" (its JSON grammar writes blank lines between tokens), "<|im_end|>"
    written inside the title string. A JSON turn takes none (the object's end ends the answer), said;
    the client's own stop strings stay."""
    kw = {"model": "gemma-3-270m", "max_tokens": 64, "stop": ["<|im_end|>", "\n\n"], "endpoint": "local"}
    rt = translate.request("anthropic", "openai", claude_code_title(), **kw)
    assert "stop" not in rt.body
    assert "endpoint local stop strings ['<|im_end|>', '\\n\\n'] not added: this turn asks for JSON, which they " \
           "would cut (the object's end ends the answer)" in rt.warnings
    free = {k: v for k, v in claude_code_title().items() if k != "output_config"}
    assert translate.request("anthropic", "openai", free, **kw).body["stop"] == ["<|im_end|>", "\n\n"]
    own = claude_code_title() | {"stop_sequences": ["END"]}
    assert translate.request("anthropic", "openai", own, **kw).body["stop"] == ["END"]
    # a format the target cannot carry constrains nothing there: the stops stay
    json_object = sdk_chat({"type": "json_object"}) | {"max_tokens": 64}
    assert translate.request("openai", "anthropic", json_object, **kw).body["stop_sequences"] == ["<|im_end|>", "\n\n"]
    gem = translate.request("openai", "gemini", json_object, path=GEMINI_PATH, **kw)
    assert "stopSequences" not in gem.body.get("generationConfig", {})
