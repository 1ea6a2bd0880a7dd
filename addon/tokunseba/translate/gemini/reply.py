"""Whole Gemini replies (``generateContent``) <-> neutral events (design.md §3).

A whole reply is its stream collected: ``decode_reply`` runs the stream decoder over the one
``GenerateContentResponse`` (or over each element of the JSON array that
``streamGenerateContent`` without ``alt=sse`` returns); ``encode_reply`` runs the stream
encoder and merges its chunks the way a client does (adjacent text parts of the same kind
joined, function calls whole, the last finishReason and usageMetadata). So a whole reply and
the same reply streamed are one thing, which the tests check.
"""

from __future__ import annotations

from ... import jsonc
from ...protocols import gemini as pg
from ..events import Event, StreamReport
from .stream import GeminiDecoder, GeminiEncoder


class ReplyError(ValueError):
    """The body is not a Gemini reply."""


def decode_reply(body: bytes, report: StreamReport) -> tuple[list[Event], GeminiDecoder]:
    """The neutral events of a whole Gemini reply (and the decoder, for its usage)."""
    try:
        doc = jsonc.loads(body)
    except jsonc.JSONDecodeError as e:
        raise ReplyError(f"upstream sent a Gemini reply that is not valid JSON ({e})") from None
    objs = doc if isinstance(doc, list) else [doc]
    dec = GeminiDecoder(report)
    events: list[Event] = []
    for obj in objs:
        if not isinstance(obj, dict):
            raise ReplyError("upstream sent a Gemini reply that is not a JSON object")
        events.extend(dec.on_object(obj))
    events.extend(dec.close())
    return events, dec


def merge_chunks(chunks: list[dict]) -> dict:
    """Stream chunks (``GenerateContentResponse`` objects) merged into one reply: parts in
    order, adjacent text parts of the same kind joined; the last finishReason, usageMetadata,
    responseId and modelVersion. A chunk holding an error is the whole answer."""
    parts: list[dict] = []
    out: dict = {}
    cand: dict = {"content": {"role": "model", "parts": parts}}
    for ch in chunks:
        if "error" in ch:
            return ch
        for c in ch.get("candidates") or ():
            for p in (c.get("content") or {}).get("parts") or ():
                last = parts[-1] if parts else None
                if (last is not None and "text" in p and "text" in last
                        and bool(p.get("thought")) == bool(last.get("thought"))):
                    last["text"] += p["text"]
                else:
                    parts.append(dict(p))
            if "finishReason" in c:
                cand["finishReason"] = c["finishReason"]
        for key in ("usageMetadata", "modelVersion", "responseId"):
            if key in ch:
                out[key] = ch[key]
    cand["index"] = 0
    return {"candidates": [cand], **out}


def encode_reply(events: list[Event], report: StreamReport) -> tuple[dict, GeminiEncoder]:
    """A whole Gemini reply for neutral events (and the encoder, for the usage it sent)."""
    enc = GeminiEncoder(report)
    chunks: list[dict] = []
    for ev in events:
        b = enc.encode(ev)
        for frame in b.split(pg.SSE_END):
            if frame.startswith(b"data: "):
                chunks.append(jsonc.loads(frame[6:]))
    return merge_chunks(chunks), enc
