"""Anthropic Messages requests, decoded: an Anthropic body as the neutral conversation
(docs/dev/protocols.md A.1-A.5, E.1, E.2); its encoder is encode.py.

Sans-IO: dict in, ``Conversation`` out. Every top-level field decision lives in
``DECODE_FIELDS`` (field -> (action, handler-or-target, note), action in mapped / converted /
dropped); content blocks and message roles have their own tables. Rules kept throughout
(docs/dev/architecture.md §2):

- drop, never invent: whatever cannot travel is left behind and its JSON path recorded;
- tool-call ids travel byte for byte;
- bad input raises ``TranslationError(400, "<json path>: ...")`` and nothing else, before
  any body exists; the input is never mutated.

Flag: the Claude Code billing-header system block (it changes on every request and would
defeat a local server's prefix cache: docs/dev/pitfalls.md 25, docs/dev/clients.md §2.3) is dropped
and recorded.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ... import jsonc
from ...neutral import Conversation
from ...neutral import level_for_budget
from ...neutral import JSON_SCHEMA, OutputFormat
from ...protocols import anthropic as pa
from .. import fieldtable as ft
from .common import JOIN, MESSAGE_KEYS, TEXT_KEYS

BILLING_PREFIX = "x-anthropic-billing-header:"

# ---------------------------------------------------------------------------------------
# decode: Anthropic -> neutral
# ---------------------------------------------------------------------------------------

def _plain_text(b: Any) -> str | None:
    """The text of a well-formed text block (``{"type": "text", "text": str, ...}``), else
    None. The hot paths ask this first: the usual block is then decided without building a
    JSON path or calling a validator; anything else takes the validating path, which names
    what is wrong."""
    if type(b) is dict and b.get("type") == "text":
        text = b.get("text")
        if type(text) is str:
            return text
    return None


_SOURCE_KEYS = {  # keys of each Anthropic source type
    "base64": frozenset({"type", "media_type", "data"}),
    "url": frozenset({"type", "url"}),
    "text": frozenset({"type", "media_type", "data"}),
    "content": frozenset({"type", "content"}),
}


def _dec_text_of(rt: Conversation, value: Any, path: str, *, billing: bool = False) -> str:
    """A system string or text-block list as one string (blocks joined); with ``billing``
    the Claude Code billing-header block is dropped and recorded."""
    if isinstance(value, str):
        return value
    texts = []
    for i, b in enumerate(ft.arr(value, path)):
        text = _plain_text(b)
        if text is None:  # not the usual block: validated field by field, the failure named
            bp = f"{path}[{i}]"
            ft.obj(b, bp)
            ft.choice(b.get("type"), ("text",), f"{bp}.type", "block type")
            text = ft.req(b, "text", bp, ft.string)
        if billing and text.startswith(BILLING_PREFIX):
            rt.dropped.append(f"{path}[{i}]")
            continue
        if len(b) != 2:  # keys other than type and text
            ft.extras(rt, b, TEXT_KEYS, f"{path}[{i}]")
        texts.append(text)
    return JOIN.join(texts)


def _dec_system(rt: Conversation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    n_dropped = len(rt.dropped)
    text = _dec_text_of(rt, value, "system", billing=True)
    if text:
        out["messages"] = [rt.source({"role": "system", "content": text}, "system")]
    elif len(rt.dropped) == n_dropped:  # empty, and not already explained block by block
        rt.dropped.append("system")


def _dec_text(rt: Conversation, b: dict[str, Any], bp: str, parts: list[Any], extra: list[Any]) -> None:
    parts.append({"type": "text", "text": ft.req(b, "text", bp, ft.string)})
    ft.extras(rt, b, TEXT_KEYS, bp)


def _source(b: dict[str, Any], bp: str) -> tuple[dict[str, Any], str, Any]:
    src = ft.req(b, "source", bp, ft.obj)
    return src, f"{bp}.source", src.get("type")


def _dec_image(rt: Conversation, b: dict[str, Any], bp: str, parts: list[Any], extra: list[Any]) -> None:
    src, sp, stype = _source(b, bp)
    kind = ft.choice(stype, ("base64", "url", "file"), f"{sp}.type", "image source type")
    if kind == "file":  # a file_id has no Chat counterpart
        rt.dropped.append(bp)
        return
    if kind == "base64":
        url = f"data:{ft.req(src, 'media_type', sp, ft.string)};base64,{ft.req(src, 'data', sp, ft.string)}"
    else:
        url = ft.req(src, "url", sp, ft.string)
    ft.extras(rt, b, frozenset({"type", "source"}), bp)
    ft.extras(rt, src, _SOURCE_KEYS[kind], sp)
    parts.append({"type": "image_url", "image_url": {"url": url}})


def _dec_document(rt: Conversation, b: dict[str, Any], bp: str, parts: list[Any], extra: list[Any]) -> None:
    src, sp, stype = _source(b, bp)
    ft.choice(stype, ("base64", "text", "content", "url", "file"), f"{sp}.type", "document source type")
    title = ft.opt(b, "title", bp, ft.string)
    known = frozenset({"type", "source"})  # a text part has no title
    if stype in ("url", "file"):  # Chat takes PDFs only inline (no URL form, no file ids here)
        rt.dropped.append(bp)
        return
    if stype == "base64":
        file = {"file_data": f"data:{ft.req(src, 'media_type', sp, ft.string)};base64,{ft.req(src, 'data', sp, ft.string)}"}
        if title is not None:  # the only filename is the client's own title: never a made-up one
            file["filename"] = title
        part: dict[str, Any] = {"type": "file", "file": file}
        known |= {"title"}
    elif stype == "text":
        part = {"type": "text", "text": ft.req(src, "data", sp, ft.string)}
    else:  # "content": a string, or text/image blocks
        content, cp = ft.req(src, "content", sp, ft.anything), f"{sp}.content"
        if not isinstance(content, str):
            kinds = [ft.choice(ft.obj(x, f"{cp}[{k}]").get("type"), ("text", "image"), f"{cp}[{k}].type", "block type")
                     for k, x in enumerate(ft.arr(content, cp))]
            if "image" in kinds:  # no text-part form for it
                rt.dropped.append(bp)
                return
            content = _dec_text_of(rt, content, cp)
        part = {"type": "text", "text": content}
    ft.extras(rt, b, known, bp)
    ft.extras(rt, src, _SOURCE_KEYS[stype], sp)
    parts.append(part)


_TOOL_RESULT_PARTS = {"text": True, "image": False, "document": False, "search_result": False}
_TOOL_RESULT_KEYS = frozenset({"type", "tool_use_id", "content"})
_TOOL_USE_KEYS = frozenset({"type", "id", "name", "input"})


def _dec_tool_result(rt: Conversation, b: dict[str, Any], bp: str, parts: list[Any], tool_msgs: list[Any]) -> None:
    tool_id = ft.req(b, "tool_use_id", bp, ft.string)  # docs/dev/pitfalls.md 10: no id, no tool message
    content, cp = b.get("content"), f"{bp}.content"
    if content is None or isinstance(content, str):
        text = content or ""
    else:  # Chat tool messages are text only: images and documents are left behind
        texts = []
        for k, x in enumerate(ft.arr(content, cp)):
            if (plain := _plain_text(x)) is not None and len(x) == 2:  # the usual block, nothing else
                texts.append(plain)
                continue
            xp = f"{cp}[{k}]"
            if ft.pick(_TOOL_RESULT_PARTS, ft.obj(x, xp).get("type"), f"{xp}.type", "tool_result block type"):
                texts.append(ft.req(x, "text", xp, ft.string))
                ft.extras(rt, x, TEXT_KEYS, xp)
            else:
                rt.dropped.append(xp)
        text = JOIN.join(texts)
    if not b.keys() <= _TOOL_RESULT_KEYS:
        ft.extras(rt, b, _TOOL_RESULT_KEYS, bp)  # is_error, cache_control
    tool_msgs.append(rt.source({"role": "tool", "tool_call_id": tool_id, "content": text}, bp))


def _dec_tool_use(rt: Conversation, b: dict[str, Any], bp: str, parts: list[Any], calls: list[Any]) -> None:
    tool_input = ft.req(b, "input", bp, ft.obj)
    try:
        arguments = jsonc.dumps(tool_input)
    except (TypeError, ValueError) as e:
        raise ft.bad(f"{bp}.input", f"cannot be serialised as JSON ({e})") from None
    calls.append(rt.source({
        "id": ft.req(b, "id", bp, ft.string),
        "type": "function",
        "function": {"name": ft.req(b, "name", bp, ft.string), "arguments": arguments},
    }, bp))
    if not b.keys() <= _TOOL_USE_KEYS:
        ft.extras(rt, b, _TOOL_USE_KEYS, bp)


def _drop_block(rt: Conversation, b: dict[str, Any], bp: str, parts: list[Any], extra: list[Any]) -> None:
    rt.dropped.append(bp)


BlockHandler = Callable[[Conversation, dict[str, Any], str, list[Any], list[Any]], None]

# Anthropic content blocks by role. Thinking never leaves for a non-Anthropic endpoint
# (its signature is bound to the model that made it); server-tool blocks have no Chat form.
DECODE_USER_BLOCKS: dict[str, BlockHandler] = {
    "text": _dec_text,
    "image": _dec_image,
    "document": _dec_document,
    "tool_result": _dec_tool_result,
    "search_result": _drop_block,
    "thinking": _drop_block,
    "redacted_thinking": _drop_block,
}
DECODE_ASSISTANT_BLOCKS: dict[str, BlockHandler] = {
    "text": _dec_text,
    "tool_use": _dec_tool_use,
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


def _dec_blocks(rt: Conversation, content: Any, p: str, table: dict[str, BlockHandler]) -> tuple[list[Any], list[Any]]:
    parts: list[Any] = []
    extra: list[Any] = []
    for j, b in enumerate(content if type(content) is list else ft.arr(content, f"{p}.content")):
        if (text := _plain_text(b)) is not None:  # the usual block: as _dec_text, without a path
            parts.append({"type": "text", "text": text})
            if len(b) != 2:  # keys other than type and text
                ft.extras(rt, b, TEXT_KEYS, f"{p}.content[{j}]")
            continue
        bp = f"{p}.content[{j}]"
        btype = ft.obj(b, bp).get("type")
        if table is DECODE_ASSISTANT_BLOCKS and isinstance(btype, str) and btype.endswith(SERVER_BLOCK_SUFFIXES):
            handler: BlockHandler = table.get(btype, _drop_block)  # newer server-tool blocks: dropped too
        else:
            handler = ft.pick(table, btype, f"{bp}.type", "content block type")
        handler(rt, b, bp, parts, extra)
    return parts, extra


def _dec_user(rt: Conversation, content: Any, p: str, msgs: list[Any], o: ft.Options) -> None:
    if isinstance(content, str):
        msgs.append(rt.source({"role": "user", "content": content}, p))
        return
    parts, tool_msgs = _dec_blocks(rt, content, p, DECODE_USER_BLOCKS)
    msgs.extend(tool_msgs)  # tool messages first: they must follow the assistant's tool_calls
    if parts:
        texts = [x["text"] for x in parts if x["type"] == "text"]
        msgs.append(rt.source({"role": "user", "content": JOIN.join(texts) if len(texts) == len(parts) else parts}, p))
    elif not tool_msgs:
        rt.dropped.append(p)  # nothing of this message can travel


def _dec_assistant(rt: Conversation, content: Any, p: str, msgs: list[Any], o: ft.Options) -> None:
    if isinstance(content, str):
        msgs.append(rt.source({"role": "assistant", "content": content}, p))
        return
    parts, calls = _dec_blocks(rt, content, p, DECODE_ASSISTANT_BLOCKS)
    # "" rather than null when there is no text: llama_cpp.server answers null with a 500
    msg: dict[str, Any] = {"role": "assistant", "content": JOIN.join(x["text"] for x in parts)}
    if calls:
        msg["tool_calls"] = calls
    msgs.append(rt.source(msg, p))


def _dec_system_message(rt: Conversation, content: Any, p: str, msgs: list[Any], o: ft.Options) -> None:
    text = content if type(content) is str else _dec_text_of(rt, content, f"{p}.content")
    if not text:
        rt.dropped.append(p)
        return
    msgs.append(rt.source({"role": "system", "content": text}, p))
    rt.warnings.append(f"{p}: system message kept in place; strict chat templates reject a system message after the first")


DECODE_ROLES = {"user": _dec_user, "assistant": _dec_assistant, "system": _dec_system_message}


def _dec_messages(rt: Conversation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    msgs = out.setdefault("messages", [])
    for i, m in enumerate(ft.arr(value, "messages")):
        p = f"messages[{i}]"
        # the usual message decided without a validator call: a known role and content, the
        # only two keys
        if (type(m) is dict and type(role := m.get("role")) is str and (handler := DECODE_ROLES.get(role)) is not None
                and (content := m.get("content")) is not None and len(m) == 2):
            handler(rt, content, p, msgs, o)
            continue
        ft.obj(m, p)
        handler = ft.pick(DECODE_ROLES, m.get("role"), f"{p}.role", "role")
        content = m.get("content")
        if content is None:
            raise ft.bad(f"{p}.content", "required")
        ft.extras(rt, m, MESSAGE_KEYS, p)
        handler(rt, content, p, msgs, o)


_DECODE_TOOL_KEYS = frozenset({"type", "name", "description", "input_schema"})


def _dec_tool(rt: Conversation, t: Any, tp: str) -> dict[str, Any] | None:
    """One Anthropic tool as a Chat function tool (None: a server tool, dropped)."""
    ttype = ft.obj(t, tp).get("type")
    if ttype not in (None, "custom"):  # server tools (web_search_20250305, bash_...)
        ft.string(ttype, f"{tp}.type")
        rt.dropped.append(tp)
        return None
    fn: dict[str, Any] = {"name": ft.req(t, "name", tp, ft.string)}
    if (desc := ft.opt(t, "description", tp, ft.string)) is not None:
        fn["description"] = desc
    fn["parameters"] = ft.req(t, "input_schema", tp, ft.obj)
    ft.extras(rt, t, _DECODE_TOOL_KEYS, tp)  # cache_control, strict, defer_loading, ...
    return {"type": "function", "function": fn}


def _dec_tools(rt: Conversation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    tools: list[dict[str, Any]] = []
    for i, t in enumerate(ft.arr(value, "tools")):
        # the usual tool decided in one expression, as _dec_tool would: three keys, and
        # name, input_schema and description among them (so nothing else); anything else
        # goes through _dec_tool
        if (type(t) is dict and len(t) == 3 and type(name := t.get("name")) is str
                and type(schema := t.get("input_schema")) is dict and type(desc := t.get("description")) is str):
            tool: dict[str, Any] | None = {"type": "function", "function": {"name": name, "description": desc, "parameters": schema}}
        elif (tool := _dec_tool(rt, t, f"tools[{i}]")) is None:
            continue
        assert tool is not None  # (both branches above give one)
        if len(tools) != i:  # an earlier tool was dropped: say where this one came from
            rt.origin[f"tools[{len(tools)}]"] = f"tools[{i}]"
        tools.append(tool)
    if tools:
        out["tools"] = tools
    elif not value:
        rt.dropped.append("tools")  # an empty list: OpenAI rejects tools: []


# Anthropic tool_choice.type -> Chat tool_choice (None: the named form)
DECODE_TOOL_CHOICE: dict[str, str | None] = {"auto": "auto", "any": "required", "none": "none", "tool": None}


def _dec_tool_choice(rt: Conversation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    ft.obj(value, key)
    ttype = value.get("type")
    choice: Any = ft.pick(DECODE_TOOL_CHOICE, ttype, "tool_choice.type", "tool_choice type")
    known = {"type", "disable_parallel_tool_use"}
    if choice is None:
        choice = {"type": "function", "function": {"name": ft.req(value, "name", key, ft.string)}}
        known.add("name")
    disable = ft.opt(value, "disable_parallel_tool_use", key, ft.boolean)
    if "tools" not in out:  # Chat rejects tool_choice (and parallel_tool_calls) without tools
        rt.dropped.append(key)
        return
    ft.extras(rt, value, frozenset(known), key)
    out["tool_choice"] = choice
    if disable is not None:
        out["parallel_tool_calls"] = not disable


def _dec_max_tokens(rt: Conversation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    out["max_completion_tokens"] = ft.integer(value, key)
    rt.origin["max_completion_tokens"] = key


def _dec_stop(rt: Conversation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    seqs = ft.arr(value, key)
    for i, s in enumerate(seqs):
        ft.string(s, f"{key}[{i}]")
    if not seqs:
        rt.dropped.append(key)
        return
    out["stop"] = seqs
    rt.origin["stop"] = key


def _dec_thinking(rt: Conversation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    """thinking -> reasoning_effort (neutral/effort.py); its blocks in the history are dropped."""
    kind = ft.obj(value, key).get("type")
    if kind == "enabled":
        budget = ft.integer(ft.req(value, "budget_tokens", key, ft.anything), f"{key}.budget_tokens")
        out["reasoning_effort"] = level = level_for_budget(budget)
        rt.converted.append(f"{key}.budget_tokens {budget} -> reasoning_effort {level!r}")
    elif kind == "disabled":  # no "off" every target takes (gpt-5 and non-reasoning models reject 'none',
        rt.dropped.append(key)  # Gemini 2.5 Pro / 3 a 0 budget): the target's default, never a level made up
        rt.warnings.append(f"{key}.type disabled: dropped, not sent as reasoning_effort 'none' (servers disagree on "
                           "it); the endpoint's default applies")
        return
    else:  # adaptive (the level, if any, is output_config.effort's: the next row)
        rt.dropped.append(key)
        return
    rt.origin["reasoning_effort"] = key


def _dec_format(rt: Conversation, path: str, value: Any, out: dict[str, Any]) -> None:
    """A format ({type: json_schema, schema}) -> the neutral response_format (neutral/output_format.py)."""
    ftype = ft.obj(value, path).get("type")
    if ftype not in pa.OUTPUT_FORMAT_TYPES:  # a type this codec does not know: left behind, never guessed
        ft.string(ftype, f"{path}.type")
        rt.dropped.append(path)
        return
    fmt = OutputFormat(JSON_SCHEMA, ft.req(value, "schema", path, ft.obj))
    ft.extras(rt, value, _FORMAT_KEYS, path)
    out["response_format"] = fmt.neutral()
    for neutral in ("response_format", "response_format.json_schema"):  # its schema's paths are the client's
        rt.origin[neutral] = path


_FORMAT_KEYS = frozenset({"type", "schema"})


def _dec_output_config(rt: Conversation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    """effort -> reasoning_effort (unless thinking already named a level); format -> response_format."""
    for k, v in ft.obj(value, key).items():
        if k == "effort" and "reasoning_effort" not in out and isinstance(v, str) and v in pa.EFFORT_LEVELS:
            out["reasoning_effort"] = pa.EFFORT_LEVELS[v]
            rt.origin["reasoning_effort"] = f"{key}.effort"
            rt.converted.append(f"{key}.effort {v!r} -> reasoning_effort {pa.EFFORT_LEVELS[v]!r}")
        elif k == "format" and v is not None:
            _dec_format(rt, f"{key}.format", v, out)
        else:
            rt.dropped.append(f"{key}.{k}")


def _dec_output_format(rt: Conversation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    """The structured-outputs beta's spelling (output_config.format's shape at the top level)."""
    if "response_format" in out:  # output_config.format came first and wins
        rt.dropped.append(key)
    else:
        _dec_format(rt, key, value, out)


DECODE_FIELDS: ft.FieldTable = {
    "model": ("mapped", "model", "exact; a route or endpoint model overrides it"),
    "system": ("converted", _dec_system, "one leading system/developer message; blocks joined; billing-header block dropped"),
    "messages": ("converted", _dec_messages, "content blocks -> Chat messages (E.2)"),
    "tools": ("converted", _dec_tools, "custom tools -> functions; server tools dropped"),
    "tool_choice": ("converted", _dec_tool_choice, "auto/any/none/tool -> auto/required/none/function; disable_parallel_tool_use -> parallel_tool_calls"),
    "max_tokens": ("converted", _dec_max_tokens, "-> max_completion_tokens"),
    "temperature": ("mapped", "temperature", "Anthropic's 0-1 fits Chat's 0-2"),
    "top_p": ("mapped", "top_p", "exact"),
    "stop_sequences": ("converted", _dec_stop, "-> stop"),
    "stream": ("mapped", "stream", "exact"),
    "top_k": ("dropped", None, "no Chat counterpart"),
    "thinking": ("converted", _dec_thinking, "enabled budget -> reasoning_effort by level (neutral/effort.py); "
                                             "disabled dropped (no 'off' every target takes); adaptive: "
                                             "output_config.effort's level"),
    "metadata": ("dropped", ft.drop_keys, "user_id is opaque to Chat"),
    "service_tier": ("dropped", None, "Anthropic-only"),
    "context_management": ("dropped", None, "Anthropic beta"),
    "output_config": ("converted", _dec_output_config, "effort -> reasoning_effort (max -> xhigh); format "
                                                       "{type: json_schema, schema} -> response_format json_schema, the "
                                                       "schema as it came (neutral/output_format.py; Anthropic structured "
                                                       "outputs, platform.claude.com/docs/en/build-with-claude/structured-"
                                                       "outputs)"),
    "output_format": ("converted", _dec_output_format, "the structured-outputs beta's spelling of output_config.format "
                                                       "(moved there at GA): the same mapping"),
    "container": ("dropped", None, "Anthropic-only"),
    "cache_control": ("dropped", None, "prompt caching is Anthropic's"),
    "inference_geo": ("dropped", None, "Anthropic-only"),
    "speed": ("dropped", None, "Anthropic-only"),
    "diagnostics": ("dropped", None, "Anthropic-only"),
    "mcp_servers": ("dropped", None, "Anthropic beta"),
}

def decode(body: dict[str, Any]) -> Conversation:
    """An Anthropic Messages request body as a neutral conversation."""
    ft.check_body(body, "Anthropic")
    conv = Conversation(body={})
    conv.body = ft.run(DECODE_FIELDS, ft.CHECKS, body, conv, ft.Options())
    conv.finish_origin()
    return conv

