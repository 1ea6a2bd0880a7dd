"""Request translation, OpenAI Responses (Codex CLI) -> OpenAI Chat Completions
(protocols.md C.1, E.1, E.2; clients.md §3).

Sans-IO and built from request.py's helpers: dict in, ``RequestTranslation`` out. Every
top-level field decision lives in ``R2C_FIELDS`` (field -> (action, handler-or-target, note),
action in mapped / converted / dropped / refused); input items, message roles and content
parts have their own tables below. Rules kept throughout (design.md §2):

- drop, never invent: whatever cannot travel is left behind and its JSON path recorded in
  ``dropped``; the only addition is ``stream_options.include_usage`` (recorded as plumbing).
  Item-level bookkeeping keys that Codex puts on every item (``id``, ``status``, its metadata
  passthrough) are recorded once each as ``input[].<key>`` to keep the list readable;
- ``call_id`` travels byte for byte into ``tool_calls[].id`` and ``tool_call_id``;
- history that cannot travel refuses the turn (``kind="refused"``) instead of being dropped,
  since the model would see a broken conversation: custom (freeform) tool calls, tool
  namespaces (the lite shape), built-in tool calls, compaction, stored state
  (``previous_response_id``, ``conversation``). Tools the endpoint cannot offer are only
  dropped: the model simply cannot call them;
- bad input raises ``TranslationError(400, "<json path>: ...")`` and nothing else; the input
  is never mutated (the output may share unchanged leaves, such as tool schemas, by reference).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import TranslationError
from .request import (
    _CHECKS,
    JOIN,
    check_chat_options,
    OPENAI_TOOL_NAME_MAX,
    FieldTable,
    RequestTranslation,
    _a2c_stream,
    _any,
    _arr,
    _bad,
    _bool,
    _choice,
    _data_url,
    _drop_keys,
    _drop_part,
    _extras,
    _finish_model,
    _int,
    _jtype,
    _obj,
    _opt,
    _Opts,
    _pick,
    _req,
    _run,
    _show,
    _str,
)

CHAT_IMAGE_DETAIL = ("auto", "low", "high")  # Chat's image_url.detail values
_TEXT_KEYS = frozenset({"type", "text"})


def _refused(path: str, why: str) -> TranslationError:
    return TranslationError(400, f"{path}: {why}; this turn cannot go to a Chat Completions endpoint", kind="refused")


# ---------------------------------------------------------------------------------------
# content parts (Responses -> Chat); a handler returns a Chat part, or None when dropped
# ---------------------------------------------------------------------------------------

PartHandler = Callable[[RequestTranslation, dict, str], dict | None]


def _text(rt: RequestTranslation, x: dict, xp: str) -> dict:
    text = _req(x, "text", xp, _str)
    _extras(rt, x, _TEXT_KEYS, xp)  # annotations, logprobs
    return {"type": "text", "text": text}


def _image(rt: RequestTranslation, x: dict, xp: str) -> dict | None:
    url = _opt(x, "image_url", xp, _str)
    detail = _opt(x, "detail", xp, _str)
    if url is None:  # a file_id only: nothing a Chat endpoint can fetch
        rt.dropped.append(xp)
        return None
    image: dict = {"url": url}
    known = {"type", "image_url"}
    if detail in CHAT_IMAGE_DETAIL:
        image["detail"] = detail
        known.add("detail")
    _extras(rt, x, frozenset(known), xp)  # file_id, other detail values
    return {"type": "image_url", "image_url": image}


def _is_pdf_data_url(url: str) -> bool:
    try:
        return _data_url(url, "")[0] == "application/pdf"
    except TranslationError:
        return False


def _file(rt: RequestTranslation, x: dict, xp: str) -> dict | None:
    """A PDF as a data: URL -> Chat ``file`` part (Chat takes PDFs inline only); else dropped."""
    file_data = _opt(x, "file_data", xp, _str)
    filename = _opt(x, "filename", xp, _str)
    if file_data is None or not _is_pdf_data_url(file_data):  # file_id, file_url, other media
        rt.dropped.append(xp)
        return None
    file = {"file_data": file_data}
    if filename is not None:
        file["filename"] = filename
    _extras(rt, x, frozenset({"type", "file_data", "filename"}), xp)
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


def _content(rt: RequestTranslation, content: Any, cp: str, table: dict[str, PartHandler]) -> str | list | None:
    """A string as is; parts as one string when only text is left, else Chat parts;
    None when parts were given and none is left."""
    if isinstance(content, str):
        return content
    parts = []
    for k, x in enumerate(_arr(content, cp)):
        xp = f"{cp}[{k}]"
        part = _pick(table, _obj(x, xp).get("type"), f"{xp}.type", "content part type")(rt, x, xp)
        if part is not None:
            parts.append(part)
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

    msgs: list[dict]
    leading: bool = True  # nothing but system text yet: system items join the first message
    assistant: dict | None = None  # the last message, when function_call items may join it
    seen: set[str] = field(default_factory=set)  # input[].<key> summaries already recorded


ItemHandler = Callable[[RequestTranslation, dict, str, _Walk, _Opts], None]


def _item_extras(rt: RequestTranslation, item: dict, known: frozenset[str], st: _Walk) -> None:
    """Item-level keys outside ``known``, recorded once each as ``input[].<key>``."""
    for k in item:
        if k not in known and k not in st.seen:
            st.seen.add(k)
            rt.dropped.append(f"input[].{k}")


_MESSAGE_KEYS = frozenset({"type", "role", "content"})


def _system_message(rt: RequestTranslation, item: dict, p: str, st: _Walk, o: _Opts) -> None:
    content = _content(rt, _req(item, "content", p, _any), f"{p}.content", SYSTEM_PARTS)
    _item_extras(rt, item, _MESSAGE_KEYS, st)
    st.assistant = None
    if not content:
        rt.dropped.append(p)
    elif st.leading and st.msgs:  # one leading system message: local templates want that
        st.msgs[0]["content"] += JOIN + content
    else:
        st.msgs.append({"role": o.system_role, "content": content})
        if not st.leading:
            rt.warnings.append(f"{p}: system message kept in place; strict chat templates reject a system message after the first")


def _user_message(rt: RequestTranslation, item: dict, p: str, st: _Walk, o: _Opts) -> None:
    content = _content(rt, _req(item, "content", p, _any), f"{p}.content", USER_PARTS)
    _item_extras(rt, item, _MESSAGE_KEYS, st)
    st.leading, st.assistant = False, None
    if content is None:
        rt.dropped.append(p)  # nothing of this message can travel
    else:
        st.msgs.append({"role": "user", "content": content})


def _assistant_message(rt: RequestTranslation, item: dict, p: str, st: _Walk, o: _Opts) -> None:
    content = _content(rt, _req(item, "content", p, _any), f"{p}.content", ASSISTANT_PARTS)
    _item_extras(rt, item, _MESSAGE_KEYS, st)  # phase, status, id, ...
    st.leading, st.assistant = False, None
    if content is None:
        rt.dropped.append(p)
        return
    st.assistant = {"role": "assistant", "content": content}
    st.msgs.append(st.assistant)


# Responses message role -> handler
R2C_ROLES: dict[str, ItemHandler] = {
    "system": _system_message,
    "developer": _system_message,
    "user": _user_message,
    "assistant": _assistant_message,
}


def _message(rt: RequestTranslation, item: dict, p: str, st: _Walk, o: _Opts) -> None:
    _pick(R2C_ROLES, item.get("role"), f"{p}.role", "role")(rt, item, p, st, o)


def _function_call(rt: RequestTranslation, item: dict, p: str, st: _Walk, o: _Opts) -> None:
    call = {
        "id": _req(item, "call_id", p, _str),  # byte for byte (design.md rule 2)
        "type": "function",
        "function": {"name": _req(item, "name", p, _str), "arguments": _req(item, "arguments", p, _str)},
    }
    _item_extras(rt, item, frozenset({"type", "call_id", "name", "arguments"}), st)  # id, status, namespace
    st.leading = False
    if st.assistant is None:  # "" rather than null: llama_cpp.server answers null with a 500
        st.assistant = {"role": "assistant", "content": ""}
        st.msgs.append(st.assistant)
    st.assistant.setdefault("tool_calls", []).append(call)


def _function_call_output(rt: RequestTranslation, item: dict, p: str, st: _Walk, o: _Opts) -> None:
    call_id = _req(item, "call_id", p, _str)
    output, op = _req(item, "output", p, _any), f"{p}.output"
    if isinstance(output, str):
        text = output
    else:
        texts = []
        for k, x in enumerate(_arr(output, op)):
            xp = f"{op}[{k}]"
            if _pick(OUTPUT_PARTS, _obj(x, xp).get("type"), f"{xp}.type", "output part type"):
                texts.append(_text(rt, x, xp)["text"])
            else:
                rt.dropped.append(xp)
        text = JOIN.join(texts)
    _item_extras(rt, item, frozenset({"type", "call_id", "output"}), st)
    st.leading, st.assistant = False, None
    st.msgs.append({"role": "tool", "tool_call_id": call_id, "content": text})


def _drop_item(rt: RequestTranslation, item: dict, p: str, st: _Walk, o: _Opts) -> None:
    """Reasoning: its encrypted content is bound to the provider that made it (clients.md §3.4)."""
    rt.dropped.append(p)


_FREEFORM = ("Codex's freeform tools (apply_patch, exec) have no Chat Completions counterpart on local servers, "
             "and dropping the item would break the history the model sees")
_BUILTIN = "a built-in tool item has no Chat Completions counterpart, and dropping it would break the history the model sees"
# Input item types that refuse the turn -> why
R2C_REFUSED_ITEMS: dict[str, str] = {
    "custom_tool_call": _FREEFORM,
    "custom_tool_call_output": _FREEFORM,
    "additional_tools": "tool namespaces (Codex's lite shape) have no Chat Completions counterpart",
    "compaction": "an encrypted compaction summary is readable only by the provider that made it",
    "item_reference": "it refers to an item stored by the provider; a Chat endpoint has no stored items",
    **{t: _BUILTIN for t in (
        "local_shell_call", "local_shell_call_output", "shell_call", "shell_call_output", "apply_patch_call",
        "apply_patch_call_output", "web_search_call", "file_search_call", "computer_call", "computer_call_output",
        "image_generation_call", "code_interpreter_call", "tool_search_call", "tool_search_output", "mcp_call",
        "mcp_list_tools", "mcp_approval_request", "mcp_approval_response")},
}
TOOL_ITEM_SUFFIXES = ("_call", "_output")  # newer tool item types: refused like the listed ones


def _refuse_item(rt: RequestTranslation, item: dict, p: str, st: _Walk, o: _Opts) -> None:
    itype = item["type"]
    name = item.get("name")
    label = f"{itype} item" + (f" {name!r}" if isinstance(name, str) else "")
    raise _refused(p, f"{label}: {R2C_REFUSED_ITEMS.get(itype, _BUILTIN)}")


# Responses input item type -> handler
R2C_ITEMS: dict[str, ItemHandler] = {
    "message": _message,
    "function_call": _function_call,
    "function_call_output": _function_call_output,
    "reasoning": _drop_item,
    **dict.fromkeys(R2C_REFUSED_ITEMS, _refuse_item),
}


def _item_handler(item: dict, p: str) -> ItemHandler:
    itype = item.get("type")
    if itype is None and "role" in item:  # the easy form {role, content} is a message
        return _message
    if isinstance(itype, str) and itype in R2C_ITEMS:
        return R2C_ITEMS[itype]
    if isinstance(itype, str) and itype.endswith(TOOL_ITEM_SUFFIXES):
        return _refuse_item
    raise _bad(f"{p}.type", f"unknown input item type {_show(itype)} (expected message, function_call, "
                            "function_call_output, reasoning or a tool item type)")


# ---------------------------------------------------------------------------------------
# top-level fields
# ---------------------------------------------------------------------------------------


def _instructions(rt: RequestTranslation, key: str, value: Any, out: dict, o: _Opts) -> None:
    if _str(value, key):
        out["messages"] = [{"role": o.system_role, "content": value}]
    else:
        rt.dropped.append(key)


def _input(rt: RequestTranslation, key: str, value: Any, out: dict, o: _Opts) -> None:
    st = _Walk(msgs=out.setdefault("messages", []))
    if isinstance(value, str):
        st.msgs.append({"role": "user", "content": value})
        return
    for i, item in enumerate(_arr(value, key)):
        p = f"{key}[{i}]"
        _item_handler(_obj(item, p), p)(rt, item, p, st, o)


def _tools(rt: RequestTranslation, key: str, value: Any, out: dict, o: _Opts) -> None:
    tools = []
    for i, t in enumerate(_arr(value, key)):
        tp = f"{key}[{i}]"
        if _req(_obj(t, tp), "type", tp, _str) != "function":  # custom, web_search, namespace, mcp, ...
            rt.dropped.append(tp)
            continue
        name = _req(t, "name", tp, _str)
        if len(name) > OPENAI_TOOL_NAME_MAX:
            raise TranslationError(
                400,
                f"{tp}.name: tool name {_show(name)} has {len(name)} characters; Chat Completions accepts at most "
                f"{OPENAI_TOOL_NAME_MAX}, and renaming it would invent a tool",
                kind="refused",
            )
        fn: dict = {"name": name}
        if (desc := _opt(t, "description", tp, _str)) is not None:
            fn["description"] = desc
        if (params := _opt(t, "parameters", tp, _obj)) is not None:
            fn["parameters"] = params
        _extras(rt, t, frozenset({"type", "name", "description", "parameters"}), tp)  # strict, ...
        tools.append({"type": "function", "function": fn})
    if tools:
        out["tools"] = tools
    elif not value:
        rt.dropped.append(key)  # an empty list: OpenAI rejects tools: []


def _tool_choice(rt: RequestTranslation, key: str, value: Any, out: dict, o: _Opts) -> None:
    if isinstance(value, str):
        choice: Any = _choice(value, ("auto", "none", "required"), key, "tool_choice")
    elif (ctype := _req(_obj(value, key), "type", key, _str)) == "function":
        choice = {"type": "function", "function": {"name": _req(value, "name", key, _str)}}
    else:  # allowed_tools, custom, hosted tools: nothing to point at on a Chat endpoint
        rt.dropped.append(key)
        rt.warnings.append(f"tool_choice {ctype!r} has no Chat counterpart here: dropped, the model chooses freely")
        return
    if "tools" not in out:  # Chat rejects tool_choice without tools
        rt.dropped.append(key)
        return
    if isinstance(value, dict):
        _extras(rt, value, frozenset({"type", "name"}), key)
    out[key] = choice


def _parallel_tool_calls(rt: RequestTranslation, key: str, value: Any, out: dict, o: _Opts) -> None:
    _bool(value, key)
    if "tools" in out:
        out[key] = value
    else:
        rt.dropped.append(key)


def _max_output_tokens(rt: RequestTranslation, key: str, value: Any, out: dict, o: _Opts) -> None:
    n = _int(value, key)
    if o.max_tokens_cap is not None and n > o.max_tokens_cap:
        n = o.max_tokens_cap
        rt.converted.append(f"{key} -> {o.max_tokens_field} (capped at {n})")
    out[o.max_tokens_field] = n


def _stored_state(rt: RequestTranslation, key: str, value: Any, out: dict, o: _Opts) -> None:
    raise _refused(key, "it continues state stored by the provider, and a Chat Completions endpoint has none "
                        "(the turn's history would be missing)")


# Responses field -> (action, Chat field or handler, note). Processed in this order.
R2C_FIELDS: FieldTable = {
    "model": ("mapped", "model", "exact; a route or endpoint model overrides it"),
    "previous_response_id": ("refused", _stored_state, "a Chat endpoint has no stored responses"),
    "conversation": ("refused", _stored_state, "a Chat endpoint has no stored conversations"),
    "instructions": ("converted", _instructions, "one leading system/developer message"),
    "input": ("converted", _input, "items -> messages; leading system/developer items join the first message (E.2)"),
    "tools": ("converted", _tools, "flat functions -> nested functions; other tool types dropped; names > 64 refused"),
    "tool_choice": ("converted", _tool_choice, "auto/none/required same; {type:function,name} nested; others dropped"),
    "parallel_tool_calls": ("converted", _parallel_tool_calls, "exact, when tools remain"),
    "max_output_tokens": ("converted", _max_output_tokens, "-> max_completion_tokens or max_tokens (endpoint), capped by the endpoint"),
    "temperature": ("mapped", "temperature", "same 0-2 range"),
    "top_p": ("mapped", "top_p", "exact"),
    "stream": ("converted", _a2c_stream, "+ stream_options.include_usage (plumbing)"),
    "reasoning": ("dropped", _drop_keys, "effort/summary: no faithful counterpart on local servers"),
    "text": ("dropped", _drop_keys, "verbosity/format: no faithful counterpart on local servers"),
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


def responses_to_chat(
    body: dict,
    *,
    model: str | None = None,
    system_role: str = "system",
    max_tokens_field: str = "max_completion_tokens",
    max_tokens_cap: int | None = None,
) -> RequestTranslation:
    """An OpenAI Responses request body (Codex's) as an OpenAI Chat Completions request body."""
    check_chat_options(system_role, max_tokens_field)
    if not isinstance(body, dict):
        raise TranslationError(400, f"Responses request body must be a JSON object, got {_jtype(body)}", kind="invalid_request_error")
    rt = RequestTranslation(body={})
    o = _Opts(system_role=system_role, max_tokens_field=max_tokens_field, max_tokens_cap=max_tokens_cap)
    out = _run(R2C_FIELDS, _CHECKS, body, rt, o)
    if not out.get("messages"):
        raise _bad("input", "required" if body.get("input") is None else "no message is left to send (every item was dropped)")
    rt.body = _finish_model(rt, out, model)
    return rt
