"""OpenAI Responses tool declarations, decoded (top-level ``tools`` and the tools of Codex's
``additional_tools`` items), one row per tool type (``DECODE_TOOL_TYPES``).

Codex's freeform (``custom``) tools and namespaced tools (its default "lite" models declare
them in an ``additional_tools`` input item, hoisted into the tools) travel as a declared two-way
encoding (neutral/tools.py): a freeform tool is a function of one string ``input``, a namespaced
one has a flat name; the map goes with the translation (``client_tools``) so the reply gives
them back. Tools another endpoint cannot offer are only dropped: the model simply cannot call
them. Two tools that would share one flat name refuse the turn.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...neutral import Conversation
from ...neutral import ClientTool, freeform_parameters
from ...protocols import DEFAULT_NAMESPACE, flat_tool_name
from .. import fieldtable as ft
from .common import refused

_FUNCTION_TOOL_KEYS = frozenset({"type", "name", "description", "parameters"})
_FUNCTION_TOOL_KEYS_STRICT = _FUNCTION_TOOL_KEYS | {"strict"}  # Codex's usual declaration: one known drop
_CUSTOM_TOOL_KEYS = frozenset({"type", "name", "description", "format"})
_NAMESPACE_TOOL_KEYS = frozenset({"type", "name", "description", "tools"})
_GRAMMAR_KEYS = frozenset({"type", "syntax", "definition"})


ToolHandler = Callable[[Conversation, dict[str, Any], str, list[dict[str, Any]], "str | None"], None]


def _declare(rt: Conversation, flat: str, tool: ClientTool, tp: str) -> None:
    """The client's tool behind the neutral name ``flat``; a name already taken by another
    tool refuses the turn (the reply could not say which of the two the model called)."""
    have = rt.client_tools.setdefault(flat, tool)
    if have is not tool and have != tool:
        def show(t: ClientTool) -> str:
            return f"{t.namespace}.{t.name}" if t.namespace else t.name
        raise refused(tp, f"tools {show(have)!r} and {show(tool)!r} would have the same name {flat!r} "
                           "at an endpoint of another protocol")


def _function_tool(rt: Conversation, t: dict[str, Any], tp: str, tools: list[dict[str, Any]], ns: str | None) -> None:
    name = t.get("name")
    if type(name) is not str:
        name = ft.req(t, "name", tp, ft.string)  # a 400 naming the path, or a string subclass
    flat = flat_tool_name(ns, name)
    fn: dict[str, Any] = {"name": flat}
    desc, params = t.get("description"), t.get("parameters")
    if desc is not None:
        fn["description"] = desc if type(desc) is str else ft.string(desc, f"{tp}.description")
    if params is not None:
        fn["parameters"] = params if type(params) is dict else ft.obj(params, f"{tp}.parameters")
    keys = t.keys()
    if not keys <= _FUNCTION_TOOL_KEYS:  # strict (OpenAI's schema enforcement), ...
        if keys <= _FUNCTION_TOOL_KEYS_STRICT:
            rt.dropped.append(f"{tp}.strict")
        else:
            ft.extras(rt, t, _FUNCTION_TOOL_KEYS, tp)
    _declare(rt, flat, ClientTool(name, ns), tp)
    tools.append(rt.source({"type": "function", "function": fn}, tp))


def _custom_tool(rt: Conversation, t: dict[str, Any], tp: str, tools: list[dict[str, Any]], ns: str | None) -> None:
    """A freeform tool as a function with one required string parameter ``input``
    (neutral/tools.py), its description verbatim; a grammar moves verbatim into the
    parameter's description (DECODE_TOOL_TYPES says why)."""
    name = ft.req(t, "name", tp, ft.string)
    flat = flat_tool_name(ns, name)
    fn: dict[str, Any] = {"name": flat}
    if (desc := ft.opt(t, "description", tp, ft.string)) is not None:
        fn["description"] = desc
    grammar = syntax = None
    fmt = ft.opt(t, "format", tp, ft.obj)
    if fmt is not None:
        fp = f"{tp}.format"
        if fmt.get("type") == "grammar" and isinstance(fmt.get("definition"), str):
            grammar = fmt["definition"]
            syntax = fmt.get("syntax")
            what = f"the {syntax} grammar" if isinstance(syntax, str) and syntax else "the grammar"
            rt.converted.append(f"{fp}: {what} moved verbatim into the description of parameter 'input' "
                                "(an endpoint of another protocol cannot enforce it)")
            ft.extras(rt, fmt, _GRAMMAR_KEYS, fp)
        elif fmt.get("type") != "text":  # text: any input, nothing to carry
            rt.dropped.append(fp)
    fn["parameters"] = freeform_parameters(grammar)
    ft.extras(rt, t, _CUSTOM_TOOL_KEYS, tp)
    rt.converted.append(f"{tp}: freeform tool {name!r} as a function with one required string parameter 'input' "
                        "(its calls come back as custom_tool_call)")
    declared = (syntax if isinstance(syntax, str) else "", grammar) if grammar is not None else None
    _declare(rt, flat, ClientTool(name, ns, freeform=True, grammar=declared), tp)
    tools.append(rt.source({"type": "function", "function": fn}, tp))


def _namespace_tool(rt: Conversation, t: dict[str, Any], tp: str, tools: list[dict[str, Any]], ns: str | None) -> None:
    """A namespace: each of its tools under its flat name (protocols.openai_responses.flat_tool_name)."""
    if ns is not None:  # a namespace in a namespace: Codex declares none; nothing to address it by
        rt.dropped.append(tp)
        return
    name = ft.req(t, "name", tp, ft.string)
    if ft.opt(t, "description", tp, ft.string):
        rt.dropped.append(f"{tp}.description")  # its tools' own descriptions travel; this one has no place
    ft.extras(rt, t, _NAMESPACE_TOOL_KEYS, tp)
    before = len(tools)
    tool_list(rt, ft.req(t, "tools", tp, ft.anything), f"{tp}.tools", tools, name)
    if name != DEFAULT_NAMESPACE and len(tools) > before:
        rt.converted.append(f"{tp}: namespace {name!r}: its tools as {flat_tool_name(name, '<name>')} "
                            "(the namespace comes back on their calls)")


# Responses tool type -> (action, handler, note). Other types are dropped, recorded.
DECODE_TOOL_TYPES: dict[str, tuple[str, ToolHandler | None, str]] = {
    "function": ("mapped", _function_tool, "flat -> nested function; in a namespace, under its flat name"),
    "custom": ("converted", _custom_tool,
               "freeform tool -> a function with one required string parameter 'input' (OpenAI's own JSON "
               "variant of apply_patch names it so), description verbatim; calls come back as custom_tool_call "
               "with the input byte for byte. Its grammar moves verbatim into that parameter's description "
               "(recorded): no other protocol can enforce it, and without it the model has no definition of "
               "the input's syntax (apply_patch's patch format); the client's bytes in a new place, no word added"),
    "namespace": ("converted", _namespace_tool,
                  "each tool under a flat name, <namespace>__<name> (protocols.openai_responses.flat_tool_name; "
                  "the default namespace 'functions' adds nothing), reversible, collision-checked; calls come back "
                  "with the namespace Codex routes by; the namespace's own description is dropped"),
    "web_search": ("dropped", None, "a hosted tool OpenAI runs; another endpoint cannot: the model cannot call it"),
    "web_search_preview": ("dropped", None, "as web_search"),
    "local_shell": ("dropped", None, "a built-in tool with its own call items; no function counterpart declared"),
    "image_generation": ("dropped", None, "a hosted tool OpenAI runs"),
    "file_search": ("dropped", None, "a hosted tool over OpenAI's vector stores"),
    "code_interpreter": ("dropped", None, "a hosted tool OpenAI runs"),
    "computer_use_preview": ("dropped", None, "a built-in tool with its own call items"),
    "mcp": ("dropped", None, "a remote MCP server OpenAI calls; another endpoint does not"),
    "tool_search": ("dropped", None, "Codex's client-side search of deferred tools (its gpt-5.5 MCP tools): "
                                     "no function counterpart; its past calls refuse the route"),
}


def tool_list(rt: Conversation, value: Any, key: str, tools: list[dict[str, Any]], ns: str | None = None) -> None:
    for i, t in enumerate(ft.arr(value, key)):
        tp = f"{key}[{i}]"
        ttype = t.get("type") if type(t) is dict else None
        row = DECODE_TOOL_TYPES.get(ttype if type(ttype) is str else ft.req(ft.obj(t, tp), "type", tp, ft.string))
        if row is None or row[1] is None:  # hosted tools, newer types
            rt.dropped.append(tp)
            continue
        row[1](rt, t, tp, tools, ns)


def decode_tools(rt: Conversation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    tools: list[dict[str, Any]] = out.get("tools") or []  # after those of additional_tools items
    tool_list(rt, value, key, tools)
    if tools:
        out["tools"] = tools
    elif not value:
        rt.dropped.append(key)  # an empty list: OpenAI rejects tools: []
