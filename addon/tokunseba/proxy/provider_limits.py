"""What a provider's reply says about the account's limits, kept for the quota-window work
(issue 42): the reply's headers whose names start with a registered protocol's
``limit_headers`` prefixes (the ChatGPT backend's ``x-codex-…``), as they came.

Contract: pure (header pairs in, pairs out), no mitmproxy. Names are lower-cased; a header whose
name says it holds a credential is never kept (credentials.py); the reply itself is not touched.
The adapter (proxy/reply.py) writes what this returns as a ``provider_limits`` ledger event:
``{"host": <where the reply came from>, "headers": [[name, value], ...]}``.
"""

from __future__ import annotations

from collections.abc import Iterable

from .. import protocols
from ..credentials import is_credential_header

EVENT = "provider_limits"
_prefixes: list[tuple[int, tuple[str, ...]]] = []  # (registry generation, the prefixes then)


def limit_prefixes() -> tuple[str, ...]:
    """Every registered protocol's ``limit_headers`` prefixes (rebuilt when the registry changes)."""
    gen = protocols.generation()
    if not _prefixes or _prefixes[0][0] != gen:
        _prefixes[:] = [(gen, tuple(dict.fromkeys(p for f in protocols.all_protocols() for p in f.limit_headers)))]
    return _prefixes[0][1]


def limit_headers(fields: Iterable[tuple[str, str]]) -> list[list[str]]:
    """The (name, value) pairs of ``fields`` that report the account's limits, in order."""
    prefixes = limit_prefixes()
    if not prefixes:
        return []
    out = []
    for name, value in fields:
        low = name.lower()
        if low.startswith(prefixes) and not is_credential_header(low):
            out.append([low, value])
    return out
