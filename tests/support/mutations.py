"""What the mutation tests share: odd JSON values, every subtree of a document (up to the
fourth item of each list), and a copy of a document with one subtree replaced."""

from __future__ import annotations

import copy

PROTOCOLS = ["anthropic", "openai", "openai-responses", "gemini"]
ODD = [[], {}, [[]], {"a": []}, 1.5, -1, None, "x", True, [{"type": []}], {"type": {}}]


def paths(v, p=()):
    yield p
    if isinstance(v, dict):
        for k, x in v.items():
            yield from paths(x, (*p, k))
    elif isinstance(v, list):
        for i, x in enumerate(v[:4]):
            yield from paths(x, (*p, i))


def replaced(body, path, new):
    out = copy.deepcopy(body)
    cur = out
    for k in path[:-1]:
        cur = cur[k]
    cur[path[-1]] = new
    return out
