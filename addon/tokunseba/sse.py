"""Incremental Server-Sent Events codec (sans-IO).

``SSEDecoder.feed(bytes)`` accepts bytes split anywhere (inside a multi-byte UTF-8
character, between ``\\r`` and ``\\n``) and returns the complete events seen so far;
``close()`` returns a final event that lacked its trailing blank line. Line ends may be
``\\n``, ``\\r\\n`` or ``\\r``; comments (``:``) are ignored — or, with ``SSEDecoder(comments=True)``, each comment
line becomes an ``SSEEvent`` with ``comment=True`` (a keep-alive), in its place among the
events; multi-line ``data:`` is joined with ``\\n`` as the WHATWG spec says. The output never
depends on how input was split.

``EventBoundary`` follows bytes going by and says whether they stop at an event boundary
(nothing yet, or a blank line just ended an event), where something may be inserted
(``KEEPALIVE_COMMENT``) without entering an unfinished event.

Bounded: an event (its lines, or one line without its end) larger than
``SSEDecoder.max_event_bytes`` (default 16 MiB; ``set_max_event_bytes`` changes it for
every decoder, running or not) raises ``SSETooLarge`` from ``feed`` and drops what was
buffered, so a peer that never ends a line cannot grow the proxy.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SSEEvent", "SSEDecoder", "SSETooLarge", "EventBoundary", "encode_event", "set_max_event_bytes",
           "DEFAULT_MAX_EVENT_BYTES", "KEEPALIVE_COMMENT"]

DEFAULT_MAX_EVENT_BYTES = 16 * 1024 * 1024
CONTENT_TYPE = "text/event-stream; charset=utf-8"  # a stream tokunseba writes (a translated reply)
KEEPALIVE_COMMENT = b": keep-alive\n\n"  # a keep-alive every conforming SSE parser skips


class SSETooLarge(ValueError):
    """An SSE event (or line) grew past the cap."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"upstream sent an SSE event larger than {_size(limit)} (the cap; option "
                         f"tokunseba_max_event_bytes)")
        self.limit = limit


def _size(n: int) -> str:
    return f"{n // (1024 * 1024)} MiB" if n % (1024 * 1024) == 0 else f"{n} bytes"


def set_max_event_bytes(n: int) -> None:
    """The cap on one SSE event for every decoder (``n`` >= 1)."""
    if n < 1:
        raise ValueError("the SSE event cap must be at least 1 byte")
    SSEDecoder.max_event_bytes = n


@dataclass(frozen=True, slots=True)
class SSEEvent:
    event: str | None  # the `event:` name, None when the event had no `event:` line
    data: str
    id: str | None = None
    comment: bool = False  # a comment line (``data`` is its text), only with SSEDecoder(comments=True)


class SSEDecoder:
    __slots__ = ("_buf", "_pending_cr", "_event", "_data", "_has_data", "_id", "_saw_field", "_size", "_comments")
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES  # class-wide cap (set_max_event_bytes)

    def __init__(self, comments: bool = False) -> None:
        self._comments = comments  # report comment lines (keep-alives) instead of skipping them
        self._buf = bytearray()
        self._pending_cr = False  # last byte seen was \r: a following \n belongs to it
        self._reset()

    def _reset(self) -> None:
        self._event: str | None = None
        self._data: list[str] = []
        self._has_data = False
        self._id: str | None = None
        self._saw_field = False
        self._size = 0  # bytes of the lines of the event being read

    def feed(self, data: bytes) -> list[SSEEvent]:
        out: list[SSEEvent] = []
        if not data:
            return out
        if self._pending_cr:
            self._pending_cr = False
            if data[:1] == b"\n":
                data = data[1:]
        elif not self._buf and not self._saw_field:
            done = self._whole_events(data, out)
            if done:
                data = data[done:]
                if not data:
                    return out
        buf = self._buf
        buf += data
        start = 0
        n = len(buf)
        while True:
            i_n = buf.find(b"\n", start)
            # look for \r only before the next \n: scanning the whole buffer per line is quadratic
            i_r = buf.find(b"\r", start, i_n if i_n >= 0 else n)
            if i_n < 0 and i_r < 0:
                break
            if i_r < 0 or (0 <= i_n < i_r):
                end, nxt = i_n, i_n + 1
            else:
                end = i_r
                if i_r + 1 < n:
                    nxt = i_r + 2 if buf[i_r + 1] == 0x0A else i_r + 1
                else:  # \r at the very end: a \n may follow in the next chunk
                    nxt = i_r + 1
                    self._pending_cr = True
            self._line(bytes(buf[start:end]), out)
            start = nxt
        del buf[:start]
        if self._size + len(buf) > self.max_event_bytes:
            self._overflow()
        return out

    def _whole_events(self, data: bytes, out: list[SSEEvent]) -> int:
        """The fast path, from a clean state (nothing buffered, no event begun): the complete
        events at the start of ``data`` in the shape nearly every stream has — an optional
        ``event: NAME`` line and one ``data: VALUE`` line, ``\\n`` line ends — parsed a
        block at a time. Returns the bytes consumed; anything else (comments, ids, multi-line
        data, ``\\r``, an event near the cap, an unfinished event) is left to the line-by-line
        path, which would make the same events of these bytes."""
        pos = 0
        cap = self.max_event_bytes
        while True:
            end = data.find(b"\n\n", pos)
            if end <= pos or end - pos + 2 > cap:
                return pos
            block = data[pos:end]
            if b"\r" in block:
                return pos
            first, sep, second = block.partition(b"\n")
            if not sep:
                name, value = None, first
            elif first.startswith(b"event: ") and b"\n" not in second:
                name, value = first[7:].decode("utf-8", errors="replace"), second
            else:
                return pos
            if not value.startswith(b"data: "):
                return pos
            out.append(SSEEvent(name, value[6:].decode("utf-8", errors="replace")))
            pos = end + 2

    def _overflow(self) -> None:
        self._buf = bytearray()  # release it now: the caller ends the stream
        self._pending_cr = False
        self._reset()
        raise SSETooLarge(self.max_event_bytes)

    def close(self) -> list[SSEEvent]:
        """Flush: a last line without a line end, and an event without its blank line."""
        out: list[SSEEvent] = []
        if self._buf:
            self._line(bytes(self._buf), out)
            self._buf.clear()
        self._dispatch(out)
        self._pending_cr = False
        return out

    @property
    def pending(self) -> bool:
        """True when bytes of an unfinished event are buffered."""
        return bool(self._buf) or self._saw_field

    @property
    def clean(self) -> bool:
        """True between events: nothing buffered, no field seen, no ``\r`` waiting for its
        ``\n``. Bytes that start with a whole event may then be read by someone else and the
        decoder fed what follows, with the same events as feeding it all."""
        return not self._buf and not self._saw_field and not self._pending_cr

    def _line(self, raw: bytes, out: list[SSEEvent]) -> None:
        if not raw:
            self._dispatch(out)
            return
        self._size += len(raw) + 1
        if self._size > self.max_event_bytes:
            self._overflow()
        line = raw.decode("utf-8", errors="replace")
        if line[0] == ":":
            if self._comments:
                out.append(SSEEvent(None, line[1:].lstrip(" "), None, True))
            return
        name, sep, value = line.partition(":")
        if sep and value[:1] == " ":
            value = value[1:]
        self._saw_field = True
        if name == "data":
            self._data.append(value)
            self._has_data = True
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._id = value
        # `retry` and unknown fields are ignored, as the spec says

    def _dispatch(self, out: list[SSEEvent]) -> None:
        if self._has_data:
            out.append(SSEEvent(self._event, "\n".join(self._data), self._id))
        elif self._event is not None:
            # An `event:` with no data line: the spec drops it; Anthropic never sends one.
            out.append(SSEEvent(self._event, "", self._id))
        self._reset()


class EventBoundary:
    """Follows the bytes of an SSE body as they go by (sans-IO): ``at_boundary`` is True when
    they stop where an event ended (or before any byte), so a comment inserted there cannot
    land inside an unfinished event. A lone ``\\r`` that ended a blank line counts: a ``\\n``
    after it would only be one more blank line."""

    __slots__ = ("_tail", "_any")

    def __init__(self) -> None:
        self._tail = b""  # the last few bytes seen
        self._any = False

    def feed(self, data: bytes) -> None:
        if data:
            self._tail = (self._tail + data[-4:])[-4:]
            self._any = True

    @property
    def at_boundary(self) -> bool:
        if not self._any:
            return True
        t = self._tail
        if t.endswith(b"\r\n"):
            rest = t[:-2]
        elif t.endswith((b"\n", b"\r")):
            rest = t[:-1]
        else:
            return False  # inside a line
        return not rest or rest.endswith((b"\n", b"\r"))  # the line just ended was empty: an event ended


def encode_event(data: str | bytes, event: str | None = None) -> bytes:
    """One SSE event with its trailing blank line. ``data`` must not contain line ends
    (compact JSON never does)."""
    if isinstance(data, str):
        data = data.encode()
    if event is None:
        return b"data: " + data + b"\n\n"
    return b"event: " + event.encode() + b"\ndata: " + data + b"\n\n"
