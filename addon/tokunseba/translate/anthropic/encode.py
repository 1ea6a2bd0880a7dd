"""Anthropic Messages requests, encoded: the neutral conversation as an Anthropic body
(docs/dev/protocols.md A.1-A.5, E.1, E.2); its decoder is decode.py.

Sans-IO: ``Conversation`` in, ``RequestTranslation`` out. Every top-level field decision lives
in ``ENCODE_FIELDS`` (field -> (action, handler-or-target, note)); content parts and message
roles have their own tables. Rules kept throughout (docs/dev/architecture.md §2): drop, never
invent (the only additions are protocol plumbing, recorded in ``plumbing``); tool ids Anthropic
rejects refuse the turn (never rewritten); temperature above 1 is dropped (never clamped);
``max_tokens`` is required (the endpoint's default as plumbing); bad input raises
``TranslationError(400, "<json path>: ...")`` before any body exists.

The translated body is a new dict, but it may share unchanged leaves of the input by
reference (tool schemas): treat both as read-only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ... import jsonc
from ...errors import Refused
from ...neutral import Capped, Conversation, RequestTranslation
from ...neutral import BUDGETS, budget_for
from ...neutral import JSON_OBJECT, JSON_SCHEMA, TEXT, close_objects, keep_keywords
from ...neutral import read_format
from ...neutral import PROVIDER_STATE, state_for
from ...protocols import anthropic as pa
from ...protocols import TOOL_ID_RE
from .. import fieldtable as ft
from .cache import CARRIED, CHAT_BREAKPOINT, EPHEMERAL, at_most_four_breakpoints
from .common import JOIN, MESSAGE_KEYS, TEXT_KEYS

DOCUMENT_MEDIA_TYPES = ("application/pdf",)  # media types Anthropic takes as a document, never as an image


def _anthropic_id(v: Any, path: str) -> str:
    """A tool-call id Anthropic accepts, untouched; any other id refuses the turn (docs/dev/architecture.md rule 2)."""
    tool_id = ft.string(v, path)
    if not TOOL_ID_RE.fullmatch(tool_id):
        raise Refused(
            400,
            f"{path}: tool call id {ft.show(v)} does not match ^[a-zA-Z0-9_-]+$, which Anthropic requires; "
            "ids are never rewritten, so this turn cannot go to an Anthropic endpoint")
    return tool_id


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
            ft.extras(rt, x, TEXT_KEYS | {CHAT_BREAKPOINT}, xp)
            marks.append((len(texts), xp))
        else:
            ft.extras(rt, x, TEXT_KEYS, xp)
        if text:
            texts.append(text)
        else:
            rt.dropped.append(xp)
    return texts


def _enc_text_part(rt: RequestTranslation, x: dict[str, Any], xp: str) -> dict[str, Any] | None:
    text = ft.req(x, "text", xp, ft.string)
    if not text:  # Anthropic rejects empty text blocks
        ft.extras(rt, x, TEXT_KEYS, xp)
        rt.dropped.append(xp)
        return None
    if CHAT_BREAKPOINT in x:  # the client's own cache breakpoint (OpenAI's explicit one): the same intent
        ft.extras(rt, x, TEXT_KEYS | {CHAT_BREAKPOINT}, xp)
        rt.converted.append(f"{xp}.{CHAT_BREAKPOINT} -> cache_control{CARRIED}")
        return {"type": "text", "text": text, "cache_control": dict(EPHEMERAL)}
    ft.extras(rt, x, TEXT_KEYS, xp)
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
    ft.extras(rt, m, MESSAGE_KEYS, p)  # name
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
    ft.extras(rt, m, MESSAGE_KEYS, p)  # name
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
    tool_id = _anthropic_id(ft.req(m, "tool_call_id", p, ft.string), f"{p}.tool_call_id")  # docs/dev/pitfalls.md 10
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
            rt.converted.append(f"{xp}.{CHAT_BREAKPOINT} -> cache_control{CARRIED}")
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
                rt.converted.append(f"{xp}.{CHAT_BREAKPOINT} -> cache_control{CARRIED}")
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


def _enc_response_format(rt: RequestTranslation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    """response_format -> output_config.format (neutral/output_format.py): json_schema with the schema in
    Anthropic's subset (unsupported keywords dropped, objects closed); json_object has no counterpart."""
    fmt = read_format(value, key, rt.dropped)
    if fmt is None or fmt.kind == JSON_OBJECT or (fmt.kind == JSON_SCHEMA and fmt.schema is None):
        rt.dropped.append(key)
        if fmt is not None:
            rt.warnings.append(f"{key} {fmt.kind} without a schema: Anthropic has no JSON mode without one: dropped, "
                               "the model answers in free text")
        return
    if fmt.kind == TEXT:  # Anthropic's default output: nothing to send
        return
    sp = f"{key}.json_schema"
    rt.dropped.extend(f"{sp}.{k}" for k in ("name", "strict", "description") if getattr(fmt, k) is not None)
    schema = close_objects(keep_keywords(fmt.schema or {}, pa.output_schema_takes, f"{sp}.schema", rt.dropped),
                           f"{sp}.schema", rt.converted)
    if schema is None:
        rt.dropped.append(key)
        rt.warnings.append(f"{key}: the schema lets an object take other properties (additionalProperties), which "
                           "Anthropic's structured outputs do not take: dropped, the model answers in free text")
        return
    out.setdefault("output_config", {})["format"] = {"type": JSON_SCHEMA, "schema": schema}


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
    "response_format": ("converted", _enc_response_format, "json_schema -> output_config.format {type: json_schema, "
                        "schema}: keywords Anthropic does not support dropped, objects that say nothing of other "
                        "properties closed (additionalProperties: false), name/strict/description dropped (Anthropic "
                        "always constrains; platform.claude.com/docs/en/build-with-claude/structured-outputs); "
                        "json_object dropped (no schema-less JSON mode); text is the default"),
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
    at_most_four_breakpoints(rt, out)
    rt.client_wants_usage = o.include_usage or not out.get("stream")
    rt.body = out
    return rt
