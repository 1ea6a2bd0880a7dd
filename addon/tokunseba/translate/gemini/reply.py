"""Whole Gemini replies (``generateContent``): the decoder (a ``GenerateContentResponse``
-> neutral events) and the encoder (a neutral ``Message`` -> a ``GenerateContentResponse``)
(design.md §3, gemini.md 4.2).

A whole reply is its stream collected: ``decode`` runs the stream decoder over the one
object (or over each element of the JSON array ``streamGenerateContent`` without ``alt=sse``
returns); ``encode`` runs the stream encoder over the message's events (keeping its chunks as
objects: ``ChunkCollector``) and merges its chunks the way a client does (adjacent text parts of the same kind joined, function calls whole, the
last finishReason and usageMetadata). So a whole reply and the same reply streamed are one
thing, which the tests check.
"""

from __future__ import annotations

from typing import Any

from ... import jsonc
from ...errors import UntranslatableReply
from ...neutral.events import Event, StreamError
from ...neutral.message import Message
from ...neutral.report import ReplyReport
from ...protocols import gemini as pg
from .stream import GeminiDecoder, GeminiEncoder


def decode(body: bytes, report: ReplyReport) -> list[Event]:
    """The neutral events of a whole Gemini reply; a 502 ``UntranslatableReply`` when it is not
    one, or when it ends in an error (a broken function call, an error object)."""
    try:
        doc = jsonc.loads(body)
    except jsonc.JSONDecodeError as e:
        raise UntranslatableReply(502, f"the upstream's Gemini reply is not valid JSON ({e})") from None
    objs = doc if isinstance(doc, list) else [doc]
    dec = GeminiDecoder(report)
    events: list[Event] = []
    for obj in objs:
        if not isinstance(obj, dict):
            raise UntranslatableReply(502, "the upstream's Gemini reply is not a JSON object")
        events.extend(dec.on_object(obj))
    events.extend(dec.close())
    for ev in events:
        if isinstance(ev, StreamError):
            raise UntranslatableReply(502, ev.message)
    return events


def merge_chunks(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """Stream chunks (``GenerateContentResponse`` objects) merged into one reply: parts in
    order, adjacent text parts of the same kind joined; the last finishReason, promptFeedback,
    usageMetadata, responseId and modelVersion. A chunk holding an error is the whole answer."""
    parts: list[dict[str, Any]] = []
    out: dict[str, Any] = {}
    cand: dict[str, Any] = {"content": {"role": "model", "parts": parts}}
    seen = False
    for ch in chunks:
        if "error" in ch:
            return ch
        for c in ch.get("candidates") or ():
            seen = True
            for p in (c.get("content") or {}).get("parts") or ():
                last = parts[-1] if parts else None
                if (last is not None and "text" in p and "text" in last
                        and bool(p.get("thought")) == bool(last.get("thought"))):
                    last["text"] += p["text"]
                else:
                    parts.append(dict(p))
            if "finishReason" in c:
                cand["finishReason"] = c["finishReason"]
        for key in ("promptFeedback", "usageMetadata", "modelVersion", "responseId"):
            if key in ch:
                out[key] = ch[key]
    cand["index"] = 0
    return {"candidates": [cand], **out} if seen else out


def chunks_of(sse: bytes) -> list[dict[str, Any]]:
    """The objects of Gemini SSE bytes as the encoder frames them."""
    return [jsonc.loads(frame[6:]) for frame in sse.split(pg.SSE_END) if frame.startswith(b"data: ")]


class ChunkCollector(GeminiEncoder):
    """The stream encoder keeping its chunks as objects: the chunks ``chunks_of`` would read
    back from its SSE bytes, without writing and parsing them."""

    def __init__(self, report: ReplyReport) -> None:
        super().__init__(report)
        self.chunks: list[dict[str, Any]] = []

    def _emit(self, obj: dict[str, Any]) -> bytes:
        self.chunks.append(obj)
        return b""


def encode(msg: Message, report: ReplyReport, created: int) -> tuple[bytes, dict[str, Any] | None]:
    """A whole ``GenerateContentResponse`` for a neutral message (``created`` has no Gemini
    field). Arguments that are not a JSON object are a 502, never a string (gemini.md 5.1.7)."""
    enc = ChunkCollector(report)
    for ev in msg.events():
        enc.encode(ev)
    out = merge_chunks(enc.chunks)
    if "error" in out:
        raise UntranslatableReply(502, out["error"].get("message") or "the upstream reply cannot be carried to Gemini")
    return jsonc.dumpb(out), enc.client_usage
