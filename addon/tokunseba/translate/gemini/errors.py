"""Errors to and from Google's envelope ``{"error": {"code", "message", "status", "details"?}}``
(gemini.md 4.2, 5.1.8).

Reading: the HTTP status stays the status (``RESOURCE_EXHAUSTED`` is 429 already); a prompt
over the model's context window is marked as a context overflow (the neutral code), so an
Anthropic client gets "prompt is too long" (design.md rule 6). Writing: the upstream's text
is kept; Anthropic's 529 becomes 503 UNAVAILABLE (retried by Gemini clients); a context
overflow becomes 400 INVALID_ARGUMENT (not retried).
"""

from __future__ import annotations

from ...protocols import gemini as pg
from ...protocols import openai_chat as po
from ..errors import UpstreamError, error_from_obj, is_context_overflow, parse_error_body

# status changes on the way to a Gemini client (everything else keeps its status)
STATUS_TO_GEMINI: dict[int, int] = {529: 503}


def is_gemini_overflow(message: str) -> bool:
    low = message.lower()
    return all(p in low for p in pg.CONTEXT_OVERFLOW_TEXT)


def from_gemini(err: UpstreamError) -> UpstreamError:
    """An error read from a Gemini upstream, its context overflow marked with the neutral code."""
    if err.code is None and is_gemini_overflow(err.message):
        return UpstreamError(err.status, err.message, err.type, po.CONTEXT_LENGTH_CODE)
    return err


def parse_gemini_error(status: int, body: bytes) -> UpstreamError:
    """A whole Gemini error reply (any body) as an ``UpstreamError``."""
    return from_gemini(parse_error_body(status, body))


def stream_error_status(doc: dict) -> int:
    """The HTTP status of a mid-stream ``{"error": {...}}`` chunk: its ``code``, else its
    ``status`` name, else 500."""
    e = doc.get("error") if isinstance(doc.get("error"), dict) else {}
    code = e.get("code")
    if isinstance(code, int) and not isinstance(code, bool) and 400 <= code <= 599:
        return code
    return pg.STATUS_CODES.get(e.get("status") if isinstance(e.get("status"), str) else "", 500)


def read_stream_error(doc: dict) -> UpstreamError:
    return from_gemini(error_from_obj(stream_error_status(doc), doc))


def to_gemini(err: UpstreamError) -> tuple[int, str]:
    """(status, message) of the Google envelope for an error any upstream gave."""
    if is_context_overflow(err):
        return 400, err.message
    return STATUS_TO_GEMINI.get(err.status, err.status), err.message


def gemini_error(status: int, body: bytes) -> tuple[int, bytes]:
    """Any upstream's error reply -> (status, Google envelope) for a Gemini client."""
    st, message = to_gemini(parse_error_body(status, body))
    return st, pg.error_body(st, message)


def sse_error(err: UpstreamError) -> bytes:
    """A mid-stream error chunk (the Python SDK raises on it; Gemini CLI cannot see it)."""
    st, message = to_gemini(err)
    return pg.sse_event(pg.error_envelope(st, message))


