"""What endpoints answer when they cannot take a turn now (facts for turn/failover.py,
turn/failover.py, and every protocol's error envelope).

Each row says why it is there. A reply with one of ``FAILOVER_STATUSES`` means "not now,
not here": the turn itself may be fine, another endpoint can take it. A context-window
error is told apart from the other 4xx by its body: ``CONTEXT_WINDOW`` is the one table of
how endpoints say "the prompt does not fit" (OpenAI's ``context_length_exceeded``,
llama-server's ``exceed_context_size_error``, vLLM's, Ollama's, Anthropic's and Gemini's
wordings), and ``is_context_window`` its one reader: failover reads it to move a turn on,
and the error envelopes (protocols/*.from_upstream_error, the stream codecs) read it to tell
the client "prompt is too long" / ``context_length_exceeded`` / INVALID_ARGUMENT.
``CONTEXT_STATUSES`` are the statuses such an error comes with. Any other 4xx is the
request's own fault and is answered, never failed over.
"""

from __future__ import annotations

import re

from ..neutral import UpstreamError

# status -> why a reply with it is a failure of the endpoint, not of the request
FAILOVER_STATUSES: dict[int, str] = {
    408: "request timeout: the server gave up waiting (nothing of the turn was served)",
    429: "rate limited (Anthropic rate_limit_error, OpenAI rate_limit_exceeded, Gemini RESOURCE_EXHAUSTED)",
    500: "server error (Anthropic api_error, OpenAI server_error, Gemini INTERNAL)",
    502: "bad gateway: a proxy in front of the endpoint could not reach it",
    503: "unavailable: llama-server loading its model or with no free slot, Gemini UNAVAILABLE, OpenAI overloaded",
    504: "gateway timeout (Gemini DEADLINE_EXCEEDED)",
    529: "Anthropic overloaded_error",
}

# statuses a context-window error comes with (the body says whether it is one)
CONTEXT_STATUSES: dict[int, str] = {
    400: "OpenAI context_length_exceeded, llama-server exceed_context_size_error, vLLM, Anthropic "
         "'prompt is too long', Gemini INVALID_ARGUMENT 'input token count ... exceeds'",
    413: "a server that says the prompt is too large for its context with 413 (LM Studio, some gateways)",
    422: "OpenAI-compatible servers built on FastAPI that reject an over-long prompt as unprocessable",
}



def may_be_failure(status: int) -> bool:
    """Whether a reply with ``status`` may be a failure of the endpoint (``FAILOVER_STATUSES``) or
    a context-window error (``CONTEXT_STATUSES``): its body must be read before the client gets
    it (the relay holds it until turn/failover.py ``Failure.of`` has decided)."""
    return status in FAILOVER_STATUSES or status in CONTEXT_STATUSES


# endpoint protocol -> how its endpoints say "the prompt does not fit the context window":
# (field of the error read by neutral.error.parse_error_body: "code" | "type" | "message",
#  a case-insensitive regex, where it comes from). Servers borrow each other's words, so a
# reply is read against every row whatever protocol answered (is_context_window).
CONTEXT_WINDOW: dict[str, tuple[tuple[str, str, str], ...]] = {
    "openai": (
        ("code", r"^context_length_exceeded$", "OpenAI Chat Completions; vLLM and LiteLLM copy it"),
        ("type", r"^exceed_context_size_error$", "llama.cpp llama-server (its type, with n_prompt_tokens, n_ctx)"),
        ("message", r"exceeds? (?:the )?(?:available )?context", "llama-server: 'the request exceeds the available "
                                                                   "context size, try increasing it'; and servers "
                                                                   "saying 'exceeds context' / 'exceed the context'"),
        ("message", r"maximum context length", "OpenAI and vLLM: 'This model's maximum context length is N tokens'"),
        ("message", r"context length exceeded|context window", "Ollama, LM Studio and gateways in their own words"),
    ),
    "openai-responses": (
        ("code", r"^context_length_exceeded$", "OpenAI Responses: 'Your input exceeds the context window of this model'"),
        ("message", r"exceeds the context window", "OpenAI Responses' message when the code is missing"),
    ),
    "anthropic": (
        ("message", r"prompt is too long", "Anthropic invalid_request_error: 'prompt is too long: N tokens > M maximum'"),
        ("message", r"input length and `max_tokens` exceed context limit", "Anthropic, when max_tokens does not fit"),
    ),
    "gemini": (
        ("message", r"input token count .* exceeds the maximum number of tokens",
         "Gemini INVALID_ARGUMENT: 'The input token count (N) exceeds the maximum number of tokens allowed (M)'"),
    ),
}
# A "message" row counts only in a client error (status < 500): a server error whose text
# mentions the prompt's length ("internal error while checking whether the prompt is too
# long") is a server error. A "code" or "type" row counts at any status (a mid-stream error
# event has no HTTP status of its own).
MESSAGE_ROWS_BELOW = 500

_FIELDS = ("code", "type", "message")
# one alternation per field of the error, from every protocol's rows
_MATCHERS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (f, re.compile("|".join(f"(?:{rx})" for rows in CONTEXT_WINDOW.values() for field, rx, _ in rows if field == f),
                   re.IGNORECASE))
    for f in _FIELDS
    if any(field == f for rows in CONTEXT_WINDOW.values() for field, _, _ in rows)
)


def is_context_window(err: UpstreamError) -> bool:
    """Whether an endpoint's error (however it was enveloped) says "the prompt does not fit
    the context window": a row of ``CONTEXT_WINDOW`` of any protocol matches its field (a
    ``message`` row only below ``MESSAGE_ROWS_BELOW``)."""
    for field, rx in _MATCHERS:
        if field == "message":
            if err.status >= MESSAGE_ROWS_BELOW:
                continue
            value: str | None = err.message
        else:
            value = err.code if field == "code" else err.type
        if value and rx.search(value):
            return True
    return False


# header (lower-case) -> how its value says when the endpoint will take turns again
#   "seconds-or-date": RFC 9110 Retry-After: delay-seconds or an HTTP-date
#   "ms": milliseconds
#   "duration": OpenAI's Go-style duration ("1s", "6m0s", "250ms", "1h2m3.5s")
#   "rfc3339": an RFC 3339 time
RETRY_HEADERS: dict[str, str] = {
    "retry-after": "seconds-or-date",  # RFC 9110 §10.2.3; Anthropic, OpenAI, Gemini, llama-server
    "retry-after-ms": "ms",  # OpenAI (its SDKs read it before retry-after)
}
# rate-limit reset headers, read when no retry-after came: the limit that is used up
# (its "remaining" header is 0) says when it refills
RESET_HEADERS: dict[str, tuple[str, str]] = {  # reset header -> (its "remaining" header, format)
    "x-ratelimit-reset-requests": ("x-ratelimit-remaining-requests", "duration"),  # OpenAI
    "x-ratelimit-reset-tokens": ("x-ratelimit-remaining-tokens", "duration"),  # OpenAI
    "anthropic-ratelimit-requests-reset": ("anthropic-ratelimit-requests-remaining", "rfc3339"),
    "anthropic-ratelimit-tokens-reset": ("anthropic-ratelimit-tokens-remaining", "rfc3339"),
    "anthropic-ratelimit-input-tokens-reset": ("anthropic-ratelimit-input-tokens-remaining", "rfc3339"),
    "anthropic-ratelimit-output-tokens-reset": ("anthropic-ratelimit-output-tokens-remaining", "rfc3339"),
}
