"""Function-call ids minted deterministically where Gemini sent none (docs/dev/architecture.md rule 2,
recorded as ``id_synthesized``).

Gemini may send ``functionCall`` without an ``id``; the client's protocol needs one. The id
is made from what the upstream did send (its ``responseId``) and the call's position, so the
same reply always gives the same ids, and it matches ``^[a-zA-Z0-9_-]+$`` (every protocol's
id grammar). Ids Gemini does send are never touched.
"""

from __future__ import annotations

import re

_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")


def synth_call_id(response_id: str | None, n: int) -> str:
    """The id of function call ``n`` (0-based, in reply order) of a reply that sent none."""
    rid = response_id or "gemini"
    if not (rid.isascii() and rid.isalnum()):  # (Gemini's own ids are letters and digits: no regex for them)
        rid = _UNSAFE.sub("_", rid)
    return f"call_{rid}_{n}"

