"""OpenAI Responses requests (Codex CLI), decoded: a Responses body as the neutral conversation
(docs/dev/protocols.md C.1, E.1, E.2; docs/dev/clients.md §3); its tool declarations are read by
tool_declarations.py, and its encoder is encode.py.

Sans-IO: dict in, ``Conversation`` out. Every top-level field decision lives in
``DECODE_FIELDS`` (field -> (action, handler-or-target, note), action in mapped / converted /
dropped / refused); input items, message roles and content parts have their own tables. Rules
kept throughout (docs/dev/architecture.md §2):

- drop, never invent: whatever cannot travel is left behind and its JSON path recorded in
  ``dropped``. Item-level bookkeeping keys that Codex puts on every item (``id``,
  ``status``, its metadata passthrough) are recorded once each as ``input[].<key>`` to keep
  the list readable;
- ``call_id`` travels byte for byte into the neutral tool call ids;
- Codex's freeform (``custom``) and namespaced tools travel as a declared two-way encoding
  (tool_declarations.py); their past calls are wrapped the same way;
- history that cannot travel refuses the turn (``Refused``) instead of being dropped, since
  the model would see a broken conversation: built-in tool calls (DECODE_REFUSED_ITEMS),
  compaction, stored state (``previous_response_id``, ``conversation``);
- flag: a tool output Codex sent after a later user message moves back next to its call
  (recorded in ``converted``): every other protocol requires it there;
- bad input raises ``TranslationError(400, "<json path>: ...")`` and nothing else; the input
  is never mutated.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...errors import InvalidRequest, TranslationError
from ...neutral import Conversation
from ...neutral import read_format
from ...neutral import freeform_arguments
from ...protocols import flat_tool_name
from .. import fieldtable as ft
from .common import JOIN, TEXT_KEYS, refused
from .tool_declarations import decode_tools, tool_list

CHAT_IMAGE_DETAIL = ("auto", "low", "high")  # Chat's image_url.detail values
_TEXT_TYPES = ("input_text", "output_text")


def _drop_part(rt: Conversation, x: dict[str, Any], xp: str) -> None:
    rt.dropped.append(xp)



# ---------------------------------------------------------------------------------------
# content parts (Responses -> Chat); a handler returns a Chat part, or None when dropped
# ---------------------------------------------------------------------------------------

PartHandler = Callable[[Conversation, dict[str, Any], str], dict[str, Any] | None]


def _text(rt: Conversation, x: dict[str, Any], xp: str) -> dict[str, Any]:
    text = ft.req(x, "text", xp, ft.string)
    ft.extras(rt, x, TEXT_KEYS, xp)  # annotations, logprobs
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
                and x.keys() <= TEXT_KEYS:
            return t
    if content.__class__ is list and content and all(  # the usual case: text parts alone, nothing left behind
            x.__class__ is dict and x.get("type") in _TEXT_TYPES and x.get("text").__class__ is str
            and x.keys() <= TEXT_KEYS for x in content):
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
        "id": ft.req(item, "call_id", p, ft.string),  # byte for byte (docs/dev/architecture.md rule 2)
        "type": "function",
        "function": {"name": _call_name(rt, item, p, st), "arguments": ft.req(item, "arguments", p, ft.string)},
    }, p)
    _item_extras(rt, item, _FUNCTION_CALL_ITEM_KEYS, st)  # id, status
    _add_call(rt, call, p, st)


def _custom_tool_call(rt: Conversation, item: dict[str, Any], p: str, st: _Walk, o: ft.Options) -> None:
    """A freeform call: the function call of its tool's encoding, arguments {"input": <input>}."""
    call = rt.source({
        "id": ft.req(item, "call_id", p, ft.string),  # byte for byte (docs/dev/architecture.md rule 2)
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
    tool_list(rt, ft.req(item, "tools", p, ft.anything), f"{p}.tools", st.tools)
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
    # gpt-5.5 (classic) Codex's tool_search (execution: client): the model searched Codex's deferred
    # tools, and the tools the search found (tool_search_output.tools) became callable from then on.
    # Only Responses declares tools inside the history: elsewhere they would have to be moved into the
    # request's declared tools (words the client never sent there), and a new search by the target's
    # model could not come back as the tool_search_call Codex runs. Carried as they are to a
    # Responses endpoint (retargeted, passed through).
    **dict.fromkeys(("tool_search_call", "tool_search_output"),
                    "Codex's search of its deferred tools: the tools it found are declared inside the history, "
                    "which only the Responses protocol has (route it to a Responses endpoint, or keep it at "
                    "OpenAI)"),
    **{t: _BUILTIN for t in (
        "local_shell_call", "local_shell_call_output", "shell_call", "shell_call_output", "apply_patch_call",
        "apply_patch_call_output", "file_search_call", "computer_call", "computer_call_output",
        "code_interpreter_call", "mcp_call",
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
    raise refused(p, f"{label}: {DECODE_REFUSED_ITEMS.get(itype, _BUILTIN)}")


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
    raise refused(key, "it continues state stored by the provider, and a Chat Completions endpoint has none "
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


def _text_options(rt: Conversation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    """text.format -> response_format (json_schema's flat keys nested, as Chat has them:
    neutral/output_format.py); verbosity and the rest dropped."""
    for k, v in ft.obj(value, key).items():
        if k != "format" or v is None:
            rt.dropped.append(f"{key}.{k}")
            continue
        fp = f"{key}.format"
        fmt = read_format(v, fp, rt.dropped, flat=True)
        if fmt is None:  # a type this codec does not know: left behind, never guessed
            ft.string(v.get("type"), f"{fp}.type")
            rt.dropped.append(fp)
            continue
        out["response_format"] = fmt.neutral()
        rt.origin["response_format"] = rt.origin["response_format.json_schema"] = fp


# Responses field -> (action, Chat field or handler, note). Processed in this order.
DECODE_FIELDS: ft.FieldTable = {
    "model": ("mapped", "model", "exact; a route or endpoint model overrides it"),
    "previous_response_id": ("refused", _stored_state, "a Chat endpoint has no stored responses"),
    "conversation": ("refused", _stored_state, "a Chat endpoint has no stored conversations"),
    "instructions": ("converted", _instructions, "one leading system/developer message"),
    "input": ("converted", _input, "items -> messages (DECODE_ITEMS); leading system/developer items join the first "
                                   "message (E.2); additional_tools items hoisted into tools"),
    "tools": ("converted", decode_tools, "after the tools of additional_tools items: DECODE_TOOL_TYPES, a row per tool type"),
    "tool_choice": ("converted", _tool_choice, "auto/none/required same; {type:function,name} nested; others dropped"),
    "parallel_tool_calls": ("converted", _parallel_tool_calls, "exact, when tools remain"),
    "max_output_tokens": ("converted", _max_output_tokens, "-> max_completion_tokens"),
    "temperature": ("mapped", "temperature", "same 0-2 range"),
    "top_p": ("mapped", "top_p", "exact"),
    "stream": ("mapped", "stream", "exact"),
    "reasoning": ("converted", _reasoning, "effort -> reasoning_effort (neutral/effort.py); summary dropped"),
    "text": ("converted", _text_options, "format -> response_format: text / json_object as they are, json_schema "
                                         "{name, schema, strict, description} nested under json_schema (OpenAI API "
                                         "reference: Responses text.format, Chat response_format); verbosity dropped"),
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
