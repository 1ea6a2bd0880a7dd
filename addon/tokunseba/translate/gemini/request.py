"""Gemini requests <-> the neutral request (Chat-shaped: see neutral.conversation), by field
tables (docs/protocols.md D.1, D.3, D.4; issue 11).

``decode(body, path=…)``: a ``generateContent`` / ``streamGenerateContent`` body (lowerCamel
or snake_case keys: google-genai leaks snake_case) as the neutral request. The model and the
stream flag come from the URL path (``/v1beta/models/{model}:streamGenerateContent?alt=sse``),
never the body. Every field is in ``DECODE_FIELDS`` (mapped,
converted or dropped, with the reason); every drop is recorded in the client's JSON path.
Function-call ids: a ``functionCall`` without ``id`` gets one minted deterministically from
its place (recorded ``id_synthesized``); a ``functionResponse`` without ``id`` is matched to
the preceding model turn's calls by name, then order.

``encode(neutral, …)``: the neutral request as a Gemini body (``ENCODE_FIELDS``): system ->
``systemInstruction``, assistant -> ``model`` contents, each tool result a
``functionResponse`` given its call's ``name`` from the history (Gemini needs it) and the
call's id byte for byte; JSON Schemas go as ``parametersJsonSchema``; the first function call
of each model turn in the active tool loop carries Gemini's documented
``skip_thought_signature_validator`` (plumbing, recorded: Gemini 3 rejects unsigned calls
from another model's history, docs/protocols.md D.4.3). The model and the stream flag go in the URL.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, unquote

from ... import jsonc
from ...errors import InvalidRequest, Refused, TranslationError
from ...neutral import Capped, Conversation, RequestTranslation
from ...neutral import note_once
from ...neutral import BUDGETS, LEVELS, budget_for, level_for_budget
from ...neutral import state_for
from ...protocols import gemini as pg
from .. import fieldtable as ft

JOIN = "\n\n"  # how several text parts (system, user) become one string
DATA_URL = re.compile(r"^data:([^;,]+);base64,(.*)$", re.DOTALL)
GEMINI_MAX_STOP = 5
# a fileData URI only Google can read (its Files API, Cloud Storage)
GOOGLE_ONLY_URI = re.compile(r"^(gs://|https://generativelanguage\.googleapis\.com/)")
MODES = {"AUTO": "auto", "ANY": "required", "NONE": "none", "VALIDATED": "auto"}
CHOICES = {"auto": "AUTO", "required": "ANY", "none": "NONE"}
# /{version}/models/{model}:{method}: the model and the method (stream or not) of a request path
PATH = re.compile(r"/models/(?P<model>[^/:?]+):(?P<method>[A-Za-z]+)")


def _snake(name: str) -> str:
    return re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), name)


def _get(obj: dict[str, Any], name: str) -> Any:
    """A field by its lowerCamel name or its snake_case spelling."""
    v = obj.get(name)
    return obj.get(_snake(name)) if v is None else v


def _keys(obj: dict[str, Any]) -> dict[str, str]:
    """lowerCamel name -> the spelling present."""
    out = {}
    for k in obj:
        camel = re.sub(r"_([a-z])", lambda m: m.group(1).upper(), k)
        out[camel] = k
    return out


def _bad(path: str, msg: str, *, refused: bool = False) -> TranslationError:
    return (Refused if refused else InvalidRequest)(400, f"{path}: {msg}")


def _obj(v: Any, path: str) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise _bad(path, "must be an object")
    return v


def _arr(v: Any, path: str) -> list[Any]:
    if not isinstance(v, list):
        raise _bad(path, "must be an array")
    return v


def _opt_str(v: Any, path: str) -> str | None:
    """A field that is a string when present (a Chat client's body is read as it came)."""
    if v is not None and not isinstance(v, str):
        raise _bad(path, "must be a string")
    return v


# ======================================================================================
# decode: Gemini -> neutral
# ======================================================================================


class _Decode:
    """The decoder's record for the field tables (``ft.run`` records drops in ``dropped``: the
    conversation's own list) and what the rows build on the way."""

    def __init__(self, rt: Conversation) -> None:
        self.rt = rt
        self.dropped = rt.dropped
        self.messages: list[dict[str, Any]] = []
        self.system: list[str] = []
        self.calls: list[tuple[str, str]] = []  # (name, id) of the latest model turn's calls, unanswered
        self.gc: dict[str, Any] = {}  # the generationConfig its rows read besides their own field

    def drop(self, path: str) -> None:
        note_once(self.rt.dropped, path)


def _lower_types(schema: Any) -> Any:
    """OpenAPI-style UPPERCASE type names (``OBJECT``) as JSON Schema's (``object``)."""
    if isinstance(schema, dict):
        out: dict[str, Any] = {}
        for k, v in schema.items():
            if k == "type" and isinstance(v, str):
                out[k] = v.lower()
            elif k == "type" and isinstance(v, list):
                out[k] = [t.lower() if isinstance(t, str) else t for t in v]
            else:
                out[k] = _lower_types(v)
        return out
    if isinstance(schema, list):
        return [_lower_types(x) for x in schema]
    return schema


def _media(d: _Decode, mime: str, data_url: str, path: str) -> dict[str, Any] | None:
    if mime.startswith("image/"):
        return {"type": "image_url", "image_url": {"url": data_url}}
    if mime == "application/pdf":
        return {"type": "file", "file": {"file_data": data_url}}
    d.drop(path)  # audio, video, other documents: no neutral counterpart
    return None


def _user_part(d: _Decode, part: dict[str, Any], pp: str) -> dict[str, Any] | None:
    """A user part as a neutral content part (None: dropped, recorded)."""
    keys = _keys(part)
    for k in keys:
        if k not in ("text", "inlineData", "fileData", "thought", "thoughtSignature", "functionResponse"):
            d.drop(f"{pp}.{keys[k]}")
    if "thoughtSignature" in keys:
        d.drop(f"{pp}.{keys['thoughtSignature']}")
    if part.get("thought") is True:
        d.drop(pp)
        return None
    if isinstance(part.get("text"), str):
        return {"type": "text", "text": part["text"]}
    inline = _get(part, "inlineData")
    if isinstance(inline, dict):
        mime, data = _get(inline, "mimeType"), inline.get("data")
        if not isinstance(mime, str) or not isinstance(data, str):
            raise _bad(f"{pp}.{keys['inlineData']}", "needs mimeType and data strings")
        return _media(d, mime, f"data:{mime};base64,{data}", f"{pp}.{keys['inlineData']}")
    fdata = _get(part, "fileData")
    if isinstance(fdata, dict):
        uri, mime = _get(fdata, "fileUri"), _get(fdata, "mimeType")
        fp = f"{pp}.{keys['fileData']}"
        if not isinstance(uri, str) or GOOGLE_ONLY_URI.match(uri) or not (mime or "").startswith("image/"):
            d.drop(fp)  # a file stored at Google (or not an image): another endpoint cannot read it
            return None
        return {"type": "image_url", "image_url": {"url": uri}}
    return None


def _result_text(response: Any) -> str:
    """A functionResponse's ``response`` as the tool result text: ``output`` when it is the only
    key and a string (Gemini CLI), otherwise the object as JSON (``error`` / ``result`` keys
    kept: the key is the only failure signal Gemini has)."""
    if isinstance(response, dict) and set(response) == {"output"} and isinstance(response["output"], str):
        return response["output"]
    return jsonc.dumps(response)


def _function_response(d: _Decode, fr: dict[str, Any], fp: str, taken: set[int]) -> dict[str, Any]:
    name = fr.get("name")
    if not isinstance(name, str) or not name:
        raise _bad(f"{fp}.name", "a functionResponse needs the function name")
    for k in fr:
        if k not in ("id", "name", "response", "parts", "willContinue", "scheduling"):
            d.drop(f"{fp}.{k}")
    if fr.get("parts"):
        d.drop(f"{fp}.parts")
    cid = fr.get("id")
    if not isinstance(cid, str) or not cid:
        # Python SDK / AFC: no id. The preceding model turn's call of this name, in order.
        pos = next((i for i, (n, _) in enumerate(d.calls) if n == name and i not in taken), None)
        if pos is None:
            raise _bad(fp, f"a functionResponse for {name!r} without an id answers no function call of the "
                           f"model turn before it", refused=True)
        taken.add(pos)
        cid = d.calls[pos][1]
        note_once(d.rt.converted, f"{fp}.id: matched to its call by name and order")
    return {"role": "tool", "tool_call_id": cid, "content": _result_text(fr.get("response"))}


def _user(d: _Decode, parts: list[Any], cp: str) -> None:
    tool_msgs: list[dict[str, Any]] = []
    content: list[dict[str, Any]] = []
    taken: set[int] = set()
    for j, part in enumerate(parts):
        pp = f"{cp}.parts[{j}]"
        part = _obj(part, pp)
        fr = _get(part, "functionResponse")
        if isinstance(fr, dict):
            if content:
                note_once(d.rt.warnings, f"{pp}: a function result after other parts moved before them "
                                         "(a tool result must follow its call)")
            tool_msgs.append(_function_response(d, fr, f"{pp}.{_keys(part)['functionResponse']}", taken))
            continue
        got = _user_part(d, part, pp)
        if got is not None:
            content.append(got)
    n = len(d.messages)
    for i, m in enumerate(tool_msgs):
        d.rt.origin[f"messages[{n + i}]"] = cp
    d.messages.extend(tool_msgs)
    if tool_msgs and content and any(p["type"] != "text" for p in content):
        note_once(d.rt.converted, f"{cp}: parts beside function results (a tool's image) sent as a user message "
                                  "after the results")
    if content:
        d.rt.origin[f"messages[{len(d.messages)}]"] = cp
        text_only = all(p["type"] == "text" for p in content)
        # text parts as one string (local servers drop array content), as the other decoders do
        d.messages.append({"role": "user", "content": JOIN.join(p["text"] for p in content) if text_only else content})
    d.calls = []


def _model(d: _Decode, parts: list[Any], cp: str, ci: int) -> None:
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    d.calls = []
    for j, part in enumerate(parts):
        pp = f"{cp}.parts[{j}]"
        part = _obj(part, pp)
        keys = _keys(part)
        if "thoughtSignature" in keys:
            d.drop(f"{pp}.{keys['thoughtSignature']}")  # Gemini's own; meaningless to another model
        if part.get("thought") is True:
            d.drop(pp)
            continue
        fc = _get(part, "functionCall")
        if isinstance(fc, dict):
            fp = f"{pp}.{keys['functionCall']}"
            name = fc.get("name")
            if not isinstance(name, str) or not name:
                raise _bad(f"{fp}.name", "a functionCall needs a name")
            cid = fc.get("id")
            if not isinstance(cid, str) or not cid:
                cid = f"call_{ci}_{len(calls)}"  # deterministic: the call's place in the history
                note_once(d.rt.warnings, f"id_synthesized: {fp}.id")
            args = fc.get("args")
            if args is not None and not isinstance(args, dict):
                raise _bad(f"{fp}.args", "must be an object")
            d.rt.origin[f"messages[{len(d.messages)}].tool_calls[{len(calls)}]"] = fp
            calls.append({"id": cid, "type": "function",
                          "function": {"name": name, "arguments": jsonc.dumps(args if args is not None else {})}})
            d.calls.append((name, cid))
            continue
        if isinstance(part.get("text"), str):
            texts.append(part["text"])
            continue
        for k in keys:
            if k not in ("thoughtSignature",):
                d.drop(f"{pp}.{keys[k]}")  # inlineData, executableCode, codeExecutionResult...
    msg: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if calls:
        msg["tool_calls"] = calls
    elif not texts:
        return  # nothing left of this turn (only thoughts)
    d.rt.origin[f"messages[{len(d.messages)}]"] = cp
    d.messages.append(msg)


def _contents(d: _Decode, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    for i, c in enumerate(_arr(value, key)):
        cp = f"{key}[{i}]"
        c = _obj(c, cp)
        for k in c:
            if k not in ("role", "parts"):
                d.drop(f"{cp}.{k}")
        role = c.get("role") or "user"
        parts = _arr(c.get("parts") or [], f"{cp}.parts")
        if role == "user":
            _user(d, parts, cp)
        elif role == "model":
            _model(d, parts, cp, i)
        else:
            raise _bad(f"{cp}.role", f"must be user or model, not {role!r}")


def _system_instruction(d: _Decode, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    if isinstance(value, str):  # the SDKs accept a bare string
        d.system.append(value)
        return
    value = _obj(value, key)
    for j, part in enumerate(_arr(value.get("parts") or [], f"{key}.parts")):
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            d.system.append(part["text"])
        else:
            d.drop(f"{key}.parts[{j}]")
    # its "role" (Gemini CLI sends "user") means nothing: ignored (docs/protocols.md D.3.2)


def _tools(d: _Decode, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    tools: list[dict[str, Any]] = []
    for i, t in enumerate(_arr(value, key)):
        tp = f"{key}[{i}]"
        t = _obj(t, tp)
        tkeys = _keys(t)
        for k in tkeys:
            if k != "functionDeclarations":
                d.drop(f"{tp}.{tkeys[k]}")  # googleSearch, codeExecution, urlContext...: Google's own tools
        for j, fd in enumerate(_arr(_get(t, "functionDeclarations") or [], f"{tp}.functionDeclarations")):
            fp = f"{tp}.{tkeys.get('functionDeclarations')}[{j}]"
            fd = _obj(fd, fp)
            fkeys = _keys(fd)
            fn: dict[str, Any] = {"name": fd.get("name")}
            if not isinstance(fn["name"], str) or not fn["name"]:
                raise _bad(f"{fp}.name", "a function declaration needs a name")
            if isinstance(fd.get("description"), str):
                fn["description"] = fd["description"]
            schema = _get(fd, "parametersJsonSchema")
            if schema is None and _get(fd, "parameters") is not None:
                schema = _lower_types(_get(fd, "parameters"))  # OpenAPI subset, UPPERCASE types
            if schema is not None:
                fn["parameters"] = schema
            for k in fkeys:
                if k not in ("name", "description", "parameters", "parametersJsonSchema"):
                    d.drop(f"{fp}.{fkeys[k]}")  # response / responseJsonSchema, behavior
            d.rt.origin[f"tools[{len(tools)}]"] = fp
            tools.append({"type": "function", "function": fn})
    if tools:
        out["tools"] = tools


def _tool_config(d: _Decode, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    value = _obj(value, key)
    keys = _keys(value)
    for k in keys:
        if k != "functionCallingConfig":
            d.drop(f"{key}.{keys[k]}")  # retrievalConfig
    fcc = _get(value, "functionCallingConfig")
    if not isinstance(fcc, dict):
        return
    fp = f"{key}.{keys['functionCallingConfig']}"
    mode = fcc.get("mode") or "AUTO"
    if not isinstance(mode, str) or mode not in MODES:
        raise _bad(f"{fp}.mode", f"must be one of {sorted(MODES)}, not {mode!r}")
    names = _get(fcc, "allowedFunctionNames")
    if mode == "ANY" and isinstance(names, list) and len(names) == 1 and isinstance(names[0], str):
        out["tool_choice"] = {"type": "function", "function": {"name": names[0]}}
    else:
        out["tool_choice"] = MODES[mode]
        if names:
            d.drop(f"{fp}.{_keys(fcc)['allowedFunctionNames']}")  # a subset has no Chat counterpart
        if mode == "VALIDATED":
            note_once(d.rt.converted, f"{fp}.mode: VALIDATED -> auto (schema-constrained calls have no counterpart)")


def _generation_config(d: _Decode, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    """Field by field (``GENERATION_FIELDS``), each by the client's spelling of it."""
    d.gc = value = _obj(value, key)
    keys = _keys(value)
    view = {camel: value[spelled] for camel, spelled in keys.items() if value[spelled] is not None}
    paths = {camel: f"{key}.{spelled}" for camel, spelled in keys.items()}
    got = ft.run(GENERATION_FIELDS, GENERATION_CHECKS, view, d, o, paths)
    for camel, (action, target, _why) in GENERATION_FIELDS.items():
        if action == "mapped" and camel in view:
            d.rt.origin[target] = paths[camel]  # type: ignore[index]
    out.update(got)


def _max_output_tokens(v: Any, path: str) -> int:
    if not isinstance(v, int) or isinstance(v, bool):  # a cap is compared with the endpoint's: a number
        raise _bad(path, f"expected an integer, not {jsonc.dumps(v)[:40]}")
    return v


def _gc_candidates(d: _Decode, path: str, v: Any, out: dict[str, Any], o: ft.Options) -> None:
    if v != 1:
        raise _bad(path, f"{v} candidates requested; the target returns one", refused=True)


def _gc_mime(d: _Decode, path: str, v: Any, out: dict[str, Any], o: ft.Options) -> None:
    if v == "application/json":
        schema = _get(d.gc, "responseJsonSchema")
        if schema is None:
            schema = _get(d.gc, "responseSchema")
        if schema is None:
            out["response_format"] = {"type": "json_object"}
        else:
            out["response_format"] = {"type": "json_schema",
                                      "json_schema": {"name": "response", "schema": _lower_types(schema)}}
            note_once(d.rt.plumbing, "response_format.json_schema.name")
        d.rt.origin["response_format"] = path
    elif v not in ("text/plain", None):
        d.drop(path)


def _gc_schema(d: _Decode, path: str, v: Any, out: dict[str, Any], o: ft.Options) -> None:
    if _get(d.gc, "responseMimeType") != "application/json":
        d.drop(path)  # a schema without JSON output: nothing to constrain


def _gc_stop(d: _Decode, path: str, v: Any, out: dict[str, Any], o: ft.Options) -> None:
    out["stop"] = list(_arr(v, path))
    d.rt.origin["stop"] = path


def _gc_thinking(d: _Decode, path: str, v: Any, out: dict[str, Any], o: ft.Options) -> None:
    """thinkingConfig -> reasoning_effort (neutral/effort.py): a level as named, a budget by level
    (0, off, and -1, dynamic: no level, dropped); includeThoughts asks for thought parts back: dropped."""
    for camel, spelled in _keys(_obj(v, path)).items():
        value, p = v[spelled], f"{path}.{spelled}"
        level = None
        if camel == "thinkingLevel" and isinstance(value, str) and value.lower() in LEVELS:
            level = value.lower()
        elif camel == "thinkingBudget" and type(value) is int and value > 0:  # 0 (off) and -1 (dynamic):
            level = level_for_budget(value)  # no level every target takes: dropped, the target's default
        if level is None or "reasoning_effort" in out:
            if value is not None:
                d.drop(p)
            continue
        out["reasoning_effort"] = level
        d.rt.origin["reasoning_effort"] = p
        d.rt.converted.append(f"{p} {value!r} -> reasoning_effort {level!r}")


# generationConfig field (lowerCamel) -> (action, neutral field or handler, why). Processed in this order.
GENERATION_FIELDS: ft.FieldTable = {
    "temperature": ("mapped", "temperature", "exact"),
    "topP": ("mapped", "top_p", "exact"),
    "maxOutputTokens": ("mapped", "max_completion_tokens", "exact (an integer)"),
    "stopSequences": ("converted", _gc_stop, "-> stop"),
    "presencePenalty": ("mapped", "presence_penalty", "exact"),
    "frequencyPenalty": ("mapped", "frequency_penalty", "exact"),
    "seed": ("mapped", "seed", "exact"),
    "candidateCount": ("converted", _gc_candidates, "1 is the only answer the client can get; more refused"),
    "responseMimeType": ("converted", _gc_mime, "application/json -> response_format (json_schema with the schema)"),
    "responseSchema": ("converted", _gc_schema, "read with responseMimeType (types lowercased)"),
    "responseJsonSchema": ("converted", _gc_schema, "read with responseMimeType"),
    "topK": ("dropped", None, "no Chat counterpart"),
    "thinkingConfig": ("converted", _gc_thinking, "thinkingLevel / thinkingBudget -> reasoning_effort "
                                                  "(neutral/effort.py); includeThoughts dropped"),
    "responseLogprobs": ("dropped", None, "no counterpart in the reply codecs"),
    "logprobs": ("dropped", None, "no counterpart in the reply codecs"),
    "responseModalities": ("dropped", None, "text is the only modality carried"),
    "speechConfig": ("dropped", None, "no counterpart"),
    "mediaResolution": ("dropped", None, "no counterpart"),
    "imageConfig": ("dropped", None, "no counterpart"),
    "audioTimestamp": ("dropped", None, "no counterpart"),
    "enableEnhancedCivicAnswers": ("dropped", None, "Google-only"),
    "routingConfig": ("dropped", None, "Google-only"),
    "modelSelectionConfig": ("dropped", None, "Google-only"),
    "enableAffectiveDialog": ("dropped", None, "Google-only"),
}
# the mapped rows' checks (a value carried as it came; the maximum output is compared with the endpoint's)
GENERATION_CHECKS: dict[str, Callable[[Any, str], Any]] = {
    "temperature": ft.anything, "topP": ft.anything, "maxOutputTokens": _max_output_tokens,
    "presencePenalty": ft.anything, "frequencyPenalty": ft.anything, "seed": ft.anything}


def _refuse_cached(d: _Decode, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    raise _bad(key, "names content cached at Google; another endpoint cannot read it, and the turn without it "
                    "is not the turn the client sent", refused=True)


# top-level field (lowerCamel) -> (action, handler, why). Processed in this order; anything not listed is
# dropped, recorded.
DECODE_FIELDS: ft.FieldTable = {
    "systemInstruction": ("converted", _system_instruction, "parts' text joined -> a leading system message; role ignored"),
    "contents": ("converted", _contents, "user/model -> user/assistant; functionCall -> tool_calls; "
                                         "functionResponse -> tool messages; inlineData -> image/file parts"),
    "tools": ("converted", _tools, "functionDeclarations -> function tools (parametersJsonSchema as is, "
                                   "parameters with types lowercased); Google's own tools dropped"),
    "toolConfig": ("converted", _tool_config, "AUTO/ANY/NONE -> auto/required/none; ANY with one allowed name -> "
                                              "that function"),
    "generationConfig": ("converted", _generation_config, "field by field: GENERATION_FIELDS"),
    "cachedContent": ("refused", _refuse_cached, "content stored at Google: no other endpoint can read it"),
    "safetySettings": ("dropped", None, "Google's filters: no counterpart"),
    "labels": ("dropped", None, "billing labels: no counterpart"),
    "model": ("dropped", None, "the model is the URL's (docs/protocols.md D.1)"),
}


def url_facts(path: str) -> tuple[str | None, bool]:
    """(model, stream) of a Gemini request path; a stream must be SSE (``alt=sse``): the JSON
    array form is not what the stream encoder writes."""
    m = PATH.search(path.split("?", 1)[0])
    if m is None:
        return None, False
    stream = m.group("method") == "streamGenerateContent"
    if stream and parse_qs(path.partition("?")[2]).get("alt") != ["sse"]:
        raise _bad("alt", "tokunseba translates Gemini streams as SSE: ask with ?alt=sse", refused=True)
    return unquote(m.group("model")), stream


def decode(body: dict[str, Any], *, path: str = "") -> Conversation:
    """A Gemini request body as the neutral request (the model and stream flag from ``path``)."""
    if not isinstance(body, dict):
        raise InvalidRequest(400, "Gemini request body must be a JSON object")
    model, stream = url_facts(path)
    rt = Conversation(body={})
    d = _Decode(rt)
    spelled = _keys(body)
    if all(camel == k for camel, k in spelled.items()):  # lowerCamel throughout (the usual case)
        out = ft.run(DECODE_FIELDS, {}, body, d, ft.Options())
    else:
        out = ft.run(DECODE_FIELDS, {}, {camel: body[k] for camel, k in spelled.items()}, d, ft.Options(), spelled)
    messages = d.messages
    if d.system:
        messages = [{"role": "system", "content": JOIN.join(d.system)}] + messages
        rt.origin = {_shift(k): v for k, v in rt.origin.items()}
        rt.origin["messages[0]"] = spelled.get("systemInstruction", "systemInstruction")
    if not any(m["role"] != "system" for m in messages):
        raise _bad("contents", "needs at least one content")
    neutral: dict[str, Any] = {"model": model, "messages": messages, **out, "stream": stream}
    if model is None:
        del neutral["model"]
    rt.body = neutral
    rt.client_wants_usage = True  # Gemini replies always carry usageMetadata when reported
    return rt


def _shift(path: str) -> str:
    """A neutral path after a system message was put first."""
    m = re.match(r"^messages\[(\d+)\]", path)
    return f"messages[{int(m.group(1)) + 1}]{path[m.end():]}" if m else path


# ======================================================================================
# encode: neutral -> Gemini
# ======================================================================================


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
    for j, p in enumerate(_arr(content, path)):
        pp = f"{path}[{j}]"
        p = _obj(p, pp)
        t = p.get("type")
        if t == "text":
            parts.append({"text": p.get("text") or ""})
        elif t == "image_url":
            url = (p.get("image_url") or {}).get("url") if isinstance(p.get("image_url"), dict) else p.get("image_url")
            url = _opt_str(url, f"{pp}.image_url.url")
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
            f = _obj(p.get("file") or {}, f"{pp}.file")
            m = DATA_URL.match(_opt_str(f.get("file_data"), f"{pp}.file.file_data") or "")
            if m:
                parts.append({"inlineData": {"mimeType": m.group(1), "data": m.group(2)}})
            else:
                e.drop(pp)  # a file id stored at the client's provider
        elif t == "input_audio":
            a = _obj(p.get("input_audio") or {}, f"{pp}.input_audio")
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


def _enc_messages(rt: RequestTranslation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    """-> ``contents`` (and ``systemInstruction``): the body's first keys, as the row comes first."""
    e = _Encode(rt)
    results: list[dict[str, Any]] = []  # functionResponse parts waiting for their user content
    for i, m in enumerate(_arr(value, key)):
        mp = f"{key}[{i}]"
        m = _obj(m, mp)
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
            parts = _texts(e, m.get("content"), f"{mp}.content")
            restored = state_for(m, "gemini")  # this endpoint's own thoughtSignatures, on their calls
            sigs = restored.payload.get("signatures", {}) if restored else {}
            if restored and "text_signature" in restored.payload and not m.get("tool_calls"):
                texts = [q for q in parts if "text" in q]
                if texts:  # a reply without calls: its signature back on its (last) text part
                    texts[-1]["thoughtSignature"] = restored.payload["text_signature"]
            for j, tc in enumerate(_arr(m.get("tool_calls") or [], f"{mp}.tool_calls")):
                tp = f"{mp}.tool_calls[{j}]"
                fn = _obj(_obj(tc, tp).get("function"), f"{tp}.function")
                _opt_str(tc.get("id"), f"{tp}.id")
                _opt_str(fn.get("name"), f"{tp}.function.name")
                raw = fn.get("arguments")
                try:
                    args = jsonc.loads_exact(raw) if isinstance(raw, str) and raw.strip() else (raw or {})
                except jsonc.JSONDecodeError:
                    args = None
                if not isinstance(args, dict):
                    raise _bad(f"{tp}.function.arguments", "Gemini takes function-call arguments as a JSON object; "
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
            _add(e, "model", parts)
        elif role == "tool":
            cid = m.get("tool_call_id")
            name = e.names.get(cid) if isinstance(cid, str) else None
            if name is None:
                raise _bad(f"{mp}.tool_call_id", f"the tool result {cid!r} answers no call in the history; Gemini "
                                                 "needs the function's name", refused=True)
            content = m.get("content")
            text = content if isinstance(content, str) else "".join(
                p.get("text") or "" for p in _arr(content or [], f"{mp}.content")
                if isinstance(p, dict) and p.get("type") == "text")
            results.append({"functionResponse": {"id": cid, "name": name, "response": {"output": text}}})
            note_once(e.rt.plumbing, "contents[].parts[].functionResponse.response.output (the result text in the "
                                     "object Gemini requires)")
        else:
            raise _bad(f"{mp}.role", f"unknown role {role!r}")
    if results:
        _add(e, "user", results)
    _sign_active_loop(e)
    out["contents"] = e.contents
    if e.system:
        out["systemInstruction"] = {"parts": [{"text": JOIN.join(e.system)}]}


def _sign_active_loop(e: _Encode) -> None:
    """The first functionCall of each model turn since the last user text carries Gemini's
    documented bypass signature (what Gemini CLI itself does: docs/clients.md §5.4,
    docs/protocols.md D.4.3), unless it carries its real one (restored: reasoning/state.py)."""
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
    for i, t in enumerate(_arr(value, key)):
        if type(t) is not dict:
            _obj(t, f"{key}[{i}]")  # a 400 naming the path (a path is built only for a failure or a record)
        fn = t.get("function")
        if t.get("type") != "function" or not isinstance(fn, dict):
            note_once(rt.dropped, f"{key}[{i}]")
            continue
        name = fn.get("name")
        if not isinstance(name, str) or not FUNCTION_NAME.fullmatch(name):
            raise _bad(f"{key}[{i}].function.name", f"Gemini rejects the function name {name!r}: it must start "
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
        raise _bad(key, f"unknown tool_choice {value!r}")
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
    stops = [value] if isinstance(value, str) else list(_arr(value, key))
    if len(stops) > GEMINI_MAX_STOP:
        rt.dropped.extend(f"{key}[{i}]" for i in range(GEMINI_MAX_STOP, len(stops)))
        stops = stops[:GEMINI_MAX_STOP]
    out.setdefault("generationConfig", {})["stopSequences"] = stops


def _enc_n(rt: RequestTranslation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    pass  # 1: the Chat decoder refuses more (the same toward every target)


def _enc_response_format(rt: RequestTranslation, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    value = _obj(value, key)
    gc = out.setdefault("generationConfig", {})
    if value.get("type") == "json_object":
        gc["responseMimeType"] = "application/json"
    elif value.get("type") == "json_schema" and isinstance(value.get("json_schema"), dict):
        gc["responseMimeType"] = "application/json"
        if value["json_schema"].get("schema") is not None:
            gc["responseJsonSchema"] = value["json_schema"]["schema"]
    elif value.get("type") != "text":
        note_once(rt.dropped, key)


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
                                                           "application/json (+ responseJsonSchema)"),
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
        raise _bad("messages", "no user or assistant content to send")
    rt.body = body
    return rt
