"""What both halves of the Anthropic request codec read (decode.py, encode.py): the key sets of
the shapes they share and how text blocks join."""

from __future__ import annotations

from .. import fieldtable as ft

JOIN = ft.JOIN
TEXT_KEYS = frozenset({"type", "text"})  # a plain text block
MESSAGE_KEYS = frozenset({"role", "content"})  # a message with nothing else
