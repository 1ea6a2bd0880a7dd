"""Anthropic Messages: the protocol's facts as data (protocols.md A).

Error types by HTTP status (A.7, E.6), the error envelope (as a JSON body and as an
``event: error`` SSE event), the API version tokunseba sends, and the tool-id rule.
"""

from __future__ import annotations

import re

from .. import jsonc
from ..neutral.error import UpstreamError, is_context_overflow
from ..sse import encode_event

PROTOCOL = "anthropic"
# The anthropic-version tokunseba sends to an Anthropic endpoint when the client sent none
# (a translated OpenAI client; a models probe).
ANTHROPIC_VERSION = "2023-06-01"
SSE_PING = b'event: ping\ndata: {"type": "ping"}\n\n'  # the stream's keep-alive, as the API sends it

# A.7, plus E.6's 503 -> overloaded_error. Unlisted 4xx -> invalid_request_error, 5xx -> api_error.
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
# error type -> the status it travels with (for `event: error` in a stream, which has none)
STATUS_FOR_TYPE: dict[str, int] = {t: s for s, t in ERROR_TYPES.items() if s != 503}

# A tool_use id Anthropic accepts (A.3); anything else is a 400 on the next turn.
TOOL_ID_RE = re.compile(r"[a-zA-Z0-9_-]+")  # use fullmatch: "$" would let a trailing "\n" through

# Claude Code auto-compacts when the lower-cased error message contains one of these (A.7).
PROMPT_TOO_LONG = "prompt is too long"


# status changes from another protocol's error (everything else keeps its status)
STATUS_FROM_OTHERS: dict[int, int] = {503: 529}  # Claude Code classifies 529 as overloaded


def from_upstream_error(err: UpstreamError) -> tuple[int, str, str]:
    """(status, Anthropic error type, message) for an error another protocol's upstream gave.
    A context overflow becomes a 400 ``invalid_request_error`` saying "prompt is too long"
    (the phrase Claude Code auto-compacts on), the upstream's text kept."""
    if is_context_overflow(err):
        msg = err.message
        if PROMPT_TOO_LONG not in msg.lower():
            msg = f"{PROMPT_TOO_LONG}: {msg}"
        return 400, "invalid_request_error", msg
    status = STATUS_FROM_OTHERS.get(err.status, err.status)
    return status, error_type_for_status(status), err.message


def error_reply(err: UpstreamError) -> tuple[int, bytes]:
    """An upstream error of another protocol as (status, Anthropic error body)."""
    status, etype, message = from_upstream_error(err)
    return status, error_body(status, message, etype)


def error_type_for_status(status: int) -> str:
    """The Anthropic ``error.type`` for an HTTP status."""
    if status in ERROR_TYPES:
        return ERROR_TYPES[status]
    return "api_error" if status >= 500 else "invalid_request_error"


def status_for_type(etype: str | None) -> int:
    """The HTTP status an Anthropic error type stands for (500 when unknown)."""
    return STATUS_FOR_TYPE.get(etype or "", 500)


def tool_id_problem(tool_id: object) -> str | None:
    """Why Anthropic would reject this tool_use id, or None when it is valid."""
    if isinstance(tool_id, str) and TOOL_ID_RE.fullmatch(tool_id):
        return None
    return (
        f"the upstream's tool call id {tool_id!r} is not a valid Anthropic tool_use id "
        f"(it must match ^{TOOL_ID_RE.pattern}$); it would be rejected on the next turn, so it is not forwarded"
    )


def error_envelope(etype: str, message: str) -> dict:
    return {"type": "error", "error": {"type": etype, "message": message}}


def error_body(status: int, message: str, etype: str | None = None) -> bytes:
    """A JSON error body: ``{"type":"error","error":{"type":…,"message":…}}``."""
    return jsonc.dumpb(error_envelope(etype or error_type_for_status(status), message))


def sse_error(etype: str, message: str) -> bytes:
    """An ``event: error`` SSE event carrying the same envelope."""
    return encode_event(jsonc.dumpb(error_envelope(etype, message)), "error")
