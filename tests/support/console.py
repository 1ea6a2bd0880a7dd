"""Reading what a proxy printed: whether a status was said, apart from the digits of a
timestamp (``[10:37:15.426]``), a port (``127.0.0.1:42611``) or a number."""

from __future__ import annotations

import re


def said_status(log: str, status: int) -> bool:
    """Whether ``status`` stands in ``log`` as a number of its own (not inside a timestamp,
    an address, a port or a longer number)."""
    return re.search(rf"(?<![\w.:]){status}(?![\w.:])", log) is not None
