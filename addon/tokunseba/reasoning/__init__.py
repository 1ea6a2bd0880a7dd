"""Reasoning continuity across a tool loop (issue 18; docs/dev/architecture.md §4b).

- ``state``: what a provider's reply left to be given back (DeepSeek's reasoning_content,
  Anthropic's signed thinking, Responses reasoning items, Gemini thought signatures),
  captured from the reply and restored into the next request — to the same endpoint and
  model only;
- ``store``: where it is kept between turns (memory, then ``reasoning.db``, 0600, bounded);
- ``loop_route``: a request that answers a translated reply's tool calls goes back to the
  endpoint and model that made them.

Contract: nothing forged; restored only to its origin; no mitmproxy here.
"""

from __future__ import annotations

from .loop_route import follow_loop, not_followed
from .state import STATE_EVENTS, explain_state
from .store import DEFAULT_MAX_ENTRIES, Keeper, open_keeper

__all__ = [
    "follow_loop", "not_followed", "STATE_EVENTS", "explain_state", "DEFAULT_MAX_ENTRIES", "Keeper", "open_keeper",
]
