"""An upstream's error, read from any envelope, in neutral form (docs/dev/protocols.md A.7, B.6, E.6).

``parse_error_body`` reads a whole error reply of any shape; ``error_from_obj`` an error
object already parsed (a mid-stream ``{"error":…}`` chunk). Each protocol module turns an
``UpstreamError`` into its own envelope (protocols.*.from_upstream_error); the upstream's
message text is always kept. Whether an error means "the prompt does not fit the context
window" is a protocol fact: ``protocols.failures.is_context_window`` reads an ``UpstreamError``
against its one table (neutral/ knows no protocol's wording).
"""

from __future__ import annotations

from typing import Any

from dataclasses import dataclass

from .. import jsonc

MAX_MESSAGE_CHARS = 4000  # a non-JSON body (an HTML error page...) is cut to this

# The neutral error vocabulary: error types by HTTP status, with Anthropic's names (docs/dev/protocols.md
# A.7, plus E.6's 503 -> overloaded_error). A ``StreamError`` carries one of these; each
# protocol module maps them to its own. Unlisted 4xx -> invalid_request_error, 5xx -> api_error.
ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    503: "overloaded_error",
    504: "timeout_error",
    529: "overloaded_error",
}
# error type -> the status it travels with (for an error event in a stream, which has none)
STATUS_FOR_TYPE: dict[str, int] = {t: s for s, t in ERROR_TYPES.items() if s != 503}


def error_type_for_status(status: int) -> str:
    """The neutral (Anthropic-named) error type for an HTTP status."""
    if status in ERROR_TYPES:
        return ERROR_TYPES[status]
    return "api_error" if status >= 500 else "invalid_request_error"


def status_for_type(etype: str | None) -> int:
    """The HTTP status a neutral error type stands for (500 when unknown)."""
    return STATUS_FOR_TYPE.get(etype or "", 500)


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


def error_from_obj(status: int, doc: dict[str, Any], *, status_from_code: bool = False) -> UpstreamError:
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

