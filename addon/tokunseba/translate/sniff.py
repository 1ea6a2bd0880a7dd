"""Usage of replies tokunseba does not translate (pass-through and retargeted turns), read
on the side without changing a byte by the protocol's own stream decoder (from the codec
registry), so the ledger can show what the upstream reported."""

from __future__ import annotations

import zlib
from collections.abc import Callable

from .. import jsonc
from ..neutral.report import StreamReport
from ..neutral.usage import ANTHROPIC, GEMINI, OPENAI, Usage
from ..sse import SSEDecoder
from . import CODECS

# client protocol -> the Usage counting convention of its replies
USAGE_PROTOCOL = {"anthropic": ANTHROPIC, "openai": OPENAI, "openai-responses": OPENAI, "gemini": GEMINI}
# client protocol -> the key of a whole reply that holds its usage
USAGE_KEY = {"gemini": "usageMetadata"}


class UsageSniffer:
    """Feed it the raw reply stream; ``usage`` is what the upstream reported (or None).
    It never raises: a reply it cannot read just yields no usage."""

    __slots__ = ("_sse", "_dec", "_broken", "_inflate")

    def __init__(self, protocol: str, content_encoding: str | None = None) -> None:
        codec = CODECS.get(protocol)
        factory = codec.stream_decoder if codec else None
        self._sse = SSEDecoder() if factory else None
        self._dec = factory(StreamReport()) if factory else None
        # a pass-through stream keeps the encoding the client asked for (pitfalls 27)
        self._inflate = _decompressor(content_encoding)
        self._broken = factory is None or self._inflate is False

    def feed(self, data: bytes) -> None:
        if self._broken or not data:
            return
        try:
            if self._inflate is not None:
                data = self._inflate(data)
            for ev in self._sse.feed(data):
                self._dec.on_event(ev)
        except Exception:
            self._broken = True

    def close(self) -> None:
        if self._broken:
            return
        try:
            for ev in self._sse.close():
                self._dec.on_event(ev)
        except Exception:
            self._broken = True

    @property
    def usage(self) -> Usage | None:
        return None if self._dec is None else self._dec.usage


def _decompressor(encoding: str | None) -> Callable[[bytes], bytes] | None | bool:
    """An incremental decoder for a Content-Encoding; None for identity, False when unknown."""
    enc = (encoding or "").strip().lower()
    if enc in ("", "identity"):
        return None
    if enc in ("gzip", "x-gzip", "deflate"):
        return zlib.decompressobj(47).decompress  # 47: gzip or zlib header, detected
    try:
        if enc == "br":
            import brotli  # a mitmproxy dependency

            return brotli.Decompressor().process
        if enc == "zstd":
            try:
                from compression import zstd  # Python 3.14
            except ImportError:
                from backports import zstd  # a mitmproxy dependency before 3.14
            return zstd.ZstdDecompressor().decompress
    except ImportError:
        pass
    return False


def usage_from_json(protocol: str, body: bytes) -> Usage | None:
    """The `usage` object of a whole JSON reply, as reported (None when absent or unreadable)."""
    conv = USAGE_PROTOCOL.get(protocol)
    if conv is None or not body:
        return None
    try:
        obj = jsonc.loads(body)
    except Exception:
        return None
    u = obj.get(USAGE_KEY.get(protocol, "usage")) if isinstance(obj, dict) else None
    return Usage(conv, u) if isinstance(u, dict) and (u or protocol not in USAGE_KEY) else None
