"""Gemini requests, decoded: a ``generateContent`` / ``streamGenerateContent`` body as the
neutral request (Chat-shaped: see neutral.conversation), by field tables (docs/dev/protocols.md
D.1, D.3, D.4; issue 11); its encoder is encode.py.

Keys come lowerCamel or snake_case (google-genai leaks snake_case). The model and the stream
flag come from the URL path (``/v1beta/models/{model}:streamGenerateContent?alt=sse``), never
the body. Every field is in ``DECODE_FIELDS`` / ``GENERATION_FIELDS`` (mapped, converted or
dropped, with the reason); every drop is recorded in the client's JSON path. Function-call
ids: a ``functionCall`` without ``id`` gets one minted deterministically from its place
(recorded ``id_synthesized``); a ``functionResponse`` without ``id`` is matched to the
preceding model turn's calls by name, then order.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, unquote

from ... import jsonc
from ...errors import InvalidRequest
from ...neutral import Conversation
from ...neutral import LEVELS, level_for_budget
from ...neutral import JSON_OBJECT, JSON_SCHEMA, OutputFormat, from_openapi
from ...neutral import note_once
from ...protocols import gemini as pg
from .. import fieldtable as ft
from .common import JOIN, arr, bad, obj

# a fileData URI only Google can read (its Files API, Cloud Storage)
GOOGLE_ONLY_URI = re.compile(r"^(gs://|https://generativelanguage\.googleapis\.com/)")
MODES = {"AUTO": "auto", "ANY": "required", "NONE": "none", "VALIDATED": "auto"}
# /{version}/models/{model}:{method}: the model and the method (stream or not) of a request path
PATH = re.compile(r"/models/(?P<model>[^/:?]+):(?P<method>[A-Za-z]+)")


def _snake(name: str) -> str:
    return re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), name)


def _get(holder: dict[str, Any], name: str) -> Any:
    """A field by its lowerCamel name or its snake_case spelling."""
    v = holder.get(name)
    return holder.get(_snake(name)) if v is None else v


def _keys(holder: dict[str, Any]) -> dict[str, str]:
    """lowerCamel name -> the spelling present."""
    out = {}
    for k in holder:
        camel = re.sub(r"_([a-z])", lambda m: m.group(1).upper(), k)
        out[camel] = k
    return out



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
            raise bad(f"{pp}.{keys['inlineData']}", "needs mimeType and data strings")
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
        raise bad(f"{fp}.name", "a functionResponse needs the function name")
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
            raise bad(fp, f"a functionResponse for {name!r} without an id answers no function call of the "
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
        part = obj(part, pp)
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
        part = obj(part, pp)
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
                raise bad(f"{fp}.name", "a functionCall needs a name")
            cid = fc.get("id")
            if not isinstance(cid, str) or not cid:
                cid = f"call_{ci}_{len(calls)}"  # deterministic: the call's place in the history
                note_once(d.rt.warnings, f"id_synthesized: {fp}.id")
            args = fc.get("args")
            if args is not None and not isinstance(args, dict):
                raise bad(f"{fp}.args", "must be an object")
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
    for i, c in enumerate(arr(value, key)):
        cp = f"{key}[{i}]"
        c = obj(c, cp)
        for k in c:
            if k not in ("role", "parts"):
                d.drop(f"{cp}.{k}")
        role = c.get("role") or "user"
        parts = arr(c.get("parts") or [], f"{cp}.parts")
        if role == "user":
            _user(d, parts, cp)
        elif role == "model":
            _model(d, parts, cp, i)
        else:
            raise bad(f"{cp}.role", f"must be user or model, not {role!r}")


def _system_instruction(d: _Decode, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    if isinstance(value, str):  # the SDKs accept a bare string
        d.system.append(value)
        return
    value = obj(value, key)
    for j, part in enumerate(arr(value.get("parts") or [], f"{key}.parts")):
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            d.system.append(part["text"])
        else:
            d.drop(f"{key}.parts[{j}]")
    # its "role" (Gemini CLI sends "user") means nothing: ignored (docs/dev/protocols.md D.3.2)


def _tools(d: _Decode, key: str, value: Any, out: dict[str, Any], o: ft.Options) -> None:
    tools: list[dict[str, Any]] = []
    for i, t in enumerate(arr(value, key)):
        tp = f"{key}[{i}]"
        t = obj(t, tp)
        tkeys = _keys(t)
        for k in tkeys:
            if k != "functionDeclarations":
                d.drop(f"{tp}.{tkeys[k]}")  # googleSearch, codeExecution, urlContext...: Google's own tools
        for j, fd in enumerate(arr(_get(t, "functionDeclarations") or [], f"{tp}.functionDeclarations")):
            fp = f"{tp}.{tkeys.get('functionDeclarations')}[{j}]"
            fd = obj(fd, fp)
            fkeys = _keys(fd)
            fn: dict[str, Any] = {"name": fd.get("name")}
            if not isinstance(fn["name"], str) or not fn["name"]:
                raise bad(f"{fp}.name", "a function declaration needs a name")
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
    value = obj(value, key)
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
        raise bad(f"{fp}.mode", f"must be one of {sorted(MODES)}, not {mode!r}")
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
    d.gc = value = obj(value, key)
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
        raise bad(path, f"expected an integer, not {jsonc.dumps(v)[:40]}")
    return v


def _gc_candidates(d: _Decode, path: str, v: Any, out: dict[str, Any], o: ft.Options) -> None:
    if v != 1:
        raise bad(path, f"{v} candidates requested; the target returns one", refused=True)


def _gc_mime(d: _Decode, path: str, v: Any, out: dict[str, Any], o: ft.Options) -> None:
    """application/json -> response_format: json_schema with the schema (responseJsonSchema first,
    else responseSchema), converted to JSON Schema (neutral/output_format.py); json_object without one."""
    if v == pg.JSON_MIME:
        keys = _keys(d.gc)
        name = "responseJsonSchema" if _get(d.gc, "responseJsonSchema") is not None else "responseSchema"
        schema, sp = _get(d.gc, name), f"{path.rsplit('.', 1)[0]}.{keys.get(name, name)}"
        if schema is None:
            out["response_format"] = OutputFormat(JSON_OBJECT).neutral()
        else:
            schema = from_openapi(obj(schema, sp), sp, d.rt.converted, d.rt.dropped, pg.SCHEMA_OWN_KEYWORDS)
            out["response_format"] = OutputFormat(JSON_SCHEMA, schema).neutral()
            d.rt.origin["response_format.json_schema.schema"] = sp
        d.rt.origin["response_format"] = d.rt.origin["response_format.json_schema"] = path
    elif v not in (pg.TEXT_MIME, None):
        d.drop(path)  # text/x.enum and other types: no counterpart elsewhere


def _gc_schema(d: _Decode, path: str, v: Any, out: dict[str, Any], o: ft.Options) -> None:
    mime = _get(d.gc, "responseMimeType")
    if mime != pg.JSON_MIME:
        d.drop(path)  # a schema without JSON output: nothing to constrain
    elif path.endswith(("responseSchema", "response_schema")) and _get(d.gc, "responseJsonSchema") is not None:
        d.drop(path)  # both given (Gemini rejects that): responseJsonSchema is the one read


def _gc_stop(d: _Decode, path: str, v: Any, out: dict[str, Any], o: ft.Options) -> None:
    out["stop"] = list(arr(v, path))
    d.rt.origin["stop"] = path


def _gc_thinking(d: _Decode, path: str, v: Any, out: dict[str, Any], o: ft.Options) -> None:
    """thinkingConfig -> reasoning_effort (neutral/effort.py): a level as named, a budget by level
    (0, off, and -1, dynamic: no level, dropped); includeThoughts asks for thought parts back: dropped."""
    for camel, spelled in _keys(obj(v, path)).items():
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
    "responseMimeType": ("converted", _gc_mime, "application/json -> response_format: json_schema with the schema "
                                                "(no name: Gemini has none), json_object without one; text/plain is "
                                                "the default; text/x.enum has no counterpart (dropped)"),
    "responseSchema": ("converted", _gc_schema, "read with responseMimeType: Gemini's OpenAPI 3.0 subset as JSON "
                                                "Schema, upper-case types lower-cased, nullable as a \"null\" type, "
                                                "propertyOrdering dropped (each recorded; ai.google.dev/api/caching#Schema)"),
    "responseJsonSchema": ("converted", _gc_schema, "read with responseMimeType, as JSON Schema; upper-case type names "
                                                    "(Gemini CLI sends them, Gemini takes them) lower-cased, recorded"),
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
    raise bad(key, "names content cached at Google; another endpoint cannot read it, and the turn without it "
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
    "model": ("dropped", None, "the model is the URL's (docs/dev/protocols.md D.1)"),
}


def url_facts(path: str) -> tuple[str | None, bool]:
    """(model, stream) of a Gemini request path; a stream must be SSE (``alt=sse``): the JSON
    array form is not what the stream encoder writes."""
    m = PATH.search(path.split("?", 1)[0])
    if m is None:
        return None, False
    stream = m.group("method") == "streamGenerateContent"
    if stream and parse_qs(path.partition("?")[2]).get("alt") != ["sse"]:
        raise bad("alt", "tokunseba translates Gemini streams as SSE: ask with ?alt=sse", refused=True)
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
        raise bad("contents", "needs at least one content")
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
