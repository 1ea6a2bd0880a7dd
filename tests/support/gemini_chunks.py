"""Gemini stream chunks as a client collects them, for the tests that compare a translated
whole reply with the same reply streamed (tests/translate/gemini/test_stream.py,
tests/suites/test_whole_reply_paths.py). Test-only: the product never merges chunks (it was in
translate/gemini/reply.py)."""

from __future__ import annotations

from typing import Any

from tokunseba import jsonc
from tokunseba.protocols import gemini as pg


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
