"""Watches the rules file while the proxy runs, so that an edit is taken — or a broken one
reported — when it is made, not when the next turn arrives.

``watch(seconds, check)`` starts an asyncio task on the running loop that calls ``check``
(the adapter's ``_maybe_reload_rules``: one stat, a reload only when the file changed) every
``seconds``; an exception from ``check`` is logged and the watch goes on. The caller cancels
the task when the proxy stops. No mitmproxy import.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)


async def _every(seconds: float, check: Callable[[], None]) -> None:
    while True:
        await asyncio.sleep(seconds)
        try:
            check()
        except Exception:  # a failed check must not end the watch
            log.exception("tokunseba: could not check the rules file")


def watch(seconds: float, check: Callable[[], None]) -> asyncio.Task:
    """Call ``check`` every ``seconds`` on the running loop until the returned task is cancelled."""
    return asyncio.ensure_future(_every(seconds, check))
