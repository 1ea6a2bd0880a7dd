"""One provider turn's plain lifecycle, from the intercepted request to the reply the client
gets: no mitmproxy, no sockets, no asyncio (tests/suites/test_layering.py keeps it so).

- planning: ``plan`` (prepare, decide, translate for the route chosen, build: a ``Turn``),
  ``planner`` (the same as one object the adapter drives, round after round, and the flow's
  state begun), ``target`` (where a request object points, its headers, the plan applied to
  it: duck-typed, never mitmproxy's);
- the reply: ``reply`` (its mode, the stream translator, the whole reply translated),
  ``disposition`` (what the ``response`` hook does with it), ``outcome``, ``stream_watch``,
  ``encoding``, ``pump`` (a reply on its way to the client);
- a failed attempt and the next one: ``failover`` (which failures move on, cooldowns and
  slots, the next attempt), ``last_word`` (what the client gets when none is left);
- around the turn: ``flowstate`` (what the adapter holds per flow), ``presentation`` (what
  mitmweb shows of it), ``console_line``, ``access`` (who may have turns routed), ``base_url``
  (how it came in), ``retries`` (a request that repeats a recent one of its session),
  ``provider_limits`` (what a reply's headers say about the account's limits).

The adapter (proxy/route.py) plans a request through ``planner`` and applies the ``Turn`` it gets
with ``target.aim``.
``from tokunseba.turn import name`` still finds what the one-module ``turn`` had (read lazily
from ``plan`` and ``reply``).
"""

from __future__ import annotations

import importlib
from typing import Any

_MODULES = {"plan", "reply", "target", "disposition", "outcome", "stream_watch", "encoding", "pump", "failover",
            "last_word", "retries", "access", "console_line", "flowstate", "presentation", "base_url", "planner",
            "quota_seen", "provider_limits"}


def __getattr__(name: str) -> Any:
    """``from tokunseba.turn import build_turn``: the names of ``plan`` and ``reply``, imported when asked."""
    if name.startswith("__") or name in _MODULES:  # a module of the package: the import system loads it
        raise AttributeError(name)
    for module in ("plan", "reply"):  # what the one-module ``turn`` had, in these two now
        found = getattr(importlib.import_module(f"{__name__}.{module}"), name, _MODULES)
        if found is not _MODULES:
            return found
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
