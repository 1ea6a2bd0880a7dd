"""Gemini requests, encoded: the neutral request as a ``generateContent`` body, by field
tables (``ENCODE_FIELDS``; docs/dev/protocols.md D.1, D.3, D.4); its decoder is decode.py.

System -> ``systemInstruction``, assistant -> ``model`` contents, each tool result a
``functionResponse`` given its call's ``name`` from the history (Gemini needs it) and the
call's id byte for byte; JSON Schemas go as ``parametersJsonSchema``; the first function call
of each model turn in the active tool loop carries Gemini's documented
``skip_thought_signature_validator`` (plumbing, recorded: Gemini 3 rejects unsigned calls
from another model's history, docs/dev/protocols.md D.4.3). The model and the stream flag go in
the URL (the caller puts them there).
"""

from __future__ import annotations

import re
from typing import Any

from ... import jsonc
from ...neutral import Capped, Conversation, RequestTranslation
from ...neutral import BUDGETS, budget_for
from ...neutral import JSON_SCHEMA, TEXT, keep_keywords
from ...neutral import read_format
from ...neutral import note_once
from ...neutral import state_for
from ...protocols import gemini as pg
from .. import fieldtable as ft
from .common import JOIN, arr, bad, obj, opt_str

DATA_URL = re.compile(r"^data:([^;,]+);base64,(.*)$", re.DOTALL)
GEMINI_MAX_STOP = 5
CHOICES = {"auto": "AUTO", "required": "ANY", "none": "NONE"}


class _Encode:
    """What encoding ``messages`` keeps on the way (the row's handler makes one)."""

    def __init__(self, rt: RequestTranslation) -> None:
        self.rt = rt
        self.names: dict[str, str] = {}  # tool call id -> function name, from the history
        self.contents: list[dict[str, Any]] = []
        self.system: list[str] = []

    def drop(self, path: str) -> None:
        note_once(self.rt.dropped, path)


def _texts(e: _Encode, content: Any, path: str) -> list[dict[str, Any]]:
    """A neutral content (a string or parts) as Gemini parts."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"text": content}] if content else []
    parts: list[dict[str, Any]] = []
    for j, p in enumerate(arr(content, path)):
        pp = f"{path}[{j}]"
        p = obj(p, pp)
        t = p.get("type")
        if t == "text":
            parts.append({"text": p.get("text") or ""})
        elif t == "image_url":
            url = (p.get("image_url") or {}).get("url") if isinstance(p.get("image_url"), dict) else p.get("image_url")
            url = opt_str(url, f"{pp}.image_url.url")
            m = DATA_URL.match(url or "")
            if m:
                parts.append({"inlineData": {"mimeType": m.group(1), "data": m.group(2)}})
            elif isinstance(url, str) and url.startswith(("http://", "https://")):
                parts.append({"fileData": {"fileUri": url}})
            else:
                e.drop(pp)
            if isinstance(p.get("image_url"), dict) and p["image_url"].get("detail"):
                e.drop(f"{pp}.image_url.detail")
        elif t == "file":
            f = obj(p.get("file") or {}, f"{pp}.file")
            m = DATA_URL.match(opt_str(f.get("file_data"), f"{pp}.file.file_data") or "")
            if m:
                parts.append({"inlineData": {"mimeType": m.group(1), "data": m.group(2)}})
            else:
                e.drop(pp)  # a file id stored at the client's provider
        elif t == "input_audio":
            a = obj(p.get("input_audio") or {}, f"{pp}.input_audio")
            fmt = a.get("format")
            if isinstance(a.get("data"), str) and fmt in ("wav", "mp3"):
                parts.append({"inlineData": {"mimeType": f"audio/{fmt}", "data": a["data"]}})
            else:
                e.drop(pp)
        else:
            e.drop(pp)
    return parts


def _add(e: _Encode, role: str, parts: list[dict[str, Any]]) -> None:
    if parts:
        e.contents.append({"role": role, "parts": parts})


def _model_parts(e: _Encode, m: dict[str, Any], mp: str) -> list[dict[str, Any]]:
    """An assistant message as a model content's parts: its text, then its function calls (each
    with its restored thoughtSignature, if any); arguments that are no JSON object refuse the turn."""
    parts = _texts(e, m.get("content"), f"{mp}.content")
    restored = state_for(m, "gemini")  # this endpoint's own thoughtSignatures, on their calls
    sigs = restored.payload.get("signatures", {}) if restored else {}
    if restored and "text_signature" in restored.payload and not m.get("tool_calls"):
        texts = [q for q in parts if "text" in q]
        if texts:  # a reply without calls: its signature back on its (last) text part
            texts[-1]["thoughtSignature"] = restored.payload["text_signature"]
    for j, tc in enumerate(arr(m.get("tool_calls") or [], f"{mp}.tool_calls")):
        tp = f"{mp}.tool_calls[{j}]"
        fn = obj(obj(tc, tp).get("function"), f"{tp}.function")
        opt_str(tc.get("id"), f"{tp}.id")
        opt_str(fn.get("name"), f"{tp}.function.name")
        raw = fn.get("arguments")
        try:
            args = jsonc.loads_exact(raw) if isinstance(raw, str) and raw.strip() else (raw or {})
        except jsonc.JSONDecodeError:
            args = None
        if not isinstance(args, dict):
            raise bad(f"{tp}.function.arguments", "Gemini takes function-call arguments as a JSON object; "
                                                   "these are not one", refused=True)
        fc: dict[str, Any] = {"name": fn.get("name"), "args": args}
        if tc.get("id"):
            fc["id"] = tc["id"]
            e.names[tc["id"]] = str(fn.get("name"))
        part = {"functionCall": fc}
        if tc.get("id") in sigs:
            part["thoughtSignature"] = sigs[tc["id"]]
        parts.append(part)
    if m.get("refusal"):
        e.drop(f"{mp}.refusal")
    return parts


def _enc_messages(rt: RequestTranslation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    """-> ``contents`` (and ``systemInstruction``): the body's first keys, as the row comes first."""
    e = _Encode(rt)
    results: list[dict[str, Any]] = []  # functionResponse parts waiting for their user content
    for i, m in enumerate(arr(value, key)):
        mp = f"{key}[{i}]"
        m = obj(m, mp)
        role = m.get("role")
        if role != "tool" and results:
            _add(e, "user", results)
            results = []
        if role in ("system", "developer"):
            if e.contents:
                note_once(e.rt.converted, f"{mp}: a system message after the conversation began -> systemInstruction")
            e.system.extend(p["text"] for p in _texts(e, m.get("content"), f"{mp}.content") if "text" in p)
        elif role == "user":
            _add(e, "user", _texts(e, m.get("content"), f"{mp}.content"))
        elif role == "assistant":
            _add(e, "model", _model_parts(e, m, mp))
        elif role == "tool":
            cid = m.get("tool_call_id")
            name = e.names.get(cid) if isinstance(cid, str) else None
            if name is None:
                raise bad(f"{mp}.tool_call_id", f"the tool result {cid!r} answers no call in the history; Gemini "
                                                 "needs the function's name", refused=True)
            content = m.get("content")
            text = content if isinstance(content, str) else "".join(
                p.get("text") or "" for p in arr(content or [], f"{mp}.content")
                if isinstance(p, dict) and p.get("type") == "text")
            results.append({"functionResponse": {"id": cid, "name": name, "response": {"output": text}}})
            note_once(e.rt.plumbing, "contents[].parts[].functionResponse.response.output (the result text in the "
                                     "object Gemini requires)")
        else:
            raise bad(f"{mp}.role", f"unknown role {role!r}")
    if results:
        _add(e, "user", results)
    _sign_active_loop(e)
    out["contents"] = e.contents
    if e.system:
        out["systemInstruction"] = {"parts": [{"text": JOIN.join(e.system)}]}


def _sign_active_loop(e: _Encode) -> None:
    """The first functionCall of each model turn since the last user text carries Gemini's
    documented bypass signature (what Gemini CLI itself does: docs/dev/clients.md §5.4,
    docs/dev/protocols.md D.4.3), unless it carries its real one (restored: reasoning/state.py)."""
    start = 0
    for i, c in enumerate(e.contents):
        if c["role"] == "user" and any("text" in p for p in c["parts"]):
            start = i + 1
    for c in e.contents[start:]:
        if c["role"] != "model":
            continue
        for p in c["parts"]:
            if "functionCall" in p:
                if "thoughtSignature" in p:  # its real signature, restored: never the skip value over it
                    break
                p["thoughtSignature"] = pg.SKIP_SIGNATURE
                note_once(e.rt.plumbing, f"contents[].parts[].thoughtSignature = {pg.SKIP_SIGNATURE!r} on the first "
                                         "function call of each model turn of the active tool loop")
                break


# FunctionDeclaration.name, as the Gemini API reference states it; Anthropic and Chat allow
# names Gemini rejects (a leading digit, up to 128 characters): such a turn is refused.
FUNCTION_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:\-]{0,63}")


def _enc_tools(rt: RequestTranslation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    decls = []
    for i, t in enumerate(arr(value, key)):
        if type(t) is not dict:
            obj(t, f"{key}[{i}]")  # a 400 naming the path (a path is built only for a failure or a record)
        fn = t.get("function")
        if t.get("type") != "function" or not isinstance(fn, dict):
            note_once(rt.dropped, f"{key}[{i}]")
            continue
        name = fn.get("name")
        if not isinstance(name, str) or not FUNCTION_NAME.fullmatch(name):
            raise bad(f"{key}[{i}].function.name", f"Gemini rejects the function name {name!r}: it must start "
                                                    "with a letter or an underscore and hold at most 64 of a-z, "
                                                    "A-Z, 0-9, _ . : -", refused=True)
        fd: dict[str, Any] = {"name": name}
        if desc := fn.get("description"):
            fd["description"] = desc
        if (params := fn.get("parameters")) is not None:
            fd["parametersJsonSchema"] = params
        if fn.get("strict") is not None:
            note_once(rt.dropped, f"{key}[{i}].function.strict")
        decls.append(fd)
    if decls:
        out["tools"] = [{"functionDeclarations": decls}]


def _enc_tool_choice(rt: RequestTranslation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    if isinstance(value, str) and value in CHOICES:
        fcc: dict[str, Any] = {"mode": CHOICES[value]}
    elif isinstance(value, dict) and isinstance(value.get("function"), dict) and value["function"].get("name"):
        fcc = {"mode": "ANY", "allowedFunctionNames": [value["function"]["name"]]}
    else:
        raise bad(key, f"unknown tool_choice {value!r}")
    out["toolConfig"] = {"functionCallingConfig": fcc}


def _gen(name: str) -> ft.Handler:
    def mapped(rt: RequestTranslation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
        out.setdefault("generationConfig", {})[name] = value
    return mapped


def _enc_max_tokens(rt: RequestTranslation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    cap = o.max_tokens_cap
    if isinstance(cap, int) and isinstance(value, int) and value > cap:
        rt.capped = Capped(asked=value, cap=cap)
        value = cap
        rt.converted.append(f"{key} -> generationConfig.maxOutputTokens (capped at {cap})")
    out.setdefault("generationConfig", {})["maxOutputTokens"] = value


def _enc_stop(rt: RequestTranslation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    stops = [value] if isinstance(value, str) else list(arr(value, key))
    if len(stops) > GEMINI_MAX_STOP:
        rt.dropped.extend(f"{key}[{i}]" for i in range(GEMINI_MAX_STOP, len(stops)))
        stops = stops[:GEMINI_MAX_STOP]
    out.setdefault("generationConfig", {})["stopSequences"] = stops


def _enc_n(rt: RequestTranslation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    pass  # 1: the Chat decoder refuses more (the same toward every target)


def _enc_response_format(rt: RequestTranslation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    """response_format -> responseMimeType application/json (+ responseJsonSchema, in the subset Gemini
    takes): neutral/output_format.py."""
    fmt = read_format(value, key, rt.dropped)
    if fmt is None:
        note_once(rt.dropped, key)
        return
    if fmt.kind == TEXT:  # Gemini's default output: nothing to send
        return
    gc = out.setdefault("generationConfig", {})
    gc["responseMimeType"] = pg.JSON_MIME
    if fmt.kind == JSON_SCHEMA:
        sp = f"{key}.json_schema"
        rt.dropped.extend(f"{sp}.{k}" for k in ("name", "strict", "description") if getattr(fmt, k) is not None)
        if fmt.schema is not None:  # none: any JSON object, as json_object
            gc["responseJsonSchema"] = keep_keywords(fmt.schema, pg.response_json_schema_takes, f"{sp}.schema",
                                                     rt.dropped)


def _enc_effort(rt: RequestTranslation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    if not isinstance(value, str) or value not in BUDGETS:
        note_once(rt.dropped, key)
        rt.warnings.append(f"reasoning_effort {value!r} is no level tokunseba knows: dropped")
        return
    budget = budget_for(value)
    out.setdefault("generationConfig", {})["thinkingConfig"] = {"thinkingBudget": budget}
    rt.converted.append(f"{key} {value!r} -> generationConfig.thinkingConfig.thinkingBudget {budget}")


def _enc_nothing(rt: RequestTranslation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    pass


def _enc_drop(rt: RequestTranslation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    if value not in (None, False):
        note_once(rt.dropped, key)


# neutral field -> (action, handler, why). Processed in this order; anything not listed is dropped, recorded.
ENCODE_FIELDS: ft.FieldTable = {
    "messages": ("converted", _enc_messages, "system -> systemInstruction; user/assistant -> user/model contents; "
                                             "tool results -> functionResponse parts named from the history"),
    "tools": ("converted", _enc_tools, "function tools -> functionDeclarations (parameters as parametersJsonSchema)"),
    "tool_choice": ("converted", _enc_tool_choice, "auto/none/required/function -> AUTO/NONE/ANY/ANY+allowed name"),
    "max_completion_tokens": ("converted", _enc_max_tokens, "-> maxOutputTokens, capped by the endpoint's max_tokens"),
    "max_tokens": ("converted", _enc_max_tokens, "-> maxOutputTokens"),
    "temperature": ("converted", _gen("temperature"), "exact, as generationConfig.temperature"),
    "top_p": ("converted", _gen("topP"), "exact, as generationConfig.topP"),
    "presence_penalty": ("converted", _gen("presencePenalty"), "exact, as generationConfig.presencePenalty"),
    "frequency_penalty": ("converted", _gen("frequencyPenalty"), "exact, as generationConfig.frequencyPenalty"),
    "seed": ("converted", _gen("seed"), "exact, as generationConfig.seed"),
    "stop": ("converted", _enc_stop, "-> stopSequences (5 at most; the rest dropped)"),
    "n": ("converted", _enc_n, "1 is Gemini's one candidate (the Chat decoder refuses more)"),
    "response_format": ("converted", _enc_response_format, "json_object/json_schema -> responseMimeType "
                                                           "application/json (+ responseJsonSchema: JSON Schema, the "
                                                           "keywords Gemini documents it takes; others dropped, "
                                                           "recorded; ai.google.dev/api/generate-content#generationconfig); "
                                                           "name/strict/description dropped (Gemini has none); text "
                                                           "is the default"),
    "reasoning_effort": ("converted", _enc_effort, "-> thinkingConfig.thinkingBudget, the level's budget "
                                                   "('none': 0) (neutral/effort.py)"),
    "model": ("converted", _enc_nothing, "goes in the URL path"),
    "stream": ("converted", _enc_nothing, "goes in the URL (:streamGenerateContent?alt=sse)"),
    "stream_options": ("converted", _enc_nothing, "Gemini always reports usage"),
    "parallel_tool_calls": ("dropped", _enc_drop, "no Gemini counterpart (false is recorded)"),
}


def encode(conv: Conversation, *, max_tokens: int | None = None, **_: object) -> RequestTranslation:
    """A neutral request as a Gemini ``generateContent`` body (model and stream go in the URL)."""
    rt = RequestTranslation(body={})
    body = ft.run(ENCODE_FIELDS, {}, conv.body, rt, ft.Options(max_tokens_cap=max_tokens))
    if max_tokens is not None and "maxOutputTokens" not in body.get("generationConfig", {}):
        # the client named no limit: the endpoint's is the turn's (plumbing)
        body.setdefault("generationConfig", {})["maxOutputTokens"] = max_tokens
        rt.plumbing.append("generationConfig.maxOutputTokens")
        rt.capped = Capped(asked=None, cap=max_tokens)
    if not body.get("contents"):
        raise bad("messages", "no user or assistant content to send")
    rt.body = body
    return rt
