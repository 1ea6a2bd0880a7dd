"""Watch a reply that tokunseba passes on unchanged (pass-through and retargeted turns), on
the side, so the ledger can tell a clean reply from a broken one without touching a byte.

``StreamWatch(protocol, content_encoding)`` is fed the raw body chunks (``feed`` / ``close``)
and afterwards knows the usage the upstream reported, the ``model`` its first event named,
and ``verdict()``: None for a clean
stream (its terminal event seen, no error event) or when the protocol cannot be judged
(its facts say ``stream_judged=False``: Gemini streams have no terminal event; their usage
is still read), else why it is not clean — an upstream error
event, a stream cut in the middle of an event, a stream that ended without its terminal
event, an event larger than the SSE cap or whose data is not JSON, bytes that are not UTF-8
(the official SDKs raise on them) (``fatal``: the stream cannot go on from there), bytes that
are not the declared encoding. ``whole_verdict`` does the same for a
whole reply that should be JSON. Neither ever raises.

The protocol codecs' own stream decoders (``translate.CODECS``) read the SSE: the watch is
not a second parser of any protocol. Events that carry neither usage, nor an end, nor an
error (text and argument deltas: most of a stream) are not decoded, only checked to be
JSON their client can read. When such an event comes whole in the usual shape (``event: NAME``,
one ``data:`` line, ``\n`` line ends) it is read straight from the chunk's bytes (``_feed``),
never made into an event object; so is, in a protocol whose events have no name (Chat), one
``data:`` line its facts' ``skipped_chunk`` judge a piece of text alone, once the decoder has
made the stream's start (its model). Anything else goes through the SSE decoder, which is fed
exactly the bytes around it (split-invariant, so the events and the verdict are the same).
"""

from __future__ import annotations

import codecs

from .. import jsonc, protocols
from ..encoding import Decoding, EncodingError
from ..sse import SSEDecoder, SSEEvent, SSETooLarge
from ..neutral import MessageStart, MessageStop, StreamError
from ..neutral import ReplyReport
from ..neutral import Usage
from ..translate import CODECS

__all__ = ["StreamWatch", "whole_verdict", "error_event", "last_event_end"]

NO_TERMINAL = "upstream stream ended without its terminal event"
CUT_MID_EVENT = "upstream stream was cut in the middle of an event"


class StreamWatch:
    """``fatal``: why the stream cannot go on to the client from here — an event larger than
    the SSE cap, or one whose data is not JSON (the client's SDK would raise a parse error)
    — set by the ``feed`` that met it; a relayed stream ends there (turn/pump.py)."""

    __slots__ = ("_sse", "_dec", "_judged", "_inflate", "_problem", "_terminal", "_skip", "_heads", "_skip_chunk",
                 "_started", "completed", "error", "cut", "fatal", "model", "_utf8")

    def __init__(self, protocol: str, content_encoding: str | None = None) -> None:
        # the protocol's own codec reads its stream; its facts say what ends one and which
        # events carry neither usage, nor an end, nor an error (not decoded: most of a stream)
        codec, facts = CODECS.get(protocol), protocols.find(protocol)
        self._sse = SSEDecoder()
        # the stream's bytes as its client's SDK reads them: strict UTF-8 (the SSE decoder here
        # replaces what is not; the official SDKs raise on it)
        self._utf8 = codecs.getincrementaldecoder("utf-8")("strict")
        self._dec = codec.stream_decoder(ReplyReport()) if codec is not None and facts is not None else None
        self._judged = facts is not None and facts.stream_judged
        self._terminal = facts.terminal_event if facts is not None else None
        self._skip = facts.skipped_events if facts is not None else frozenset()
        self._heads = tuple(f"event: {name}\n".encode() for name in sorted(self._skip))  # their first line, as bytes
        self._skip_chunk = facts.skipped_chunk if facts is not None else None  # unnamed events (Chat): by their data
        self._started = False  # the decoder made the stream's start (its model): until then every event is decoded
        self._problem: str | None = None  # unreadable: why
        self.completed = False
        self.error: str | None = None  # the first error the stream carried
        self.cut = False
        self.fatal: str | None = None
        self.model: str | None = None  # the model the stream's first event named (the decoder's MessageStart)
        try:
            self._inflate: Decoding | None = Decoding(content_encoding)
        except EncodingError as e:
            self._inflate, self._problem = None, str(e)

    @property
    def judged(self) -> bool:
        """Whether the stream's completeness is judged (a protocol without an end of its own is
        read for usage and errors only)."""
        return self._dec is not None and self._judged

    @property
    def usage(self) -> Usage | None:
        return getattr(self._dec, "usage", None)

    def feed(self, data: bytes) -> None:
        if self._dec is None or self._problem or not data:
            return
        try:
            if self._inflate is not None:
                data = self._inflate.feed(data)
            self._utf8.decode(data)
            self._feed(data)
        except SSETooLarge as e:
            self._problem = self.fatal = str(e)
        except UnicodeDecodeError as e:  # its client cannot read the stream from here on
            self._problem = self.fatal = f"upstream sent bytes that are not valid UTF-8 ({e.reason})"
        except Exception as e:
            self._problem = f"unreadable upstream stream: {e}"

    def _feed(self, data: bytes) -> None:
        """The chunk's events: the skipped ones that come whole and plain read from the bytes
        (checked to be JSON), the rest fed to the SSE decoder."""
        heads, chunk, sse, pos, n = self._heads, self._skip_chunk, self._sse, 0, len(data)
        while (heads or chunk) and pos < n and sse.clean:
            end = data.find(b"\n\n", pos)
            if end < 0:
                break
            # a skipped event's name line, then its data; an unnamed event (its protocol judges its
            # data: ``chunk``) starts with its data line
            named = bool(heads) and data.startswith(heads, pos)
            head = data.find(b"\n", pos) if named else pos - 1  # where the line before the data ends
            # the usual shape: one line of data after at most the name line, no CR, within the cap
            plain = ((named or chunk is not None) and data.startswith(b"data: ", head + 1)
                     and data.find(b"\n", head + 1, end) < 0 and data.find(b"\r", pos, end) < 0
                     and end + 2 - pos <= sse.max_event_bytes)
            if plain and named:  # a skipped event by its name: only checked to be JSON
                try:
                    jsonc.loads(data[head + 7:end])
                except jsonc.JSONDecodeError as e:
                    self._problem = self.fatal = f"upstream sent an event that is not valid JSON ({e})"
                    return
            elif not (plain and self._started and _skipped_chunk(chunk, data[pos + 6:end])):
                self._events(sse.feed(data[pos:end + 2]))  # any other event, or an unusual shape: the decoder reads it
                if self._problem:
                    return
            pos = end + 2
        if pos < n:
            self._events(sse.feed(data[pos:] if pos else data))

    def _events(self, events: list[SSEEvent], whole: bool = True) -> None:
        """``whole``: events that ended with their blank line (a terminal event cut before it
        is not a terminal event)."""
        skip = self._skip
        for ev in events:
            if ev.event in skip:  # not decoded; its client must still be able to read it
                if whole and (why := _unreadable(ev)):
                    self._problem = self.fatal = why
                    return
                continue
            if whole and self._terminal is not None and ev.event == self._terminal:
                self.completed = True
            assert self._dec is not None  # (feed and close return early without one)
            out, upstream_error = self._dec.on_event(ev), _is_error_event(ev)
            if whole and not upstream_error and (why := _not_json(ev, out)):  # a cut event: `cut` says it
                self._problem = self.fatal = why
                return
            self._note(out, upstream_error=upstream_error)

    def close(self) -> None:
        if self._dec is None or self._problem:
            return
        try:
            if self._inflate is not None:
                rest = self._inflate.close()
                self._utf8.decode(rest)
                self._events(self._sse.feed(rest))
            self._utf8.decode(b"", True)
            self.cut = self._sse.pending
            self._events(self._sse.close(), whole=not self.cut)
            if not self.completed and not self.error:
                # the decoder's own end: a held-back stop (Chat waits for usage), or its
                # early-end error, which says no more than `completed` stays False
                self._note([e for e in self._dec.close() if isinstance(e, MessageStop)])
        except UnicodeDecodeError as e:
            self._problem = f"upstream sent bytes that are not valid UTF-8 ({e.reason})"
        except Exception as e:
            self._problem = f"unreadable upstream stream: {e}"

    def _note(self, events: list, upstream_error: bool = True) -> None:
        """What the decoder made of an event: a stop, or an error the upstream itself sent
        (the decoder's own complaints about a stream's grammar are not the upstream's error
        event; what matters of those, a missing end, ``verdict`` says)."""
        for e in events:
            if isinstance(e, MessageStart):
                self._started = True
                if self.model is None and e.model:
                    self.model = e.model
            elif isinstance(e, MessageStop) and self._terminal is None:
                self.completed = True
            elif isinstance(e, StreamError) and upstream_error and self.error is None:
                self.error = e.message

    def verdict(self) -> str | None:
        """Why the stream is not a clean, complete reply; None when it is (or cannot be judged)."""
        if not self.judged:
            return None
        if self._problem:
            return self._problem
        if self.error:
            return f"upstream stream carried an error: {self.error}"
        if not self.completed:
            return CUT_MID_EVENT if self.cut else NO_TERMINAL
        return None


def _skipped_chunk(skipped, data: bytes) -> bool:
    """An unnamed event's data that its protocol says carries no usage, end or error (its facts'
    ``skipped_chunk``); data that is not JSON (``[DONE]``, a broken chunk) is the decoder's to read."""
    try:
        return skipped(jsonc.loads(data))
    except jsonc.JSONDecodeError:
        return False


def _unreadable(ev: SSEEvent) -> str | None:
    """Why a skipped (not decoded) event's data is not JSON; None when it is."""
    try:
        jsonc.loads(ev.data)
    except jsonc.JSONDecodeError as e:
        return f"upstream sent an event that is not valid JSON ({e})"
    return None


def _not_json(ev: SSEEvent, decoded: list) -> str | None:
    """The decoder's complaint when it was that ``ev``'s data is not JSON (checked only
    when the decoder complained: the healthy path parses nothing twice)."""
    for e in decoded:
        if isinstance(e, StreamError):
            try:
                jsonc.loads(ev.data)
            except jsonc.JSONDecodeError:
                return e.message
            return None
    return None


def _is_error_event(ev: SSEEvent) -> bool:
    """An error the upstream sent as an event: ``event: error`` (Anthropic, Responses), or a
    data object with a top-level ``error`` (Chat, Gemini)."""
    if ev.event in ("error", "response.failed"):
        return True
    if '"error"' not in ev.data:
        return False
    try:
        d = jsonc.loads(ev.data)
    except Exception:
        return False
    return isinstance(d, dict) and (bool(d.get("error")) or d.get("object") == "error" or d.get("type") == "error")


def whole_verdict(content_type: str | None, body: bytes) -> tuple[object | None, str | None]:
    """A whole 2xx reply that should be a JSON object: (the parsed object, None), or
    (None, why it is not one)."""
    ctype = (content_type or "").split(";")[0].strip().lower()
    if ctype == "text/event-stream":
        return None, "upstream sent a stream where a whole JSON reply was due"
    try:
        obj = jsonc.loads(body)
    except Exception:
        shown = ctype or "no content-type"
        return None, f"upstream reply is not valid JSON ({shown}, {len(body)} bytes)"
    if not isinstance(obj, dict):
        return None, "upstream reply is not a JSON object"
    return obj, None


def error_event(protocol: str, message: str) -> bytes:
    """One SSE event that ends a passed-on stream with an error the client's SDK raises on, in
    the client's protocol (its facts' ``stream_error``: 502 semantics, the upstream failed)."""
    return protocols.for_errors(protocol).stream_error(message)


def last_event_end(buf: bytes | bytearray) -> int:
    """The offset just after the last complete SSE event in ``buf`` (its blank line), 0 when
    there is none: bytes up to there can go on without splitting an event."""
    end = 0
    for sep in (b"\n\n", b"\r\n\r\n", b"\r\r"):
        i = buf.rfind(sep)
        if i >= 0:
            end = max(end, i + len(sep))
    return end
