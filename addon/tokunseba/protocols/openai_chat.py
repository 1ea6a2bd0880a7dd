"""OpenAI Chat Completions: the protocol's facts as data (protocols.md B).

finish_reason <-> neutral (Anthropic-named) stop reasons (E.3), error types by status (B.6),
the error envelope as a JSON body and as a ``data: {"error":…}`` SSE event.
"""

from __future__ import annotations

from .. import jsonc
from ..neutral.error import UpstreamError, is_context_overflow
from ..sse import encode_event

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
# HTTP status -> error.code when nothing more specific is known
ERROR_CODES: dict[int, str] = {429: "rate_limit_exceeded"}
CONTEXT_LENGTH_CODE = "context_length_exceeded"


# status changes from another protocol's error: no 529 in OpenAI; clients retry any >= 500
STATUS_FROM_OTHERS: dict[int, int] = {529: 503}


def from_upstream_error(err: UpstreamError) -> tuple[int, str, str | None, str]:
    """(status, OpenAI error type, code, message) for an error another protocol's upstream gave."""
    status = STATUS_FROM_OTHERS.get(err.status, err.status)
    if is_context_overflow(err):
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


def error_envelope(message: str, etype: str, code: str | None = None, param: str | None = None) -> dict:
    return {"error": {"message": message, "type": etype, "param": param, "code": code}}


def error_body(status: int, message: str, etype: str | None = None, code: str | None = None) -> bytes:
    """A JSON error body: ``{"error":{"message","type","param","code"}}``."""
    return jsonc.dumpb(
        error_envelope(message, etype or error_type_for_status(status), code or ERROR_CODES.get(status))
    )


def sse_error(etype: str, message: str, code: str | None = None) -> bytes:
    """A mid-stream error event: ``data: {"error":{…}}`` (the SDK raises APIError on it)."""
    return encode_event(jsonc.dumpb(error_envelope(message, etype, code)))
