"""Upstream errors -> errors in the client's protocol (protocols.md A.7, B.6, E.6).

Used for whole error replies (``translate_error``) and for mid-stream errors (the stream
encoders call ``to_anthropic`` / ``to_openai``). The upstream's message text is kept; the
status maps by table; a context overflow reaches an Anthropic client as a 400
``invalid_request_error`` whose message contains "prompt is too long" (design.md rule 6).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .. import jsonc
from ..protocols import anthropic as pa
from ..protocols import openai_chat as po

# status changes between the protocols (everything else keeps its status)
STATUS_TO_ANTHROPIC: dict[int, int] = {503: 529}  # Claude Code classifies 529 as overloaded
STATUS_TO_OPENAI: dict[int, int] = {529: 503}  # no 529 in OpenAI; clients retry any >= 500

# How an OpenAI-compatible upstream says "context overflow": code, type, or message text.
CONTEXT_CODES = frozenset({po.CONTEXT_LENGTH_CODE})
CONTEXT_TYPES = frozenset({"exceed_context_size_error"})  # llama.cpp llama-server
CONTEXT_TEXT = re.compile(
    r"maximum context length|context length exceeded|exceeds? (?:the )?(?:available )?context"
    r"|context window|prompt is too long|input length and `max_tokens` exceed context limit",
    re.IGNORECASE,
)
MAX_MESSAGE_CHARS = 4000  # a non-JSON body (an HTML error page...) is cut to this


@dataclass(frozen=True, slots=True)
class UpstreamError:
    status: int
    message: str
    type: str | None = None  # the upstream's own error type string
    code: str | None = None  # the upstream's error code (OpenAI), as a string


def parse_error_body(status: int, body: bytes) -> UpstreamError:
    """Read an error reply in any shape: Anthropic or OpenAI envelopes, Ollama's
    ``{"error": "text"}``, vLLM's flat ``{"object":"error","message":…}``, FastAPI's
    ``{"detail": …}``, or plain text."""
    try:
        doc = jsonc.loads(body) if body.strip() else None
    except jsonc.JSONDecodeError:
        doc = None
    if not isinstance(doc, dict):
        text = body.decode("utf-8", "replace").strip()[:MAX_MESSAGE_CHARS]
        return UpstreamError(status, text or f"upstream returned HTTP {status}")
    return error_from_obj(status, doc)


def error_from_obj(status: int, doc: dict, *, status_from_code: bool = False) -> UpstreamError:
    """An error object already parsed (a whole body, or a mid-stream ``{"error":…}`` chunk).
    With ``status_from_code`` (mid-stream, where there is no HTTP status) an integer ``code``
    in 400..599 (vLLM, llama-server) is taken as the status."""
    err = doc.get("error")
    src = err if isinstance(err, dict) else doc
    message = err if isinstance(err, str) else src.get("message")
    if message is None and "detail" in doc:
        message = _detail_text(doc["detail"])
    if message is None:
        message = jsonc.dumps(doc)
    elif not isinstance(message, str):
        message = jsonc.dumps(message)
    etype, code = src.get("type"), src.get("code")
    if isinstance(code, int) and not isinstance(code, bool):
        if status_from_code and 400 <= code <= 599:
            status = code
        code = None
    return UpstreamError(
        status,
        message or f"upstream returned HTTP {status}",
        etype if isinstance(etype, str) else None,
        code if isinstance(code, str) else None,
    )


def _detail_text(detail: object) -> str:
    """FastAPI's ``detail``: a string, or a list of pydantic errors ``{loc, msg}``."""
    if isinstance(detail, str):
        return detail
    if isinstance(detail, list):
        parts = []
        for item in detail:
            if isinstance(item, dict) and "msg" in item:
                loc = ".".join(str(x) for x in item.get("loc") or ())
                parts.append(f"{loc}: {item['msg']}" if loc else str(item["msg"]))
            else:
                parts.append(jsonc.dumps(item))
        return "; ".join(parts)
    return jsonc.dumps(detail)


def is_context_overflow(err: UpstreamError) -> bool:
    if err.code in CONTEXT_CODES or err.type in CONTEXT_TYPES:
        return True
    return (err.status < 500) and bool(CONTEXT_TEXT.search(err.message))


def to_anthropic(err: UpstreamError) -> tuple[int, str, str]:
    """(status, Anthropic error type, message) for an error an OpenAI-side upstream gave."""
    if is_context_overflow(err):
        msg = err.message
        if pa.PROMPT_TOO_LONG not in msg.lower():
            msg = f"{pa.PROMPT_TOO_LONG}: {msg}"
        return 400, "invalid_request_error", msg
    status = STATUS_TO_ANTHROPIC.get(err.status, err.status)
    return status, pa.error_type_for_status(status), err.message


def to_openai(err: UpstreamError) -> tuple[int, str, str | None, str]:
    """(status, OpenAI error type, code, message) for an error an Anthropic upstream gave."""
    status = STATUS_TO_OPENAI.get(err.status, err.status)
    if is_context_overflow(err):
        return status, "invalid_request_error", po.CONTEXT_LENGTH_CODE, err.message
    return status, po.error_type_for_status(status), po.ERROR_CODES.get(status), err.message


def translate_error(upstream: str, client: str, status: int, body: bytes) -> tuple[int, bytes]:
    """An upstream error reply (status >= 400, any body) -> (status, body) in the client's
    protocol, keeping the upstream's message text."""
    if upstream == client:
        return status, body  # same protocol: byte-identical (design.md rule 8)
    err = parse_error_body(status, body)
    if client == pa.PROTOCOL:
        st, etype, msg = to_anthropic(err)
        return st, pa.error_body(st, msg, etype)
    if client == po.PROTOCOL:
        st, etype, code, msg = to_openai(err)
        return st, po.error_body(st, msg, etype, code)
    if client == "openai-responses":
        from .responses_reply import responses_error  # imports this module

        return responses_error(status, body)
    raise ValueError(f"no error translation from {upstream!r} to {client!r}")
