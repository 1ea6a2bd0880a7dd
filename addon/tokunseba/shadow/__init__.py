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
    from .replay import ReplayError, replay
    from .sender import ShadowJob, ShadowSender
    from .turns import should_shadow
    from .view import explain_lines

# name -> its module: read when first asked (explain needs only ``view``, not the sender and the codecs)
_FACE = {"ReplayError": "replay", "replay": "replay", "ShadowJob": "sender", "ShadowSender": "sender",
         "should_shadow": "turns", "explain_lines": "view"}

__all__ = ["ReplayError", "replay", "ShadowJob", "ShadowSender", "should_shadow", "explain_lines"]


def __getattr__(name: str) -> Any:
    """``from tokunseba.shadow import ShadowSender``: the name's module imported when asked."""
    module = _FACE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
