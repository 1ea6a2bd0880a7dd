"""Request translation OpenAI Responses (Codex) -> OpenAI Chat Completions: the real Codex
fixtures (classic and custom-provider shapes), the lite shape refused, one table-driven case
per mapping, refusals and bad input naming the JSON path, then hypothesis properties: call
ids byte-identical, nothing invented, only TranslationError on garbage, input never mutated."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import load_fixture
from tests.suites.test_request_properties import (
    ANY_ID,
    B64,
    JSON,
    MEDIA,
    NAME,
    SETTINGS,
    TEXT,
    TOOL_INPUT,
    _assert_provenance,
    _chat_ids,
    _only_translation_error,
    mutated,
)
from tokunseba import jsonc
from tokunseba.neutral.tools import ClientTool
from tokunseba.errors import TranslationError
from tokunseba.neutral.conversation import RequestTranslation
from tests.support.pairs import responses_to_chat
from tokunseba.translate.openai_responses.decode import DECODE_FIELDS as R2C_FIELDS
from tokunseba.translate.openai_responses.decode import DECODE_ITEMS as R2C_ITEMS
from tokunseba.translate.openai_responses.decode import DECODE_REFUSED_ITEMS as R2C_REFUSED_ITEMS

CLASSIC = "codex-responses-gpt55-tool-followup.json"
CUSTOM_PROVIDER = "codex-responses-custom-provider.json"
PDF = "data:application/pdf;base64,JVBERi0xLjQ="
PNG = "data:image/png;base64,iVBORw0KGgo="


def R(**extra) -> dict:
    """A minimal Responses request plus ``extra``."""
    return {"model": "gpt-x", "input": "hi"} | extra


def r2c(body: dict, **kw) -> RequestTranslation:
    before = copy.deepcopy(body)
    rt = responses_to_chat(body, **kw)
    assert body == before, "input mutated"
    jsonc.dumpb(rt.body)  # always serialisable
    return rt


def msg(role: str, content) -> dict:
    return {"type": "message", "role": role, "content": content}


def fc(call_id: str, name: str = "f", arguments: str = "{}") -> dict:
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments}


def fco(call_id: str, output="ok") -> dict:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def call(call_id: str, name: str = "f", arguments: str = "{}") -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def text_parts(*texts: str, kind: str = "input_text") -> list[dict]:
    return [{"type": kind, "text": t} for t in texts]


# ---------------------------------------------------------------------------------------
# the real Codex requests
# ---------------------------------------------------------------------------------------


def test_codex_classic_tool_followup_translates_with_ids_and_every_text():
    body = load_fixture(CLASSIC)["body"]
    rt = r2c(body)
    out = rt.body
    items = body["input"]
    dev0, dev1, env, prompt, fcall, fout = items
    assert [i["type"] for i in items] == ["message"] * 4 + ["function_call", "function_call_output"]
    # developer items -> ONE leading system message; user items -> user messages; the call and its output
    assert [m["role"] for m in out["messages"]] == ["system", "user", "user", "assistant", "tool"]
    system, user_env, user_prompt, assistant, tool = out["messages"]
    assert system == {"role": "system", "content": "\n\n".join(p["text"] for p in dev0["content"] + dev1["content"])}
    assert user_env == {"role": "user", "content": env["content"][0]["text"]}
    assert user_prompt == {"role": "user", "content": "TOOLTEST run echo"}
    assert assistant == {"role": "assistant", "content": "", "tool_calls": [
        {"id": fcall["call_id"], "type": "function", "function": {"name": "exec_command", "arguments": fcall["arguments"]}}]}
    assert tool == {"role": "tool", "tool_call_id": fout["call_id"], "content": fout["output"]}
    assert assistant["tool_calls"][0]["id"] == tool["tool_call_id"] == "call_91e3e748cad94115b873"
    # every input text, the arguments and the output are in the wire body, byte for byte
    wire = jsonc.dumps(out)
    texts = [p["text"] for i in items[:4] for p in i["content"]] + [fcall["arguments"], fout["output"]]
    for text in texts:
        assert jsonc.dumps(text)[1:-1] in wire
    # the 10 tools: the 7 function tools kept exactly (minus strict); the freeform apply_patch as a
    # function of one string 'input' (its grammar in that parameter's description); tool_search
    # (type "tool_search", not a function) and web_search dropped by path
    assert [t["type"] for t in body["tools"]] == ["function"] * 3 + ["custom"] + ["function"] * 4 + ["tool_search", "web_search"]
    kept = [t for t in body["tools"] if t["type"] == "function"]
    assert [t["function"]["name"] for t in out["tools"]] == [
        "exec_command", "write_stdin", "request_user_input", "apply_patch", "view_image", "get_goal", "create_goal",
        "update_goal"]
    patch = out["tools"].pop(3)
    for src, dst in zip(kept, out["tools"], strict=True):
        assert dst == {"type": "function", "function": {"name": src["name"], "description": src["description"], "parameters": src["parameters"]}}
    src = body["tools"][3]
    assert src["name"] == "apply_patch"
    assert patch["function"]["description"] == src["description"]
    assert patch["function"]["parameters"]["properties"]["input"]["description"] == src["format"]["definition"]
    assert sorted(rt.dropped) == sorted([
        "input[].id", "input[].internal_chat_message_metadata_passthrough", "input[].status",
        *(f"tools[{i}].strict" for i in (0, 1, 2, 4, 5, 6, 7)), "tools[8]", "tools[9]",
        "text.verbosity", "include", "store", "prompt_cache_key", "client_metadata",
    ])
    assert out["reasoning_effort"] == body["reasoning"]["effort"]  # effort travels (neutral/effort.py)
    assert all(set(t) == {"type", "function"} and "strict" not in t["function"] for t in out["tools"])
    assert all(set(m) <= {"role", "content", "tool_calls", "tool_call_id"} for m in out["messages"])
    for gone in ("internal_chat_message_metadata_passthrough", "msg_01a2370a", "fc_3eeee594", "encrypted_content"):
        assert gone not in wire
    assert set(out) == {"model", "messages", "tools", "tool_choice", "parallel_tool_calls", "stream", "stream_options",
                        "reasoning_effort"}
    assert (out["model"], out["tool_choice"], out["parallel_tool_calls"], out["stream"]) == ("gpt-5.5", "auto", True, True)
    assert rt.plumbing == ["stream_options.include_usage"] and out["stream_options"] == {"include_usage": True}
    assert [c.split(":")[0] for c in rt.converted] == ["tools[3].format", "tools[3]"] and rt.warnings == []


def test_codex_custom_provider_first_request_translates():
    body = load_fixture(CUSTOM_PROVIDER)["body"]
    rt = r2c(body, model="qwen3-8b", max_tokens_field="max_tokens")
    out = rt.body
    assert out["model"] == "qwen3-8b" and any("local-model" in c for c in rt.converted)
    assert [m["role"] for m in out["messages"]] == ["system", "user", "user"]
    assert out["messages"][0]["content"] == "\n\n".join(p["text"] for i in body["input"][:2] for p in i["content"])
    assert out["messages"][2]["content"] == "TOOLTEST run echo"
    assert body["tools"][4]["type"] == "namespace"  # multi_agent_v1: its tools under flat names
    ns = body["tools"][4]
    assert [t["function"]["name"] for t in out["tools"]] == [
        *(t["name"] for t in body["tools"][:4] if t["type"] == "function"),
        *(f"{ns['name']}__{t['name']}" for t in ns["tools"]),
        *(t["name"] for t in body["tools"][5:] if t["type"] == "function")]
    assert {f"{ns['name']}__{t['name']}" for t in ns["tools"]} == set(rt.client_tools)
    assert {"tools[8]", "reasoning.summary", "input[].id", "client_metadata"} <= set(rt.dropped)
    assert all("tool_calls" not in m for m in out["messages"])


def _lite(body: dict) -> dict:
    """The classic fixture turned into Codex's lite shape: no top-level tools, an
    additional_tools item first whose namespace holds the custom tool exec (docs/dev/clients.md §3.4)."""
    lite = copy.deepcopy(body)
    del lite["tools"]
    ns = {"type": "namespace", "name": "functions", "tools": [{"type": "custom", "name": "exec", "description": "JS",
                                                               "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}}]}
    lite["input"].insert(0, {"type": "additional_tools", "role": "developer", "tools": [ns]})
    lite |= {"parallel_tool_calls": False, "reasoning": {"effort": "low", "context": "all_turns"}}
    return lite


def test_codex_lite_shape_translates():
    """The lite shape's additional_tools item is hoisted: its freeform exec is a function of one
    string 'input' whose grammar moved into that parameter's description (recorded)."""
    lite = _lite(load_fixture(CLASSIC)["body"])
    rt = r2c(lite)
    assert rt.body["tools"] == [{"type": "function", "function": {"name": "exec", "description": "JS", "parameters": {
        "type": "object", "properties": {"input": {"type": "string", "description": "start: /.+/"}},
        "required": ["input"], "additionalProperties": False}}}]
    assert any(c.startswith("input[0].tools[0].tools[0].format: the lark grammar moved verbatim") for c in rt.converted)
    assert any(c.startswith("input[0]: additional_tools item: 1 tools hoisted") for c in rt.converted)
    assert rt.client_tools == {"exec": ClientTool("exec", "functions", freeform=True, grammar=("lark", "start: /.+/"))}
    assert rt.body["parallel_tool_calls"] is False


def test_codex_lite_tool_round_trip_is_carried_wrapped():
    """A custom_tool_call / custom_tool_call_output pair (exec) in the history travels as a
    function call whose arguments are {"input": <input>} and its tool result, the id byte for byte."""
    body = load_fixture(CLASSIC)["body"]
    followup = copy.deepcopy(body)
    code = 'const r = await tools.exec_command({cmd: "echo hi"});\ntext(r);'
    followup["input"] += [
        {"type": "custom_tool_call", "name": "exec", "call_id": "call_L1", "input": code},
        {"type": "custom_tool_call_output", "call_id": "call_L1", "output": [{"type": "input_text", "text": "hi"}]},
    ]
    out = r2c(followup).body
    assert out["messages"][-2]["tool_calls"][-1] == {
        "id": "call_L1", "type": "function", "function": {"name": "exec", "arguments": json.dumps({"input": code}, separators=(",", ":"))}}
    assert out["messages"][-1] == {"role": "tool", "tool_call_id": "call_L1", "content": "hi"}


# ---------------------------------------------------------------------------------------
# the table
# ---------------------------------------------------------------------------------------


def test_field_table_is_well_formed():
    for key, (action, how, note) in R2C_FIELDS.items():
        assert action in {"mapped", "converted", "dropped", "refused"}, key
        assert note, key
        if action == "mapped":
            assert isinstance(how, str)
        elif action in ("converted", "refused"):
            assert callable(how)
    assert R2C_FIELDS["reasoning"][0] == "converted"  # effort travels; summary dropped
    assert R2C_FIELDS["text"][0] == "converted"  # format travels (issue 41); verbosity dropped
    for key in ("include", "store", "prompt_cache_key", "client_metadata", "service_tier",
                "truncation", "metadata", "safety_identifier", "user", "background", "max_tool_calls",
                "top_logprobs", "prompt", "stream_options"):
        assert R2C_FIELDS[key][0] == "dropped", key
    assert {k for k, (a, _, _) in R2C_FIELDS.items() if a == "refused"} == {"previous_response_id", "conversation"}
    assert set(R2C_REFUSED_ITEMS) <= set(R2C_ITEMS)


# ---------------------------------------------------------------------------------------
# one case per mapping: (id, request, kwargs, expected body subset, expected dropped, plumbing)
# ---------------------------------------------------------------------------------------

FN_TOOL = {"type": "function", "name": "get_weather", "description": "Weather.", "strict": True,
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}
CHAT_FN = {"type": "function", "function": {"name": "get_weather", "description": "Weather.", "parameters": FN_TOOL["parameters"]}}
REASONING = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "plan"}], "encrypted_content": "gAAA"}

R2C_CASES = [
    ("input string -> one user message", R(), {}, {"messages": [{"role": "user", "content": "hi"}]}, [], []),
    ("instructions -> one leading system message",
     R(instructions="Be brief."), {}, {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]}, [], []),
    ("leading developer/system items join the instructions, developer role per endpoint",
     R(instructions="I", input=[msg("developer", "D1"), msg("system", text_parts("D2", "D3")), msg("user", "q")]), {"system_role": "developer"},
     {"messages": [{"role": "developer", "content": "I\n\nD1\n\nD2\n\nD3"}, {"role": "user", "content": "q"}]}, [], []),
    ("leading developer item without instructions is the system message",
     R(input=[msg("developer", text_parts("D")), msg("developer", "E"), msg("user", "q")]), {},
     {"messages": [{"role": "system", "content": "D\n\nE"}, {"role": "user", "content": "q"}]}, [], []),
    ("mid-list developer message stays in place",
     R(input=[msg("user", "a"), msg("developer", "M"), msg("user", "b")]), {},
     {"messages": [{"role": "user", "content": "a"}, {"role": "system", "content": "M"}, {"role": "user", "content": "b"}]}, [], []),
    ("empty developer message dropped",
     R(input=[msg("developer", ""), msg("user", "q")]), {}, {"messages": [{"role": "user", "content": "q"}]}, ["input[0]"], []),
    ("items without type but with role are messages",
     R(input=[{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]), {},
     {"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]}, [], []),
    ("text parts joined into one string; output_text annotations dropped by path",
     R(input=[msg("user", text_parts("a", "b")), msg("assistant", [{"type": "output_text", "text": "c", "annotations": []}])]), {},
     {"messages": [{"role": "user", "content": "a\n\nb"}, {"role": "assistant", "content": "c"}]}, ["input[1].content[0].annotations"], []),
    ("images -> image_url parts; Chat's detail values kept; file_id images dropped",
     R(input=[msg("user", [{"type": "input_text", "text": "look"},
                           {"type": "input_image", "image_url": "https://x.test/a.png", "detail": "low"},
                           {"type": "input_image", "image_url": PNG, "detail": "original"},
                           {"type": "input_image", "file_id": "file_1", "detail": "auto"}])]), {},
     {"messages": [{"role": "user", "content": [
         {"type": "text", "text": "look"},
         {"type": "image_url", "image_url": {"url": "https://x.test/a.png", "detail": "low"}},
         {"type": "image_url", "image_url": {"url": PNG}}]}]},
     ["input[0].content[2].detail", "input[0].content[3]"], []),
    ("PDF data URL -> file part with its filename; file_id, file_url and non-PDF files dropped",
     R(input=[msg("user", [{"type": "input_file", "file_data": PDF, "filename": "r.pdf"},
                           {"type": "input_file", "file_id": "file_2"},
                           {"type": "input_file", "file_url": "https://x.test/a.pdf"},
                           {"type": "input_file", "file_data": "data:text/plain;base64,aGk=", "filename": "a.txt"},
                           {"type": "input_file", "file_data": "JVBERi0xLjQ=", "filename": "raw.pdf"},
                           {"type": "input_text", "text": "sum up"}])]), {},
     {"messages": [{"role": "user", "content": [
         {"type": "file", "file": {"file_data": PDF, "filename": "r.pdf"}}, {"type": "text", "text": "sum up"}]}]},
     ["input[0].content[1]", "input[0].content[2]", "input[0].content[3]", "input[0].content[4]"], []),
    ("user message with nothing left is dropped",
     R(input=[msg("user", [{"type": "input_image", "file_id": "f"}]), msg("user", "q")]), {},
     {"messages": [{"role": "user", "content": "q"}]}, ["input[0].content[0]", "input[0]"], []),
    ("refusal parts dropped, never demoted to text",
     R(input=[msg("user", "q"), msg("assistant", [{"type": "output_text", "text": "ok"}, {"type": "refusal", "refusal": "no"}])]), {},
     {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "ok"}]}, ["input[1].content[1]"], []),
    ("function_call -> assistant tool_calls, call_id byte-identical, content '' (never null)",
     R(input=[msg("user", "q"), fc("call_Ä 1\n", "get_weather", '{"city": "Paris"}')]), {},
     {"messages": [{"role": "user", "content": "q"},
                   {"role": "assistant", "content": "", "tool_calls": [call("call_Ä 1\n", "get_weather", '{"city": "Paris"}')]}]}, [], []),
    ("consecutive function_calls, and one right after an assistant message, join it (reasoning between is dropped)",
     R(input=[msg("user", "q"), msg("assistant", text_parts("Checking.", kind="output_text")), fc("c1"), REASONING, fc("c2", arguments=""),
              fco("c1", "18C"), fco("c2", "")]), {},
     {"messages": [{"role": "user", "content": "q"},
                   {"role": "assistant", "content": "Checking.", "tool_calls": [call("c1"), call("c2", arguments="")]},
                   {"role": "tool", "tool_call_id": "c1", "content": "18C"},
                   {"role": "tool", "tool_call_id": "c2", "content": ""}]}, ["input[3]"], []),
    ("a function_call after a tool message opens a new assistant message",
     R(input=[fc("c1"), fco("c1"), fc("c2"), fco("c2")]), {},
     {"messages": [{"role": "assistant", "content": "", "tool_calls": [call("c1")]}, {"role": "tool", "tool_call_id": "c1", "content": "ok"},
                   {"role": "assistant", "content": "", "tool_calls": [call("c2")]}, {"role": "tool", "tool_call_id": "c2", "content": "ok"}]}, [], []),
    ("function_call_output parts: text joined, images and files dropped by path",
     R(input=[fc("c1"), fco("c1", [{"type": "input_text", "text": "a"}, {"type": "input_image", "image_url": PNG},
                                   {"type": "input_file", "file_data": PDF}, {"type": "output_text", "text": "b"}])]), {},
     {"messages": [{"role": "assistant", "content": "", "tool_calls": [call("c1")]},
                   {"role": "tool", "tool_call_id": "c1", "content": "a\n\nb"}]}, ["input[1].output[1]", "input[1].output[2]"], []),
    ("reasoning items dropped: encrypted content never goes to another provider",
     R(input=[msg("user", "q"), REASONING]), {}, {"messages": [{"role": "user", "content": "q"}]}, ["input[1]"], []),
    ("item-level bookkeeping keys recorded once each as input[].<key>",
     R(input=[msg("user", "q") | {"id": "msg_1"}, fc("c1") | {"id": "fc_1", "status": "completed", "namespace": "ns"},
              fco("c1") | {"id": "fco_1", "status": "completed"}, msg("assistant", "a") | {"id": "msg_2", "phase": "final_answer"}]), {},
     {}, ["input[].id", "input[].status", "input[].phase"], []),
    ("tools: flat functions nested, strict dropped; a freeform tool as a function of one string 'input'; "
     "a namespace's tools flat; hosted tools dropped by path",
     R(tools=[{"type": "custom", "name": "apply_patch", "format": {"type": "grammar"}}, FN_TOOL, {"type": "web_search"},
              {"type": "namespace", "name": "ns", "tools": [FN_TOOL]}, {"type": "local_shell"}, {"type": "mcp", "server_label": "x"},
              {"type": "image_generation"}, {"type": "tool_search", "execution": "client", "parameters": {}}]), {},
     {"tools": [{"type": "function", "function": {"name": "apply_patch", "parameters": {
         "type": "object", "properties": {"input": {"type": "string"}}, "required": ["input"], "additionalProperties": False}}},
                CHAT_FN, {"type": "function", "function": CHAT_FN["function"] | {"name": "ns__get_weather"}}]},
     ["tools[0].format", "tools[1].strict", "tools[2]", "tools[3].tools[0].strict", "tools[4]", "tools[5]", "tools[6]",
      "tools[7]"], []),
    ("function tool with null parameters: none sent",
     R(tools=[{"type": "function", "name": "f", "parameters": None, "strict": False}]), {},
     {"tools": [{"type": "function", "function": {"name": "f"}}]}, ["tools[0].strict"], []),
    ("empty tools list dropped", R(tools=[]), {}, {}, ["tools"], []),
    *[(f"tool_choice {c!r} kept", R(tools=[FN_TOOL], tool_choice=c), {}, {"tool_choice": c}, ["tools[0].strict"], [])
      for c in ("auto", "none", "required")],
    ("tool_choice function object -> nested",
     R(tools=[FN_TOOL], tool_choice={"type": "function", "name": "get_weather", "extra": 1}), {},
     {"tool_choice": {"type": "function", "function": {"name": "get_weather"}}}, ["tools[0].strict", "tool_choice.extra"], []),
    ("tool_choice object without tools dropped whole",
     R(tool_choice={"type": "function", "name": "get_weather", "extra": 1}), {}, {}, ["tool_choice"], []),
    ("tool_choice allowed_tools / custom dropped",
     R(tools=[FN_TOOL], tool_choice={"type": "allowed_tools", "mode": "auto", "tools": []}), {}, {}, ["tools[0].strict", "tool_choice"], []),
    ("no tool left: tool_choice and parallel_tool_calls dropped too",
     R(tools=[{"type": "web_search"}], tool_choice="auto", parallel_tool_calls=True), {}, {},
     ["tools[0]", "tool_choice", "parallel_tool_calls"], []),
    ("parallel_tool_calls false kept with tools",
     R(tools=[FN_TOOL], parallel_tool_calls=False), {}, {"parallel_tool_calls": False}, ["tools[0].strict"], []),
    ("max_output_tokens -> max_completion_tokens", R(max_output_tokens=300), {}, {"max_completion_tokens": 300}, [], []),
    ("max_output_tokens -> max_tokens under the cap",
     R(max_output_tokens=300), {"max_tokens_field": "max_tokens", "max_tokens_cap": 4096}, {"max_tokens": 300}, [], []),
    ("temperature and top_p mapped", R(temperature=1.5, top_p=0.9), {}, {"temperature": 1.5, "top_p": 0.9}, [], []),
    ("stream true -> stream_options.include_usage (plumbing)",
     R(stream=True), {}, {"stream": True, "stream_options": {"include_usage": True}}, [], ["stream_options.include_usage"]),
    ("stream false: no plumbing", R(stream=False), {}, {"stream": False}, [], []),
    ("reasoning.effort -> reasoning_effort; summary and text.verbosity dropped, text.format carried",
     R(reasoning={"effort": "high", "summary": "auto"}, text={"verbosity": "low", "format": {"type": "text"}}), {},
     {"reasoning_effort": "high", "response_format": {"type": "text"}}, ["reasoning.summary", "text.verbosity"], []),
    ("null optional fields are absent", R(temperature=None, previous_response_id=None, tools=None), {}, {}, [], []),
]


@pytest.mark.parametrize(("case", "body", "kw", "expect", "dropped", "plumbing"), R2C_CASES, ids=[c[0] for c in R2C_CASES])
def test_responses_to_chat_mapping(case, body, kw, expect, dropped, plumbing):
    rt = r2c(body, **kw)
    for key, value in expect.items():
        assert rt.body[key] == value, key
    assert rt.dropped == dropped
    assert rt.plumbing == plumbing
    assert rt.body["model"] == "gpt-x"
    assert rt.body["messages"]


def test_mid_list_system_message_warns():
    rt = r2c(R(input=[msg("user", "a"), msg("developer", "M")]))
    assert rt.warnings and rt.warnings[0].startswith("input[1]:")


def test_tool_choice_drop_is_explained():
    rt = r2c(R(tools=[FN_TOOL], tool_choice={"type": "custom", "name": "apply_patch"}))
    assert "tool_choice" not in rt.body and "tool_choice" in rt.dropped
    assert rt.warnings and "'apply_patch', which no declared tool carries" in rt.warnings[0]
    rt = r2c(R(tools=[FN_TOOL], tool_choice={"type": "allowed_tools", "mode": "auto", "tools": []}))
    assert "tool_choice" not in rt.body and rt.warnings and "'allowed_tools'" in rt.warnings[0]


def test_tool_choice_naming_a_freeform_or_namespaced_tool_names_its_function():
    tools = [{"type": "custom", "name": "apply_patch"}, {"type": "namespace", "name": "clock", "tools": [FN_TOOL]}]
    rt = r2c(R(tools=tools, tool_choice={"type": "custom", "name": "apply_patch"}))
    assert rt.body["tool_choice"] == {"type": "function", "function": {"name": "apply_patch"}}
    rt = r2c(R(tools=tools, tool_choice={"type": "function", "namespace": "clock", "name": "get_weather"}))
    assert rt.body["tool_choice"] == {"type": "function", "function": {"name": "clock__get_weather"}}


def test_max_output_tokens_capped_is_recorded_as_converted():
    rt = r2c(R(max_output_tokens=64000), max_tokens_field="max_tokens", max_tokens_cap=512)
    assert rt.body["max_tokens"] == 512 and "max_completion_tokens" not in rt.body
    assert rt.converted == ["max_output_tokens -> max_tokens (capped at 512)"]


def test_model_override_recorded_and_first():
    rt = r2c(R(), model="gemma-3-270m")
    assert list(rt.body)[0] == "model" and rt.body["model"] == "gemma-3-270m"
    assert len(rt.converted) == 1 and "gemma-3-270m" in rt.converted[0] and "gpt-x" in rt.converted[0]


def test_unknown_top_level_fields_dropped_not_forwarded():
    rt = r2c(R(foo={"x": 1}, context_management=[{"type": "compaction"}]))
    assert set(rt.body) == {"model", "messages"}
    assert rt.dropped == ["foo", "context_management"]


@pytest.mark.parametrize("kw", [{"system_role": "assistant"}, {"max_tokens_field": "max_output_tokens"}])
def test_endpoint_options_validated(kw):
    with pytest.raises(ValueError):
        responses_to_chat(R(), **kw)


EVERYTHING_DROPPABLE = R(
    instructions="S",
    input=[
        msg("developer", text_parts("D")) | {"id": "msg_0"},
        REASONING,
        msg("user", [{"type": "input_text", "text": "q"}, {"type": "input_image", "file_id": "f1", "detail": "high"},
                     {"type": "input_file", "file_url": "https://x.test/a.pdf"}, {"type": "refusal", "refusal": "r"}]) | {"status": "completed"},
        msg("assistant", [{"type": "output_text", "text": "a", "annotations": [], "logprobs": []}]) | {"phase": "commentary"},
        fc("c1") | {"id": "fc_1", "status": "completed"},
        fco("c1", [{"type": "input_text", "text": "r"}, {"type": "input_image", "image_url": PNG}]) | {"id": "fco_1"},
    ],
    tools=[FN_TOOL, {"type": "custom", "name": "apply_patch"}, {"type": "web_search", "external_web_access": False}],
    tool_choice={"type": "allowed_tools", "mode": "auto", "tools": []},
    parallel_tool_calls=True, stream=True, stream_options={"include_obfuscation": False},
    reasoning={"effort": "medium"}, text={"verbosity": "low"}, include=["reasoning.encrypted_content"], store=False,
    prompt_cache_key="k", prompt_cache_retention="24h", client_metadata={"session_id": "s"}, service_tier="auto",
    truncation="auto", metadata={"a": "b"}, safety_identifier="s", user="u", background=False, max_tool_calls=3,
    top_logprobs=2, prompt={"id": "pmpt_1"}, mystery_field=1,
)


def test_every_dropped_responses_field_is_recorded():  # docs/dev/pitfalls.md 24
    rt = r2c(EVERYTHING_DROPPABLE)
    assert sorted(rt.dropped) == sorted([
        "input[].id", "input[1]", "input[2].content[1]", "input[2].content[2]", "input[2].content[3]", "input[].status",
        "input[3].content[0].annotations", "input[3].content[0].logprobs", "input[].phase", "input[5].output[1]",
        "tools[0].strict", "tools[2]", "tool_choice",
        "stream_options", "text.verbosity", "include", "store", "prompt_cache_key",
        "prompt_cache_retention", "client_metadata", "service_tier", "truncation", "metadata", "safety_identifier",
        "user", "background", "max_tool_calls", "top_logprobs", "prompt", "mystery_field",
    ])
    assert set(rt.body) == {"model", "messages", "tools", "parallel_tool_calls", "stream", "stream_options",
                            "reasoning_effort"}
    wire = jsonc.dumps(rt.body)
    for gone in ("strict", "annotations", "encrypted", "plan", "refusal", "file_id", "web_search", "obfuscation"):
        assert gone not in wire
    assert '"name":"apply_patch"' in wire  # a freeform tool travels as its function (test_codex_tools.py)


# ---------------------------------------------------------------------------------------
# refusals: history or state a Chat endpoint cannot hold refuses the turn (kind "refused")
# ---------------------------------------------------------------------------------------

R2C_REFUSALS = [
    (R(previous_response_id="resp_1"), "previous_response_id: "),
    (R(conversation="conv_1"), "conversation: "),
    (R(conversation={"id": "conv_1"}), "conversation: "),
    (R(input=[{"type": "local_shell_call", "call_id": "c", "action": {}}]), "input[0]: local_shell_call item"),
    (R(input=[{"type": "compaction", "encrypted_content": "gAAA"}]), "input[0]: compaction item"),
    (R(input=[{"type": "item_reference", "id": "msg_1"}]), "input[0]: item_reference item"),
    (R(input=[{"type": "tool_search_call", "call_id": "c", "execution": "client", "arguments": {}}]), "input[0]: tool_search_call item"),
    (R(input=[{"type": "future_thing_call", "call_id": "c"}]), "input[0]: future_thing_call item"),
    (R(tools=[{"type": "function", "name": "mcp__some_server__" + "x" * 47}]), "tools[0].name: tool name"),
]


@pytest.mark.parametrize(("body", "message"), R2C_REFUSALS, ids=[m for _, m in R2C_REFUSALS])
def test_untranslatable_history_and_state_refuse_the_turn(body, message):
    with pytest.raises(TranslationError) as e:
        responses_to_chat(body)
    assert e.value.status == 400 and e.value.kind == "refused"
    assert e.value.message.startswith(message), e.value.message


def test_tool_name_of_64_chars_passes():  # docs/dev/pitfalls.md 20
    name = "mcp__some_server__" + "x" * 46
    assert r2c(R(tools=[{"type": "function", "name": name}])).body["tools"][0]["function"]["name"] == name


# ---------------------------------------------------------------------------------------
# bad input: a 400 naming the JSON path, never a traceback
# ---------------------------------------------------------------------------------------

R2C_BAD = [
    ([1], "Responses request body must be a JSON object, got array"),
    ({"model": "m"}, "input: required"),
    ({"input": "hi"}, "model: required"),
    (R(input=[REASONING]), "input: no message is left to send"),
    (R(input=5), "input: expected an array, got number"),
    (R(input=[5]), "input[0]: expected an object, got number"),
    (R(input=[{"type": "message", "role": "robot", "content": "x"}]), "input[0].role: unknown role 'robot'"),
    (R(input=[{"content": "x"}]), "input[0].type: unknown input item type None"),
    (R(input=[{"type": "banana"}]), "input[0].type: unknown input item type 'banana'"),
    (R(input=[{"type": "message", "role": "user"}]), "input[0].content: required"),
    (R(input=[msg("user", 3)]), "input[0].content: expected an array, got number"),
    (R(input=[msg("user", [{"type": "video"}])]), "input[0].content[0].type: unknown content part type 'video'"),
    (R(input=[msg("assistant", [{"type": "input_image", "image_url": PNG}])]), "input[0].content[0].type: unknown content part type 'input_image'"),
    (R(input=[msg("user", [{"type": "input_text", "text": 5}])]), "input[0].content[0].text: expected a string, got number"),
    (R(input=[msg("user", [{"type": "input_image", "image_url": PNG, "detail": 1}])]), "input[0].content[0].detail: expected a string"),
    (R(input=[{"type": "function_call", "name": "f", "arguments": "{}"}]), "input[0].call_id: required"),
    (R(input=[fc("c") | {"call_id": 7}]), "input[0].call_id: expected a string, got number"),
    (R(input=[fc("c") | {"arguments": {"a": 1}}]), "input[0].arguments: expected a string, got object"),
    (R(input=[{"type": "function_call", "call_id": "c", "name": "f"}]), "input[0].arguments: required"),
    (R(input=[{"type": "function_call_output", "call_id": "c"}]), "input[0].output: required"),
    (R(input=[{"type": "function_call_output", "output": "x"}]), "input[0].call_id: required"),
    (R(input=[fco("c", 5)]), "input[0].output: expected an array, got number"),
    (R(input=[fco("c", [{"type": "refusal", "refusal": "x"}])]), "input[0].output[0].type: unknown output part type 'refusal'"),
    (R(instructions=5), "instructions: expected a string, got number"),
    (R(tools={"type": "function"}), "tools: expected an array, got object"),
    (R(tools=[{"name": "f"}]), "tools[0].type: required"),
    (R(tools=[{"type": "function"}]), "tools[0].name: required"),
    (R(tools=[{"type": "function", "name": "f", "parameters": "{}"}]), "tools[0].parameters: expected an object, got string"),
    (R(tools=[FN_TOOL], tool_choice="sometimes"), "tool_choice: unknown tool_choice 'sometimes'"),
    (R(tools=[FN_TOOL], tool_choice={"type": "function"}), "tool_choice.name: required"),
    (R(tools=[FN_TOOL], tool_choice={}), "tool_choice.type: required"),
    (R(max_output_tokens="100"), "max_output_tokens: expected an integer, got string"),
    (R(max_output_tokens=True), "max_output_tokens: expected an integer, got boolean"),
    (R(temperature="hot"), "temperature: expected a number"),
    (R(stream="yes"), "stream: expected a boolean"),
    (R(parallel_tool_calls="no"), "parallel_tool_calls: expected a boolean"),
]


@pytest.mark.parametrize(("body", "message"), R2C_BAD, ids=[m for _, m in R2C_BAD])
def test_bad_input_is_a_400_naming_the_path(body, message):
    before = copy.deepcopy(body)
    with pytest.raises(TranslationError) as e:
        responses_to_chat(body)
    assert e.value.status == 400 and e.value.kind == "invalid_request_error"
    assert e.value.message.startswith(message), e.value.message
    assert body == before


# ---------------------------------------------------------------------------------------
# properties (hypothesis)
# ---------------------------------------------------------------------------------------


def _parts(draw, extras: bool) -> list[dict]:
    parts = [{"type": "input_text", "text": draw(TEXT)} for _ in range(draw(st.integers(1, 2)))]
    if extras and draw(st.booleans()):
        image = {"type": "input_image", "image_url": f"data:{draw(MEDIA)};base64,{draw(B64)}"}
        parts.append(image | ({"detail": draw(st.sampled_from(["auto", "low", "high", "original"]))} if draw(st.booleans()) else {}))
    if extras and draw(st.booleans()):
        parts.append({"type": "input_file", "file_data": f"data:application/pdf;base64,{draw(B64)}", "filename": draw(TEXT)})
    return parts


@st.composite
def responses_requests(draw, *, extras: bool = False) -> dict:
    """A well-formed Responses request in Codex's classic shape. With ``extras`` it adds
    droppable fields, item ids, reasoning items, images, PDFs and hosted tools."""
    body: dict = {"model": draw(TEXT)}
    if not extras and draw(st.integers(0, 9)) == 0:
        body["input"] = draw(TEXT)
        return body
    items: list[dict] = []
    for _ in range(draw(st.integers(0, 2))):
        items.append(msg(draw(st.sampled_from(["developer", "system"])), draw(TEXT) if draw(st.booleans()) else text_parts(*draw(st.lists(TEXT, min_size=1, max_size=2)))))
    used: set[str] = set()
    tool_names = draw(st.lists(NAME, min_size=1, max_size=3, unique=True))
    for _ in range(draw(st.integers(1, 3))):
        items.append(msg("user", draw(TEXT) if draw(st.booleans()) else _parts(draw, extras)))
        if extras and draw(st.booleans()):
            items.append(dict(REASONING, encrypted_content=draw(TEXT)))
        if draw(st.booleans()):
            items.append(msg("assistant", text_parts(draw(TEXT), kind="output_text")))
        calls = []
        for _ in range(draw(st.integers(0, 2))):
            cid = draw(ANY_ID.filter(lambda x: x not in used))
            used.add(cid)
            args = draw(TOOL_INPUT)
            calls.append(fc(cid, draw(st.sampled_from(tool_names)), jsonc.dumps(args) if args else draw(st.sampled_from(["", "{}"]))))
        items += calls
        for c in calls:
            out = draw(TEXT) if draw(st.booleans()) else text_parts(*draw(st.lists(TEXT, min_size=1, max_size=2)))
            items.append(fco(c["call_id"], out))
        if extras and draw(st.booleans()):
            items.append(msg("developer", draw(TEXT)))
    if extras:
        for i, item in enumerate(items):
            if draw(st.booleans()):
                item["id"] = f"item_{i}"
    body["input"] = items
    if draw(st.booleans()):
        body["instructions"] = draw(TEXT)
    if draw(st.booleans()):
        body["tools"] = [{"type": "function", "name": n, "description": draw(TEXT),
                          "parameters": {"type": "object", "properties": draw(st.dictionaries(TEXT, st.just({"type": "string"}), max_size=2))}}
                         for n in tool_names]
        if extras:
            body["tools"] = [t | {"strict": draw(st.booleans())} for t in body["tools"]]
            body["tools"] += [{"type": "custom", "name": "apply_patch"}, {"type": "web_search"}]
        if draw(st.booleans()):
            body["tool_choice"] = draw(st.sampled_from(["auto", "none", "required", {"type": "function", "name": tool_names[0]}]))
        if draw(st.booleans()):
            body["parallel_tool_calls"] = draw(st.booleans())
    for key, strat in (("max_output_tokens", st.integers(1, 10**6)), ("temperature", st.floats(0, 2)), ("top_p", st.floats(0, 1)),
                       ("stream", st.booleans())):
        if draw(st.booleans()):
            body[key] = draw(strat)
    if extras:
        for key, value in (("reasoning", {"effort": "medium"}), ("text", {"verbosity": "low"}), ("store", False),
                           ("include", ["reasoning.encrypted_content"]), ("prompt_cache_key", draw(TEXT)),
                           ("client_metadata", {"session_id": draw(TEXT)})):
            if draw(st.booleans()):
                body[key] = value
    return body


def _responses_ids(body: dict) -> list[str]:
    return [i["call_id"] for i in body["input"] if isinstance(body["input"], list) and i.get("type") in ("function_call", "function_call_output")]


@SETTINGS
@given(responses_requests(extras=True))
def test_call_ids_byte_identical_responses_to_chat(body):
    out = responses_to_chat(body).body
    assert _chat_ids(out) == _responses_ids(body)


@SETTINGS
@given(responses_requests(extras=True))
def test_responses_to_chat_invents_nothing(body):
    _assert_provenance(body, responses_to_chat(body))


@SETTINGS
@given(responses_requests())
def test_every_text_of_a_plain_request_arrives_in_order(body):
    """Without extras nothing is dropped, and the texts arrive in input order (joined texts split back)."""
    rt = responses_to_chat(body)
    assert rt.dropped == [] and rt.converted == []
    src = [body.get("instructions")] if body.get("instructions") else []
    inp = body["input"]
    for item in [msg("user", inp)] if isinstance(inp, str) else inp:
        content = item.get("content", item.get("output"))
        if item["type"] == "function_call":
            src.append(item["arguments"])
        else:
            src += [content] if isinstance(content, str) else [p["text"] for p in content]
    got: list[str] = []
    for m in rt.body["messages"]:
        got += m["content"].split("\n\n") if m["content"] else []  # "" only for an assistant turn of tool calls
        got += [c["function"]["arguments"] for c in m.get("tool_calls", [])]
    assert got == src


ITEM_TYPES = st.sampled_from([*R2C_ITEMS, "banana", "future_call"])
PART_TYPES = st.sampled_from(["input_text", "output_text", "input_image", "input_file", "refusal", "text", "video"])
ITEM_KEYS = st.sampled_from(["type", "role", "content", "call_id", "name", "arguments", "output", "id", "tools"])
ITEM_VALUES = JSON | ITEM_TYPES | st.sampled_from(["user", "assistant", "developer", "system"]) | st.lists(
    st.dictionaries(st.sampled_from(["type", "text", "image_url", "file_data", "detail", "filename"]), PART_TYPES | JSON, max_size=3), max_size=3)
GARBAGE = (
    st.dictionaries(st.sampled_from(sorted(R2C_FIELDS)) | TEXT, JSON, max_size=6)
    | st.fixed_dictionaries({"model": TEXT, "input": st.lists(st.dictionaries(ITEM_KEYS, ITEM_VALUES, max_size=5), max_size=4)})
    | mutated(responses_requests(extras=True))
    | JSON
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(GARBAGE)
def test_garbage_in_gives_only_translation_errors(body):
    _only_translation_error(responses_to_chat, body)
    _only_translation_error(responses_to_chat, body, system_role="developer", max_tokens_field="max_tokens", max_tokens_cap=100)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated(st.sampled_from([load_fixture(CLASSIC)["body"], load_fixture(CUSTOM_PROVIDER)["body"]])))
def test_mutated_codex_fixtures_give_only_translation_errors(body):
    _only_translation_error(responses_to_chat, body)
