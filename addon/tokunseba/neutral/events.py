"""The neutral events of a reply (docs/dev/architecture.md §3): what every stream and whole-reply codec
speaks.

Each protocol has a stream decoder (wire SSE events -> these) and a stream encoder (these ->
wire bytes); a whole reply is decoded to the same events and collected into a ``Message``
(neutral.message). Any pair is decoder(source) + encoder(target).

Vocabulary:
- stop reasons use Anthropic's names (``end_turn``, ``max_tokens``, ``stop_sequence``,
  ``tool_use``, ``refusal``, ``pause_turn``, ``model_context_window_exceeded``); each
  protocol module maps its own to and from these.
- usage travels as a ``Usage`` (neutral.usage): the upstream's own object,
  exactly as reported, plus the protocol that reported it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Union

from .usage import Usage

# The neutral stop reasons (Anthropic's names): every decoder maps its protocol's own to these
STOP_REASONS = frozenset({"end_turn", "max_tokens", "stop_sequence", "tool_use", "refusal", "pause_turn",
                          "model_context_window_exceeded"})
EARLY_END = "upstream ended the stream early"  # the error when a stream ends before its end
NAMELESS_CALL = "upstream sent a tool call without a function name"  # never passed on: no client can run it

BlockKind = Literal["text", "tool_use", "thinking", "redacted_thinking", "other"]


@dataclass(slots=True)
class MessageStart:
    id: str | None
    model: str | None
    usage: Usage | None = None  # usage reported at start (Anthropic message_start)


@dataclass(slots=True)
class BlockStart:
    index: int  # the decoder's own running block index (0, 1, ...)
    kind: BlockKind
    id: str | None = None  # tool_use: the tool call id, byte for byte
    name: str | None = None  # tool_use: the tool name
    # thinking blocks: signature when the source protocol signs them (Anthropic)
    signature: str | None = None
    # "other" blocks (server tools, redacted thinking...): the source's raw block
    raw: dict[str, Any] | None = None


@dataclass(slots=True)
class BlockDelta:
    index: int
    text: str  # text / tool argument fragment (verbatim) / thinking text


@dataclass(slots=True)
class BlockSignature:
    index: int
    signature: str


@dataclass(slots=True)
class BlockStop:
    index: int


@dataclass(slots=True)
class MessageStop:
    stop_reason: str | None
    stop_sequence: str | None = None
    usage: Usage | None = None  # the final, cumulative usage as reported (None: none)


@dataclass(slots=True)
class StreamError:
    status: int  # the HTTP status the error corresponds to (500 for a broken stream)
    type: str  # Anthropic error type vocabulary (api_error, overloaded_error, ...)
    message: str
    code: str | None = None  # OpenAI error code when the source gave one


@dataclass(slots=True)
class UsageUpdate:
    """Usage reported after the stop (OpenAI's trailing usage chunk)."""

    usage: Usage


@dataclass(slots=True)
class KeepAlive:
    """The upstream (or the relay, for a stalled upstream) said it is still there: an SSE
    comment line, an Anthropic ``ping``. Never content: no block, no usage; an encoder writes
    its client protocol's keep-alive, or nothing where the client's parser has none."""


KEEPALIVE = KeepAlive()

Event = Union[MessageStart, BlockStart, BlockDelta, BlockSignature, BlockStop, MessageStop, StreamError, UsageUpdate,
              KeepAlive]
