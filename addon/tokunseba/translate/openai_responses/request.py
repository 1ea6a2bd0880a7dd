"""OpenAI Responses requests (Codex CLI): the decoder (Responses -> neutral) and the encoder
(neutral -> Responses) (docs/protocols.md C.1, E.1, E.2; docs/clients.md §3).

Sans-IO: dict in, ``Conversation`` / ``RequestTranslation`` out. Every top-level field
decision lives in one table per direction, ``DECODE_FIELDS`` and ``ENCODE_FIELDS`` (field ->
(action, handler-or-target, note), action in mapped / converted / dropped / refused); input
items, message roles and content parts have their own tables. Rules kept throughout
(docs/architecture.md §2):

- drop, never invent: whatever cannot travel is left behind and its JSON path recorded in
  ``dropped``. Item-level bookkeeping keys that Codex puts on every item (``id``,
  ``status``, its metadata passthrough) are recorded once each as ``input[].<key>`` to keep
  the list readable;
- ``call_id`` travels byte for byte into the neutral tool call ids and back;
- Codex's freeform (``custom``) tools and namespaced tools (its default "lite" models declare
  them in an ``additional_tools`` input item, hoisted into the tools) travel as a declared
  two-way encoding (neutral/tools.py; DECODE_TOOL_TYPES): a freeform tool is a function of one
  string ``input``, a namespaced one has a flat name; their past calls are wrapped the same way
  and the map goes with the translation (``client_tools``) so the reply gives them back;
- history that cannot travel refuses the turn (``Refused``) instead of being dropped, since
  the model would see a broken conversation: built-in tool calls (DECODE_REFUSED_ITEMS),
  compaction, stored state (``previous_response_id``, ``conversation``). Tools another
  endpoint cannot offer are only dropped: the model simply cannot call them;
- decoder flag: a tool output Codex sent after a later user message moves back next to its
  call (recorded in ``converted``): every other protocol requires it there;
- encoder checks: Responses has no stop sequences (dropped, recorded); function tools say
  ``strict: false`` unless the client said otherwise (plumbing: Responses defaults to strict
  schemas, Chat and Anthropic to loose ones); tool names over 64 characters refuse the turn;
- bad input raises ``TranslationError(400, "<json path>: ...")`` and nothing else; the input
  is never mutated (the output may share unchanged leaves, such as tool schemas, by reference).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...errors import InvalidRequest, Refused, TranslationError
from ...neutral import Capped, Conversation, RequestTranslation
from ...neutral import PROVIDER_STATE, state_for
from ...neutral import ClientTool, freeform_arguments, freeform_parameters
from ...protocols import DEFAULT_NAMESPACE, flat_tool_name
from .. import fieldtable as ft

JOIN = ft.JOIN
OPENAI_TOOL_NAME_MAX = 64  # docs/pitfalls.md 20
CHAT_IMAGE_DETAIL = ("auto", "low", "high")  # Chat's image_url.detail values
_TEXT_KEYS = frozenset({"type", "text"})
_TEXT_TYPES = ("input_text", "output_text")


def _refused(path: str, why: str) -> TranslationError:
    return Refused(400, f"{path}: {why}; this turn cannot go to an endpoint of another protocol")


def _drop_part(rt: Conversation, x: dict[str, Any], xp: str) -> None:
    rt.dropped.append(xp)



# ---------------------------------------------------------------------------------------
# content parts (Responses -> Chat); a handler returns a Chat part, or None when dropped
# ---------------------------------------------------------------------------------------

PartHandler = Callable[[Conversation, dict[str, Any], str], dict[str, Any] | None]


def _text(rt: Conversation, x: dict[str, Any], xp: str) -> dict[str, Any]:
    text = ft.req(x, "text", xp, ft.string)
    ft.extras(rt, x, _TEXT_KEYS, xp)  # annotations, logprobs
    return {"type": "text", "text": text}


def _image(rt: Conversation, x: dict[str, Any], xp: str) -> dict[str, Any] | None:
    url = ft.opt(x, "image_url", xp, ft.string)
    detail = ft.opt(x, "detail", xp, ft.string)
    if url is None:  # a file_id only: nothing a Chat endpoint can fetch
        rt.dropped.append(xp)
        return None
    image: dict[str, Any] = {"url": url}
    known = {"type", "image_url"}
    if detail in CHAT_IMAGE_DETAIL:
        image["detail"] = detail
        known.add("detail")
    ft.extras(rt, x, frozenset(known), xp)  # file_id, other detail values
    return {"type": "image_url", "image_url": image}


def _is_pdf_data_url(url: str) -> bool:
    try:
        return ft.data_url(url, "")[0] == "application/pdf"
    except TranslationError:
        return False


def _file(rt: Conversation, x: dict[str, Any], xp: str) -> dict[str, Any] | None:
    """A PDF as a data: URL -> Chat ``file`` part (Chat takes PDFs inline only); else dropped."""
    file_data = ft.opt(x, "file_data", xp, ft.string)
    filename = ft.opt(x, "filename", xp, ft.string)
    if file_data is None or not _is_pdf_data_url(file_data):  # file_id, file_url, other media
        rt.dropped.append(xp)
        return None
    file = {"file_data": file_data}
    if filename is not None:
        file["filename"] = filename
    ft.extras(rt, x, frozenset({"type", "file_data", "filename"}), xp)
    return {"type": "file", "file": file}


# Responses content part types by role. Refusals are not demoted to text (the model never
# said them as text); Chat system and assistant messages carry text only.
USER_PARTS: dict[str, PartHandler] = {
    "input_text": _text,
    "output_text": _text,
    "input_image": _image,
    "input_file": _file,
    "refusal": _drop_part,
}
ASSISTANT_PARTS: dict[str, PartHandler] = {"output_text": _text, "input_text": _text, "refusal": _drop_part}
SYSTEM_PARTS: dict[str, PartHandler] = {"input_text": _text, "output_text": _text, "input_image": _drop_part, "input_file": _drop_part}
# function_call_output parts: True = text kept, False = dropped (Chat tool messages are text only)
OUTPUT_PARTS = {"input_text": True, "output_text": True, "input_image": False, "input_file": False}


def _content(rt: Conversation, content: Any, cp: str, table: dict[str, PartHandler]) -> str | list[Any] | None:
    """A string as is; parts as one string when only text is left, else Chat parts;
    None when parts were given and none is left."""
    if isinstance(content, str):
        return content
    if content.__class__ is list and len(content) == 1:  # one text part (most of Codex's messages)
        x = content[0]
        if x.__class__ is dict and x.get("type") in _TEXT_TYPES and (t := x.get("text")).__class__ is str \
                and x.keys() <= _TEXT_KEYS:
            return t
    if content.__class__ is list and content and all(  # the usual case: text parts alone, nothing left behind
            x.__class__ is dict and x.get("type") in _TEXT_TYPES and x.get("text").__class__ is str
            and x.keys() <= _TEXT_KEYS for x in content):
        return JOIN.join([x["text"] for x in content])  # every table takes both text types as text
    parts = ft.each_part(rt, content, cp, table)
    if not parts:
        return None
    texts = [x["text"] for x in parts if x["type"] == "text"]
    return JOIN.join(texts) if len(texts) == len(parts) else parts


# ---------------------------------------------------------------------------------------
# input items
# ---------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Walk:
    """State of the input-item walk."""

    msgs: list[dict[str, Any]]
    leading: bool = True  # nothing but system text yet: system items join the first message
    assistant: dict[str, Any] | None = None  # the last message, when function_call items may join it
    seen: set[str] = field(default_factory=set)  # input[].<key> summaries already recorded
    tools: list[dict[str, Any]] = field(default_factory=list)  # tools hoisted from additional_tools items
    lead: list[str] | None = None  # the leading system texts, joined into the first message at the end


ItemHandler = Callable[[Conversation, dict[str, Any], str, _Walk, ft.Options], None]


def _item_extras(rt: Conversation, item: dict[str, Any], known: frozenset[str], st: _Walk) -> None:
    """Item-level keys outside ``known``, recorded once each as ``input[].<key>``."""
    if item.keys() - known <= st.seen:  # the usual case: every such key recorded already (C-level sets)
        return
    for k in item:
        if k not in known and k not in st.seen:
            st.seen.add(k)
            rt.dropped.append(f"input[].{k}")


_MESSAGE_KEYS = frozenset({"type", "role", "content"})
_FUNCTION_CALL_ITEM_KEYS = frozenset({"type", "call_id", "name", "arguments", "namespace"})
_CUSTOM_CALL_ITEM_KEYS = frozenset({"type", "call_id", "name", "input", "namespace"})
_CALL_OUTPUT_ITEM_KEYS = frozenset({"type", "call_id", "output"})
_ADDITIONAL_TOOLS_KEYS = frozenset({"type", "role", "tools"})
_FUNCTION_TOOL_KEYS = frozenset({"type", "name", "description", "parameters"})
_FUNCTION_TOOL_KEYS_STRICT = _FUNCTION_TOOL_KEYS | {"strict"}  # Codex's usual declaration: one known drop
_CUSTOM_TOOL_KEYS = frozenset({"type", "name", "description", "format"})
_NAMESPACE_TOOL_KEYS = frozenset({"type", "name", "description", "tools"})
_GRAMMAR_KEYS = frozenset({"type", "syntax", "definition"})


def _system_message(rt: Conversation, item: dict[str, Any], p: str, st: _Walk, o: ft.Options) -> None:
    content = _content(rt, ft.req(item, "content", p, ft.anything), f"{p}.content", SYSTEM_PARTS)
    _item_extras(rt, item, _MESSAGE_KEYS, st)
    st.assistant = None
    if not content:
        rt.dropped.append(p)
    elif st.leading and st.msgs and isinstance(content, str) and isinstance(st.msgs[0]["content"], str):
        # one leading system message: local templates want that (joined once, at the end of the input)
        if st.lead is None:
            st.lead = [st.msgs[0]["content"]]
        st.lead.append(content)
    else:
        st.msgs.append(rt.source({"role": "system", "content": content}, p))
        if not st.leading:
            rt.warnings.append(f"{p}: system message kept in place; strict chat templates reject a system message after the first")


def _user_message(rt: Conversation, item: dict[str, Any], p: str, st: _Walk, o: ft.Options) -> None:
    content = _content(rt, ft.req(item, "content", p, ft.anything), f"{p}.content", USER_PARTS)
    _item_extras(rt, item, _MESSAGE_KEYS, st)
    st.leading, st.assistant = False, None
    if content is None:
        rt.dropped.append(p)  # nothing of this message can travel
    else:
        st.msgs.append(rt.source({"role": "user", "content": content}, p))


def _assistant_message(rt: Conversation, item: dict[str, Any], p: str, st: _Walk, o: ft.Options) -> None:
    content = _content(rt, ft.req(item, "content", p, ft.anything), f"{p}.content", ASSISTANT_PARTS)
    _item_extras(rt, item, _MESSAGE_KEYS, st)  # phase, status, id, ...
    st.leading, st.assistant = False, None
    if content is None:
        rt.dropped.append(p)
        return
    st.assistant = rt.source({"role": "assistant", "content": content}, p)
    st.msgs.append(st.assistant)


# Responses message role -> handler
DECODE_ROLES: dict[str, ItemHandler] = {
    "system": _system_message,
    "developer": _system_message,
    "user": _user_message,
    "assistant": _assistant_message,
}


def _message(rt: Conversation, item: dict[str, Any], p: str, st: _Walk, o: ft.Options) -> None:
    role = item.get("role")
    handler = DECODE_ROLES.get(role) if role.__class__ is str else None
    (handler or ft.pick(DECODE_ROLES, role, f"{p}.role", "role"))(rt, item, p, st, o)


def _call_name(rt: Conversation, item: dict[str, Any], p: str, st: _Walk) -> str:
    """A call item's tool name as the neutral function is named (a namespaced one flat)."""
    name = ft.req(item, "name", p, ft.string)
    ns = ft.opt(item, "namespace", p, ft.string)
    flat = flat_tool_name(ns, name)
    if flat != name and "namespace" not in st.seen:
        st.seen.add("namespace")
        rt.converted.append(f"input[].namespace: namespaced calls under their flat tool names (<namespace>__<name>)")
    return flat


def _function_call(rt: Conversation, item: dict[str, Any], p: str, st: _Walk, o: ft.Options) -> None:
    call = rt.source({
        "id": ft.req(item, "call_id", p, ft.string),  # byte for byte (docs/architecture.md rule 2)
        "type": "function",
        "function": {"name": _call_name(rt, item, p, st), "arguments": ft.req(item, "arguments", p, ft.string)},
    }, p)
    _item_extras(rt, item, _FUNCTION_CALL_ITEM_KEYS, st)  # id, status
    _add_call(rt, call, p, st)


def _custom_tool_call(rt: Conversation, item: dict[str, Any], p: str, st: _Walk, o: ft.Options) -> None:
    """A freeform call: the function call of its tool's encoding, arguments {"input": <input>}."""
    call = rt.source({
        "id": ft.req(item, "call_id", p, ft.string),  # byte for byte (docs/architecture.md rule 2)
        "type": "function",
        "function": {"name": _call_name(rt, item, p, st),
                     "arguments": freeform_arguments(ft.req(item, "input", p, ft.string))},
    }, p)
    if "custom_tool_call" not in st.seen:
        st.seen.add("custom_tool_call")
        rt.converted.append("input[].custom_tool_call: freeform calls as function calls whose arguments are "
                            "{\"input\": <the input>} (the declared encoding of freeform tools)")
    _item_extras(rt, item, _CUSTOM_CALL_ITEM_KEYS, st)  # id, status
    _add_call(rt, call, p, st)


def _add_call(rt: Conversation, call: dict[str, Any], p: str, st: _Walk) -> None:
    """A call joins the assistant turn before it (one is opened when there is none)."""
    st.leading = False
    if st.assistant is None:  # "" rather than null: llama_cpp.server answers null with a 500
        st.assistant = rt.source({"role": "assistant", "content": ""}, p)
        st.msgs.append(st.assistant)
    st.assistant.setdefault("tool_calls", []).append(call)


def _additional_tools(rt: Conversation, item: dict[str, Any], p: str, st: _Walk, o: ft.Options) -> None:
    """Codex's Responses Lite declares its tools in an input item: hoisted into the tools."""
    before = len(st.tools)
    _tool_list(rt, ft.req(item, "tools", p, ft.anything), f"{p}.tools", st.tools)
    _item_extras(rt, item, _ADDITIONAL_TOOLS_KEYS, st)
    rt.converted.append(f"{p}: additional_tools item: {len(st.tools) - before} tools hoisted into the request's tools")


def _function_call_output(rt: Conversation, item: dict[str, Any], p: str, st: _Walk, o: ft.Options) -> None:
    call_id = ft.req(item, "call_id", p, ft.string)
    output, op = ft.req(item, "output", p, ft.anything), f"{p}.output"
    if isinstance(output, str):
        text = output
    else:
        texts = []
        for k, x in enumerate(ft.arr(output, op)):
            xp = f"{op}[{k}]"
            if ft.pick(OUTPUT_PARTS, ft.obj(x, xp).get("type"), f"{xp}.type", "output part type"):
                texts.append(_text(rt, x, xp)["text"])
            else:
                rt.dropped.append(xp)
        text = JOIN.join(texts)
    _item_extras(rt, item, _CALL_OUTPUT_ITEM_KEYS, st)
    st.leading, st.assistant = False, None
    st.msgs.append(rt.source({"role": "tool", "tool_call_id": call_id, "content": text}, p))


def _drop_item(rt: Conversation, item: dict[str, Any], p: str, st: _Walk, o: ft.Options) -> None:
    """An item left behind (DECODE_DROPPED_ITEMS says why)."""
    rt.dropped.append(p)


_BUILTIN = "a built-in tool item has no Chat Completions counterpart, and dropping it would break the history the model sees"
# Input item types that refuse the turn -> why
DECODE_REFUSED_ITEMS: dict[str, str] = {
    "compaction": "an encrypted compaction summary is readable only by the provider that made it",
    # Codex 0.171.0's remote compaction (v2): the history plus this item, answered with exactly one
    # encrypted `compaction` output item that only OpenAI makes (none is ever invented here)
    "compaction_trigger": "Codex asks for an encrypted compaction item that only OpenAI makes (give Codex a model "
                          "provider of its own, `-c model_provider=…`, and it compacts with an ordinary turn, which "
                          "routes: README, Long routed sessions)",
    "item_reference": "it refers to an item stored by the provider; a Chat endpoint has no stored items",
    **{t: _BUILTIN for t in (
        "local_shell_call", "local_shell_call_output", "shell_call", "shell_call_output", "apply_patch_call",
        "apply_patch_call_output", "file_search_call", "computer_call", "computer_call_output",
        "code_interpreter_call", "tool_search_call", "tool_search_output", "mcp_call",
        "mcp_list_tools", "mcp_approval_request", "mcp_approval_response")},
}
# Input item types that are dropped (recorded): a hosted tool's record that no later item
# answers, which the model can do without (what it found is in the text that followed)
DECODE_DROPPED_ITEMS: dict[str, str] = {
    "reasoning": "encrypted reasoning is bound to the provider that made it (restored only to it: reasoning/state.py)",
    "web_search_call": "OpenAI's own search ran on OpenAI; its results are in the assistant text after it",
    "image_generation_call": "an image OpenAI generated; another endpoint can neither read nor continue it",
}
TOOL_ITEM_SUFFIXES = ("_call", "_output")  # newer tool item types: refused like the listed ones


def _refuse_item(rt: Conversation, item: dict[str, Any], p: str, st: _Walk, o: ft.Options) -> None:
    itype = item["type"]
    name = item.get("name")
    label = f"{itype} item" + (f" {name!r}" if isinstance(name, str) else "")
    raise _refused(p, f"{label}: {DECODE_REFUSED_ITEMS.get(itype, _BUILTIN)}")


# Responses input item type -> handler
DECODE_ITEMS: dict[str, ItemHandler] = {
    "message": _message,
    "function_call": _function_call,
    "function_call_output": _function_call_output,
    "custom_tool_call": _custom_tool_call,
    "custom_tool_call_output": _function_call_output,  # the same shape: call_id, output (a string or parts)
    "additional_tools": _additional_tools,
    **dict.fromkeys(DECODE_DROPPED_ITEMS, _drop_item),
    **dict.fromkeys(DECODE_REFUSED_ITEMS, _refuse_item),
}


def _item_handler(item: dict[str, Any], p: str) -> ItemHandler:
    itype = item.get("type")
    if itype.__class__ is str and (handler := DECODE_ITEMS.get(itype)) is not None:
        return handler  # the usual case
    if itype is None and "role" in item:  # the easy form {role, content} is a message
        return _message
    if isinstance(itype, str) and itype in DECODE_ITEMS:
        return DECODE_ITEMS[itype]
    if isinstance(itype, str) and itype.endswith(TOOL_ITEM_SUFFIXES):
        return _refuse_item
    raise ft.bad(f"{p}.type", f"unknown input item type {ft.show(itype)} (expected message, function_call, "
                            "function_call_output, reasoning or a tool item type)")


# ---------------------------------------------------------------------------------------
# top-level fields
# ---------------------------------------------------------------------------------------


def _instructions(rt: Conversation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    if ft.string(value, key):
        out["messages"] = [rt.source({"role": "system", "content": value}, key)]
    else:
        rt.dropped.append(key)


def _input(rt: Conversation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    st = _Walk(msgs=out.setdefault("messages", []))
    if isinstance(value, str):
        st.msgs.append(rt.source({"role": "user", "content": value}, key))
        return
    for i, item in enumerate(ft.arr(value, key)):
        p = f"{key}[{i}]"
        _item_handler(item if item.__class__ is dict else ft.obj(item, p), p)(rt, item, p, st, o)
    if st.lead is not None:
        st.msgs[0]["content"] = JOIN.join(st.lead)
    if st.tools:
        out["tools"] = st.tools


# ---------------------------------------------------------------------------------------
# tool declarations (top-level tools, and the tools of additional_tools items)
# ---------------------------------------------------------------------------------------

ToolHandler = Callable[[Conversation, dict[str, Any], str, list[dict[str, Any]], "str | None"], None]


def _declare(rt: Conversation, flat: str, tool: ClientTool, tp: str) -> None:
    """The client's tool behind the neutral name ``flat``; a name already taken by another
    tool refuses the turn (the reply could not say which of the two the model called)."""
    have = rt.client_tools.setdefault(flat, tool)
    if have is not tool and have != tool:
        def show(t: ClientTool) -> str:
            return f"{t.namespace}.{t.name}" if t.namespace else t.name
        raise _refused(tp, f"tools {show(have)!r} and {show(tool)!r} would have the same name {flat!r} "
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
    _tool_list(rt, ft.req(t, "tools", tp, ft.anything), f"{tp}.tools", tools, name)
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


def _tool_list(rt: Conversation, value: Any, key: str, tools: list[dict[str, Any]], ns: str | None = None) -> None:
    for i, t in enumerate(ft.arr(value, key)):
        tp = f"{key}[{i}]"
        ttype = t.get("type") if type(t) is dict else None
        row = DECODE_TOOL_TYPES.get(ttype if type(ttype) is str else ft.req(ft.obj(t, tp), "type", tp, ft.string))
        if row is None or row[1] is None:  # hosted tools, newer types
            rt.dropped.append(tp)
            continue
        row[1](rt, t, tp, tools, ns)


def _tools(rt: Conversation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    tools: list[dict[str, Any]] = out.get("tools") or []  # after those of additional_tools items
    _tool_list(rt, value, key, tools)
    if tools:
        out["tools"] = tools
    elif not value:
        rt.dropped.append(key)  # an empty list: OpenAI rejects tools: []


def _tool_choice(rt: Conversation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    if isinstance(value, str):
        choice: Any = ft.choice(value, ("auto", "none", "required"), key, "tool_choice")
    elif (ctype := ft.req(ft.obj(value, key), "type", key, ft.string)) in ("function", "custom"):
        # a freeform or namespaced tool is the neutral function of its encoding
        name = flat_tool_name(ft.opt(value, "namespace", key, ft.string), ft.req(value, "name", key, ft.string))
        choice = {"type": "function", "function": {"name": name}}
    else:  # allowed_tools, hosted tools: nothing to point at on a Chat endpoint
        rt.dropped.append(key)
        rt.warnings.append(f"tool_choice {ctype!r} has no Chat counterpart here: dropped, the model chooses freely")
        return
    if "tools" not in out:  # Chat rejects tool_choice without tools
        rt.dropped.append(key)
        return
    if isinstance(choice, dict) and not any(t["function"]["name"] == choice["function"]["name"] for t in out["tools"]):
        rt.dropped.append(key)  # naming a tool the request does not declare: every endpoint rejects it
        rt.warnings.append(f"tool_choice names {choice['function']['name']!r}, which no declared tool carries: "
                           "dropped, the model chooses freely")
        return
    if isinstance(value, dict):
        ft.extras(rt, value, frozenset({"type", "name", "namespace"}), key)
    out[key] = choice


def _parallel_tool_calls(rt: Conversation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    ft.boolean(value, key)
    if "tools" in out:
        out[key] = value
    else:
        rt.dropped.append(key)


def _max_output_tokens(rt: Conversation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    n = ft.integer(value, key)
    out["max_completion_tokens"] = n
    rt.origin["max_completion_tokens"] = key


def _stored_state(rt: Conversation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    raise _refused(key, "it continues state stored by the provider, and a Chat Completions endpoint has none "
                        "(the turn's history would be missing)")


def _reasoning(rt: Conversation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    """reasoning.effort -> reasoning_effort (the same OpenAI levels: neutral/effort.py); summary and
    the rest ask for reasoning items back, which no other protocol returns."""
    for k, v in ft.obj(value, key).items():
        if k == "effort" and isinstance(v, str):
            out["reasoning_effort"] = v
            rt.origin["reasoning_effort"] = f"{key}.effort"
        elif v is not None:
            rt.dropped.append(f"{key}.{k}")


# Responses field -> (action, Chat field or handler, note). Processed in this order.
DECODE_FIELDS: ft.FieldTable = {
    "model": ("mapped", "model", "exact; a route or endpoint model overrides it"),
    "previous_response_id": ("refused", _stored_state, "a Chat endpoint has no stored responses"),
    "conversation": ("refused", _stored_state, "a Chat endpoint has no stored conversations"),
    "instructions": ("converted", _instructions, "one leading system/developer message"),
    "input": ("converted", _input, "items -> messages (DECODE_ITEMS); leading system/developer items join the first "
                                   "message (E.2); additional_tools items hoisted into tools"),
    "tools": ("converted", _tools, "after the tools of additional_tools items: DECODE_TOOL_TYPES, a row per tool type"),
    "tool_choice": ("converted", _tool_choice, "auto/none/required same; {type:function,name} nested; others dropped"),
    "parallel_tool_calls": ("converted", _parallel_tool_calls, "exact, when tools remain"),
    "max_output_tokens": ("converted", _max_output_tokens, "-> max_completion_tokens"),
    "temperature": ("mapped", "temperature", "same 0-2 range"),
    "top_p": ("mapped", "top_p", "exact"),
    "stream": ("mapped", "stream", "exact"),
    "reasoning": ("converted", _reasoning, "effort -> reasoning_effort (neutral/effort.py); summary dropped"),
    "text": ("dropped", ft.drop_keys, "verbosity/format: no faithful counterpart on local servers"),
    "include": ("dropped", None, "asks for encrypted reasoning back; nothing to include"),
    "store": ("dropped", None, "a Chat endpoint stores nothing"),
    "prompt_cache_key": ("dropped", None, "OpenAI-only"),
    "prompt_cache_retention": ("dropped", None, "OpenAI-only"),
    "client_metadata": ("dropped", None, "Codex's installation, thread and turn ids"),
    "service_tier": ("dropped", None, "OpenAI tiers"),
    "truncation": ("dropped", None, "server-side context truncation: none on a Chat endpoint"),
    "metadata": ("dropped", None, "stored-response tags"),
    "safety_identifier": ("dropped", None, "OpenAI-only"),
    "user": ("dropped", None, "deprecated; OpenAI-only"),
    "background": ("dropped", None, "stored background responses: none on a Chat endpoint"),
    "max_tool_calls": ("dropped", None, "no Chat counterpart"),
    "top_logprobs": ("dropped", None, "the reply carries no logprobs"),
    "prompt": ("dropped", None, "stored prompt template: none on a Chat endpoint"),
    "stream_options": ("dropped", None, "Responses clients do not send it; include_usage is plumbing"),
}


def decode(body: dict[str, Any]) -> Conversation:
    """An OpenAI Responses request body (Codex's) as a neutral conversation."""
    if not isinstance(body, dict):
        raise InvalidRequest(400, f"Responses request body must be a JSON object, got {ft.jtype(body)}")
    conv = Conversation(body={})
    out = ft.run(DECODE_FIELDS, ft.CHECKS, body, conv, ft.Options())
    if not out.get("messages"):
        raise ft.bad("input", "required" if body.get("input") is None else "no message is left to send (every item was dropped)")
    out["messages"] = _outputs_next_to_calls(conv, out["messages"])
    conv.body = out
    # the reply needs the map only for tools it must give back in another shape
    conv.client_tools = {k: t for k, t in conv.client_tools.items() if t.freeform or t.namespace}
    conv.finish_origin()
    return conv


def _outputs_next_to_calls(conv: Conversation, msgs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every tool result directly after the assistant turn that made its call: Codex may send
    ``user, function_call c1, user message, function_call_output c1``, a history Chat and
    Anthropic reject. The output moves back next to its call (recorded); nothing is dropped."""
    out: list[dict[str, Any]] = []
    owner: dict[str, dict[str, Any]] = {}  # call id -> the assistant message holding the call
    for m in msgs:
        a = owner.get(str(m.get("tool_call_id"))) if m.get("role") == "tool" else None
        if a is not None:
            j = next(i for i, x in enumerate(out) if x is a) + 1
            while j < len(out) and out[j].get("role") == "tool":
                j += 1
            if j != len(out):
                out.insert(j, m)
                conv.converted.append(f"{conv.source_path(m)} moved next to its function_call "
                                      f"({conv.source_path(a)}): a tool result must follow its call")
                continue
        out.append(m)
        for tc in m.get("tool_calls") or ():
            owner[tc["id"]] = m
    return out


# ---------------------------------------------------------------------------------------
# encode: neutral -> Responses (the neutral vocabulary is Chat's: a Chat client's body is
# encoded as it came, so every Chat field has its row)
# ---------------------------------------------------------------------------------------


def _enc_text_parts(rt: RequestTranslation, content: Any, cp: str, kind: str) -> list[dict[str, Any]]:
    """Text content (a string or text parts) as Responses ``input_text`` / ``output_text`` parts."""
    if isinstance(content, str):
        return [{"type": kind, "text": content}] if content else []
    parts = []
    for k, x in enumerate(ft.arr(content, cp)):
        xp = f"{cp}[{k}]"
        ptype = ft.choice(ft.obj(x, xp).get("type"), ("text", "refusal"), f"{xp}.type", "content part type")
        text = ft.req(x, ptype, xp, ft.string)
        ft.extras(rt, x, frozenset({"type", ptype}), xp)
        if ptype == "refusal":  # Responses input has no refusal part for a past turn: kept as text
            rt.converted.append(f"{xp} -> {kind} (refusal)")
        if text:
            parts.append({"type": kind, "text": text})
        else:
            rt.dropped.append(xp)
    return parts


def _enc_image(rt: RequestTranslation, x: dict[str, Any], xp: str) -> dict[str, Any]:
    ip = f"{xp}.image_url"
    image = ft.req(x, "image_url", xp, ft.obj)
    part: dict[str, Any] = {"type": "input_image", "image_url": ft.req(image, "url", ip, ft.string)}
    if (detail := ft.opt(image, "detail", ip, ft.string)) is not None:
        part["detail"] = detail
    ft.extras(rt, x, frozenset({"type", "image_url"}), xp)
    ft.extras(rt, image, frozenset({"url", "detail"}), ip)
    return part


def _enc_file(rt: RequestTranslation, x: dict[str, Any], xp: str) -> dict[str, Any]:
    fp = f"{xp}.file"
    file = ft.req(x, "file", xp, ft.obj)
    part: dict[str, Any] = {"type": "input_file"}
    for key in ("file_data", "file_id", "filename"):
        if (v := ft.opt(file, key, fp, ft.string)) is not None:
            part[key] = v
    ft.extras(rt, x, frozenset({"type", "file"}), xp)
    ft.extras(rt, file, frozenset({"file_data", "file_id", "filename"}), fp)
    return part


def _enc_text_part(rt: RequestTranslation, x: dict[str, Any], xp: str) -> dict[str, Any] | None:
    text = ft.req(x, "text", xp, ft.string)
    ft.extras(rt, x, _TEXT_KEYS, xp)
    return {"type": "input_text", "text": text}


# neutral (Chat) user content part -> Responses input part (None: dropped)
ENC_USER_PARTS: dict[str, Callable[[RequestTranslation, dict[str, Any], str], dict[str, Any] | None]] = {
    "text": _enc_text_part,
    "image_url": _enc_image,
    "file": _enc_file,
    "input_audio": lambda rt, x, xp: rt.dropped.append(xp),  # no audio input in Responses
}


_ROLE_CONTENT_KEYS = frozenset({"role", "content"})
_TOOL_MESSAGE_KEYS = frozenset({"role", "tool_call_id", "content"})
_ASSISTANT_KEYS = frozenset({"role", "content", "tool_calls", "refusal"})
_ASSISTANT_KEYS_RESTORED = _ASSISTANT_KEYS | {PROVIDER_STATE}
_TOOL_CALL_KEYS = frozenset({"id", "type", "function"})
_CALL_FUNCTION_KEYS = frozenset({"name", "arguments"})


def _enc_message(rt: RequestTranslation, role: str, parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "message", "role": role, "content": parts}


def _enc_system(rt: RequestTranslation, m: dict[str, Any], p: str, items: list[Any], top: dict[str, Any]) -> None:
    parts = _enc_text_parts(rt, ft.req(m, "content", p, ft.anything), f"{p}.content", "input_text")
    ft.extras(rt, m, _ROLE_CONTENT_KEYS, p)  # name
    if not parts:
        rt.dropped.append(p)
    elif not items and "instructions" not in top:  # the leading system text: instructions
        top["instructions"] = JOIN.join(x["text"] for x in parts)
    elif not items:
        top["instructions"] += JOIN + JOIN.join(x["text"] for x in parts)
    else:
        items.append(_enc_message(rt, m["role"], parts))


def _enc_user(rt: RequestTranslation, m: dict[str, Any], p: str, items: list[Any], top: dict[str, Any]) -> None:
    content = ft.req(m, "content", p, ft.anything)
    ft.extras(rt, m, _ROLE_CONTENT_KEYS, p)  # name
    if isinstance(content, str):
        parts = [{"type": "input_text", "text": content}] if content else []
    else:
        parts = ft.each_part(rt, content, f"{p}.content", ENC_USER_PARTS)
    if parts:
        items.append(_enc_message(rt, "user", parts))
    else:
        rt.dropped.append(p)


def _enc_assistant(rt: RequestTranslation, m: dict[str, Any], p: str, items: list[Any], top: dict[str, Any]) -> None:
    if restored := state_for(m, "openai-responses"):  # this endpoint's own reasoning items, before their calls
        items.extend(restored.payload["items"])
    content = m.get("content")
    parts = [] if content is None else _enc_text_parts(rt, content, f"{p}.content", "output_text")
    if (refusal := ft.opt(m, "refusal", p, ft.string)):
        parts.append({"type": "output_text", "text": refusal})
        rt.converted.append(f"{p}.refusal -> output_text")
    if parts:
        items.append(_enc_message(rt, "assistant", parts))
    for k, tc in enumerate(ft.opt(m, "tool_calls", p, ft.arr) or ()):
        tp = f"{p}.tool_calls[{k}]"
        ft.choice(ft.obj(tc, tp).get("type", "function"), ("function",), f"{tp}.type", "tool call type")
        fp = f"{tp}.function"
        fn = ft.req(tc, "function", tp, ft.obj)
        items.append({"type": "function_call", "call_id": ft.req(tc, "id", tp, ft.string),
                      "name": ft.req(fn, "name", fp, ft.string),
                      "arguments": ft.opt(fn, "arguments", fp, ft.string) or ""})
        ft.extras(rt, tc, _TOOL_CALL_KEYS, tp)
        ft.extras(rt, fn, _CALL_FUNCTION_KEYS, fp)
    ft.extras(rt, m, _ASSISTANT_KEYS_RESTORED if restored else _ASSISTANT_KEYS, p)  # name, audio, ...
    if not parts and not m.get("tool_calls"):
        rt.dropped.append(p)


def _enc_tool_message(rt: RequestTranslation, m: dict[str, Any], p: str, items: list[Any], top: dict[str, Any]) -> None:
    content = ft.req(m, "content", p, ft.anything)
    parts = _enc_text_parts(rt, content, f"{p}.content", "input_text")
    output: str | list[Any] = content if isinstance(content, str) else parts
    items.append({"type": "function_call_output", "call_id": ft.req(m, "tool_call_id", p, ft.string),
                  "output": output})
    ft.extras(rt, m, _TOOL_MESSAGE_KEYS, p)


ENC_ROLES = {"system": _enc_system, "developer": _enc_system, "user": _enc_user, "assistant": _enc_assistant,
             "tool": _enc_tool_message}


def _enc_messages(rt: RequestTranslation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    items: list[dict[str, Any]] = []
    for i, m in enumerate(ft.arr(value, key)):
        p = f"{key}[{i}]"
        ft.pick(ENC_ROLES, ft.obj(m, p).get("role"), f"{p}.role", "role")(rt, m, p, items, out)
    out["input"] = items


def _enc_tool(rt: RequestTranslation, t: Any, tp: str, n: int) -> dict[str, Any] | None:
    """One neutral tool as the ``n``-th Responses tool (None: a custom tool, dropped)."""
    ttype = ft.choice(ft.obj(t, tp).get("type"), ("function", "custom"), f"{tp}.type", "tool type")
    if ttype == "custom":  # a Chat custom tool's shape differs; not carried here
        rt.dropped.append(tp)
        return None
    fp = f"{tp}.function"
    fn = ft.req(t, "function", tp, ft.obj)
    name = ft.name_within(ft.req(fn, "name", fp, ft.string), f"{tp}.name", OPENAI_TOOL_NAME_MAX, "Responses")
    tool: dict[str, Any] = {"type": "function", "name": name}
    if (desc := ft.opt(fn, "description", fp, ft.string)) is not None:
        tool["description"] = desc
    tool["parameters"] = ft.opt(fn, "parameters", fp, ft.obj)
    strict = ft.opt(fn, "strict", fp, ft.boolean)
    if strict is None:  # Responses defaults to strict schemas, Chat to loose ones: say what the client meant
        strict = False
        rt.plumbing.append(f"tools[{n}].strict")
    tool["strict"] = strict
    ft.extras(rt, t, _TOOL_KEYS, tp)
    ft.extras(rt, fn, _FUNCTION_KEYS, fp)
    return tool


_TOOL_KEYS = frozenset({"type", "function"})
_FUNCTION_KEYS = frozenset({"name", "description", "parameters", "strict"})


def _enc_tools(rt: RequestTranslation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    tools: list[dict[str, Any]] = []
    for i, t in enumerate(ft.arr(value, key)):
        # the usual tool decided in one expression, as _enc_tool would: {"type": "function",
        # "function": {name (64 characters at most), description, parameters}} and nothing else
        if (type(t) is dict and len(t) == 2 and t.get("type") == "function" and type(fn := t.get("function")) is dict
                and len(fn) == 3 and type(name := fn.get("name")) is str and len(name) <= OPENAI_TOOL_NAME_MAX
                and type(desc := fn.get("description")) is str and type(params := fn.get("parameters")) is dict):
            tool: dict[str, Any] | None = {"type": "function", "name": name, "description": desc, "parameters": params,
                                 "strict": False}
            rt.plumbing.append(f"tools[{len(tools)}].strict")  # Responses defaults to strict: see _enc_tool
        elif (tool := _enc_tool(rt, t, f"{key}[{i}]", len(tools))) is None:
            continue
        assert tool is not None  # (both branches above give one)
        tools.append(tool)
    if tools:
        out["tools"] = tools
    elif not value:
        rt.dropped.append(key)  # an empty list: nothing to offer


def _enc_tool_choice(rt: RequestTranslation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    if isinstance(value, str):
        out[key] = ft.choice(value, ("auto", "none", "required"), key, "tool_choice")
        return
    ctype = ft.choice(ft.obj(value, key).get("type"), ("function", "allowed_tools", "custom"), f"{key}.type",
                      "tool_choice type")
    if ctype != "function":
        rt.dropped.append(key)
        rt.warnings.append(f"tool_choice {ctype!r} is not carried to a Responses endpoint: dropped")
        return
    fn = ft.req(value, "function", key, ft.obj)
    out[key] = {"type": "function", "name": ft.req(fn, "name", f"{key}.function", ft.string)}
    ft.extras(rt, value, frozenset({"type", "function"}), key)
    ft.extras(rt, fn, frozenset({"name"}), f"{key}.function")


def _enc_max_tokens(rt: RequestTranslation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    n = ft.integer(value, key)
    if "max_output_tokens" in out:  # max_completion_tokens came first and wins
        rt.dropped.append(key)
        return
    if o.max_tokens_cap is not None and n > o.max_tokens_cap:
        rt.capped = Capped(asked=n, cap=o.max_tokens_cap)
        rt.converted.append(f"{key} -> max_output_tokens (capped at {o.max_tokens_cap})")
        n = o.max_tokens_cap
    out["max_output_tokens"] = n


def _enc_stream_options(rt: RequestTranslation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    """Consumed: it tells the reply encoder whether the client wants a usage chunk (a
    Responses stream always reports usage in response.completed)."""
    o.include_usage = bool(ft.opt(ft.obj(value, key), "include_usage", key, ft.boolean))
    ft.extras(rt, value, frozenset({"include_usage"}), key)


def _enc_n(rt: RequestTranslation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    rt.dropped.append(key)  # 1: the Chat decoder refuses more (the same toward every target)


def _enc_reasoning_effort(rt: RequestTranslation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    out["reasoning"] = {"effort": ft.string(value, key)}


def _enc_verbosity(rt: RequestTranslation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    out.setdefault("text", {})["verbosity"] = ft.string(value, key)


def _enc_response_format(rt: RequestTranslation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    ftype = ft.choice(ft.obj(value, key).get("type"), ("text", "json_object", "json_schema"), f"{key}.type",
                      "response_format type")
    fmt: dict[str, Any] = {"type": ftype}
    if ftype == "json_schema":  # nested in Chat, flat in Responses
        fmt.update(ft.req(value, "json_schema", key, ft.obj))
    out.setdefault("text", {})["format"] = fmt


# neutral (Chat) field -> (action, Responses field or handler, note). Processed in this order.
ENCODE_FIELDS: ft.FieldTable = {
    "model": ("mapped", "model", "exact; a route or endpoint model overrides it"),
    "messages": ("converted", _enc_messages, "leading system -> instructions; turns -> input items (message, "
                                             "function_call, function_call_output)"),
    "tools": ("converted", _enc_tools, "nested functions -> flat functions (strict false unless the client said); "
                                       "names > 64 refused"),
    "tool_choice": ("converted", _enc_tool_choice, "auto/none/required same; {function:{name}} flattened"),
    "parallel_tool_calls": ("mapped", "parallel_tool_calls", "exact"),
    "max_completion_tokens": ("converted", _enc_max_tokens, "-> max_output_tokens, capped by the endpoint"),
    "max_tokens": ("converted", _enc_max_tokens, "-> max_output_tokens"),
    "temperature": ("mapped", "temperature", "same 0-2 range"),
    "top_p": ("mapped", "top_p", "exact"),
    "stream": ("mapped", "stream", "exact"),
    "stream_options": ("converted", _enc_stream_options, "consumed: include_usage decides the usage chunk"),
    "n": ("converted", _enc_n, "1 is the only answer (the Chat decoder refuses more)"),
    "reasoning_effort": ("converted", _enc_reasoning_effort, "-> reasoning.effort"),
    "verbosity": ("converted", _enc_verbosity, "-> text.verbosity"),
    "response_format": ("converted", _enc_response_format, "-> text.format (json_schema flattened)"),
    "user": ("mapped", "user", "exact (deprecated in both)"),
    "safety_identifier": ("mapped", "safety_identifier", "exact"),
    "prompt_cache_key": ("mapped", "prompt_cache_key", "exact"),
    "prompt_cache_retention": ("mapped", "prompt_cache_retention", "exact"),
    "metadata": ("mapped", "metadata", "exact"),
    "store": ("mapped", "store", "exact"),
    "service_tier": ("mapped", "service_tier", "exact"),
    "top_logprobs": ("mapped", "top_logprobs", "exact"),
    "stop": ("dropped", None, "Responses has no stop sequences"),
    "seed": ("dropped", None, "no Responses counterpart"),
    "logprobs": ("dropped", None, "Responses asks for logprobs through include"),
    "logit_bias": ("dropped", None, "no Responses counterpart"),
    "presence_penalty": ("dropped", None, "no Responses counterpart"),
    "frequency_penalty": ("dropped", None, "no Responses counterpart"),
    "modalities": ("dropped", None, "no Responses counterpart"),
    "audio": ("dropped", None, "no Responses counterpart"),
    "prediction": ("dropped", None, "no Responses counterpart"),
    "web_search_options": ("dropped", None, "a hosted tool in Responses, not an option"),
    "functions": ("dropped", None, "deprecated; no counterpart"),
    "function_call": ("dropped", None, "deprecated; no counterpart"),
}
_ENCODE_CHECKS = {**ft.CHECKS, "parallel_tool_calls": ft.boolean, "user": ft.string, "safety_identifier": ft.string,
                  "prompt_cache_key": ft.string, "prompt_cache_retention": ft.string, "metadata": ft.obj,
                  "store": ft.boolean, "service_tier": ft.string, "top_logprobs": ft.integer}


def encode(conv: Conversation, *, max_tokens: int | None = None, **_: object) -> RequestTranslation:
    """A neutral conversation as an OpenAI Responses request body. ``max_tokens``: the
    endpoint's cap on ``max_output_tokens``, and its value when the client named none (plumbing)."""
    body = ft.check_body(conv.body, "Chat")
    rt = RequestTranslation(body={})
    o = ft.Options(max_tokens_cap=max_tokens)
    out = ft.run(ENCODE_FIELDS, _ENCODE_CHECKS, body, rt, o)
    if "max_output_tokens" not in out and max_tokens is not None:  # the client named no limit: the endpoint's
        out["max_output_tokens"] = max_tokens
        rt.plumbing.append("max_output_tokens")
        rt.capped = Capped(asked=None, cap=max_tokens)
    if "tool_choice" in out and not out.get("tools"):
        rt.dropped.append("tool_choice")
        del out["tool_choice"]
    if "parallel_tool_calls" in out and not out.get("tools"):
        rt.dropped.append("parallel_tool_calls")
        del out["parallel_tool_calls"]
    rt.client_wants_usage = o.include_usage or not out.get("stream")
    rt.body = out
    return rt
