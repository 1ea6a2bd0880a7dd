"""OpenAI Chat Completions: the protocol's facts as data (docs/dev/protocols.md B).

finish_reason <-> neutral (Anthropic-named) stop reasons (E.3), error types by status (B.6),
the error envelope as a JSON body and as a ``data: {"error":…}`` SSE event.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from .. import jsonc
from ..neutral import UpstreamError
from ..neutral import Counting, Tokens, Usage, count, first, sub
from ..sse import encode_event
from .failures import is_context_window
from .facts import Check, json_schema, Problem, Protocol, RuleShape, d, lst, non_empty_list, positive_int, role_user, typed

PROTOCOL = "openai"

DONE = b"data: [DONE]\n\n"

# upstream finish_reason -> neutral stop reason (E.3, reverse direction)
FINISH_TO_STOP: dict[str, str] = {
    "stop": "end_turn",  # never invent a stop_sequence: which one matched is unknown
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",  # deprecated name
    "content_filter": "refusal",
}
# neutral stop reason -> finish_reason (E.3)
STOP_TO_FINISH: dict[str, str] = {
    "end_turn": "stop",
    "stop_sequence": "stop",  # lossy: the matched sequence has no field in Chat
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
    "pause_turn": "stop",  # lossy
    "model_context_window_exceeded": "length",  # lossy
}

# HTTP status -> error.type. OpenAI's own types are loose; these are what its SDK and
# clients see in practice. Unlisted 4xx -> invalid_request_error, 5xx -> server_error.
ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    503: "server_error",
}
# hosts whose Chat Completions take freeform tools as they are (``{"type": "custom", "custom":
# {name, description, format}}``, answered with ``tool_calls[].custom.input``): OpenAI's own API.
# Another Chat server (llama-server, vLLM, Ollama) gets them as functions of one string ``input``
# (neutral/tools.py); an endpoint says otherwise with ``custom_tools:`` in the rules
NATIVE_CUSTOM_TOOL_HOSTS = frozenset({"api.openai.com"})
# HTTP status -> error.code when nothing more specific is known
ERROR_CODES: dict[int, str] = {429: "rate_limit_exceeded"}
CONTEXT_LENGTH_CODE = "context_length_exceeded"


# status changes from another protocol's error: no 529 in OpenAI; clients retry any >= 500
STATUS_FROM_OTHERS: dict[int, int] = {529: 503}


def from_upstream_error(err: UpstreamError) -> tuple[int, str, str | None, str]:
    """(status, OpenAI error type, code, message) for an error another protocol's upstream gave."""
    status = STATUS_FROM_OTHERS.get(err.status, err.status)
    if is_context_window(err):
        return status, "invalid_request_error", CONTEXT_LENGTH_CODE, err.message
    return status, error_type_for_status(status), ERROR_CODES.get(status), err.message


def error_reply(err: UpstreamError) -> tuple[int, bytes]:
    """An upstream error of another protocol as (status, OpenAI error body); an OpenAI-side
    upstream's own code (insufficient_quota...) is kept: clients act on it."""
    status, etype, code, message = from_upstream_error(err)
    if code != CONTEXT_LENGTH_CODE and err.code:
        code = err.code
    return status, error_body(status, message, etype, code)


def error_type_for_status(status: int) -> str:
    if status in ERROR_TYPES:
        return ERROR_TYPES[status]
    return "server_error" if status >= 500 else "invalid_request_error"


def error_envelope(message: str, etype: str, code: str | None = None, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": etype, "param": param, "code": code}}


def error_body(status: int, message: str, etype: str | None = None, code: str | None = None) -> bytes:
    """A JSON error body: ``{"error":{"message","type","param","code"}}``."""
    return jsonc.dumpb(
        error_envelope(message, etype or error_type_for_status(status), code or ERROR_CODES.get(status))
    )


def stop_now(message: str, reset_in_s: float, reset_at: float) -> tuple[int, dict[str, str], bytes]:
    """A reached cap: 429 ``insufficient_quota`` (the type and code OpenAI gives an account out of
    credit, which its SDKs and clients do not retry) with ``x-should-retry: false``."""
    body = error_body(429, message, "insufficient_quota", "insufficient_quota")
    return 429, {"x-should-retry": "false", "retry-after": str(max(61, int(reset_in_s + 0.999)))}, body


def sse_error(etype: str, message: str, code: str | None = None) -> bytes:
    """A mid-stream error event: ``data: {"error":{…}}`` (the SDK raises APIError on it)."""
    return encode_event(jsonc.dumpb(error_envelope(message, etype, code)))


def _answered_calls(body: dict[str, Any]) -> list[str]:
    """The tool_call_ids of the trailing tool messages."""
    out: list[str] = []
    for m in reversed(lst(body.get("messages"))):
        if not isinstance(m, dict) or m.get("role") != "tool":
            break
        if isinstance(m.get("tool_call_id"), str):
            out.append(m["tool_call_id"])
    return out[::-1]


def _orphan_results(body: dict[str, Any]) -> Iterator[Problem]:
    calls: set[str] = set()
    for i, m in enumerate(lst(body.get("messages"))):
        m = d(m)
        for c in lst(m.get("tool_calls")):
            if isinstance(d(c).get("id"), str):
                calls.add(c["id"])
        if m.get("role") == "tool" and not (isinstance(m.get("tool_call_id"), str) and m["tool_call_id"] in calls):
            yield f"messages[{i}].tool_call_id", f"{m.get('tool_call_id')!r} matches no earlier assistant tool_calls id"


CHAT_REASONING_FIELDS = ("reasoning_content", "reasoning")  # DeepSeek / llama.cpp, vLLM / OpenRouter


def state_payload(blocks: Sequence[Any]) -> dict[str, Any] | None:
    """The reasoning text of the named field (DeepSeek requires it back in tool loops)."""
    field_name, parts = None, []
    for b in blocks:
        src = (b.raw or {}).get("source") if b.kind == "thinking" else None
        if isinstance(src, str) and b.text:
            name = src.rsplit(".", 1)[-1]
            if name in CHAT_REASONING_FIELDS:
                field_name = field_name or name
                parts.append(b.text)
    return {"field": field_name, "text": "".join(parts)} if parts else None


# ---- usage: how OpenAI counts (docs/dev/protocols.md E.4); the Responses API shares it ----
# prompt_tokens includes the cached tokens (prompt_tokens_details.cached_tokens), completion_tokens
# the reasoning (completion_tokens_details.reasoning_tokens). Responses names the same numbers
# input_tokens / output_tokens / *_details; OpenAI-compatible servers for Anthropic-backed models
# (LiteLLM...) also report the cache under Anthropic's names at the top, counted inside prompt_tokens.
COUNTING_NAME = "openai"


def usage_plain(r: dict[str, Any]) -> tuple[int, int] | None:
    """(prompt, completion) of the plainest report: those two and the total only (llama.cpp,
    vLLM, Ollama)."""
    if len(r) == 3 and type(i := r.get("prompt_tokens")) is int \
            and type(o := r.get("completion_tokens")) is int and "total_tokens" in r:
        return i, o
    return None


def usage_plain_total(r: dict[str, Any]) -> int | None:
    """The total of a plain report (``usage_plain``) on the common base: as reported, else the
    sum of prompt and completion."""
    reported = count(r.get("total_tokens"))
    return r["prompt_tokens"] + r["completion_tokens"] if reported is None else reported


def usage_fields(r: dict[str, Any]) -> dict[str, int | None]:
    """A usage object's numbers in OpenAI's own counting (input includes the cache), under
    Chat's names or Responses'."""
    get = r.get
    inp, out = get("prompt_tokens"), get("completion_tokens")
    if type(inp) is int and type(out) is int:  # Chat names: the general case's answer, sooner
        if len(r) == 3 and "total_tokens" in r:  # the plainest (llama.cpp, vLLM, Ollama)
            return {"input": inp, "output": out, "cache_read": None, "cache_write": None, "reasoning": None}
        if "input_tokens_details" not in r and "output_tokens_details" not in r \
                and "cache_read_input_tokens" not in r and "cache_creation_input_tokens" not in r:
            ptd, ctd = get("prompt_tokens_details"), get("completion_tokens_details")
            return {"input": inp, "output": out,
                    "cache_read": count(ptd.get("cached_tokens")) if isinstance(ptd, dict) else None,
                    "cache_write": count(ptd.get("cache_write_tokens")) if isinstance(ptd, dict) else None,
                    "reasoning": count(ctd.get("reasoning_tokens")) if isinstance(ctd, dict) else None}
    ptd, ctd = sub(r, "prompt_tokens_details"), sub(r, "completion_tokens_details")
    itd, otd = sub(r, "input_tokens_details"), sub(r, "output_tokens_details")
    return {"input": first(r.get("prompt_tokens"), r.get("input_tokens")),
            "output": first(r.get("completion_tokens"), r.get("output_tokens")),
            "cache_read": first(ptd.get("cached_tokens"), itd.get("cached_tokens"), r.get("cache_read_input_tokens")),
            "cache_write": first(ptd.get("cache_write_tokens"), itd.get("cache_write_tokens"),
                                 r.get("cache_creation_input_tokens")),
            "reasoning": first(ctd.get("reasoning_tokens"), otd.get("reasoning_tokens"))}


_RESPONSES_NAMES = frozenset(("input_tokens", "input_tokens_details", "output_tokens", "output_tokens_details",
                              "total_tokens"))


def usage_tokens(r: dict[str, Any]) -> Tokens:
    """On the common base (OpenAI's own: input with the cache); the total as reported, else
    the sum of input and output. (``usage_fields``' reading, written out: once per reply.)"""
    if (plain := usage_plain(r)) is not None:  # prompt, completion and total alone: as below, sooner
        p, c = plain
        return {"input": p, "uncached": max(p, 0), "output": c, "cache_read": None, "cache_write": None,
                "reasoning": None, "total": usage_plain_total(r), "reasoning_detail": True}
    get = r.get
    if _RESPONSES_NAMES.issuperset(r):  # the Responses API's own names alone: as below, sooner (one name a number)
        inp, out = count(get("input_tokens")), count(get("output_tokens"))
        itd, otd = sub(r, "input_tokens_details"), sub(r, "output_tokens_details")
        cr, cw = count(itd.get("cached_tokens")), count(itd.get("cache_write_tokens"))
        total = count(get("total_tokens"))
        if total is None and inp is not None and out is not None:
            total = inp + out
        return {"input": inp, "uncached": None if inp is None else max(inp - (cr or 0) - (cw or 0), 0), "output": out,
                "cache_read": cr, "cache_write": cw, "reasoning": count(otd.get("reasoning_tokens")), "total": total,
                "reasoning_detail": True}
    ptd, ctd = sub(r, "prompt_tokens_details"), sub(r, "completion_tokens_details")
    itd, otd = sub(r, "input_tokens_details"), sub(r, "output_tokens_details")
    inp, out = first(get("prompt_tokens"), get("input_tokens")), first(get("completion_tokens"), get("output_tokens"))
    cr = first(ptd.get("cached_tokens"), itd.get("cached_tokens"), get("cache_read_input_tokens"))
    cw = first(ptd.get("cache_write_tokens"), itd.get("cache_write_tokens"), get("cache_creation_input_tokens"))
    total = count(get("total_tokens"))
    if total is None and inp is not None and out is not None:
        total = inp + out
    return {"input": inp, "uncached": None if inp is None else max(inp - (cr or 0) - (cw or 0), 0), "output": out,
            "cache_read": cr, "cache_write": cw, "reasoning": first(ctd.get("reasoning_tokens"), otd.get("reasoning_tokens")),
            "total": total, "reasoning_detail": True}


def usage_object(u: Usage) -> dict[str, Any]:
    """The Chat Completions usage object a client sees (only reported fields): an OpenAI
    report as it came; a Responses one renamed (same definitions); another re-based."""
    r = u.reported
    if u.counting == COUNTING_NAME and ("prompt_tokens" in r or "completion_tokens" in r
                                        or not ("input_tokens" in r or "output_tokens" in r)):
        return dict(r)
    if (pc := u.plain_counts()) is not None:  # input and output alone (a Gemini report's usual): as below, sooner
        plain = {"prompt_tokens": pc[0], "completion_tokens": pc[1]}
        if pc[2] is not None:
            plain["total_tokens"] = pc[2]
        return plain
    t = u.tokens()
    inp, outp, total, cr, cw = t["input"], t["output"], t["total"], t["cache_read"], t["cache_write"]
    out: dict[str, Any] = {}
    if inp is not None:
        out["prompt_tokens"] = inp
    if outp is not None:
        out["completion_tokens"] = outp
    if total is not None:
        out["total_tokens"] = total
    if cr is not None or cw is not None:
        ptd: dict[str, int] = {}
        if cr is not None:
            ptd["cached_tokens"] = cr
        if cw is not None:
            ptd["cache_write_tokens"] = cw
        out["prompt_tokens_details"] = ptd
    if (v := t["reasoning"]) is not None:
        out["completion_tokens_details"] = {"reasoning_tokens": v}
    return out


COUNTING = Counting(COUNTING_NAME, input_includes_cached=True, fields=usage_fields, tokens=usage_tokens,
                    write=usage_object, plain=usage_plain, plain_total=usage_plain_total)


def text_piece(chunk: Any) -> bool:
    """A stream chunk that carries one piece of text and nothing else (most of a Chat stream):
    no usage (``usage`` absent or null), no ``finish_reason``, no error, one choice (index 0)
    whose delta is its ``content`` alone. Anything else, or anything odd, is not one (the
    stream watch decodes it)."""
    if chunk.__class__ is not dict or chunk.get("usage") is not None or "error" in chunk or chunk.get("object") == "error":
        return False
    choices = chunk.get("choices")
    if choices.__class__ is not list or len(choices) != 1:
        return False
    ch = choices[0]
    if ch.__class__ is not dict or ch.get("index", 0) != 0 or ch.get("finish_reason") is not None:
        return False
    delta = ch.get("delta")
    return delta.__class__ is dict and len(delta) == 1 and delta.get("content").__class__ is str


FACTS = Protocol(
    name=PROTOCOL,
    title="OpenAI Chat Completions",
    clients="the OpenAI SDKs, most agents and local servers",
    hosts=("api.openai.com",),  # shared with Responses: the path decides
    api_prefixes=("/v1",),
    paths={"chat": "/chat/completions"},
    turn_kinds=("chat", "chat"),
    auth_header=("authorization", "Bearer {key}"),
    key_env="OPENAI_API_KEY",
    builtin_url="https://api.openai.com/v1",
    version_headers={"openai-beta": "beta features the body uses"},
    credential_headers={"openai-organization": "the OpenAI organization an API key bills (an account's identity)",
                        "openai-project": "the OpenAI project an API key bills (an account's identity)"},
    upstream_error=error_reply,
    error_body=lambda status, message, etype: error_body(status, message),  # by status, not etype
    stop_now=stop_now,
    stream_error=lambda message: sse_error("server_error", message),
    skipped_chunk=text_piece,
    counting=COUNTING,
    cache_prefix=("tools", "messages"),
    rule_shape=RuleShape(
        "messages", ("content",), typed("image_url"), role_user, "content", typed("text"),
        # legacy `functions` count as tools too
        tool_count=lambda body: len(lst(body.get("tools"))) + len(lst(body.get("functions"))),
        thinking=lambda body: isinstance(e := body.get("reasoning_effort"), str) and e != "none",
        answered_calls=_answered_calls,
        is_document=typed("file"),
        # Chat has no provider-run tools in `tools`; web_search_options asks the provider to search
        server_tools=lambda body: ["web_search_options"] if isinstance(body.get("web_search_options"), dict) else [],
        tool_names=lambda body: [n for t in lst(body.get("tools")) + lst(body.get("functions"))
                                 if isinstance(n := d(t).get("name", d(d(t).get("function")).get("name")), str)],
        output_schema=lambda body: json_schema(d(body.get("response_format"))),  # {type: json_schema, json_schema: {schema}}
    ),
    checks=(
        Check("token limits", positive_int("max_tokens", "max_completion_tokens"),
              "Chat Completions: max_tokens / max_completion_tokens are integers ≥ 1"),
        Check("messages", non_empty_list("messages"), "Chat Completions: at least one message"),
        Check("tool message ids", _orphan_results,
              "Chat Completions: a tool message answers a tool_calls id of an earlier assistant message"),
    ),
    max_output_field="max_completion_tokens",
    state_payload=state_payload,
    state_kind=lambda p: p.get("field") or "reasoning_content",
    genai_provider="openai",
    effort_spellings={"reasoning_effort": ("the level itself", "Chat is the neutral vocabulary")},
    effort_fields=(("reasoning_effort",),),
)


def register_protocols(register: Callable[..., object]) -> None:
    """The built-in plugin (entry-point group ``tokunseba.protocols``): these facts and the codec,
    named for the registry to import on first use (``protocols/`` imports no codec)."""
    register(FACTS, "tokunseba.translate.openai_chat:CODEC")
