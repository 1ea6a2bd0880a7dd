"""Anthropic Messages requests: the decoder (Anthropic -> neutral) and the encoder (neutral
-> Anthropic) (docs/protocols.md A.1-A.5, E.1, E.2).

Sans-IO: dict in, ``Conversation`` / ``RequestTranslation`` out. Every top-level field
decision lives in one table per direction, ``DECODE_FIELDS`` and ``ENCODE_FIELDS`` (field ->
(action, handler-or-target, note), action in mapped / converted / dropped); content blocks,
message roles and content parts have their own tables below. Rules kept throughout
(docs/architecture.md §2):

- drop, never invent: whatever cannot travel is left behind and its JSON path recorded; the
  only additions are protocol plumbing, recorded in ``plumbing``;
- tool-call ids travel byte for byte; an id Anthropic would reject refuses the turn;
- bad input raises ``TranslationError(400, "<json path>: ...")`` and nothing else, before
  any body exists (never a half-translated body); the input is never mutated.

Decoder flag: the Claude Code billing-header system block (it changes on every request and
would defeat a local server's prefix cache: docs/pitfalls.md 25, docs/clients.md §2.3) is dropped and
recorded. Encoder checks: tool ids Anthropic rejects refuse the turn; temperature above 1 is
dropped (never clamped); ``max_tokens`` is required (the endpoint's default as plumbing).

The translated body is a new dict, but it may share unchanged leaves of the input by
reference (tool schemas): treat both as read-only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ... import jsonc
from ...errors import Refused
from ...neutral import BUDGETS, budget_for, level_for_budget
from ...neutral import PROVIDER_STATE, state_for
from ...protocols import anthropic as pa
from ...neutral import Capped, Conversation, RequestTranslation
from ...protocols import TOOL_ID_RE
from .. import fieldtable as ft

BILLING_PREFIX = "x-anthropic-billing-header:"
JOIN = ft.JOIN
DOCUMENT_MEDIA_TYPES = ("application/pdf",)  # media types Anthropic takes as a document, never as an image


def _anthropic_id(v: Any, path: str) -> str:
    """A tool-call id Anthropic accepts, untouched; any other id refuses the turn (docs/architecture.md rule 2)."""
    tool_id = ft.string(v, path)
    if not TOOL_ID_RE.fullmatch(tool_id):
        raise Refused(
            400,
            f"{path}: tool call id {ft.show(v)} does not match ^[a-zA-Z0-9_-]+$, which Anthropic requires; "
            "ids are never rewritten, so this turn cannot go to an Anthropic endpoint")
    return tool_id



# ---------------------------------------------------------------------------------------
# decode: Anthropic -> neutral
# ---------------------------------------------------------------------------------------

_TEXT_KEYS = frozenset({"type", "text"})


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
            ft.extras(rt, b, _TEXT_KEYS, f"{path}[{i}]")
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
    ft.extras(rt, b, _TEXT_KEYS, bp)


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
    tool_id = ft.req(b, "tool_use_id", bp, ft.string)  # docs/pitfalls.md 10: no id, no tool message
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
                ft.extras(rt, x, _TEXT_KEYS, xp)
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
                ft.extras(rt, b, _TEXT_KEYS, f"{p}.content[{j}]")
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
_MESSAGE_KEYS = frozenset({"role", "content"})


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
        ft.extras(rt, m, _MESSAGE_KEYS, p)
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


def _dec_output_config(rt: Conversation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    """effort -> reasoning_effort (unless thinking already named a level); format has no counterpart."""
    for k, v in ft.obj(value, key).items():
        if k == "effort" and "reasoning_effort" not in out and isinstance(v, str) and v in pa.EFFORT_LEVELS:
            out["reasoning_effort"] = pa.EFFORT_LEVELS[v]
            rt.origin["reasoning_effort"] = f"{key}.effort"
            rt.converted.append(f"{key}.effort {v!r} -> reasoning_effort {pa.EFFORT_LEVELS[v]!r}")
        else:
            rt.dropped.append(f"{key}.{k}")


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
    "output_config": ("converted", _dec_output_config, "effort -> reasoning_effort (max -> xhigh); format dropped"),
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


# ---------------------------------------------------------------------------------------
# encode: neutral -> Anthropic (the neutral vocabulary is Chat's: a Chat client's body is
# encoded as it came, so every Chat field has its row)
# ---------------------------------------------------------------------------------------

def _enc_texts(rt: RequestTranslation, content: Any, path: str, marks: list[tuple[int, str]] | None = None) -> list[str]:
    """The non-empty texts of a string or text-part content (empty parts dropped, recorded).
    ``marks``: where the client's own cache breakpoints are, (index into the texts, the part's
    path), for the caller to carry or drop (without it they are dropped, recorded)."""
    if isinstance(content, str):
        return [content] if content else []
    texts: list[str] = []
    for k, x in enumerate(ft.arr(content, path)):
        xp = f"{path}[{k}]"
        ft.choice(ft.obj(x, xp).get("type"), ("text",), f"{xp}.type", "content part type")
        text = ft.req(x, "text", xp, ft.string)
        if marks is not None and CHAT_BREAKPOINT in x and text:
            ft.extras(rt, x, _TEXT_KEYS | {CHAT_BREAKPOINT}, xp)
            marks.append((len(texts), xp))
        else:
            ft.extras(rt, x, _TEXT_KEYS, xp)
        if text:
            texts.append(text)
        else:
            rt.dropped.append(xp)
    return texts


def _enc_text_part(rt: RequestTranslation, x: dict[str, Any], xp: str) -> dict[str, Any] | None:
    text = ft.req(x, "text", xp, ft.string)
    if not text:  # Anthropic rejects empty text blocks
        ft.extras(rt, x, _TEXT_KEYS, xp)
        rt.dropped.append(xp)
        return None
    if CHAT_BREAKPOINT in x:  # the client's own cache breakpoint (OpenAI's explicit one): the same intent
        ft.extras(rt, x, _TEXT_KEYS | {CHAT_BREAKPOINT}, xp)
        rt.converted.append(f"{xp}.{CHAT_BREAKPOINT} -> cache_control{_CARRIED}")
        return {"type": "text", "text": text, "cache_control": dict(EPHEMERAL)}
    ft.extras(rt, x, _TEXT_KEYS, xp)
    return {"type": "text", "text": text}


def _enc_image(rt: RequestTranslation, x: dict[str, Any], xp: str) -> dict[str, Any]:
    ip = f"{xp}.image_url"
    image = ft.req(x, "image_url", xp, ft.obj)
    url = ft.req(image, "url", ip, ft.string)
    block_type = "image"
    if url.startswith("data:"):
        media_type, data = ft.data_url(url, f"{ip}.url")
        source = {"type": "base64", "media_type": media_type, "data": data}
        if media_type in DOCUMENT_MEDIA_TYPES:  # a PDF sent as an "image": Anthropic reads it as a document
            block_type = "document"
            rt.converted.append(f"{xp} -> document ({media_type} is no image)")
    else:
        source = {"type": "url", "url": url}
    ft.extras(rt, x, frozenset({"type", "image_url"}), xp)
    ft.extras(rt, image, frozenset({"url"}), ip)  # detail
    return {"type": block_type, "source": source}


def _enc_file(rt: RequestTranslation, x: dict[str, Any], xp: str) -> dict[str, Any] | None:
    fp = f"{xp}.file"
    file = ft.req(x, "file", xp, ft.obj)
    file_data = ft.opt(file, "file_data", fp, ft.string)
    title = ft.opt(file, "filename", fp, ft.string)
    ft.extras(rt, x, frozenset({"type", "file"}), xp)
    if file_data is None:  # a file_id only: nothing Anthropic can read
        rt.dropped.append(xp)
        return None
    media_type, data = ft.data_url(file_data, f"{fp}.file_data")
    doc: dict[str, Any] = {"type": "document", "source": {"type": "base64", "media_type": media_type, "data": data}}
    if title is not None:
        doc["title"] = title
    ft.extras(rt, file, frozenset({"file_data", "filename"}), fp)
    return doc


def _drop_part(rt: RequestTranslation, x: dict[str, Any], xp: str) -> None:
    rt.dropped.append(xp)


# Chat user content parts -> Anthropic blocks (None: dropped)
ENCODE_USER_PARTS: dict[str, Callable[[RequestTranslation, dict[str, Any], str], dict[str, Any] | None]] = {
    "text": _enc_text_part,
    "image_url": _enc_image,
    "file": _enc_file,
    "input_audio": _drop_part,
}


def _enc_tool_call(rt: RequestTranslation, tc: Any, tp: str) -> dict[str, Any]:
    ft.obj(tc, tp)
    ft.choice(tc.get("type", "function"), ("function",), f"{tp}.type", "tool call type")
    tool_id = _anthropic_id(ft.req(tc, "id", tp, ft.string), f"{tp}.id")
    fp = f"{tp}.function"
    fn = ft.req(tc, "function", tp, ft.obj)
    name = ft.req(fn, "name", fp, ft.string)
    arguments = ft.opt(fn, "arguments", fp, ft.string) or ""
    try:
        tool_input = jsonc.loads(arguments) if arguments else {}  # "" means no arguments
    except jsonc.JSONDecodeError:
        raise ft.bad(f"{fp}.arguments", f"not valid JSON: {ft.show(arguments)}") from None
    if not isinstance(tool_input, dict):
        raise ft.bad(f"{fp}.arguments", f"must encode a JSON object, got {ft.jtype(tool_input)}")
    ft.extras(rt, tc, frozenset({"id", "type", "function"}), tp)
    ft.extras(rt, fn, frozenset({"name", "arguments"}), fp)
    return {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}


@dataclass(slots=True)
class _Turns:
    """State of the Chat -> Anthropic message walk."""

    system: list[str] = field(default_factory=list)
    # the client's cache breakpoint at the end of the leading system text: (its part's path, the
    # number of system texts then): carried only while no later system text follows it
    system_mark: tuple[str, int] | None = None
    msgs: list[dict[str, Any]] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)  # tool_result blocks waiting for a user turn
    leading: bool = True

    def flush(self) -> None:
        if self.results:
            self.msgs.append({"role": "user", "content": self.results})
            self.results = []


def _enc_system(rt: RequestTranslation, m: dict[str, Any], p: str, st: _Turns) -> None:
    content = ft.req(m, "content", p, ft.anything)
    marks: list[tuple[int, str]] = []
    texts = [content] if content.__class__ is str else _enc_texts(rt, content, f"{p}.content", marks)
    text = JOIN.join(texts) if len(texts) != 1 else texts[0]
    ft.extras(rt, m, _MESSAGE_KEYS, p)  # name
    for k, xp in marks:  # only one at the very end of the system text has a place: one system block's end
        if st.leading and k == len(texts) - 1:
            if st.system_mark is not None:
                rt.dropped.append(f"{st.system_mark[0]}.{CHAT_BREAKPOINT}")  # a later system text follows it
            st.system_mark = (xp, len(st.system) + 1)
        else:
            rt.dropped.append(f"{xp}.{CHAT_BREAKPOINT}")  # inside the system text: Anthropic gets it as one block
    if not text:
        rt.dropped.append(p)
    elif st.leading:
        st.system.append(text)
    else:
        st.flush()
        st.msgs.append({"role": "system", "content": text})
        rt.warnings.append(f"{p}: system message kept in place (needs an Anthropic API that accepts system messages inside messages)")


def _enc_user(rt: RequestTranslation, m: dict[str, Any], p: str, st: _Turns) -> None:
    st.leading = False
    content = ft.req(m, "content", p, ft.anything)
    ft.extras(rt, m, _MESSAGE_KEYS, p)  # name
    if isinstance(content, str):
        blocks = [{"type": "text", "text": content}] if content else []
    else:
        blocks = ft.each_part(rt, content, f"{p}.content", ENCODE_USER_PARTS)
    if not blocks:
        rt.dropped.append(p)  # Anthropic rejects empty messages
    if st.results:  # a run of tool messages and this user message make ONE user turn
        st.results.extend(blocks)
        st.flush()
    elif blocks:
        st.msgs.append({"role": "user", "content": content if isinstance(content, str) else blocks})


def _enc_assistant(rt: RequestTranslation, m: dict[str, Any], p: str, st: _Turns) -> None:
    st.leading = False
    st.flush()
    content, cp = m.get("content"), f"{p}.content"
    restored = state_for(m, "anthropic")  # this endpoint's own signed thinking, first (its thinking rule)
    blocks: list[dict[str, Any]] = list(restored.payload["blocks"]) if restored else []
    if isinstance(content, str) or content is None:
        if content:
            blocks.append({"type": "text", "text": content})
    else:
        for k, x in enumerate(ft.arr(content, cp)):
            xp = f"{cp}[{k}]"
            kind = ft.choice(ft.obj(x, xp).get("type"), ("text", "refusal"), f"{xp}.type", "content part type")
            text = ft.req(x, kind, xp, ft.string)
            ft.extras(rt, x, frozenset({"type", kind}), xp)
            if not text:
                rt.dropped.append(xp)
                continue
            blocks.append({"type": "text", "text": text})
            if kind == "refusal":
                rt.converted.append(f"{xp} -> text block (refusal)")
    if refusal := ft.opt(m, "refusal", p, ft.string):
        blocks.append({"type": "text", "text": refusal})
        rt.converted.append(f"{p}.refusal -> text block")
    calls = ft.opt(m, "tool_calls", p, ft.arr) or []
    blocks.extend(_enc_tool_call(rt, tc, f"{p}.tool_calls[{k}]") for k, tc in enumerate(calls))
    ft.extras(rt, m, _ASSISTANT_KEYS_RESTORED if restored else _ASSISTANT_KEYS, p)  # name, audio, ...
    if not blocks:
        rt.dropped.append(p)  # Anthropic rejects empty messages
    elif isinstance(content, str) and content and not calls and not refusal and not restored:  # plain text: a string
        st.msgs.append({"role": "assistant", "content": content})
    else:
        st.msgs.append({"role": "assistant", "content": blocks})


_ASSISTANT_KEYS = frozenset({"role", "content", "tool_calls", "refusal"})
_ASSISTANT_KEYS_RESTORED = _ASSISTANT_KEYS | {PROVIDER_STATE}


def _enc_tool(rt: RequestTranslation, m: dict[str, Any], p: str, st: _Turns) -> None:
    st.leading = False
    tool_id = _anthropic_id(ft.req(m, "tool_call_id", p, ft.string), f"{p}.tool_call_id")  # docs/pitfalls.md 10
    content = ft.req(m, "content", p, ft.anything)
    marks: list[tuple[int, str]] = []
    texts = _enc_texts(rt, content, f"{p}.content", marks)
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_id}
    if not texts:
        rt.dropped.append(f"{p}.content")  # empty: Anthropic takes a tool_result without content
    elif isinstance(content, str):
        block["content"] = content
    else:
        block["content"] = [{"type": "text", "text": t} for t in texts]
    for k, xp in marks:  # the client's own breakpoint at the result's end: on the tool_result block
        if k == len(texts) - 1:
            block["cache_control"] = dict(EPHEMERAL)
            rt.converted.append(f"{xp}.{CHAT_BREAKPOINT} -> cache_control{_CARRIED}")
        else:  # inside the result: no block of its own ends there
            rt.dropped.append(f"{xp}.{CHAT_BREAKPOINT}")
    ft.extras(rt, m, frozenset({"role", "tool_call_id", "content"}), p)
    st.results.append(block)


ENCODE_ROLES = {"system": _enc_system, "developer": _enc_system, "user": _enc_user, "assistant": _enc_assistant, "tool": _enc_tool}


def _enc_messages(rt: RequestTranslation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    st = _Turns()
    for i, m in enumerate(ft.arr(value, key)):
        p = f"messages[{i}]"
        role = m.get("role") if m.__class__ is dict else None
        handler = ENCODE_ROLES.get(role) if role.__class__ is str else None
        (handler or ft.pick(ENCODE_ROLES, ft.obj(m, p).get("role"), f"{p}.role", "role"))(rt, m, p, st)
    st.flush()
    out["messages"] = st.msgs
    if st.system:
        out["system"] = JOIN.join(st.system)
        if st.system_mark is not None:
            xp, n = st.system_mark
            if n == len(st.system):  # at the very end of the system prompt: one block carrying it
                out["system"] = [{"type": "text", "text": out["system"], "cache_control": dict(EPHEMERAL)}]
                rt.converted.append(f"{xp}.{CHAT_BREAKPOINT} -> cache_control{_CARRIED}")
            else:  # more system text follows it: no block ends there
                rt.dropped.append(f"{xp}.{CHAT_BREAKPOINT}")


_TOOL_KEYS = frozenset({"type", "function"})
_FUNCTION_KEYS = frozenset({"name", "description", "parameters"})


def _enc_tools(rt: RequestTranslation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    tools: list[dict[str, Any]] = []
    for i, t in enumerate(ft.arr(value, key)):
        fn = t.get("function") if type(t) is dict and t.get("type") == "function" else None
        if type(fn) is not dict or type(name := fn.get("name")) is not str:  # the checks, naming the path
            tp = f"tools[{i}]"
            ttype = ft.choice(ft.obj(t, tp).get("type"), ("function", "custom"), f"{tp}.type", "tool type")
            if ttype == "custom":  # free-form grammar tools have no Anthropic counterpart
                rt.dropped.append(tp)
                continue
            fn = ft.req(t, "function", tp, ft.obj)
            name = ft.req(fn, "name", f"{tp}.function", ft.string)
        tool: dict[str, Any] = {"name": name}
        desc, params = fn.get("description"), fn.get("parameters")
        if desc is not None:
            tool["description"] = desc if type(desc) is str else ft.string(desc, f"tools[{i}].function.description")
        if params is not None:
            tool["input_schema"] = params if type(params) is dict else ft.obj(params, f"tools[{i}].function.parameters")
        else:  # Chat: no parameters = no arguments; Anthropic requires a schema saying so
            tool["input_schema"] = {"type": "object"}
            rt.plumbing.append(f"tools[{len(tools)}].input_schema")
        if not (t.keys() <= _TOOL_KEYS and fn.keys() <= _FUNCTION_KEYS):
            ft.extras(rt, t, _TOOL_KEYS, f"tools[{i}]")
            ft.extras(rt, fn, _FUNCTION_KEYS, f"tools[{i}].function")  # strict
        tools.append(tool)
    out["tools"] = tools


# Chat string tool_choice -> Anthropic tool_choice.type
ENCODE_TOOL_CHOICE = {"auto": "auto", "required": "any", "none": "none"}
_ENCODE_TOOL_CHOICE_OBJECTS = {"function": True, "allowed_tools": False, "custom": False}


def _enc_tool_choice(rt: RequestTranslation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    if isinstance(value, str):
        choice = {"type": ft.pick(ENCODE_TOOL_CHOICE, value, key, "tool_choice")}
    elif not ft.pick(_ENCODE_TOOL_CHOICE_OBJECTS, ft.obj(value, key).get("type"), f"{key}.type", "tool_choice type"):
        rt.dropped.append(key)  # allowed_tools / custom: no Anthropic counterpart
        rt.warnings.append(f"tool_choice {value['type']!r} has no Anthropic counterpart: dropped")
        return
    else:
        fn = ft.req(value, "function", key, ft.obj)
        choice = {"type": "tool", "name": ft.req(fn, "name", f"{key}.function", ft.string)}
        ft.extras(rt, value, frozenset({"type", "function"}), key)
        ft.extras(rt, fn, frozenset({"name"}), f"{key}.function")
    if not out.get("tools"):  # Anthropic takes tool_choice only with tools
        rt.dropped.append(key)
        return
    out["tool_choice"] = choice


def _enc_parallel(rt: RequestTranslation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    ft.boolean(value, key)
    choice = out.get("tool_choice")
    if not out.get("tools") or (choice and choice["type"] == "none") or (choice is None and value):
        rt.dropped.append(key)  # nothing to ride on, or Anthropic's default already
        return
    if choice is None:  # disable_parallel_tool_use needs a tool_choice object
        choice = out["tool_choice"] = {"type": "auto"}
        rt.plumbing.append("tool_choice")
    choice["disable_parallel_tool_use"] = not value


def _enc_max_tokens(rt: RequestTranslation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    n = ft.integer(value, key)
    if "max_tokens" in out:  # max_completion_tokens came first and wins
        rt.dropped.append(key)
    else:
        out["max_tokens"] = n


def _enc_temperature(rt: RequestTranslation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    if ft.number(value, key) > 1:  # Anthropic's range is 0-1: drop, never clamp
        rt.dropped.append(key)
        rt.warnings.append(f"temperature {value} is above Anthropic's maximum of 1: dropped, not clamped")
    else:
        out["temperature"] = value


def _enc_stop(rt: RequestTranslation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    seqs = [value] if isinstance(value, str) else ft.arr(value, key)
    for i, s in enumerate(seqs):
        ft.string(s, f"{key}[{i}]")
    if seqs:
        out["stop_sequences"] = list(seqs)
    else:
        rt.dropped.append(key)


def _enc_stream_options(rt: RequestTranslation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    """Consumed here: it tells the reply encoder whether the client wants a usage chunk."""
    o.include_usage = bool(ft.opt(ft.obj(value, key), "include_usage", key, ft.boolean))
    ft.extras(rt, value, frozenset({"include_usage"}), key)


def _enc_effort(rt: RequestTranslation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    """reasoning_effort -> thinking (neutral/effort.py); the budget is fitted under max_tokens in encode()."""
    level = ft.string(value, key)
    if level not in BUDGETS:
        rt.dropped.append(key)
        rt.warnings.append(f"reasoning_effort {level!r} is no level tokunseba knows ({', '.join(BUDGETS)}): dropped")
    elif level == "none":
        out["thinking"] = {"type": "disabled"}
        rt.converted.append(f"{key} 'none' -> thinking.type disabled")
    else:
        out["thinking"] = {"type": "enabled", "budget_tokens": budget_for(level)}


def _fit_thinking(rt: RequestTranslation, out: dict[str, Any], effort: Any) -> None:
    """Anthropic takes thinking only with 1024 <= budget_tokens < max_tokens, no temperature but
    1, top_p >= 0.95, and no forced tool. The budget is the level's, at most half of max_tokens
    (the other half stays for the answer and its tool calls); the client's max_tokens is never
    raised, and a forced tool or a max_tokens below 2048 drops the effort (recorded); a
    temperature or top_p thinking rejects is dropped (recorded)."""
    th = out.get("thinking")
    if not th or th.get("type") != "enabled":
        return
    budget, cap = th["budget_tokens"], out["max_tokens"] // 2  # half of the output stays for the answer
    why = None
    if cap < pa.MIN_THINKING_BUDGET:
        why = f"max_tokens {out['max_tokens']} leaves no room for Anthropic's minimum thinking budget " \
              f"({pa.MIN_THINKING_BUDGET}) beside the answer"
    elif (out.get("tool_choice") or {}).get("type") in ("any", "tool"):
        why = "Anthropic takes no thinking when tool_choice forces a tool"
    if why:
        del out["thinking"]
        rt.dropped.append("reasoning_effort")
        rt.warnings.append(f"reasoning_effort {effort!r} dropped: {why}")
        return
    if budget > cap:
        th["budget_tokens"] = budget = cap
    rt.converted.append(f"reasoning_effort {effort!r} -> thinking.budget_tokens {budget}"
                        + (" (capped under max_tokens)" if budget == cap else ""))
    accepts: tuple[tuple[str, Callable[[Any], bool]], ...] = (
        ("temperature", lambda v: v == 1), ("top_p", lambda v: v >= pa.THINKING_MIN_TOP_P))
    for k, ok in accepts:
        if k in out and not ok(out[k]):
            rt.dropped.append(k)
            rt.warnings.append(f"{k} {out.pop(k)} dropped: Anthropic rejects it with thinking on")


def _enc_n(rt: RequestTranslation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    rt.dropped.append(key)  # 1: the Chat decoder refuses more (the same toward every target)


# neutral (Chat) field -> (action, Anthropic field or handler, note). Processed in this order.
ENCODE_FIELDS: ft.FieldTable = {
    "model": ("mapped", "model", "exact; a route or endpoint model overrides it"),
    "messages": ("converted", _enc_messages, "leading system/developer -> system; tool runs + user -> one user turn (E.2)"),
    "tools": ("converted", _enc_tools, "functions -> custom tools; custom (grammar) tools dropped"),
    "tool_choice": ("converted", _enc_tool_choice, "auto/required/none/function -> auto/any/none/tool"),
    "parallel_tool_calls": ("converted", _enc_parallel, "false -> tool_choice.disable_parallel_tool_use"),
    "max_completion_tokens": ("converted", _enc_max_tokens, "-> max_tokens (required; endpoint default when absent)"),
    "max_tokens": ("converted", _enc_max_tokens, "-> max_tokens"),
    "temperature": ("converted", _enc_temperature, "above 1 dropped, never clamped"),
    "top_p": ("mapped", "top_p", "exact"),
    "stop": ("converted", _enc_stop, "-> stop_sequences"),
    "stream": ("mapped", "stream", "exact"),
    "stream_options": ("converted", _enc_stream_options, "consumed: include_usage decides the usage chunk; not forwarded"),
    "n": ("converted", _enc_n, "1 is Anthropic's only answer (the Chat decoder refuses more)"),
    "user": ("dropped", None, "no Anthropic counterpart (metadata.user_id is opaque)"),
    "safety_identifier": ("dropped", None, "no Anthropic counterpart"),
    "prompt_cache_key": ("dropped", None, "OpenAI-only"),
    "prompt_cache_retention": ("dropped", None, "OpenAI-only"),
    "response_format": ("dropped", None, "no exact Anthropic counterpart"),
    "reasoning_effort": ("converted", _enc_effort, "-> thinking enabled with the level's budget_tokens (capped under "
                                                   "max_tokens), 'none' -> disabled (neutral/effort.py)"),
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


def encode(conv: Conversation, *, max_tokens: int | None = None, endpoint: str | None = None,
           **_: object) -> RequestTranslation:
    """A neutral conversation as an Anthropic Messages request body. ``max_tokens``: the
    endpoint's default when the request sets none (Anthropic requires one); ``endpoint``: its
    name, for the error that says which key to add."""
    body = ft.check_body(conv.body, "Chat")
    rt = RequestTranslation(body={})
    o = ft.Options()
    out = ft.run(ENCODE_FIELDS, ft.CHECKS, body, rt, o)
    if "max_tokens" not in out:
        if max_tokens is None:
            where = f"endpoint {endpoint}" if endpoint else "the endpoint"
            raise ft.bad(
                "max_tokens",
                f"Anthropic requires max_tokens; the request sets none and {where} configures no default "
                f"(add `max_tokens:` to {where} in the rules)",
            )
        out["max_tokens"] = max_tokens
        rt.plumbing.append("max_tokens")
        rt.capped = Capped(asked=None, cap=max_tokens)
    _fit_thinking(rt, out, body.get("reasoning_effort"))
    _at_most_four_breakpoints(rt, out)
    rt.client_wants_usage = o.include_usage or not out.get("stream")
    rt.body = out
    return rt


# ---------------------------------------------------------------------------------------
# cache: auto — breakpoints on the stable prefix (docs/architecture.md rule 1: billing plumbing)
# ---------------------------------------------------------------------------------------

MAX_BREAKPOINTS = 4  # Anthropic takes at most 4 cache_control blocks in a request
EPHEMERAL = {"type": "ephemeral"}
_NOT_MARKABLE = ("thinking", "redacted_thinking")  # blocks that cannot carry cache_control


CHAT_BREAKPOINT = "prompt_cache_breakpoint"  # a Chat client's own breakpoint on a text part (OpenAI GPT-5.6+)
_CARRIED = " (the client's own cache breakpoint)"  # how _enc_text_part records one it carried


def _at_most_four_breakpoints(rt: RequestTranslation, out: dict[str, Any]) -> None:
    """The client's own breakpoints carried (``_enc_text_part``), at most ``MAX_BREAKPOINTS`` of
    them: Anthropic rejects a fifth. The last four are kept (each covers the longest prefix
    before it); an earlier one is dropped, recorded."""
    if not any(c.endswith(_CARRIED) for c in rt.converted):  # the usual case: no breakpoint of the client's
        return
    marked = [(i, k) for i, m in enumerate(out.get("messages") or ()) if isinstance(m.get("content"), list)
              for k, b in enumerate(m["content"]) if isinstance(b, dict) and "cache_control" in b]
    extra = len(marked) + _breakpoint_count({k: v for k, v in out.items() if k != "messages"}) - MAX_BREAKPOINTS
    if extra <= 0:
        return
    for i, k in marked[:extra]:
        m = out["messages"][i] = dict(out["messages"][i])
        content = m["content"] = list(m["content"])
        content[k] = {key: v for key, v in content[k].items() if key != "cache_control"}
    rt.warnings.append(f"the client's {extra} earliest cache breakpoint(s) not carried: Anthropic takes at most "
                       f"{MAX_BREAKPOINTS} (the last ones, covering the longest prefixes, are)")


def _breakpoint_count(body: dict[str, Any]) -> int:
    """The cache_control blocks a body already carries (tools, system blocks, message blocks)."""
    n = sum(1 for t in body.get("tools") or () if isinstance(t, dict) and "cache_control" in t)
    system = body.get("system")
    n += sum(1 for b in system if isinstance(b, dict) and "cache_control" in b) if isinstance(system, list) else 0
    for m in body.get("messages") or ():
        content = m.get("content") if isinstance(m, dict) else None
        n += sum(1 for b in content if isinstance(b, dict) and "cache_control" in b) if isinstance(content, list) else 0
    return n


def _mark_content(holder: dict[str, Any], key: str, path: str) -> str | None:
    """A breakpoint on the last markable block of ``holder[key]`` (a string becomes its one text
    block, the same text); the path marked, or None when nothing there can carry one."""
    value = holder.get(key)
    if isinstance(value, str):
        if not value:
            return None
        holder[key] = [{"type": "text", "text": value, "cache_control": dict(EPHEMERAL)}]
        return f"{path}[0].cache_control"
    if not isinstance(value, list):
        return None
    value = holder[key] = list(value)  # a list of its own: the input's is never changed
    for i in range(len(value) - 1, -1, -1):
        block = value[i]
        if isinstance(block, dict) and block.get("type") not in _NOT_MARKABLE and block.get("text") != "":
            if "cache_control" in block:
                return None  # already a breakpoint there
            value[i] = {**block, "cache_control": dict(EPHEMERAL)}
            return f"{path}[{i}].cache_control"
    return None


def place_cache_breakpoints(body: dict[str, Any]) -> list[str]:
    """``cache: auto``: breakpoints where a provider that caches by itself would have cached,
    on a translated body (changed in place; only new containers, never shared leaves): the end
    of the conversation (what the next turn reads), the end of the previous user turn (what this
    turn reads, written by the turn before), the system prompt, the tools; at most
    ``MAX_BREAKPOINTS`` with the client's own, in that order of value. Returns the paths added
    (recorded as plumbing). The model sees nothing new: cache_control is billing, not content."""
    room = MAX_BREAKPOINTS - _breakpoint_count(body)
    messages = body.get("messages")
    spots: list[tuple[dict[str, Any], str, str]] = []
    if isinstance(messages, list) and messages:
        last = len(messages) - 1
        spots.append((messages[last], "content", f"messages[{last}].content"))
        prev = next((i for i in range(last - 1, -1, -1)
                     if isinstance(messages[i], dict) and messages[i].get("role") == "user"), None)
        if prev is not None:
            spots.append((messages[prev], "content", f"messages[{prev}].content"))
    if body.get("system"):
        spots.append((body, "system", "system"))
    tools = body.get("tools")
    added: list[str] = []
    for holder, key, path in spots:
        if len(added) >= room:
            return added
        if holder is not body and isinstance(messages, list):  # a message: a copy of its own (no shared leaf changes)
            i = int(path.split("[")[1].split("]")[0])
            holder = messages[i] = dict(holder)
        if (where := _mark_content(holder, key, path)) is not None:
            added.append(where)
    if isinstance(tools, list) and tools and len(added) < room and isinstance(tools[-1], dict) \
            and "cache_control" not in tools[-1]:
        body["tools"] = [*tools[:-1], {**tools[-1], "cache_control": dict(EPHEMERAL)}]
        added.append(f"tools[{len(tools) - 1}].cache_control")
    return added
