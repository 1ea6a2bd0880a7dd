"""Responses tool declarations decoded (translate/openai_responses/tool_declarations.py): one row per
tool type, each with its reason; functions flat to nested; a freeform tool as a function of one
string ``input`` with its grammar moved verbatim; a namespace's tools under flat names; hosted tools
dropped, recorded; two tools sharing one flat name refuse the turn."""

from __future__ import annotations

import pytest

from tokunseba.errors import InvalidRequest, Refused
from tokunseba.neutral.conversation import Conversation
from tokunseba.neutral.tools import ClientTool
from tokunseba.translate import fieldtable as ft
from tokunseba.translate.openai_responses.tool_declarations import DECODE_TOOL_TYPES, decode_tools


def decode(tools):
    rt = Conversation({})
    out: dict = {}
    decode_tools(rt, "tools", tools, out, ft.Options())
    rt.finish_origin()
    return rt, out.get("tools")


def test_every_row_says_why():
    for ttype, (action, handler, why) in DECODE_TOOL_TYPES.items():
        assert action in ("mapped", "converted", "dropped") and why, ttype
        assert (handler is None) == (action == "dropped"), ttype


def test_a_function_tool_flat_to_nested():
    rt, tools = decode([{"type": "function", "name": "get", "description": "Get.", "strict": True,
                         "parameters": {"type": "object"}}])
    assert tools == [{"type": "function", "function": {"name": "get", "description": "Get.",
                                                       "parameters": {"type": "object"}}}]
    assert rt.dropped == ["tools[0].strict"] and rt.client_tools == {"get": ClientTool("get", None)}
    assert rt.client_path("tools[0].function") == "tools[0].function"


def test_a_freeform_tool_and_its_grammar():
    rt, tools = decode([{"type": "custom", "name": "apply_patch", "description": "Patch files.",
                         "format": {"type": "grammar", "syntax": "lark", "definition": "start: x"}}])
    (fn,) = tools
    assert fn["function"]["name"] == "apply_patch" and fn["function"]["description"] == "Patch files."
    params = fn["function"]["parameters"]
    assert params["required"] == ["input"] and "start: x" in params["properties"]["input"]["description"]
    assert rt.client_tools["apply_patch"] == ClientTool("apply_patch", None, freeform=True, grammar=("lark", "start: x"))
    assert any("the lark grammar moved verbatim" in c for c in rt.converted)


def test_a_namespaces_tools_under_flat_names():
    rt, tools = decode([{"type": "namespace", "name": "clock", "description": "Time.",
                         "tools": [{"type": "function", "name": "sleep"}, {"type": "function", "name": "now"}]}])
    assert [t["function"]["name"] for t in tools] == ["clock__sleep", "clock__now"]
    assert rt.client_tools["clock__sleep"] == ClientTool("sleep", "clock")
    assert rt.dropped == ["tools[0].description"]
    assert any("namespace 'clock': its tools as clock__<name>" in c for c in rt.converted)


def test_hosted_and_unknown_tools_are_dropped_and_an_empty_list_too():
    rt, tools = decode([{"type": "web_search"}, {"type": "future_tool"}, {"type": "function", "name": "f"}])
    assert [t["function"]["name"] for t in tools] == ["f"] and rt.dropped == ["tools[0]", "tools[1]"]
    rt, tools = decode([])
    assert tools is None and rt.dropped == ["tools"]


def test_two_tools_behind_one_flat_name_refuse_the_turn():
    with pytest.raises(Refused) as e:
        decode([{"type": "function", "name": "clock__sleep"},
                {"type": "namespace", "name": "clock", "tools": [{"type": "function", "name": "sleep"}]}])
    assert "would have the same name 'clock__sleep'" in e.value.message


def test_bad_declarations_are_400s_naming_the_path():
    with pytest.raises(InvalidRequest, match=r"^tools\[0\]\.name: required$"):
        decode([{"type": "function"}])
    with pytest.raises(InvalidRequest, match=r"^tools: expected an array, got object$"):
        decode({"type": "function"})
