"""What the ledger stores for a JSON value: its scrubbed JSON text, memoized.

``scrubbed_json(value)`` is ``jsonc.dumps(scrub(value))`` (``credentials.scrub``: credential-like
keys, key-shaped text and the endpoints' own keys redacted), computed once per distinct
JSON text: a turn's routing trace, its ``routed`` / ``left_behind`` / ``protocol_translated``
events repeat from turn to turn, and scrubbing them is most of the writer thread's work.

Sound by construction: the memo's key is the value's JSON text, and what it stores is
computed from that text alone (``scrub(loads(text))``), so the answer is a function of the
key and of ``KNOWN_SECRETS`` (the memo is emptied whenever those change). For plain JSON
values (dict, list, str, numbers, bool, None) that is exactly ``scrub(value)``; a value
orjson writes as text (a UUID, an Enum) is scrubbed as that text, never less. A value JSON
cannot encode the same way (bytes, non-string keys, huge ints) and a text longer than
``MAX_TEXT`` bypass the memo. Bounded: ``MAX_ENTRIES`` texts, the oldest forgotten first.
"""

from __future__ import annotations

import threading
from typing import Any

from .. import jsonc
from ..credentials import KNOWN_SECRETS, scrub

MAX_ENTRIES = 512
MAX_TEXT = 4096  # characters: longer values are scrubbed every time

_lock = threading.Lock()
_memo: dict[bytes, str] = {}
_secrets: tuple[str, ...] = KNOWN_SECRETS.values


def scrubbed_json(value: Any) -> str:
    """``jsonc.dumps(scrub(value))``, from the memo when this JSON text was seen before."""
    global _memo, _secrets
    try:
        key = jsonc.dumpb(value)
    except (TypeError, ValueError):  # not JSON as it stands (bytes, cycles): scrub first, as ever
        return jsonc.dumps(scrub(value))
    if len(key) > MAX_TEXT:
        return jsonc.dumps(scrub(value))
    secrets = KNOWN_SECRETS.values
    with _lock:
        if secrets is not _secrets:  # the endpoints' keys changed: nothing remembered holds
            _memo, _secrets = {}, secrets
        text = _memo.get(key)
    if text is not None:
        return text
    try:
        text = jsonc.dumps(scrub(jsonc.loads(key)))
    except jsonc.JSONDecodeError:  # written by the stdlib fallback in a form orjson does not read back
        return jsonc.dumps(scrub(value))
    with _lock:
        if _secrets is secrets and KNOWN_SECRETS.values is secrets:
            if len(_memo) >= MAX_ENTRIES:
                del _memo[next(iter(_memo))]
            _memo[key] = text
    return text
