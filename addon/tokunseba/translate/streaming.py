"""The stream translator: SSE codec + decoder(upstream) + encoder(client), sans-IO (docs/architecture.md §3).

``translate.stream(upstream, client)`` returns a ``StreamTranslator``: ``feed(bytes)``
returns every complete translated event at once (``b""`` when nothing is complete yet),
whatever the split of the input; ``close()`` flushes at the end of the upstream body and, if
the upstream never sent its terminal event, emits an error in the client's protocol;
``fail(message)`` is the error event for a broken upstream connection.

Keep-alives cross: an SSE comment line from the upstream (or from the relay, for a stalled
upstream) becomes a neutral ``KeepAlive`` here, for every protocol alike, and a protocol's
own keep-alive event (Anthropic ``ping``) becomes one in its decoder; the client's encoder
writes its own keep-alive for it.
"""

from __future__ import annotations

from typing import Any

from ..neutral import KEEPALIVE, NAMELESS_CALL, BlockStart, MessageStart, StreamError
from ..neutral import ReplyReport
from ..sse import SSEDecoder, SSEEvent
from .codec import StreamDecoder, StreamEncoder

__all__ = ["StreamTranslator"]


class StreamTranslator:
    """Upstream SSE bytes in, client SSE bytes out. Exposes, for the ledger: ``report``
    (usage as reported, stop reason, drops, warnings, errors, completed), ``client_usage``
    (the usage object the client was sent) and ``started`` (any output produced yet)."""

    __slots__ = ("report", "started", "tap", "_sse", "_dec", "_enc", "_closed")

    def __init__(self, decoder: StreamDecoder, encoder: StreamEncoder, report: ReplyReport) -> None:
        self.report = report
        self.started = False
        self.tap = None  # called with each neutral event of the upstream's reply (reasoning.state.Capture.on)
        self._sse = SSEDecoder(comments=True)  # comments are keep-alives
        self._dec = decoder
        self._enc = encoder
        self._closed = False

    @property
    def client_usage(self) -> dict[str, Any] | None:
        return self._enc.client_usage

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
                elif ev.__class__ is BlockStart and ev.kind == "tool_use" and not ev.name:
                    ev = StreamError(502, "api_error", NAMELESS_CALL)  # never a call the client cannot run
                b = enc.encode(ev)
                if b:
                    parts.append(b)
        if final:  # end of body: the decoder's own end (or its early-end error)
            for ev in dec.close():
                b = enc.encode(ev)
                if b:
                    parts.append(b)
        self.report.usage = dec.usage
        if not parts:
            return b""
        self.started = True
        return b"".join(parts)

