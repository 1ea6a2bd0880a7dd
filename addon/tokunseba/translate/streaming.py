"""The stream translator: SSE codec + decoder(upstream) + encoder(client), sans-IO (docs/dev/architecture.md §3).

``translate.stream(upstream, client)`` returns a ``StreamTranslator``: ``feed(bytes)``
returns every complete translated event at once (``b""`` when nothing is complete yet),
whatever the split of the input; ``close()`` flushes at the end of the upstream body and, if
the upstream never sent its terminal event, emits an error in the client's protocol;
``fail(message)`` is the error event for a broken upstream connection.

Keep-alives cross: an SSE comment line from the upstream (or from the relay, for a stalled
upstream) becomes a neutral ``KeepAlive`` here, for every protocol alike, and a protocol's
own keep-alive event (Anthropic ``ping``) becomes one in its decoder; the client's encoder
writes its own keep-alive for it.

A reply the endpoint's own cap ended (``capped``: the request translation's) is told
``end_turn`` (neutral/endpoint_cap.py), recorded in the report's ``converted``; the report's
``stop_reason`` stays the endpoint's ``max_tokens``.
"""

from __future__ import annotations

from typing import Any

from ..neutral import Capped
from ..neutral import told_stop
from ..neutral import KEEPALIVE, NAMELESS_CALL, BlockStart, MessageStart, MessageStop, StreamError
from ..neutral import ReplyReport
from ..sse import SSEDecoder, SSEEvent
from .codec import StreamDecoder, StreamEncoder

__all__ = ["StreamTranslator"]


class StreamTranslator:
    """Upstream SSE bytes in, client SSE bytes out. Exposes, for the ledger: ``report``
    (usage as reported, stop reason, drops, warnings, errors, completed), ``client_usage``
    (the usage object the client was sent) and ``started`` (any output produced yet)."""

    __slots__ = ("report", "started", "tap", "_sse", "_dec", "_enc", "_closed", "_capped", "_calls", "_cut")

    def __init__(self, decoder: StreamDecoder, encoder: StreamEncoder, report: ReplyReport,
                 capped: Capped | None = None) -> None:
        self.report = report
        self.started = False
        self.tap = None  # called with each neutral event of the upstream's reply (reasoning.state.Capture.on)
        self._sse = SSEDecoder(comments=True)  # comments are keep-alives
        self._dec = decoder
        self._enc = encoder
        self._closed = False
        self._capped = capped  # the endpoint's cap in place of the client's limit (None: none)
        self._calls = False  # a tool call has started (a cut reply holding one is told as it is)
        self._cut = False  # told end_turn for the endpoint's max_tokens

    @property
    def client_usage(self) -> dict[str, Any] | None:
        return self._enc.client_usage

    @property
    def finished(self) -> bool:
        """The client's stream has its last event: its terminal event, or an error that ended it."""
        return self._enc.finished

    def feed(self, data: bytes) -> bytes:
        if not data or self._closed:
            return b""
        return self._run(self._sse.feed(data), False)

    def close(self) -> bytes:
        if self._closed:
            return b""
        self._closed = True
        return self._run(self._sse.close(), True)

    def fail(self, message: str) -> bytes:
        """The client-protocol error event for a broken upstream; b"" once the stream has
        already ended (idempotent)."""
        self._closed = True
        if self._enc.finished:
            return b""
        out = self._enc.encode(StreamError(500, "api_error", message))
        if out:
            self.started = True
        return out

    def _run(self, events: list[SSEEvent], final: bool) -> bytes:
        dec, enc, tap = self._dec, self._enc, self.tap
        parts: list[bytes] = []
        for sse in events:
            if sse.comment:
                b = enc.encode(KEEPALIVE)
                if b:
                    parts.append(b)
                continue
            for ev in dec.on_event(sse):
                if tap is not None:
                    tap(ev)
                if ev.__class__ is MessageStart:
                    self.report.model = ev.model
                elif ev.__class__ is BlockStart and ev.kind == "tool_use":
                    self._calls = True
                    if not ev.name:
                        ev = StreamError(502, "api_error", NAMELESS_CALL)  # never a call the client cannot run
                elif ev.__class__ is MessageStop and self._capped is not None and ev.stop_reason == "max_tokens":
                    ev = self._told(ev)
                b = enc.encode(ev)
                if b:
                    parts.append(b)
        if final:  # end of body: the decoder's own end (or its early-end error)
            for ev in dec.close():
                if ev.__class__ is MessageStop and self._capped is not None and ev.stop_reason == "max_tokens":
                    ev = self._told(ev)
                b = enc.encode(ev)
                if b:
                    parts.append(b)
        if self._cut:
            self.report.stop_reason = "max_tokens"  # told end_turn: the ledger keeps the endpoint's own
        self.report.usage = dec.usage
        if not parts:
            return b""
        self.started = True
        return b"".join(parts)

    def _told(self, ev: MessageStop) -> MessageStop:
        """The stop the client is told for a reply the endpoint's cap ended (neutral/endpoint_cap.py)."""
        told = told_stop(ev.stop_reason, self._capped, calls=self._calls, converted=self.report.converted)
        if told == ev.stop_reason:
            return ev
        self._cut = True
        return MessageStop(told, ev.stop_sequence, ev.usage)
