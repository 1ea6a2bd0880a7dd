"""Incremental Content-Encoding decoding (sans-IO): gzip, deflate, br, zstd.

``Decoding(header)`` takes a reply's ``content-encoding`` value and returns an object with
``feed(bytes) -> bytes`` and ``close() -> bytes``; its output does not depend on how the
input was split. Several codings (``gzip, br``) are undone in reverse order, as RFC 9110
§8.4 says. An unknown coding raises ``UnsupportedEncoding`` when the object is made;
corrupt input raises ``EncodingError`` from ``feed``/``close``; a body that ends inside a
compressed frame raises ``EncodingError`` from ``close``. brotli and zstd come from the
packages mitmproxy itself depends on (``brotli``; ``compression.zstd`` or ``backports.zstd``).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Protocol

__all__ = ["Decoding", "EncodingError", "UnsupportedEncoding", "is_identity"]


class EncodingError(ValueError):
    """The body is not valid for its declared content-encoding."""


class UnsupportedEncoding(EncodingError):
    """A content-encoding tokunseba cannot decode."""


def is_identity(header: str | None) -> bool:
    return all(c.strip().lower() in ("", "identity") for c in (header or "").split(","))


class _Decoder(Protocol):
    def feed(self, data: bytes) -> bytes: ...

    def close(self) -> bytes: ...


class _Zlib:
    """gzip (wbits 31) or deflate: zlib-wrapped, as HTTP means it, or raw (servers send both)."""

    def __init__(self, gzip: bool) -> None:
        self._gzip = gzip
        self._d = zlib.decompressobj(47 if gzip else 15)
        self._first = True

    def feed(self, data: bytes) -> bytes:
        try:
            if self._first and data:
                self._first = False
                if not self._gzip and (data[0] & 0x0F) != 8:  # no zlib header: raw deflate
                    self._d = zlib.decompressobj(-15)
            out = self._d.decompress(data)
            while self._d.eof and self._d.unused_data:  # concatenated gzip members
                rest = self._d.unused_data
                self._d = zlib.decompressobj(47 if self._gzip else 15)
                out += self._d.decompress(rest)
            return out
        except zlib.error as e:
            raise EncodingError(f"invalid {'gzip' if self._gzip else 'deflate'} data: {e}") from None

    def close(self) -> bytes:
        if self._first:
            return b""
        try:
            out = self._d.flush()
        except zlib.error as e:
            raise EncodingError(str(e)) from None
        if not self._d.eof:
            raise EncodingError(f"the {'gzip' if self._gzip else 'deflate'} body ended before its end marker")
        return out


class _Framed:
    """A decompressor with an end marker: ``process`` undoes bytes, ``finished`` says the
    marker was seen; a body that ends before it is an error."""

    name = ""
    # set by each subclass (a bound method of its decompressor, or a method of its own)
    process: Callable[[bytes], bytes]
    finished: Callable[[], bool]

    def __init__(self) -> None:
        self._any = False

    def feed(self, data: bytes) -> bytes:
        if not data:
            return b""
        self._any = True
        try:
            return self.process(data)
        except Exception as e:
            raise EncodingError(f"invalid {self.name} data: {e}") from None

    def close(self) -> bytes:
        if self._any and not self.finished():
            raise EncodingError(f"the {self.name} body ended before its end marker")
        return b""


class _Brotli(_Framed):
    name = "br"

    def __init__(self) -> None:
        super().__init__()
        import brotli  # a mitmproxy dependency

        self._d = brotli.Decompressor()
        self.process = self._d.process
        self.finished = self._d.is_finished


class _Zstd(_Framed):
    name = "zstd"

    def __init__(self) -> None:
        super().__init__()
        try:
            from compression import zstd  # Python 3.14
        except ImportError:
            from backports import zstd  # a mitmproxy dependency before 3.14
        self._new = zstd.ZstdDecompressor
        self._d = self._new()

    def process(self, data: bytes) -> bytes:
        out = self._d.decompress(data)
        while self._d.eof and self._d.unused_data:  # concatenated frames
            rest = self._d.unused_data
            self._d = self._new()
            out += self._d.decompress(rest)
        return out

    def finished(self) -> bool:
        return self._d.eof


# content-coding token -> decoder factory
CODINGS: dict[str, Callable[[], _Decoder]] = {
    "gzip": lambda: _Zlib(gzip=True),
    "x-gzip": lambda: _Zlib(gzip=True),
    "deflate": lambda: _Zlib(gzip=False),
    "br": _Brotli,
    "zstd": _Zstd,
}


class Decoding:
    """Undo a reply's content-encoding incrementally (identity: bytes unchanged)."""

    __slots__ = ("_chain",)

    def __init__(self, header: str | None) -> None:
        names = [c.strip().lower() for c in (header or "").split(",")]
        names = [n for n in names if n not in ("", "identity")]
        unknown = [n for n in names if n not in CODINGS]
        if unknown:
            raise UnsupportedEncoding(f"unsupported content-encoding {', '.join(unknown)!r}")
        try:
            self._chain = [CODINGS[n]() for n in reversed(names)]
        except ImportError as e:
            raise UnsupportedEncoding(f"cannot decode content-encoding {header!r}: {e}") from None

    def feed(self, data: bytes) -> bytes:
        for d in self._chain:
            data = d.feed(data)
        return data

    def close(self) -> bytes:
        out = b""
        for i, d in enumerate(self._chain):
            out = d.feed(out) if i else out
            out += d.close()
        return out
