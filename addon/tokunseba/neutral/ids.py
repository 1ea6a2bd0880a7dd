"""Identifiers minted as protocol plumbing, deterministically (docs/dev/architecture.md rule 2).

A tool id or message id the client's protocol requires and the upstream did not send is
minted from what the upstream did send; the codec that mints one records it
(``id_synthesized: <path>``). Ids that were sent are never touched.
"""

from __future__ import annotations

import re

from .report import note_once

UNSAFE_ID = re.compile(r"[^a-zA-Z0-9_-]")


def safe(text: str | None) -> str:
    """``text`` reduced to ``[A-Za-z0-9_-]`` (``tk`` when absent), for minted ids."""
    if not text:
        return "tk"
    if text.isascii() and text.isalnum():  # letters and digits alone (Gemini's ids): cheaper than the search
        return text
    return text if UNSAFE_ID.search(text) is None else UNSAFE_ID.sub("_", text)  # (a search is the cheaper)


def odd_id(path: str, dropped: list[str]) -> None:
    """Records a reply's message id (at ``path``) that is not a string as dropped; the caller
    then takes it as absent (an id is minted where the client's protocol needs one). Called only when
    the value is neither a string nor null."""
    note_once(dropped, path)


def synth_tool_id(message_id: str | None, n: int) -> str:
    """The tool id of call ``n`` of a reply whose upstream sent none."""
    return f"call_{safe(message_id)}_{n}"
