"""A scripted Anthropic prompt cache that bills like Anthropic (docs/dev/protocols.md A: cache_control,
at most 4 breakpoints), for the tests of ``cache: auto`` (issue 32).

The prompt is read in Anthropic's order: tools, then system blocks, then message blocks. At each
block that carries ``cache_control`` the prefix up to and including it is a breakpoint; a prefix
is the same when its blocks are byte-identical (JSON with sorted keys, ``cache_control`` left
out, as Anthropic's cache ignores where the marker is). A request reads the longest of its
breakpoint prefixes cached before (``cache_read_input_tokens``), writes the rest up to its last
breakpoint (``cache_creation_input_tokens``), and pays ``input_tokens`` for what follows.
Tokens are counted as a quarter of each block's JSON bytes (at least 1): a script, not a
tokenizer. Unlike Anthropic, no minimum prefix length and no 20-block look-back: a hit needs
a breakpoint on the same block in both requests, the stricter test.
"""

from __future__ import annotations

import hashlib
import json
import threading
from typing import Any


def _blocks(body: dict[str, Any]) -> list[tuple[bytes, bool]]:
    """The prompt as (canonical bytes, carries a breakpoint), in Anthropic's prefix order."""
    out: list[tuple[bytes, bool]] = []

    def add(prefix: str, block: Any) -> None:
        marked = isinstance(block, dict) and "cache_control" in block
        if marked:
            block = {k: v for k, v in block.items() if k != "cache_control"}
        if isinstance(block, str):  # a string is its one text block
            block = {"type": "text", "text": block}
        out.append((prefix.encode() + json.dumps(block, sort_keys=True, separators=(",", ":")).encode(), marked))

    for t in body.get("tools") or ():
        add("tool:", t)
    system = body.get("system")
    for b in ([system] if isinstance(system, str) else system or ()):
        add("system:", b)
    for m in body.get("messages") or ():
        content = m.get("content")
        for b in ([content] if isinstance(content, str) else content or ()):
            add(m.get("role", "") + ":", b)
    return out


class AnthropicCache:
    """The prefixes cached so far, across requests (one endpoint's cache)."""

    def __init__(self) -> None:
        self.cached: set[str] = set()
        self._lock = threading.Lock()

    def bill(self, body: dict[str, Any]) -> dict[str, int]:
        """The usage Anthropic would report for this request's prompt (and remember its breakpoints)."""
        blocks = _blocks(body)
        h, tokens, total = hashlib.sha256(), [], 0
        points: list[tuple[str, int]] = []  # (prefix hash, tokens up to and including it)
        for data, marked in blocks:
            h.update(len(data).to_bytes(4, "big") + data)
            total += max(1, len(data) // 4)
            if marked:
                points.append((h.hexdigest(), total))
        with self._lock:
            read = max((n for digest, n in points if digest in self.cached), default=0)
            last = points[-1][1] if points else 0
            self.cached.update(digest for digest, _ in points)
        return {"input_tokens": total - max(last, read), "cache_creation_input_tokens": max(last - read, 0),
                "cache_read_input_tokens": read}
