"""The few pieces of HTTP/1.1 the relay (proxy/relay.py) needs, sans-IO and cheap per chunk.

The relay only copies bytes between mitmproxy and an endpoint, so a general HTTP library
(h11: an event object and a state-machine step per chunk, both ways) costs more than the
copying. This module does what the relay needs and no more:

- ``split_head(buf)``: a message head (request or reply) once its blank line is in ``buf``:
  its first line and its headers as ``(lower-cased name, value)`` byte pairs, and where the
  body starts; ``HeadTooLarge`` past ``MAX_HEAD`` bytes, ``BadMessage`` when it is not HTTP/1.x.
- ``Body``: a message body followed chunk by chunk, for each of its framings
  (``content-length``, ``chunked`` with trailers, or until the connection closes).
  ``feed(bytes)`` returns the body bytes it carried (framing removed); ``done`` once the
  message ended, ``trailing`` any bytes that came after it; ``eof()`` says whether the end
  of the connection was a clean end of the body (only for until-close framing) and raises
  ``Incomplete`` otherwise. Output never depends on how the input was split.
- ``chunk(data)`` / ``LAST_CHUNK``: chunked framing toward mitmproxy.
"""

from __future__ import annotations

__all__ = ["MAX_HEAD", "BadMessage", "HeadTooLarge", "Incomplete", "Head", "split_head", "Body", "body_for_reply",
           "chunk", "LAST_CHUNK", "header"]

MAX_HEAD = 64 * 1024  # a request or reply head larger than this is refused
MAX_CHUNK_LINE = 4096  # a chunk-size line (with extensions) larger than this is a broken peer
LAST_CHUNK = b"0\r\n\r\n"


class BadMessage(ValueError):
    """Bytes that are not the HTTP/1.x message expected here."""


class HeadTooLarge(BadMessage):
    def __init__(self) -> None:
        super().__init__(f"message head larger than {MAX_HEAD} bytes")


class Incomplete(ValueError):
    """The connection ended before the message body did."""


Head = tuple[bytes, list[tuple[bytes, bytes]], int]  # first line, headers, offset of the body


def split_head(buf: bytes | bytearray) -> Head | None:
    """The head at the start of ``buf`` once complete (None until then)."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        if len(buf) > MAX_HEAD:
            raise HeadTooLarge()
        return None
    if end > MAX_HEAD:
        raise HeadTooLarge()
    lines = bytes(buf[:end]).split(b"\r\n")
    headers = []
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep or not name or name[-1:] in (b" ", b"\t"):
            raise BadMessage(f"bad header line {line[:80]!r}")
        headers.append((name.lower(), value.strip()))
    return lines[0], headers, end + 4


def header(headers: list[tuple[bytes, bytes]], name: bytes) -> bytes | None:
    """The last value of header ``name`` (lower-case), None when absent."""
    found = None
    for k, v in headers:
        if k == name:
            found = v
    return found


def chunk(data: bytes) -> bytes:
    """One chunk of a chunked body (never the last chunk: ``data`` must not be empty)."""
    return b"%x\r\n%s\r\n" % (len(data), data)


_LENGTH, _CHUNKED, _CLOSE = 0, 1, 2
# chunked states
_SIZE, _DATA, _DATA_END, _TRAILER, _DONE = range(5)


class Body:
    """One message body, its framing removed (see the module docstring)."""

    __slots__ = ("_mode", "_left", "_state", "_buf", "done", "trailing")

    def __init__(self, length: int | None = None, chunked: bool = False) -> None:
        self._mode = _CHUNKED if chunked else (_LENGTH if length is not None else _CLOSE)
        self._left = length or 0  # content-length: bytes still due; chunked: of the current chunk
        self._state = _SIZE
        self._buf = bytearray()  # chunked: an unfinished size / data-end / trailer line
        self.done = self._mode == _LENGTH and self._left == 0
        self.trailing = b""

    @classmethod
    def of(cls, headers: list[tuple[bytes, bytes]], *, request: bool = False) -> Body:
        """The body framing ``headers`` declare (a request without one has no body)."""
        te = header(headers, b"transfer-encoding")
        if te is not None:
            if te.lower().rsplit(b",", 1)[-1].strip() != b"chunked":
                raise BadMessage(f"unsupported transfer-encoding {te[:40]!r}")
            return cls(chunked=True)
        cl = header(headers, b"content-length")
        if cl is not None:
            if not cl.isdigit():
                raise BadMessage(f"bad content-length {cl[:40]!r}")
            return cls(int(cl))
        return cls(0) if request else cls()

    def feed(self, data: bytes) -> bytes:
        if self.done:
            self.trailing += data
            return b""
        if self._mode == _CLOSE:
            return data
        if self._mode == _LENGTH:
            if len(data) < self._left:
                self._left -= len(data)
                return data
            out, self.trailing = data[: self._left], data[self._left:]
            self._left, self.done = 0, True
            return out
        return self._chunked(data)

    def _chunked(self, data: bytes) -> bytes:
        out = []
        i, n = 0, len(data)
        while i < n:
            st = self._state
            if st == _DATA:
                take = min(self._left, n - i)
                out.append(data[i:i + take])
                i += take
                self._left -= take
                if self._left == 0:
                    self._state = _DATA_END
                continue
            # a line: a chunk size, the CRLF after a chunk's data, or a trailer line
            j = data.find(b"\n", i)
            if j < 0:
                self._buf += data[i:]
                if len(self._buf) > MAX_CHUNK_LINE:
                    raise BadMessage("chunked framing: a line too long")
                break
            line = bytes(self._buf) + data[i:j] if self._buf else data[i:j]
            self._buf.clear()
            i = j + 1
            line = line.rstrip(b"\r")
            if st == _SIZE:
                size = line.split(b";", 1)[0].strip()
                try:
                    self._left = int(size, 16)
                except ValueError:
                    raise BadMessage(f"chunked framing: bad chunk size {size[:20]!r}") from None
                self._state = _DATA if self._left else _TRAILER
            elif st == _DATA_END:
                if line:
                    raise BadMessage("chunked framing: chunk data longer than its size")
                self._state = _SIZE
            elif st == _TRAILER and not line:
                self._state, self.done = _DONE, True
                self.trailing = data[i:]
                break
        return out[0] if len(out) == 1 else b"".join(out)

    def eof(self) -> None:
        """The connection ended: fine after a complete body (or an until-close one), else
        ``Incomplete``."""
        if self.done:
            return
        if self._mode == _CLOSE:
            self.done = True
            return
        what = "incomplete chunked read" if self._mode == _CHUNKED else f"{self._left} bytes of its content-length missing"
        raise Incomplete(f"peer closed connection without sending complete message body: {what}")


def body_for_reply(status: int, headers: list[tuple[bytes, bytes]], method: bytes = b"POST") -> Body:
    """The body framing of a reply: none for HEAD, 1xx, 204 and 304 (RFC 9112 §6.3)."""
    if method == b"HEAD" or status < 200 or status in (204, 304):
        return Body(0)
    return Body.of(headers)
