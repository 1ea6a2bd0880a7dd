"""What both halves of the Responses request codec read (decode.py, tool_declarations.py,
encode.py): how text parts join, a plain text part's keys, and how a turn is refused."""

from __future__ import annotations

from ...errors import Refused, TranslationError
from .. import fieldtable as ft

JOIN = ft.JOIN
TEXT_KEYS = frozenset({"type", "text"})  # a plain text part


def refused(path: str, why: str) -> TranslationError:
    """A turn the Responses history (or its tools) makes impossible elsewhere: refused, never cut."""
    return Refused(400, f"{path}: {why}; this turn cannot go to an endpoint of another protocol")
