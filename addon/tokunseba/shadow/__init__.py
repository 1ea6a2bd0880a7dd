"""Shadow turns and replays: a turn sent again, to another endpoint or later, and compared.

- ``sender``: sends shadow turns in the background, off every flow's path, and records them
  (which turns a shadow can take is routing/shadowable.py's: the rules warn with it at load);
- ``turns``: the pure part — which turns to shadow, the request a shadow (or a replay)
  sends, the reply in the client's protocol, the comparison of two replies;
- ``view``: how ``explain`` shows a shadowed or replayed turn;
- ``replay``: a recorded turn sent again (``tokunseba replay``);
- ``reply_facts``: the facts of one reply (text, tool calls, stop, usage) that are compared.

Contract: a shadow never changes what the client gets; no mitmproxy here.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .replay import ReplayError, replay as replay_turn
    from .reply_facts import reply_facts as facts_of_reply
    from .sender import ShadowJob, ShadowSender
    from .turns import build_request, should_shadow
    from .view import earn_lines, explain_lines

# face name -> (its module, its name there): read when first asked; no face name is a module's
# name (the import system would bind the module over it). explain needs only ``view``, not the
# sender and the codecs.
_FACE = {"ReplayError": ("replay", "ReplayError"), "replay_turn": ("replay", "replay"),
         "facts_of_reply": ("reply_facts", "reply_facts"), "ShadowJob": ("sender", "ShadowJob"),
         "ShadowSender": ("sender", "ShadowSender"), "build_request": ("turns", "build_request"),
         "should_shadow": ("turns", "should_shadow"), "earn_lines": ("view", "earn_lines"),
         "explain_lines": ("view", "explain_lines")}

__all__ = ["ReplayError", "replay_turn", "facts_of_reply", "ShadowJob", "ShadowSender", "build_request",
           "should_shadow", "earn_lines", "explain_lines"]


def __getattr__(name: str) -> Any:
    """``from tokunseba.shadow import ShadowSender``: the name's module imported when asked."""
    if name not in _FACE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attr = _FACE[name]
    return getattr(importlib.import_module(f"{__name__}.{module}"), attr)
