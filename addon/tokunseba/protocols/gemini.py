"""Google Gemini (generativelanguage API): the protocol's facts as data (docs/dev/protocols.md
D): paths, auth, finishReason <-> neutral stop reasons, the error envelope and its
status names, the SSE framing the clients' parsers accept.

The codec (requests, replies, streams, errors) is ``tokunseba.translate.gemini``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .. import jsonc
from ..neutral import UpstreamError
from ..neutral import Counting, Tokens, Usage, count, plus
from ..sse import encode_event
from .failures import is_context_window
from .facts import Counter, Protocol, RuleShape, count_of, d, lst, relied_on

PROTOCOL = "gemini"
HOSTS = ("generativelanguage.googleapis.com",)
API_PREFIXES = ("/v1beta", "/v1")
# kind -> path under the API prefix; the model travels in the path, not the body.
PATHS = {
    "generate": "/models/{model}:generateContent",
    "stream_generate": "/models/{model}:streamGenerateContent",
    "count": "/models/{model}:countTokens",
}
QUERIES = {"stream_generate": "alt=sse"}  # without it the stream is one JSON array, not SSE
AUTH_HEADER = ("x-goog-api-key", "{key}")
KEY_ENV = "GEMINI_API_KEY"

# HTTP status -> error.status (google.rpc.Code names); any other status -> UNKNOWN_STATUS.
ERROR_STATUS: dict[int, str] = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
UNKNOWN_STATUS = "UNKNOWN"
STATUS_CODES: dict[str, int] = {name: code for code, name in ERROR_STATUS.items() if code != 502}  # UNAVAILABLE: 503

# Gemini CLI's JS parser takes only `data: <one-line JSON>` + a blank line (docs/dev/clients.md §5.5);
# Google frames with CRLF.
SSE_END = b"\r\n\r\n"

# upstream finishReason -> neutral stop reason (docs/dev/protocols.md D.5). Content filters are never a
# clean stop; a turn with function calls ends in STOP too (the decoder makes it tool_use).
FINISH_TO_STOP: dict[str, str] = {
    "STOP": "end_turn",
    "MAX_TOKENS": "max_tokens",
    "SAFETY": "refusal",
    "RECITATION": "refusal",
    "LANGUAGE": "refusal",  # the model declined a language it does not serve
    "BLOCKLIST": "refusal",
    "PROHIBITED_CONTENT": "refusal",
    "SPII": "refusal",
    "IMAGE_SAFETY": "refusal",
    "IMAGE_PROHIBITED_CONTENT": "refusal",
    "IMAGE_RECITATION": "refusal",
    "MODEL_ARMOR": "refusal",
}
# finishReasons that say the model's output is broken: an error to the client, never a stop
FINISH_ERRORS: frozenset[str] = frozenset({
    "MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS", "MISSING_THOUGHT_SIGNATURE",
    "MALFORMED_RESPONSE",
})
# neutral stop reason -> finishReason (docs/dev/protocols.md D.5; STOP also for tool_use)
STOP_TO_FINISH: dict[str, str] = {
    "end_turn": "STOP",
    "tool_use": "STOP",
    "stop_sequence": "STOP",  # lossy: the matched sequence has no field in Gemini
    "pause_turn": "STOP",  # lossy
    "max_tokens": "MAX_TOKENS",
    "model_context_window_exceeded": "MAX_TOKENS",
    "refusal": "SAFETY",
}
# ---- structured output (docs/dev/protocols.md F) ----
# generationConfig.responseMimeType "application/json" asks for JSON; with responseJsonSchema (JSON Schema, the
# subset below) or responseSchema (Gemini's OpenAPI 3.0 subset: upper-case types STRING / NUMBER / INTEGER /
# BOOLEAN / ARRAY / OBJECT / NULL, "nullable") the JSON follows it; "text/plain" is the default; "text/x.enum"
# answers one value of a string schema's enum (no other protocol has it).
JSON_MIME = "application/json"
TEXT_MIME = "text/plain"
# responseJsonSchema: "only the following properties are supported" (GenerationConfig.responseJsonSchema, Gemini
# API reference, ai.google.dev/api/generate-content#generationconfig); others are not honoured
RESPONSE_JSON_SCHEMA_KEYWORDS = frozenset({
    "$id", "$defs", "$ref", "$anchor", "type", "format", "title", "description", "enum", "items", "prefixItems",
    "minItems", "maxItems", "minimum", "maximum", "anyOf", "oneOf", "properties", "additionalProperties",
    "required", "propertyOrdering",
})
# keywords of Gemini's schemas with no JSON Schema meaning: dropped when a schema leaves for another protocol
SCHEMA_OWN_KEYWORDS = frozenset({"propertyOrdering"})


def response_json_schema_takes(keyword: str, value: Any) -> bool:
    """Whether Gemini's responseJsonSchema takes ``keyword`` (the documented subset)."""
    return keyword in RESPONSE_JSON_SCHEMA_KEYWORDS


# a thought signature Gemini accepts on a function call whose real one is unknown (docs/dev/protocols.md D.4.3)
SKIP_SIGNATURE = "skip_thought_signature_validator"


def error_envelope(status: int, message: str) -> dict[str, Any]:
    return {"error": {"code": status, "message": message, "status": ERROR_STATUS.get(status, UNKNOWN_STATUS)}}


def error_body(status: int, message: str) -> bytes:
    """A JSON error body: ``{"error":{"code":status,"message":…,"status":…}}``."""
    return jsonc.dumpb(error_envelope(status, message))


# Gemini CLI takes a 429 RESOURCE_EXHAUSTED whose RetryInfo delay exceeds 300 s as final (a
# terminal quota error: it stops instead of backing off)
STOP_MIN_DELAY_S = 301


def stop_now(message: str, reset_in_s: float, reset_at: float) -> tuple[int, dict[str, str], bytes]:
    """A reached cap: 429 ``RESOURCE_EXHAUSTED`` with a ``google.rpc.RetryInfo`` detail whose
    ``retryDelay`` is the seconds to the reset, at least 301 s."""
    delay = max(STOP_MIN_DELAY_S, int(reset_in_s + 0.999))
    env = error_envelope(429, message)
    env["error"]["details"] = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{delay}s"}]
    return 429, {"retry-after": str(delay)}, jsonc.dumpb(env)


# status changes from another protocol's error: Anthropic's 529 (overloaded) is 503 UNAVAILABLE,
# which Gemini clients retry
STATUS_FROM_OTHERS: dict[int, int] = {529: 503}


def from_upstream_error(err: UpstreamError) -> tuple[int, str]:
    """(status, message) for an error another protocol's upstream gave: a context overflow is
    400 INVALID_ARGUMENT (not retried, docs/dev/protocols.md D.3.8); 429 stays RESOURCE_EXHAUSTED."""
    if is_context_window(err):
        return 400, err.message
    return STATUS_FROM_OTHERS.get(err.status, err.status), err.message


def error_reply(err: UpstreamError) -> tuple[int, bytes]:
    """An upstream error of another protocol as (status, Google error envelope)."""
    status, message = from_upstream_error(err)
    return status, error_body(status, message)


def sse_error(err: UpstreamError) -> bytes:
    """A mid-stream error chunk: the Python SDK raises on it; Gemini CLI cannot see one
    (docs/dev/clients.md §5.5), which is why errors before the first byte go as a status instead."""
    return sse_event(error_chunk(err))


def error_chunk(err: UpstreamError) -> dict[str, Any]:
    """The object of a mid-stream error chunk (``sse_error`` frames it)."""
    status, message = from_upstream_error(err)
    return error_envelope(status, message)


def stream_error_status(doc: dict[str, Any]) -> int:
    """The HTTP status of a mid-stream ``{"error": {...}}`` chunk: its ``code``, else its
    ``status`` name, else 500."""
    e = _o if isinstance(_o := doc.get("error"), dict) else {}
    code = e.get("code")
    if isinstance(code, int) and not isinstance(code, bool) and 400 <= code <= 599:
        return code
    status = e.get("status")
    return STATUS_CODES.get(status if isinstance(status, str) else "", 500)


def sse_event(obj: dict[str, Any]) -> bytes:
    """One SSE event as Gemini frames it: ``data: <one-line JSON>\\r\\n\\r\\n``."""
    return b"data: " + jsonc.dumpb(obj) + SSE_END


def _tool_count(body: dict[str, Any]) -> int:  # a function-declarations entry counts per function
    tools = [t for t in lst(body.get("tools")) if isinstance(t, dict)]
    return sum(len(lst(t["functionDeclarations"])) if "functionDeclarations" in t else 1 for t in tools)


def _answered_calls(body: dict[str, Any]) -> list[str]:
    """The ids of the last (user) content's functionResponse parts (Gemini ids are optional)."""
    contents = lst(body.get("contents"))
    last = d(contents[-1]) if contents else {}
    if last.get("role", "user") != "user":
        return []
    return [fr["id"] for p in lst(last.get("parts")) if isinstance(p, dict)
            and isinstance(fr := p.get("functionResponse"), dict) and isinstance(fr.get("id"), str)]


def _thinking(body: dict[str, Any]) -> bool:
    tc = d(d(body.get("generationConfig")).get("thinkingConfig"))
    return bool(tc) and tc.get("thinkingBudget") != 0


def _document(part: dict[str, Any]) -> bool:
    """Inline or file data that is not an image (a PDF, a text file, audio, video)."""
    mimes = (d(part.get(k)).get("mimeType") for k in ("inlineData", "fileData"))
    return any(isinstance(m, str) and not m.startswith("image/") for m in mimes)


def _server_tools(body: dict[str, Any]) -> list[str]:
    """The provider-run tools a request relies on: tools entries other than functionDeclarations
    (googleSearch, codeExecution, urlContext…) when it declares no function of its own."""
    declared = []
    for t in lst(body.get("tools")):
        for key in d(t):
            declared.append((key, key != "functionDeclarations"))
    return relied_on(declared, None)


def _image(part: dict[str, Any]) -> bool:
    mimes = (d(part.get(k)).get("mimeType") for k in ("inlineData", "fileData"))
    return any(isinstance(m, str) and m.startswith("image/") for m in mimes)


def state_payload(blocks: Sequence[Any]) -> dict[str, Any] | None:
    """Each function call's thoughtSignature (Gemini 3 validates it); a reply without calls:
    the signature of its text (Gemini recommends it back on that text part)."""
    sigs = {b.id: b.signature for b in blocks if b.kind == "tool_use" and b.id and b.signature}
    if sigs:
        return {"signatures": sigs}
    text_sigs = [b.signature for b in blocks if b.kind == "text" and b.signature]
    return {"text_signature": text_sigs[-1]} if text_sigs else None


def count_request(body: dict[str, Any], model: str | None) -> dict[str, Any]:
    """A generateContent body -> its countTokens body: ``{"contents"}`` alone when that is all
    the turn has, else the whole turn as ``generateContentRequest`` (system instruction, tools
    and config are counted too; it names its model, ``models/…``)."""
    if set(body) <= {"contents"}:
        return {"contents": body.get("contents", [])}
    named = model if model is None or model.startswith("models/") else f"models/{model}"
    return {"generateContentRequest": {**({"model": named} if named else {}), **body}}


def count_as_turn(body: dict[str, Any]) -> dict[str, Any]:
    """A client's countTokens body -> the generateContent body it counts (docs/dev/protocols.md D.1: the
    SDKs send ``{"contents"}``; the API also takes a whole ``generateContentRequest``)."""
    inner = body.get("generateContentRequest", body.get("generate_content_request"))
    if isinstance(inner, dict):
        return {k: v for k, v in inner.items() if k != "model"}
    return body


# POST /models/{model}:countTokens (docs/dev/protocols.md D.1) -> {"totalTokens": N, "promptTokensDetails"?: …}
# ---- usage: how Gemini counts (usageMetadata; docs/dev/protocols.md D.6) ----
# promptTokenCount includes cachedContentTokenCount; candidatesTokenCount excludes
# thoughtsTokenCount (billed as output); toolUsePromptTokenCount is input outside promptTokenCount.
COUNTING_NAME = "gemini"


_NOT_PLAIN = frozenset(("cachedContentTokenCount", "thoughtsTokenCount", "toolUsePromptTokenCount"))


def usage_plain(r: dict[str, Any]) -> tuple[int, int] | None:
    """(promptTokenCount, candidatesTokenCount) of a usageMetadata that reports both and no
    cache, thoughts or tool-use prompt (null counts as not reported); None otherwise."""
    get = r.get
    if (_NOT_PLAIN.isdisjoint(r) or (get("cachedContentTokenCount") is None and get("thoughtsTokenCount") is None
                                     and get("toolUsePromptTokenCount") is None)) \
            and type(p := get("promptTokenCount")) is int and type(c := get("candidatesTokenCount")) is int:
        return p, c  # (the set test first: one C-level pass when none of the three is there at all)
    return None


def usage_plain_total(r: dict[str, Any]) -> int | None:
    """The total of a plain usageMetadata on the common base: as reported, else none."""
    return count(r.get("totalTokenCount"))


def usage_fields(r: dict[str, Any]) -> dict[str, int | None]:
    """A usageMetadata's numbers in Gemini's own counting."""
    return {
        "input": count(r.get("promptTokenCount")),  # includes the cached tokens
        "output": count(r.get("candidatesTokenCount")),  # excludes the thoughts
        "cache_read": count(r.get("cachedContentTokenCount")),
        "cache_write": None,
        "reasoning": count(r.get("thoughtsTokenCount")),
    }


def usage_tokens(r: dict[str, Any]) -> Tokens:
    """On the common base: the tool-use prompt joins the input, the thoughts the output; the
    total only as reported."""
    if (plain := usage_plain(r)) is not None:  # prompt and candidates alone: as below, sooner
        p, c = plain
        return {"input": p, "uncached": max(p, 0), "output": c, "cache_read": None, "cache_write": None,
                "reasoning": None, "total": usage_plain_total(r), "reasoning_detail": False}
    prompt, cached = count(r.get("promptTokenCount")), count(r.get("cachedContentTokenCount"))
    tool, thoughts = count(r.get("toolUsePromptTokenCount")), count(r.get("thoughtsTokenCount"))
    return {"input": plus(prompt, tool),
            "uncached": None if prompt is None else max(prompt - (cached or 0), 0) + (tool or 0),
            "output": plus(count(r.get("candidatesTokenCount")), thoughts), "cache_read": cached, "cache_write": None,
            "reasoning": thoughts, "total": count(r.get("totalTokenCount")), "reasoning_detail": False}


def usage_object(u: Usage) -> dict[str, Any]:
    """The usageMetadata a client sees (only reported fields): promptTokenCount includes the
    cache (and Anthropic's cache writes), the reasoning part of the output goes to
    thoughtsTokenCount, totalTokenCount is the reported total or the arithmetic sum of what
    was reported."""
    if u.counting == COUNTING_NAME:
        return dict(u.reported)
    if (pc := u.plain_counts()) is not None:  # input and output alone: as below, sooner
        plain = {"promptTokenCount": pc[0], "candidatesTokenCount": pc[1]}
        if pc[2] is not None:
            plain["totalTokenCount"] = pc[2]
        return plain
    t = u.tokens()
    out: dict[str, Any] = {}
    if (v := t["input"]) is not None:
        out["promptTokenCount"] = v
    if (v := t["output"]) is not None:
        out["candidatesTokenCount"] = v - (t["reasoning"] or 0)
    if (v := t["cache_read"]) is not None:
        out["cachedContentTokenCount"] = v
    if (v := t["reasoning"]) is not None:
        out["thoughtsTokenCount"] = v
    if (v := t["total"]) is not None:
        out["totalTokenCount"] = v
    return out


COUNTING = Counting(COUNTING_NAME, input_includes_cached=True, fields=usage_fields, tokens=usage_tokens,
                    write=usage_object, plain=usage_plain, plain_total=usage_plain_total)


COUNTER = Counter(
    kind="count",
    name="Gemini countTokens",
    request=count_request,
    read=count_of("totalTokens"),
    answer=lambda n: {"totalTokens": n},
    as_turn=count_as_turn,
)


FACTS = Protocol(
    name=PROTOCOL,
    title="Google Gemini",
    clients="Gemini CLI, the google-genai SDK",
    hosts=HOSTS,
    api_prefixes=API_PREFIXES,
    paths=PATHS,
    queries=QUERIES,
    turn_kinds=("generate", "stream_generate"),  # the stream flag travels in the path
    count_kinds=frozenset({"count"}),
    counter=COUNTER,
    auth_header=AUTH_HEADER,
    key_env=KEY_ENV,
    builtin_url="https://generativelanguage.googleapis.com/v1beta",
    kept_query={"alt": "stream framing (alt=sse); the endpoint URL sets it too"},
    upstream_error=error_reply,
    error_body=lambda status, message, etype: error_body(status, message),
    stop_now=stop_now,
    stream_error=lambda message: encode_event(error_body(502, message)),  # data: {"error":…}
    counting=COUNTING,
    usage_key="usageMetadata",
    reply_model_key="modelVersion",
    stream_judged=False,  # no terminal event: a stream's end cannot be told from a cut
    passthrough_keepalive=False,  # Gemini CLI reads a comment line as JSON
    cache_prefix=("systemInstruction", "tools", "contents"),
    rule_shape=RuleShape(
        "contents", ("parts",), _image, lambda m: m.get("role", "user") == "user", "parts",
        lambda part: isinstance(part.get("text"), str) and not part.get("thought"),
        tool_count=_tool_count,
        thinking=_thinking,
        role_of=lambda m: m.get("role", "user"),  # Gemini's default role is user
        answered_calls=_answered_calls,
        is_document=_document,
        server_tools=_server_tools,
    ),
    max_output_field="generationConfig.maxOutputTokens",
    state_payload=state_payload,
    state_kind=lambda p: "thoughtSignature",
    genai_operation="generate_content",
    genai_provider="gcp.gemini",
    effort_spellings={
        "thinkingConfig.thinkingBudget": (
            "N > 0 -> level_for_budget(N); 0 (off) and -1 (dynamic) name no level (dropped, recorded); written as "
            "BUDGETS[level]", "a budget is Gemini 2.5's spelling, and Gemini 3 still takes it"),
        "thinkingConfig.thinkingLevel": ("minimal / low / medium / high as named (any case)",
                                         "Gemini 3's levels are OpenAI's names"),
    },
    effort_fields=(("generationConfig", "thinkingConfig"),),
)


def register_protocols(register: Callable[..., object]) -> None:
    """The built-in plugin (entry-point group ``tokunseba.protocols``): these facts and the codec,
    named for the registry to import on first use (``protocols/`` imports no codec)."""
    register(FACTS, "tokunseba.translate.gemini:CODEC")
