"""Codex's freeform tools at a Chat endpoint that takes them as they are (OpenAI's own Chat API:
``{"type": "custom", "custom": {...}}``, answered with ``tool_calls[].custom.input``), an
endpoint fact (issue 27): declarations with their grammar as format, past calls as custom calls,
and the endpoint's custom calls (whole, or streamed in the reported chunk shape, split anywhere)
back to Codex as ``custom_tool_call`` with the input byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.translate.openai_responses.test_stream import responses_events
from tokunseba import jsonc
from tokunseba import translate as tr
from tokunseba.routing.endpoints import Endpoint
from tokunseba.routing import RulesError, load_rules_text
from tokunseba.neutral.tools import ClientTool

DATA = Path(__file__).resolve().parents[1] / "data" / "codex"
CREATED = 1767225600
TOOLS = {"exec": ClientTool("exec", "functions", freeform=True, grammar=("lark", "start: /.+/")),
         "clock__sleep": ClientTool("sleep", "clock")}
JS = 'const r = await tools.apply_patch("*** Begin Patch\\n*** End Patch\\n");\ntext(r); // "é" \\ 😀'


def codex(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def native(body: dict, native_custom_tools: bool = True):
    return tr.request("openai-responses", "openai", body, model="gpt-5.5", native_custom_tools=native_custom_tools)


# ---- the endpoint fact ----

def test_openai_own_api_takes_custom_tools_and_other_chat_servers_do_not():
    assert Endpoint("o", "openai", "https://api.openai.com/v1").native_custom_tools
    assert not Endpoint("l", "openai", "http://127.0.0.1:8080/v1").native_custom_tools
    assert Endpoint("l", "openai", "http://127.0.0.1:8080/v1", custom_tools="native").native_custom_tools
    assert not Endpoint("o", "openai", "https://api.openai.com/v1", custom_tools="function").native_custom_tools
    assert not Endpoint("a", "anthropic", "https://api.anthropic.com/v1").native_custom_tools
    with pytest.raises(ValueError, match="custom_tools must be one of: native, function"):
        Endpoint("l", "openai", "http://127.0.0.1:8080/v1", custom_tools="yes")


def test_the_rules_key_is_checked_with_its_line():
    src = ("endpoints:\n  a:\n    protocol: anthropic\n    url: http://127.0.0.1:9/v1\n    custom_tools: native\n"
           "  o:\n    protocol: openai\n    url: http://127.0.0.1:9/v1\n    custom_tools: sometimes\n"
           "routes:\n  - {name: r, when: {}, to: o}\n")
    with pytest.raises(RulesError) as e:
        load_rules_text(src)
    assert [x.split(": ", 1)[0] for x in e.value.errors] == ["<rules>:5", "<rules>:9"]
    assert "custom_tools is for Chat Completions endpoints" in e.value.errors[0]
    assert "custom_tools must be one of" in e.value.errors[1]


# ---- the request ----

def test_the_default_codex_turn_keeps_its_freeform_tool_with_its_grammar():
    body = codex("default-turn.json")
    exec_decl = body["input"][0]["tools"][0]["tools"][0]
    assert exec_decl["type"] == "custom" and exec_decl["format"]["type"] == "grammar"
    rt = native(body)
    (custom,) = [t for t in rt.body["tools"] if t["type"] == "custom"]
    assert custom == {"type": "custom", "custom": {
        "name": "exec", "description": exec_decl["description"],
        "format": {"type": "grammar", "grammar": {"definition": exec_decl["format"]["definition"],
                                                  "syntax": exec_decl["format"]["syntax"]}}}}
    functions = [t["function"]["name"] for t in rt.body["tools"] if t["type"] == "function"]
    assert "clock__sleep" in functions and "exec" not in functions
    assert any("custom_tools native" in c for c in rt.converted)
    # any other Chat endpoint: the encoding, a function of one string 'input'
    plain = native(body, native_custom_tools=False)
    assert all(t["type"] == "function" for t in plain.body["tools"])
    assert not any("custom_tools native" in c for c in plain.converted)


def test_past_freeform_calls_go_as_custom_calls_with_their_input_byte_for_byte():
    body = codex("default-exec-followup.json")
    src = body["input"][-2]
    assert src["type"] == "custom_tool_call"
    rt = native(body)
    calls = [tc for m in rt.body["messages"] for tc in m.get("tool_calls") or ()]
    assert {"id": src["call_id"], "type": "custom", "custom": {"name": "exec", "input": src["input"]}} in calls
    results = [m for m in rt.body["messages"] if m["role"] == "tool"]
    assert results[-1]["tool_call_id"] == src["call_id"]


def test_tool_choice_naming_a_freeform_tool_names_the_custom_tool():
    body = codex("default-turn.json")
    body["tool_choice"] = {"type": "custom", "name": "exec"}
    assert native(body).body["tool_choice"] == {"type": "custom", "custom": {"name": "exec"}}
    assert native(body, False).body["tool_choice"] == {"type": "function", "function": {"name": "exec"}}


def test_a_namespaced_function_stays_a_function():
    rt = native(codex("default-namespaced-followup.json"))
    calls = [tc for m in rt.body["messages"] for tc in m.get("tool_calls") or ()]
    assert calls and all(tc["type"] == "function" for tc in calls)


# ---- the reply ----

def custom_stream(call_id: str, name: str, text: str, pieces: int) -> bytes:
    """OpenAI's Chat stream of one custom call, in the reported chunk shape
    (``delta.tool_calls[{index, id, type: custom, custom: {name, input}}]``)."""
    def chunk(delta: dict, finish: str | None = None) -> bytes:
        return b"data: " + jsonc.dumpb({"id": "chatcmpl-c1", "object": "chat.completion.chunk", "created": CREATED,
                                        "model": "gpt-5.5", "choices": [{"index": 0, "delta": delta,
                                                                         "finish_reason": finish}]}) + b"\n\n"
    step = max(1, len(text) // pieces)
    out = [chunk({"role": "assistant", "tool_calls": [{"index": 0, "id": call_id, "type": "custom",
                                                        "custom": {"name": name, "input": ""}}]})]
    out += [chunk({"tool_calls": [{"index": 0, "custom": {"input": text[k:k + step]}}]})
            for k in range(0, len(text), step)]
    out.append(chunk({}, "tool_calls"))
    out.append(b"data: " + jsonc.dumpb({"id": "chatcmpl-c1", "object": "chat.completion.chunk", "choices": [],
                                        "usage": {"prompt_tokens": 11, "completion_tokens": 7}}) + b"\n\n")
    return b"".join(out) + b"data: [DONE]\n\n"


def to_codex(raw: bytes, cuts=()) -> bytes:
    t = tr.stream("openai", "openai-responses", created=CREATED, client_tools=TOOLS)
    parts, last = [], 0
    for c in cuts:
        parts.append(t.feed(raw[last:c]))
        last = c
    return b"".join(parts) + t.feed(raw[last:]) + t.close()


def custom_items(out: bytes) -> list[dict]:
    done = [e for e in responses_events(out) if e["type"] == "response.output_item.done"]
    return [e["item"] for e in done if e["item"]["type"] == "custom_tool_call"]


def test_a_streamed_custom_call_reaches_codex_as_its_custom_tool_call():
    out = to_codex(custom_stream("call_c1", "exec", JS, pieces=9))
    (item,) = custom_items(out)
    assert item["call_id"] == "call_c1" and item["name"] == "exec" and item["input"] == JS
    deltas = [e["delta"] for e in responses_events(out) if e["type"] == "response.custom_tool_call_input.delta"]
    assert "".join(deltas) == JS


def test_a_streamed_custom_call_at_every_single_split_point():
    raw = custom_stream("call_c2", "exec", JS, pieces=5)
    whole = to_codex(raw)
    for cut in range(1, len(raw)):
        assert to_codex(raw, [cut]) == whole, cut


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=80), st.integers(1, 9), st.data())
def test_any_input_round_trips_at_any_split(text, pieces, data):
    raw = custom_stream("call_c3", "exec", text, pieces)
    out = to_codex(raw)
    (item,) = custom_items(out)
    assert item["input"] == text
    cuts = sorted(data.draw(st.lists(st.integers(1, len(raw) - 1), max_size=8, unique=True)))
    assert to_codex(raw, cuts) == out


def test_a_whole_reply_with_a_custom_call():
    body = jsonc.dumpb({"id": "chatcmpl-w1", "object": "chat.completion", "created": CREATED, "model": "gpt-5.5",
                        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                            "role": "assistant", "content": None,
                            "tool_calls": [{"id": "call_w1", "type": "custom", "custom": {"name": "exec", "input": JS}}]}}],
                        "usage": {"prompt_tokens": 5, "completion_tokens": 3}})
    out = json.loads(tr.reply("openai", "openai-responses", body, created=CREATED, client_tools=TOOLS).body)
    (item,) = [i for i in out["output"] if i["type"] == "custom_tool_call"]
    assert item["call_id"] == "call_w1" and item["input"] == JS and item["name"] == "exec"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.none(), st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True)),
       st.from_regex(r"[a-z][a-z0-9_]{0,15}", fullmatch=True), st.one_of(st.none(), st.text(max_size=40)),
       st.one_of(st.none(), st.text(min_size=1, max_size=40)), st.sampled_from(["lark", "regex"]))
def test_a_declaration_reaches_the_native_endpoint_byte_for_byte(ns, name, description, grammar, syntax):
    tool: dict = {"type": "custom", "name": name}
    if description is not None:
        tool["description"] = description
    if grammar is not None:
        tool["format"] = {"type": "grammar", "syntax": syntax, "definition": grammar}
    tools = [{"type": "namespace", "name": ns, "tools": [tool]}] if ns else [tool]
    rt = native({"model": "m", "input": "hi", "tools": tools})
    (got,) = rt.body["tools"]
    want: dict = {"name": rt.body["tools"][0]["custom"]["name"]}
    if description is not None:
        want["description"] = description
    if grammar is not None:
        want["format"] = {"type": "grammar", "grammar": {"definition": grammar, "syntax": syntax}}
    assert got == {"type": "custom", "custom": want}
    assert rt.client_tools[want["name"]][:2] == (name, ns)
