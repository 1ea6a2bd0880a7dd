"""Request translation, Anthropic Messages <-> OpenAI Chat Completions (protocols.md E.1, E.2).

Sans-IO: dict in, ``RequestTranslation`` out. Every top-level field decision lives in one
table per direction, ``A2C_FIELDS`` and ``C2A_FIELDS`` (field -> (action, handler-or-target,
note), action in mapped / converted / dropped); content blocks and message roles have their
own tables below. Rules kept throughout (design.md §2):

- drop, never invent: whatever cannot travel is left behind and its JSON path recorded in
  ``dropped``; the only additions are protocol plumbing, recorded in ``plumbing``;
- tool-call ids travel byte for byte; an id Anthropic would reject refuses the turn;
- bad input raises ``TranslationError(400, "<json path>: ...")`` and nothing else, before
  any body exists (never a half-translated body); the input is never mutated.

The translated body is a new dict, but it may share unchanged leaves of the input by
reference (tool schemas): treat both as read-only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import jsonc
from ..errors import TranslationError
from ..protocols.anthropic import TOOL_ID_RE

# Claude Code's first system block; it changes on every request and would defeat a local
# server's prefix cache (pitfalls 25, clients.md §2.3).
BILLING_PREFIX = "x-anthropic-billing-header:"
OPENAI_TOOL_NAME_MAX = 64  # pitfalls 20
OPENAI_MAX_STOP = 4
SYSTEM_ROLES = ("system", "developer")
MAX_TOKENS_FIELDS = ("max_completion_tokens", "max_tokens")
JOIN = "\n\n"  # how text blocks become one string (local servers drop array content)


@dataclass
class RequestTranslation:
    body: dict  # the translated request body
    dropped: list[str] = field(default_factory=list)  # JSON paths (of the input) left behind
    plumbing: list[str] = field(default_factory=list)  # paths (of the output) added as plumbing
    converted: list[str] = field(default_factory=list)  # values converted or capped, with why
    warnings: list[str] = field(default_factory=list)
    # C->A: False only when a streaming Chat client did not ask stream_options.include_usage
    # (the reply encoder then sends no usage chunk); non-streamed Chat replies always carry usage.
    client_wants_usage: bool = True


@dataclass(slots=True)
class _Opts:
    """Endpoint options for the handlers, and what they learn on the way."""

    system_role: str = "system"
    max_tokens_field: str = "max_completion_tokens"
    max_tokens_cap: int | None = None
    include_usage: bool = False  # C->A: stream_options.include_usage


Handler = Callable[[RequestTranslation, str, Any, dict, _Opts], None]
FieldTable = dict[str, tuple[str, Handler | str | None, str]]


# ---------------------------------------------------------------------------------------
# input checks: every failure names the JSON path
# ---------------------------------------------------------------------------------------

_JSON_TYPES = ((bool, "boolean"), (int, "number"), (float, "number"), (str, "string"), (list, "array"), (dict, "object"))


def _jtype(v: Any) -> str:
    if v is None:
        return "null"
    return next((name for t, name in _JSON_TYPES if isinstance(v, t)), type(v).__name__)


def _show(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


def _bad(path: str, msg: str) -> TranslationError:
    return TranslationError(400, f"{path}: {msg}", kind="invalid_request_error")


def _at(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _obj(v: Any, path: str) -> dict:
    if not isinstance(v, dict):
        raise _bad(path, f"expected an object, got {_jtype(v)}")
    return v


def _arr(v: Any, path: str) -> list:
    if not isinstance(v, list):
        raise _bad(path, f"expected an array, got {_jtype(v)}")
    return v


def _str(v: Any, path: str) -> str:
    if not isinstance(v, str):
        raise _bad(path, f"expected a string, got {_jtype(v)}")
    return v


def _bool(v: Any, path: str) -> bool:
    if not isinstance(v, bool):
        raise _bad(path, f"expected a boolean, got {_jtype(v)}")
    return v


def _int(v: Any, path: str) -> int:
    if not isinstance(v, int) or isinstance(v, bool):
        raise _bad(path, f"expected an integer, got {_jtype(v)}")
    return v


def _num(v: Any, path: str) -> int | float:
    if not isinstance(v, int | float) or isinstance(v, bool):
        raise _bad(path, f"expected a number, got {_jtype(v)}")
    return v


def _req(obj: dict, key: str, path: str, check: Callable[[Any, str], Any]) -> Any:
    """``obj[key]``, which must be present (not null) and pass ``check``."""
    v = obj.get(key)
    if v is None:
        raise _bad(_at(path, key), "required")
    return check(v, _at(path, key))


def _opt(obj: dict, key: str, path: str, check: Callable[[Any, str], Any]) -> Any:
    v = obj.get(key)
    return None if v is None else check(v, _at(path, key))


def _any(v: Any, path: str) -> Any:
    return v


def _pick(table: dict, v: Any, path: str, what: str) -> Any:
    """``table[v]`` for a string ``v``; anything else is a 400 naming the known values."""
    if not isinstance(v, str) or v not in table:
        raise _bad(path, f"unknown {what} {_show(v)} (expected one of {', '.join(map(repr, table))})")
    return table[v]


def _choice(v: Any, names: tuple[str, ...], path: str, what: str) -> str:
    """``v`` when it is one of ``names``; anything else is a 400."""
    if not isinstance(v, str) or v not in names:
        raise _bad(path, f"unknown {what} {_show(v)} (expected one of {', '.join(map(repr, names))})")
    return v


def _extras(rt: RequestTranslation, obj: dict, known: frozenset[str], path: str) -> None:
    """Record every key of ``obj`` outside ``known`` as dropped."""
    for k in obj:
        if k not in known:
            rt.dropped.append(_at(path, k))


def _anthropic_id(v: Any, path: str) -> str:
    """A tool-call id Anthropic accepts, untouched; any other id refuses the turn (design.md rule 2)."""
    _str(v, path)
    if not TOOL_ID_RE.fullmatch(v):
        raise TranslationError(
            400,
            f"{path}: tool call id {_show(v)} does not match ^[a-zA-Z0-9_-]+$, which Anthropic requires; "
            "ids are never rewritten, so this turn cannot go to an Anthropic endpoint",
            kind="refused",
        )
    return v


def _data_url(url: str, path: str) -> tuple[str, str]:
    """``data:<media type>[;params];base64,<data>`` -> (media type, data)."""
    head, comma, data = url.partition(",")
    if not (comma and head.startswith("data:") and head.endswith(";base64")):
        raise _bad(path, "expected a URL or a base64 data: URL")
    media_type = head[5:-7].split(";", 1)[0]
    if not media_type:
        raise _bad(path, "data: URL without a media type")
    return media_type, data


def _check_body(body: Any, who: str) -> dict:
    if not isinstance(body, dict):
        raise TranslationError(400, f"{who} request body must be a JSON object, got {_jtype(body)}", kind="invalid_request_error")
    if body.get("messages") is None:
        raise _bad("messages", "required")
    return body


def _run(table: FieldTable, checks: dict[str, Callable[[Any, str], Any]], body: dict, rt: RequestTranslation, o: _Opts) -> dict:
    """Apply a field table: known fields in table order (later handlers may read what earlier
    ones wrote: tool_choice needs tools), then every unknown field recorded as dropped."""
    out: dict = {}
    for key, (action, how, _note) in table.items():
        value = body.get(key)
        if value is None:  # absent or null: nothing to carry
            continue
        if action == "mapped":
            out[how] = checks[key](value, key)  # type: ignore[index]
        elif how is None:  # dropped, recorded by name
            rt.dropped.append(key)
        else:  # converted, or dropped with its own record (metadata.user_id)
            how(rt, key, value, out, o)  # type: ignore[operator]
    rt.dropped.extend(k for k in body if k not in table)
    return out


def _finish_model(rt: RequestTranslation, out: dict, model: str | None) -> dict:
    if model is not None:
        asked = out.get("model")
        if asked != model:
            rt.converted.append(f"model -> {model!r} (route/endpoint model; client asked {asked!r})")
            out = {"model": model, **{k: v for k, v in out.items() if k != "model"}}
    if "model" not in out:
        raise _bad("model", "required")
    return out


def _drop_keys(rt: RequestTranslation, key: str, value: Any, out: dict, o: _Opts) -> None:
    """A dropped object recorded key by key (``metadata.user_id``)."""
    if isinstance(value, dict) and value:
        rt.dropped.extend(f"{key}.{k}" for k in value)
    else:
        rt.dropped.append(key)


# ---------------------------------------------------------------------------------------
# Anthropic -> Chat
# ---------------------------------------------------------------------------------------

_TEXT_KEYS = frozenset({"type", "text"})
_SOURCE_KEYS = {  # keys of each Anthropic source type
    "base64": frozenset({"type", "media_type", "data"}),
    "url": frozenset({"type", "url"}),
    "text": frozenset({"type", "media_type", "data"}),
    "content": frozenset({"type", "content"}),
}


def _a2c_text_of(rt: RequestTranslation, value: Any, path: str, *, billing: bool = False) -> str:
    """A system string or text-block list as one string (blocks joined); with ``billing``
    the Claude Code billing-header block is dropped and recorded."""
    if isinstance(value, str):
        return value
    texts = []
    for i, b in enumerate(_arr(value, path)):
        bp = f"{path}[{i}]"
        _obj(b, bp)
        _choice(b.get("type"), ("text",), f"{bp}.type", "block type")
        text = _req(b, "text", bp, _str)
        if billing and text.startswith(BILLING_PREFIX):
            rt.dropped.append(bp)
            continue
        _extras(rt, b, _TEXT_KEYS, bp)
        texts.append(text)
    return JOIN.join(texts)


def _a2c_system(rt: RequestTranslation, key: str, value: Any, out: dict, o: _Opts) -> None:
    n_dropped = len(rt.dropped)
    text = _a2c_text_of(rt, value, "system", billing=True)
    if text:
        out["messages"] = [{"role": o.system_role, "content": text}]
    elif len(rt.dropped) == n_dropped:  # empty, and not already explained block by block
        rt.dropped.append("system")


def _a2c_text(rt: RequestTranslation, b: dict, bp: str, parts: list, extra: list) -> None:
    parts.append({"type": "text", "text": _req(b, "text", bp, _str)})
    _extras(rt, b, _TEXT_KEYS, bp)


def _source(b: dict, bp: str) -> tuple[dict, str, Any]:
    src = _req(b, "source", bp, _obj)
    return src, f"{bp}.source", src.get("type")


def _a2c_image(rt: RequestTranslation, b: dict, bp: str, parts: list, extra: list) -> None:
    src, sp, stype = _source(b, bp)
    kind = _choice(stype, ("base64", "url", "file"), f"{sp}.type", "image source type")
    if kind == "file":  # a file_id has no Chat counterpart
        rt.dropped.append(bp)
        return
    if kind == "base64":
        url = f"data:{_req(src, 'media_type', sp, _str)};base64,{_req(src, 'data', sp, _str)}"
    else:
        url = _req(src, "url", sp, _str)
    _extras(rt, b, frozenset({"type", "source"}), bp)
    _extras(rt, src, _SOURCE_KEYS[kind], sp)
    parts.append({"type": "image_url", "image_url": {"url": url}})


def _a2c_document(rt: RequestTranslation, b: dict, bp: str, parts: list, extra: list) -> None:
    src, sp, stype = _source(b, bp)
    _choice(stype, ("base64", "text", "content", "url", "file"), f"{sp}.type", "document source type")
    title = _opt(b, "title", bp, _str)
    known = frozenset({"type", "source"})  # a text part has no title
    if stype in ("url", "file"):  # Chat takes PDFs only inline (no URL form, no file ids here)
        rt.dropped.append(bp)
        return
    if stype == "base64":
        file = {"file_data": f"data:{_req(src, 'media_type', sp, _str)};base64,{_req(src, 'data', sp, _str)}"}
        if title is not None:  # the only filename is the client's own title: never a made-up one
            file["filename"] = title
        part: dict = {"type": "file", "file": file}
        known |= {"title"}
    elif stype == "text":
        part = {"type": "text", "text": _req(src, "data", sp, _str)}
    else:  # "content": a string, or text/image blocks
        content, cp = _req(src, "content", sp, _any), f"{sp}.content"
        if not isinstance(content, str):
            kinds = [_choice(_obj(x, f"{cp}[{k}]").get("type"), ("text", "image"), f"{cp}[{k}].type", "block type")
                     for k, x in enumerate(_arr(content, cp))]
            if "image" in kinds:  # no text-part form for it
                rt.dropped.append(bp)
                return
            content = _a2c_text_of(rt, content, cp)
        part = {"type": "text", "text": content}
    _extras(rt, b, known, bp)
    _extras(rt, src, _SOURCE_KEYS[stype], sp)
    parts.append(part)


_TOOL_RESULT_PARTS = {"text": True, "image": False, "document": False, "search_result": False}


def _a2c_tool_result(rt: RequestTranslation, b: dict, bp: str, parts: list, tool_msgs: list) -> None:
    tool_id = _req(b, "tool_use_id", bp, _str)  # pitfalls 10: no id, no tool message
    content, cp = b.get("content"), f"{bp}.content"
    if content is None or isinstance(content, str):
        text = content or ""
    else:  # Chat tool messages are text only: images and documents are left behind
        texts = []
        for k, x in enumerate(_arr(content, cp)):
            xp = f"{cp}[{k}]"
            if _pick(_TOOL_RESULT_PARTS, _obj(x, xp).get("type"), f"{xp}.type", "tool_result block type"):
                texts.append(_req(x, "text", xp, _str))
                _extras(rt, x, _TEXT_KEYS, xp)
            else:
                rt.dropped.append(xp)
        text = JOIN.join(texts)
    _extras(rt, b, frozenset({"type", "tool_use_id", "content"}), bp)  # is_error, cache_control
    tool_msgs.append({"role": "tool", "tool_call_id": tool_id, "content": text})


def _a2c_tool_use(rt: RequestTranslation, b: dict, bp: str, parts: list, calls: list) -> None:
    tool_input = _req(b, "input", bp, _obj)
    try:
        arguments = jsonc.dumps(tool_input)
    except (TypeError, ValueError) as e:
        raise _bad(f"{bp}.input", f"cannot be serialised as JSON ({e})") from None
    calls.append({
        "id": _req(b, "id", bp, _str),
        "type": "function",
        "function": {"name": _req(b, "name", bp, _str), "arguments": arguments},
    })
    _extras(rt, b, frozenset({"type", "id", "name", "input"}), bp)


def _drop_block(rt: RequestTranslation, b: dict, bp: str, parts: list, extra: list) -> None:
    rt.dropped.append(bp)


BlockHandler = Callable[[RequestTranslation, dict, str, list, list], None]

# Anthropic content blocks by role. Thinking never leaves for a non-Anthropic endpoint
# (its signature is bound to the model that made it); server-tool blocks have no Chat form.
A2C_USER_BLOCKS: dict[str, BlockHandler] = {
    "text": _a2c_text,
    "image": _a2c_image,
    "document": _a2c_document,
    "tool_result": _a2c_tool_result,
    "search_result": _drop_block,
    "thinking": _drop_block,
    "redacted_thinking": _drop_block,
}
A2C_ASSISTANT_BLOCKS: dict[str, BlockHandler] = {
    "text": _a2c_text,
    "tool_use": _a2c_tool_use,
    "thinking": _drop_block,
    "redacted_thinking": _drop_block,
    "server_tool_use": _drop_block,
    "mcp_tool_use": _drop_block,
    "mcp_tool_result": _drop_block,
    "container_upload": _drop_block,
    "web_search_tool_result": _drop_block,
    "web_fetch_tool_result": _drop_block,
    "code_execution_tool_result": _drop_block,
    "bash_code_execution_tool_result": _drop_block,
    "text_editor_code_execution_tool_result": _drop_block,
    "tool_search_tool_result": _drop_block,
}
SERVER_BLOCK_SUFFIXES = ("_tool_use", "_tool_result")  # server-tool block types not listed above


def _a2c_blocks(rt: RequestTranslation, content: Any, p: str, table: dict[str, BlockHandler]) -> tuple[list, list]:
    parts: list = []
    extra: list = []
    for j, b in enumerate(_arr(content, f"{p}.content")):
        bp = f"{p}.content[{j}]"
        btype = _obj(b, bp).get("type")
        if table is A2C_ASSISTANT_BLOCKS and isinstance(btype, str) and btype.endswith(SERVER_BLOCK_SUFFIXES):
            handler: BlockHandler = table.get(btype, _drop_block)  # newer server-tool blocks: dropped too
        else:
            handler = _pick(table, btype, f"{bp}.type", "content block type")
        handler(rt, b, bp, parts, extra)
    return parts, extra


def _a2c_user(rt: RequestTranslation, content: Any, p: str, msgs: list, o: _Opts) -> None:
    if isinstance(content, str):
        msgs.append({"role": "user", "content": content})
        return
    parts, tool_msgs = _a2c_blocks(rt, content, p, A2C_USER_BLOCKS)
    msgs.extend(tool_msgs)  # tool messages first: they must follow the assistant's tool_calls
    if parts:
        texts = [x["text"] for x in parts if x["type"] == "text"]
        msgs.append({"role": "user", "content": JOIN.join(texts) if len(texts) == len(parts) else parts})
    elif not tool_msgs:
        rt.dropped.append(p)  # nothing of this message can travel


def _a2c_assistant(rt: RequestTranslation, content: Any, p: str, msgs: list, o: _Opts) -> None:
    if isinstance(content, str):
        msgs.append({"role": "assistant", "content": content})
        return
    parts, calls = _a2c_blocks(rt, content, p, A2C_ASSISTANT_BLOCKS)
    # "" rather than null when there is no text: llama_cpp.server answers null with a 500
    msg: dict = {"role": "assistant", "content": JOIN.join(x["text"] for x in parts)}
    if calls:
        msg["tool_calls"] = calls
    msgs.append(msg)


def _a2c_system_message(rt: RequestTranslation, content: Any, p: str, msgs: list, o: _Opts) -> None:
    text = _a2c_text_of(rt, content, f"{p}.content")
    if not text:
        rt.dropped.append(p)
        return
    msgs.append({"role": o.system_role, "content": text})
    rt.warnings.append(f"{p}: system message kept in place; strict chat templates reject a system message after the first")


A2C_ROLES = {"user": _a2c_user, "assistant": _a2c_assistant, "system": _a2c_system_message}


def _a2c_messages(rt: RequestTranslation, key: str, value: Any, out: dict, o: _Opts) -> None:
    msgs = out.setdefault("messages", [])
    for i, m in enumerate(_arr(value, "messages")):
        p = f"messages[{i}]"
        _obj(m, p)
        handler = _pick(A2C_ROLES, m.get("role"), f"{p}.role", "role")
        content = m.get("content")
        if content is None:
            raise _bad(f"{p}.content", "required")
        _extras(rt, m, frozenset({"role", "content"}), p)
        handler(rt, content, p, msgs, o)


_A2C_TOOL_KEYS = frozenset({"type", "name", "description", "input_schema"})


def _a2c_tools(rt: RequestTranslation, key: str, value: Any, out: dict, o: _Opts) -> None:
    tools = []
    for i, t in enumerate(_arr(value, "tools")):
        tp = f"tools[{i}]"
        ttype = _obj(t, tp).get("type")
        if ttype not in (None, "custom"):  # server tools (web_search_20250305, bash_...)
            _str(ttype, f"{tp}.type")
            rt.dropped.append(tp)
            continue
        name = _req(t, "name", tp, _str)
        if len(name) > OPENAI_TOOL_NAME_MAX:
            raise TranslationError(
                400,
                f"{tp}.name: tool name {_show(name)} has {len(name)} characters; OpenAI accepts at most "
                f"{OPENAI_TOOL_NAME_MAX}, and renaming it would invent a tool",
                kind="refused",
            )
        fn: dict = {"name": name}
        if (desc := _opt(t, "description", tp, _str)) is not None:
            fn["description"] = desc
        fn["parameters"] = _req(t, "input_schema", tp, _obj)
        _extras(rt, t, _A2C_TOOL_KEYS, tp)  # cache_control, strict, defer_loading, ...
        tools.append({"type": "function", "function": fn})
    if tools:
        out["tools"] = tools
    elif not value:
        rt.dropped.append("tools")  # an empty list: OpenAI rejects tools: []


# Anthropic tool_choice.type -> Chat tool_choice (None: the named form)
A2C_TOOL_CHOICE: dict[str, str | None] = {"auto": "auto", "any": "required", "none": "none", "tool": None}


def _a2c_tool_choice(rt: RequestTranslation, key: str, value: Any, out: dict, o: _Opts) -> None:
    _obj(value, key)
    ttype = value.get("type")
    choice: Any = _pick(A2C_TOOL_CHOICE, ttype, "tool_choice.type", "tool_choice type")
    known = {"type", "disable_parallel_tool_use"}
    if choice is None:
        choice = {"type": "function", "function": {"name": _req(value, "name", key, _str)}}
        known.add("name")
    disable = _opt(value, "disable_parallel_tool_use", key, _bool)
    if "tools" not in out:  # Chat rejects tool_choice (and parallel_tool_calls) without tools
        rt.dropped.append(key)
        return
    _extras(rt, value, frozenset(known), key)
    out["tool_choice"] = choice
    if disable is not None:
        out["parallel_tool_calls"] = not disable


def _a2c_max_tokens(rt: RequestTranslation, key: str, value: Any, out: dict, o: _Opts) -> None:
    n = _int(value, key)
    if o.max_tokens_cap is not None and n > o.max_tokens_cap:
        n = o.max_tokens_cap
        rt.converted.append(f"max_tokens -> {o.max_tokens_field} (capped at {n})")
    out[o.max_tokens_field] = n


def _a2c_stop(rt: RequestTranslation, key: str, value: Any, out: dict, o: _Opts) -> None:
    seqs = _arr(value, key)
    for i, s in enumerate(seqs):
        _str(s, f"{key}[{i}]")
    if not seqs:
        rt.dropped.append(key)
        return
    out["stop"] = seqs[:OPENAI_MAX_STOP]
    rt.dropped.extend(f"{key}[{i}]" for i in range(OPENAI_MAX_STOP, len(seqs)))


def _a2c_stream(rt: RequestTranslation, key: str, value: Any, out: dict, o: _Opts) -> None:
    out["stream"] = _bool(value, key)
    if value:  # without it an OpenAI upstream streams no usage at all (pitfalls 13)
        out["stream_options"] = {"include_usage": True}
        rt.plumbing.append("stream_options.include_usage")


_CHECKS: dict[str, Callable[[Any, str], Any]] = {"model": _str, "temperature": _num, "top_p": _num, "stream": _bool}

# Anthropic field -> (action, Chat field or handler, note). Processed in this order.
A2C_FIELDS: FieldTable = {
    "model": ("mapped", "model", "exact; a route or endpoint model overrides it"),
    "system": ("converted", _a2c_system, "one leading system/developer message; blocks joined; billing-header block dropped"),
    "messages": ("converted", _a2c_messages, "content blocks -> Chat messages (E.2)"),
    "tools": ("converted", _a2c_tools, "custom tools -> functions; server tools dropped; names > 64 refused"),
    "tool_choice": ("converted", _a2c_tool_choice, "auto/any/none/tool -> auto/required/none/function; disable_parallel_tool_use -> parallel_tool_calls"),
    "max_tokens": ("converted", _a2c_max_tokens, "-> max_completion_tokens or max_tokens (endpoint), capped by the endpoint"),
    "temperature": ("mapped", "temperature", "Anthropic's 0-1 fits Chat's 0-2"),
    "top_p": ("mapped", "top_p", "exact"),
    "stop_sequences": ("converted", _a2c_stop, "-> stop; Chat takes at most 4"),
    "stream": ("converted", _a2c_stream, "+ stream_options.include_usage (plumbing)"),
    "top_k": ("dropped", None, "no Chat counterpart"),
    "thinking": ("dropped", None, "no faithful Chat counterpart"),
    "metadata": ("dropped", _drop_keys, "user_id is opaque to Chat"),
    "service_tier": ("dropped", None, "Anthropic-only"),
    "context_management": ("dropped", None, "Anthropic beta"),
    "output_config": ("dropped", None, "effort/format have no exact Chat counterpart"),
    "container": ("dropped", None, "Anthropic-only"),
    "cache_control": ("dropped", None, "prompt caching is Anthropic's"),
    "inference_geo": ("dropped", None, "Anthropic-only"),
    "speed": ("dropped", None, "Anthropic-only"),
    "diagnostics": ("dropped", None, "Anthropic-only"),
    "mcp_servers": ("dropped", None, "Anthropic beta"),
}


def check_chat_options(system_role: str, max_tokens_field: str) -> None:
    """Endpoint settings for a Chat target; a wrong one is a configuration mistake (ValueError)."""
    if system_role not in SYSTEM_ROLES:
        raise ValueError(f"system_role must be one of {SYSTEM_ROLES}, not {system_role!r}")
    if max_tokens_field not in MAX_TOKENS_FIELDS:
        raise ValueError(f"max_tokens_field must be one of {MAX_TOKENS_FIELDS}, not {max_tokens_field!r}")


def anthropic_to_chat(
    body: dict,
    *,
    model: str | None = None,
    system_role: str = "system",
    max_tokens_field: str = "max_completion_tokens",
    max_tokens_cap: int | None = None,
) -> RequestTranslation:
    """An Anthropic Messages request body as an OpenAI Chat Completions request body."""
    check_chat_options(system_role, max_tokens_field)
    _check_body(body, "Anthropic")
    rt = RequestTranslation(body={})
    o = _Opts(system_role=system_role, max_tokens_field=max_tokens_field, max_tokens_cap=max_tokens_cap)
    out = _run(A2C_FIELDS, _CHECKS, body, rt, o)
    rt.body = _finish_model(rt, out, model)
    return rt


# ---------------------------------------------------------------------------------------
# Chat -> Anthropic
# ---------------------------------------------------------------------------------------


def _c2a_texts(rt: RequestTranslation, content: Any, path: str) -> list[str]:
    """The non-empty texts of a string or text-part content (empty parts dropped, recorded)."""
    if isinstance(content, str):
        return [content] if content else []
    texts = []
    for k, x in enumerate(_arr(content, path)):
        xp = f"{path}[{k}]"
        _choice(_obj(x, xp).get("type"), ("text",), f"{xp}.type", "content part type")
        text = _req(x, "text", xp, _str)
        _extras(rt, x, _TEXT_KEYS, xp)
        if text:
            texts.append(text)
        else:
            rt.dropped.append(xp)
    return texts


def _c2a_text_part(rt: RequestTranslation, x: dict, xp: str) -> dict | None:
    text = _req(x, "text", xp, _str)
    _extras(rt, x, _TEXT_KEYS, xp)
    if not text:  # Anthropic rejects empty text blocks
        rt.dropped.append(xp)
        return None
    return {"type": "text", "text": text}


def _c2a_image(rt: RequestTranslation, x: dict, xp: str) -> dict:
    ip = f"{xp}.image_url"
    image = _req(x, "image_url", xp, _obj)
    url = _req(image, "url", ip, _str)
    if url.startswith("data:"):
        media_type, data = _data_url(url, f"{ip}.url")
        source = {"type": "base64", "media_type": media_type, "data": data}
    else:
        source = {"type": "url", "url": url}
    _extras(rt, x, frozenset({"type", "image_url"}), xp)
    _extras(rt, image, frozenset({"url"}), ip)  # detail
    return {"type": "image", "source": source}


def _c2a_file(rt: RequestTranslation, x: dict, xp: str) -> dict | None:
    fp = f"{xp}.file"
    file = _req(x, "file", xp, _obj)
    file_data = _opt(file, "file_data", fp, _str)
    title = _opt(file, "filename", fp, _str)
    _extras(rt, x, frozenset({"type", "file"}), xp)
    if file_data is None:  # a file_id only: nothing Anthropic can read
        rt.dropped.append(xp)
        return None
    media_type, data = _data_url(file_data, f"{fp}.file_data")
    doc: dict = {"type": "document", "source": {"type": "base64", "media_type": media_type, "data": data}}
    if title is not None:
        doc["title"] = title
    _extras(rt, file, frozenset({"file_data", "filename"}), fp)
    return doc


def _drop_part(rt: RequestTranslation, x: dict, xp: str) -> None:
    rt.dropped.append(xp)


# Chat user content parts -> Anthropic blocks (None: dropped)
C2A_USER_PARTS: dict[str, Callable[[RequestTranslation, dict, str], dict | None]] = {
    "text": _c2a_text_part,
    "image_url": _c2a_image,
    "file": _c2a_file,
    "input_audio": _drop_part,
}


def _c2a_tool_call(rt: RequestTranslation, tc: Any, tp: str) -> dict:
    _obj(tc, tp)
    _choice(tc.get("type", "function"), ("function",), f"{tp}.type", "tool call type")
    tool_id = _anthropic_id(_req(tc, "id", tp, _str), f"{tp}.id")
    fp = f"{tp}.function"
    fn = _req(tc, "function", tp, _obj)
    name = _req(fn, "name", fp, _str)
    arguments = _opt(fn, "arguments", fp, _str) or ""
    try:
        tool_input = jsonc.loads(arguments) if arguments else {}  # "" means no arguments
    except jsonc.JSONDecodeError:
        raise _bad(f"{fp}.arguments", f"not valid JSON: {_show(arguments)}") from None
    if not isinstance(tool_input, dict):
        raise _bad(f"{fp}.arguments", f"must encode a JSON object, got {_jtype(tool_input)}")
    _extras(rt, tc, frozenset({"id", "type", "function"}), tp)
    _extras(rt, fn, frozenset({"name", "arguments"}), fp)
    return {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}


@dataclass(slots=True)
class _Turns:
    """State of the Chat -> Anthropic message walk."""

    system: list[str] = field(default_factory=list)
    msgs: list[dict] = field(default_factory=list)
    results: list[dict] = field(default_factory=list)  # tool_result blocks waiting for a user turn
    leading: bool = True

    def flush(self) -> None:
        if self.results:
            self.msgs.append({"role": "user", "content": self.results})
            self.results = []


def _c2a_system(rt: RequestTranslation, m: dict, p: str, st: _Turns) -> None:
    text = JOIN.join(_c2a_texts(rt, _req(m, "content", p, _any), f"{p}.content"))
    _extras(rt, m, frozenset({"role", "content"}), p)  # name
    if not text:
        rt.dropped.append(p)
    elif st.leading:
        st.system.append(text)
    else:
        st.flush()
        st.msgs.append({"role": "system", "content": text})
        rt.warnings.append(f"{p}: system message kept in place (needs an Anthropic API that accepts system messages inside messages)")


def _c2a_user(rt: RequestTranslation, m: dict, p: str, st: _Turns) -> None:
    st.leading = False
    content = _req(m, "content", p, _any)
    _extras(rt, m, frozenset({"role", "content"}), p)  # name
    if isinstance(content, str):
        blocks = [{"type": "text", "text": content}] if content else []
    else:
        blocks = []
        for k, x in enumerate(_arr(content, f"{p}.content")):
            xp = f"{p}.content[{k}]"
            block = _pick(C2A_USER_PARTS, _obj(x, xp).get("type"), f"{xp}.type", "content part type")(rt, x, xp)
            if block is not None:
                blocks.append(block)
    if not blocks:
        rt.dropped.append(p)  # Anthropic rejects empty messages
    if st.results:  # a run of tool messages and this user message make ONE user turn
        st.results.extend(blocks)
        st.flush()
    elif blocks:
        st.msgs.append({"role": "user", "content": content if isinstance(content, str) else blocks})


def _c2a_assistant(rt: RequestTranslation, m: dict, p: str, st: _Turns) -> None:
    st.leading = False
    st.flush()
    content, cp = m.get("content"), f"{p}.content"
    blocks: list[dict] = []
    if isinstance(content, str) or content is None:
        if content:
            blocks.append({"type": "text", "text": content})
    else:
        for k, x in enumerate(_arr(content, cp)):
            xp = f"{cp}[{k}]"
            kind = _choice(_obj(x, xp).get("type"), ("text", "refusal"), f"{xp}.type", "content part type")
            text = _req(x, kind, xp, _str)
            _extras(rt, x, frozenset({"type", kind}), xp)
            if not text:
                rt.dropped.append(xp)
                continue
            blocks.append({"type": "text", "text": text})
            if kind == "refusal":
                rt.converted.append(f"{xp} -> text block (refusal)")
    if refusal := _opt(m, "refusal", p, _str):
        blocks.append({"type": "text", "text": refusal})
        rt.converted.append(f"{p}.refusal -> text block")
    calls = _opt(m, "tool_calls", p, _arr) or []
    blocks.extend(_c2a_tool_call(rt, tc, f"{p}.tool_calls[{k}]") for k, tc in enumerate(calls))
    _extras(rt, m, frozenset({"role", "content", "tool_calls", "refusal"}), p)  # name, audio, ...
    if not blocks:
        rt.dropped.append(p)  # Anthropic rejects empty messages
    elif isinstance(content, str) and content and not calls and not refusal:  # plain text stays a string
        st.msgs.append({"role": "assistant", "content": content})
    else:
        st.msgs.append({"role": "assistant", "content": blocks})


def _c2a_tool(rt: RequestTranslation, m: dict, p: str, st: _Turns) -> None:
    st.leading = False
    tool_id = _anthropic_id(_req(m, "tool_call_id", p, _str), f"{p}.tool_call_id")  # pitfalls 10
    content = _req(m, "content", p, _any)
    texts = _c2a_texts(rt, content, f"{p}.content")
    block: dict = {"type": "tool_result", "tool_use_id": tool_id}
    if not texts:
        rt.dropped.append(f"{p}.content")  # empty: Anthropic takes a tool_result without content
    elif isinstance(content, str):
        block["content"] = content
    else:
        block["content"] = [{"type": "text", "text": t} for t in texts]
    _extras(rt, m, frozenset({"role", "tool_call_id", "content"}), p)
    st.results.append(block)


C2A_ROLES = {"system": _c2a_system, "developer": _c2a_system, "user": _c2a_user, "assistant": _c2a_assistant, "tool": _c2a_tool}


def _c2a_messages(rt: RequestTranslation, key: str, value: Any, out: dict, o: _Opts) -> None:
    st = _Turns()
    for i, m in enumerate(_arr(value, key)):
        p = f"messages[{i}]"
        _pick(C2A_ROLES, _obj(m, p).get("role"), f"{p}.role", "role")(rt, m, p, st)
    st.flush()
    out["messages"] = st.msgs
    if st.system:
        out["system"] = JOIN.join(st.system)


def _c2a_tools(rt: RequestTranslation, key: str, value: Any, out: dict, o: _Opts) -> None:
    tools = []
    for i, t in enumerate(_arr(value, key)):
        tp = f"tools[{i}]"
        ttype = _choice(_obj(t, tp).get("type"), ("function", "custom"), f"{tp}.type", "tool type")
        if ttype == "custom":  # free-form grammar tools have no Anthropic counterpart
            rt.dropped.append(tp)
            continue
        fp = f"{tp}.function"
        fn = _req(t, "function", tp, _obj)
        tool: dict = {"name": _req(fn, "name", fp, _str)}
        if (desc := _opt(fn, "description", fp, _str)) is not None:
            tool["description"] = desc
        if (params := _opt(fn, "parameters", fp, _obj)) is not None:
            tool["input_schema"] = params
        else:  # Chat: no parameters = no arguments; Anthropic requires a schema saying so
            tool["input_schema"] = {"type": "object"}
            rt.plumbing.append(f"tools[{len(tools)}].input_schema")
        _extras(rt, t, frozenset({"type", "function"}), tp)
        _extras(rt, fn, frozenset({"name", "description", "parameters"}), fp)  # strict
        tools.append(tool)
    out["tools"] = tools


# Chat string tool_choice -> Anthropic tool_choice.type
C2A_TOOL_CHOICE = {"auto": "auto", "required": "any", "none": "none"}
_C2A_TOOL_CHOICE_OBJECTS = {"function": True, "allowed_tools": False, "custom": False}


def _c2a_tool_choice(rt: RequestTranslation, key: str, value: Any, out: dict, o: _Opts) -> None:
    if isinstance(value, str):
        choice = {"type": _pick(C2A_TOOL_CHOICE, value, key, "tool_choice")}
    elif not _pick(_C2A_TOOL_CHOICE_OBJECTS, _obj(value, key).get("type"), f"{key}.type", "tool_choice type"):
        rt.dropped.append(key)  # allowed_tools / custom: no Anthropic counterpart
        rt.warnings.append(f"tool_choice {value['type']!r} has no Anthropic counterpart: dropped")
        return
    else:
        fn = _req(value, "function", key, _obj)
        choice = {"type": "tool", "name": _req(fn, "name", f"{key}.function", _str)}
        _extras(rt, value, frozenset({"type", "function"}), key)
        _extras(rt, fn, frozenset({"name"}), f"{key}.function")
    if not out.get("tools"):  # Anthropic takes tool_choice only with tools
        rt.dropped.append(key)
        return
    out["tool_choice"] = choice


def _c2a_parallel(rt: RequestTranslation, key: str, value: Any, out: dict, o: _Opts) -> None:
    _bool(value, key)
    choice = out.get("tool_choice")
    if not out.get("tools") or (choice and choice["type"] == "none") or (choice is None and value):
        rt.dropped.append(key)  # nothing to ride on, or Anthropic's default already
        return
    if choice is None:  # disable_parallel_tool_use needs a tool_choice object
        choice = out["tool_choice"] = {"type": "auto"}
        rt.plumbing.append("tool_choice")
    choice["disable_parallel_tool_use"] = not value


def _c2a_max_tokens(rt: RequestTranslation, key: str, value: Any, out: dict, o: _Opts) -> None:
    n = _int(value, key)
    if "max_tokens" in out:  # max_completion_tokens came first and wins
        rt.dropped.append(key)
    else:
        out["max_tokens"] = n


def _c2a_temperature(rt: RequestTranslation, key: str, value: Any, out: dict, o: _Opts) -> None:
    if _num(value, key) > 1:  # Anthropic's range is 0-1: drop, never clamp
        rt.dropped.append(key)
        rt.warnings.append(f"temperature {value} is above Anthropic's maximum of 1: dropped, not clamped")
    else:
        out["temperature"] = value


def _c2a_stop(rt: RequestTranslation, key: str, value: Any, out: dict, o: _Opts) -> None:
    seqs = [value] if isinstance(value, str) else _arr(value, key)
    for i, s in enumerate(seqs):
        _str(s, f"{key}[{i}]")
    if seqs:
        out["stop_sequences"] = list(seqs)
    else:
        rt.dropped.append(key)


def _c2a_stream_options(rt: RequestTranslation, key: str, value: Any, out: dict, o: _Opts) -> None:
    """Consumed here: it tells the reply encoder whether the client wants a usage chunk."""
    o.include_usage = bool(_opt(_obj(value, key), "include_usage", key, _bool))
    _extras(rt, value, frozenset({"include_usage"}), key)


def _c2a_n(rt: RequestTranslation, key: str, value: Any, out: dict, o: _Opts) -> None:
    if _int(value, key) != 1:
        raise _bad(key, f"{value} choices requested; Anthropic returns exactly one")
    rt.dropped.append(key)


# Chat field -> (action, Anthropic field or handler, note). Processed in this order.
C2A_FIELDS: FieldTable = {
    "model": ("mapped", "model", "exact; a route or endpoint model overrides it"),
    "messages": ("converted", _c2a_messages, "leading system/developer -> system; tool runs + user -> one user turn (E.2)"),
    "tools": ("converted", _c2a_tools, "functions -> custom tools; custom (grammar) tools dropped"),
    "tool_choice": ("converted", _c2a_tool_choice, "auto/required/none/function -> auto/any/none/tool"),
    "parallel_tool_calls": ("converted", _c2a_parallel, "false -> tool_choice.disable_parallel_tool_use"),
    "max_completion_tokens": ("converted", _c2a_max_tokens, "-> max_tokens (required; endpoint default when absent)"),
    "max_tokens": ("converted", _c2a_max_tokens, "-> max_tokens"),
    "temperature": ("converted", _c2a_temperature, "above 1 dropped, never clamped"),
    "top_p": ("mapped", "top_p", "exact"),
    "stop": ("converted", _c2a_stop, "-> stop_sequences"),
    "stream": ("mapped", "stream", "exact"),
    "stream_options": ("converted", _c2a_stream_options, "consumed: include_usage decides the usage chunk; not forwarded"),
    "n": ("converted", _c2a_n, "1 is Anthropic's only answer; more is a 400"),
    "user": ("dropped", None, "no Anthropic counterpart (metadata.user_id is opaque)"),
    "safety_identifier": ("dropped", None, "no Anthropic counterpart"),
    "prompt_cache_key": ("dropped", None, "OpenAI-only"),
    "prompt_cache_retention": ("dropped", None, "OpenAI-only"),
    "response_format": ("dropped", None, "no exact Anthropic counterpart"),
    "reasoning_effort": ("dropped", None, "no exact Anthropic counterpart"),
    "seed": ("dropped", None, "no Anthropic counterpart"),
    "logprobs": ("dropped", None, "no Anthropic counterpart"),
    "top_logprobs": ("dropped", None, "no Anthropic counterpart"),
    "logit_bias": ("dropped", None, "no Anthropic counterpart"),
    "presence_penalty": ("dropped", None, "no Anthropic counterpart"),
    "frequency_penalty": ("dropped", None, "no Anthropic counterpart"),
    "metadata": ("dropped", None, "OpenAI stored-completion tags"),
    "store": ("dropped", None, "OpenAI-only"),
    "service_tier": ("dropped", None, "tiers differ"),
    "modalities": ("dropped", None, "no Anthropic counterpart"),
    "audio": ("dropped", None, "no Anthropic counterpart"),
    "prediction": ("dropped", None, "no Anthropic counterpart"),
    "web_search_options": ("dropped", None, "no Anthropic counterpart"),
    "verbosity": ("dropped", None, "no Anthropic counterpart"),
    "functions": ("dropped", None, "deprecated; no counterpart"),
    "function_call": ("dropped", None, "deprecated; no counterpart"),
}


def chat_to_anthropic(body: dict, *, model: str | None = None, default_max_tokens: int | None = None) -> RequestTranslation:
    """An OpenAI Chat Completions request body as an Anthropic Messages request body."""
    _check_body(body, "Chat")
    rt = RequestTranslation(body={})
    o = _Opts()
    out = _run(C2A_FIELDS, _CHECKS, body, rt, o)
    if "max_tokens" not in out:
        if default_max_tokens is None:
            raise _bad(
                "max_tokens",
                "Anthropic requires max_tokens; the request sets neither max_completion_tokens nor "
                "max_tokens and the endpoint configures no default",
            )
        out["max_tokens"] = default_max_tokens
        rt.plumbing.append("max_tokens")
    rt.client_wants_usage = o.include_usage or not out.get("stream")
    rt.body = _finish_model(rt, out, model)
    return rt


def parse_body(raw: bytes) -> dict:
    """A request body as a dict; 400 when it is not JSON or not a JSON object."""
    try:
        obj = jsonc.loads(raw)
    except jsonc.JSONDecodeError as e:
        raise TranslationError(400, f"request body is not valid JSON: {e}", kind="invalid_request_error") from None
    if not isinstance(obj, dict):
        raise TranslationError(400, f"request body must be a JSON object, got {_jtype(obj)}", kind="invalid_request_error")
    return obj
