"""A whole reply in neutral form: its events collected (docs/dev/architecture.md §3).

A whole-reply decoder turns an upstream's JSON body into the same neutral events its stream
decoder would produce for the same reply; ``Message.collect`` gathers them; a whole-reply
encoder writes the client's body from the ``Message``. So a whole reply and the final object
of the same reply streamed are one thing, which the tests check for every pair.

``Message.events()`` gives the events back (one delta per block), for encoders that are
built on the stream encoder.
"""

from __future__ import annotations

from typing import Any

from dataclasses import dataclass, field

from .events import (
    BlockDelta,
    BlockKind,
    BlockSignature,
    BlockStart,
    BlockStop,
    Event,
    MessageStart,
    MessageStop,
    StreamError,
    UsageUpdate,
)
from .usage import Usage


@dataclass(slots=True)
class Block:
    kind: BlockKind
    id: str | None = None  # tool_use: the call id, byte for byte
    name: str | None = None  # tool_use: the tool name
    text: str = ""  # text / tool arguments (a JSON string, verbatim) / thinking text
    signature: str | None = None  # thinking: the source's signature (None: unsigned)
    raw: dict[str, Any] | None = None  # "other" blocks: the source's raw block (or {"source": path})


@dataclass(slots=True)
class Message:
    id: str | None = None
    model: str | None = None
    blocks: list[Block] = field(default_factory=list)
    stop_reason: str | None = None
    stop_sequence: str | None = None
    usage: Usage | None = None  # the final usage as reported (None: none)
    error: StreamError | None = None  # the upstream ended with an error instead
    stopped: bool = False  # a MessageStop arrived

    @classmethod
    def collect(cls, events: list[Event]) -> "Message":
        m = cls()
        by_index: dict[int, Block] = {}
        for ev in events:
            # exact types (the event classes have no subclasses), most frequent first
            if type(ev) is BlockDelta:
                if ev.index in by_index:
                    by_index[ev.index].text += ev.text
            elif type(ev) is BlockStart:
                b = Block(ev.kind, ev.id, ev.name, "", ev.signature, ev.raw)
                by_index[ev.index] = b
                m.blocks.append(b)
            elif type(ev) is BlockStop:
                continue  # nothing to keep
            elif type(ev) is MessageStart:
                m.id, m.model = ev.id, ev.model
                if ev.usage is not None:
                    m.usage = ev.usage
            elif type(ev) is MessageStop:
                m.stop_reason, m.stop_sequence, m.stopped = ev.stop_reason, ev.stop_sequence, True
                if ev.usage is not None:
                    m.usage = ev.usage
            elif type(ev) is BlockSignature:
                if ev.index in by_index:
                    by_index[ev.index].signature = (by_index[ev.index].signature or "") + ev.signature
            elif type(ev) is UsageUpdate:
                m.usage = ev.usage
            elif type(ev) is StreamError:
                m.error = ev
        return m

    def events(self) -> list[Event]:
        """The message as one event per part: start, each block whole, stop."""
        out: list[Event] = [MessageStart(self.id, self.model)]
        for i, b in enumerate(self.blocks):
            out.append(BlockStart(i, b.kind, b.id, b.name, b.signature, b.raw))
            if b.text:
                out.append(BlockDelta(i, b.text))
            out.append(BlockStop(i))
        if self.error is not None:
            out.append(self.error)
        else:
            out.append(MessageStop(self.stop_reason, self.stop_sequence, self.usage))
        return out
