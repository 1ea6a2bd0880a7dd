"""What a codec is: the parts one protocol contributes to every pair (docs/dev/architecture.md §3).

A codec package (``translate/<protocol>/``) builds one ``Codec`` from its own modules:
decode.py and encode.py (requests; Chat's, near the identity, in one request.py), reply.py
(decode + encode), stream.py (decoder + encoder), and its error encoder. The registry (``translate/__init__.py``) pairs any decoder with any
encoder. No codec imports another.
"""

from __future__ import annotations

from typing import Any, Protocol

from collections.abc import Callable
from dataclasses import dataclass, field

from .. import jsonc
from ..errors import UntranslatableReply
from ..neutral import Conversation, RequestTranslation
from ..neutral import UpstreamError
from ..neutral import Event
from ..neutral import Message
from ..neutral import ReplyReport
from ..neutral import Usage
from ..sse import SSEEvent


@dataclass(slots=True)
class ReplyTranslation:
    """A translated whole reply, and what the ledger needs of it."""

    body: bytes
    usage: Usage | None  # the upstream's usage as reported (None: none)
    client_usage: dict[str, Any] | None  # the usage object the client was sent (None: none reported)
    stop_reason: str | None  # neutral (Anthropic-named) stop reason
    dropped: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    message: Message | None = field(default=None, repr=False)  # the upstream's reply, neutral (state capture)
    converted: list[str] = field(default_factory=list)  # told the client in place of the upstream's (endpoint_cap)


class StreamDecoder(Protocol):
    """A protocol's stream decoder: wire SSE events -> neutral events."""

    usage: Usage | None  # the usage reported so far, as reported

    def on_event(self, ev: SSEEvent) -> list[Event]: ...
    def close(self) -> list[Event]: ...


class StreamEncoder(Protocol):
    """A protocol's stream encoder: neutral events -> the client's wire bytes."""

    finished: bool  # its terminal event (or an error) was written
    client_usage: dict[str, Any] | None  # the usage object the client was sent

    def encode(self, ev: Event) -> bytes: ...


@dataclass(frozen=True)
class Codec:
    protocol: str
    # requests: client body -> neutral; neutral -> target body (endpoint options as keywords)
    decode_request: Callable[..., Conversation]  # (body[, path=]: url_carries_model)
    encode_request: Callable[..., RequestTranslation]
    # whole replies: upstream body -> neutral events (TranslationError 502 when unreadable);
    # a Message -> (client body, client usage object), recording into the report
    decode_reply: Callable[[bytes, ReplyReport], list[Event]]
    encode_reply: Callable[[Message, ReplyReport, int], tuple[bytes, dict[str, Any] | None]]
    # streams: decoder(report) with on_event / close / usage; encoder(report, include_usage,
    # created) with encode / finished / client_usage
    stream_decoder: Callable[[ReplyReport], StreamDecoder]
    stream_encoder: Callable[[ReplyReport, bool, int | None], StreamEncoder]
    # an upstream error of another protocol -> (status, body) in this protocol
    encode_error: Callable[[UpstreamError], tuple[int, bytes]]
    # the request field that carries stop strings, dotted when nested (None: the protocol has none)
    stop_field: str | None = None
    # whole replies straight to the neutral message: what ``Message.collect`` makes of
    # ``decode_reply``'s events, without making them (translate.reply's path; None: it collects)
    decode_message: Callable[[bytes, ReplyReport], Message] | None = None
    # the model and the stream flag travel in the URL, not the body (Gemini): the request
    # decoder takes the client's ``path`` too, and an encoded body names no model
    url_carries_model: bool = False
    # what a translated turn is still refused for, before sending (docs/dev/architecture.md rule 4), as
    # ``tokunseba models`` lists it: as a client's turn leaving this protocol, and at this
    # protocol's endpoints. Each decoder/encoder raises ``Refused`` with the turn's own path.
    refused_leaving: tuple[str, ...] = ()
    refused_arriving: tuple[str, ...] = ()
    # ``cache: auto`` (an endpoint that caches only when asked): places breakpoints on the stable
    # prefix of a translated body, returns the paths added (plumbing); None: nothing to place
    place_cache: Callable[[dict[str, Any]], list[str]] | None = None
    # the client's own breakpoints carried (cache: breakpoints | auto): the key a client block of this
    # protocol marks one with (its decoder drops it, recorded), and, as a target, a function marking
    # the translated body's messages at the neutral indexes given (returns the paths added)
    cache_marker: str | None = None
    carry_cache: Callable[[dict[str, Any], list[int]], list[str]] | None = None


def parse_reply(body: bytes, what: str) -> dict[str, Any]:
    """A whole upstream reply as a JSON object; a 502 ``TranslationError`` otherwise."""
    try:
        doc = jsonc.loads(body)
    except jsonc.JSONDecodeError as e:
        raise UntranslatableReply(502, f"the upstream's {what} reply is not valid JSON ({e})") from None
    if not isinstance(doc, dict):
        raise UntranslatableReply(502, f"the upstream's {what} reply is not a JSON object")
    return doc
