"""OpenAI Responses requests, encoded: the neutral conversation as a Responses body
(docs/dev/protocols.md C.1, E.1, E.2); its decoder is decode.py.

Sans-IO: ``Conversation`` in, ``RequestTranslation`` out; every top-level field decision lives
in ``ENCODE_FIELDS``. Checks: Responses has no stop sequences (dropped, recorded); function
tools say ``strict: false`` unless the client said otherwise (plumbing: Responses defaults to
strict schemas, Chat and Anthropic to loose ones); tool names over 64 characters refuse the
turn; bad input raises ``TranslationError(400, "<json path>: ...")``; the input is never
mutated (the output may share unchanged leaves, such as tool schemas, by reference).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...neutral import Capped, Conversation, RequestTranslation
from ...neutral import JSON_SCHEMA, PLUMBING_NAME
from ...neutral import read_format
from ...neutral import PROVIDER_STATE, state_for
from .. import fieldtable as ft
from .common import JOIN, TEXT_KEYS

OPENAI_TOOL_NAME_MAX = 64  # docs/dev/pitfalls.md 20

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
    ft.extras(rt, x, TEXT_KEYS, xp)
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
    """response_format -> text.format: the same three types, json_schema's keys flat (neutral/output_format.py)."""
    fmt = read_format(value, key, rt.dropped)
    if fmt is None:
        rt.dropped.append(key)
        return
    spec = fmt.neutral()
    flat: dict[str, Any] = {"type": fmt.kind, **spec.get("json_schema", {})}
    if fmt.kind == JSON_SCHEMA and fmt.name is None:  # Responses requires a name (Anthropic's and Gemini's have none)
        flat = {"type": fmt.kind, "name": PLUMBING_NAME, **spec["json_schema"]}
        rt.plumbing.append("text.format.name")
    out.setdefault("text", {})["format"] = flat


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
    "response_format": ("converted", _enc_response_format, "-> text.format: text / json_object as they are, "
                        "json_schema's name, schema, strict, description flat beside its type (OpenAI API reference, "
                        "Responses text.format); a schema without a name gets 'response' (plumbing: Responses "
                        "requires one)"),
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
