"""Per-block hashes of a turn's cacheable prefix, and where two turns' prefixes first part.

Contract: ``prefix_hashes(protocol, body)`` reads a request body as sent (parsed) in the order
its provider reads the prompt (``protocols.<name>`` ``cache_prefix``: Anthropic tools, system,
messages), hashes each block (each element of those keys; a message's content blocks one by
one) and returns a compact JSON text for the ledger column ``turns.prefix_hashes``: the shape
(how many blocks under each key, and per message) and one 8-hex-digit CRC-32 of each block's
compact JSON. Never the text: a hash says only whether a block is the same as before.
Cache markers (``cache_control``, ``prompt_cache_breakpoint``) are left out of a block's hash.
``first_change(earlier, later)`` names the first block that differs (``messages[3].content[1]``),
or None when one prefix is the other's start. Pure; CRC-32 because it is stable across
processes and fast (a 48.5 KB turn: scripts/bench/bench_prefix.py), and a collision only hides one
diagnosis, never changes a turn.
"""

from __future__ import annotations

import zlib
from typing import Any

from .. import jsonc, protocols

VERSION = 1
# cache markers are where the cache is asked for, not what is cached: left out of a block's hash,
# so a breakpoint that moves on (as Claude Code's and cache: auto's do, turn by turn) is no change
MARKERS = ("cache_control", "prompt_cache_breakpoint")


def _unmarked(block: Any) -> Any:
    if isinstance(block, dict) and ("cache_control" in block or "prompt_cache_breakpoint" in block):
        return {k: v for k, v in block.items() if k not in MARKERS}
    return block


def prefix_hashes(protocol: str | None, body: Any) -> str | None:
    """The prefix hashes of ``body`` (a request of ``protocol``) as stored, or None (nothing to hash)."""
    facts = protocols.find(protocol) if protocol else None
    if facts is None or not facts.cache_prefix or not isinstance(body, dict):
        return None
    shape = facts.rule_shape
    turns, parts_key = (shape.turns, shape.parts) if shape is not None else (None, None)
    crc, dumpb_json = zlib.crc32, jsonc.dumpb

    def dumpb(x: Any) -> bytes:
        if type(x) is dict and ("cache_control" in x or "prompt_cache_breakpoint" in x):
            x = _unmarked(x)
        return dumpb_json(x)

    layout: list[Any] = []
    hashes: list[str] = []
    for key in facts.cache_prefix:
        value = body.get(key)
        if value is None:
            continue
        if not isinstance(value, list) or not value:
            layout.append([key, None])
            hashes.append(f"{crc(dumpb(value)):08x}")
            continue
        if key != turns:
            layout.append([key, len(value)])
            hashes.extend(f"{crc(dumpb(x)):08x}" for x in value)
            continue
        per: list[int] = []  # blocks of each message (0: the message hashed whole)
        for m in value:
            content = m.get(parts_key) if isinstance(m, dict) else None
            if isinstance(content, list) and content:
                per.append(len(content))
                hashes.extend(f"{crc(dumpb(b)):08x}" for b in content)
            else:
                per.append(0)
                hashes.append(f"{crc(dumpb(m)):08x}")
        layout.append([key, per])
    if not hashes:
        return None
    return jsonc.dumps({"v": VERSION, "layout": layout, "h": "".join(hashes)})


def blocks(stored: str | None) -> list[tuple[str, str]]:
    """(label, hash) of each block of stored prefix hashes, in prompt order ([] when unreadable)."""
    if not stored:
        return []
    try:
        doc = jsonc.loads(stored)
        layout, h = doc["layout"], doc["h"]
    except Exception:
        return []
    labels: list[str] = []
    for key, n in layout:
        if n is None:
            labels.append(key)
        elif isinstance(n, int):
            labels.extend(f"{key}[{i}]" for i in range(n))
        else:
            for i, k in enumerate(n):
                labels.extend([f"{key}[{i}]"] if k == 0 else [f"{key}[{i}].content[{j}]" for j in range(k)])
    hashes = [h[i:i + 8] for i in range(0, len(h), 8)]
    return list(zip(labels, hashes)) if len(hashes) == len(labels) else []


def first_change(earlier: str | None, later: str | None) -> tuple[int, str, str] | None:
    """Where ``later``'s prefix first parts from ``earlier``'s: (block index, its label in the
    earlier turn, in the later turn); None when the later one starts with the whole earlier one
    (nothing changed, only added) or either is unknown."""
    a, b = blocks(earlier), blocks(later)
    if not a or not b:
        return None
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i, x[0], y[0]
    if len(b) < len(a):  # the later prompt is a shortened one: the first block it lost
        return len(b), a[len(b)][0], "(its end)"
    return None
