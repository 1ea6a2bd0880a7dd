"""One provider turn's plain lifecycle, from the intercepted request to the reply the client
gets: no mitmproxy, no sockets, no asyncio (tests/suites/test_layering.py keeps it so).

- planning: ``plan`` (prepare, decide, translate for the route chosen, build: a ``Turn``),
  ``planner`` (the same as one object the adapter drives, round after round, and the flow's
  state begun: ``Planning.begin``'s ``Started``), ``target`` (where a request object points, its headers, the plan applied to
  it: duck-typed, never mitmproxy's);
- the reply: ``reply`` (its mode, the stream translator, the whole reply translated),
  ``disposition`` (what the ``response`` hook does with it), ``outcome``, ``stream_watch``,
  ``pump`` (a reply on its way to the client; its content-encoding undone by tokunseba/encoding.py);
- a failed attempt and the next one: ``failover`` (which failures move on, cooldowns and
  slots, the next attempt), ``failed_attempt`` (the same as one object the adapter drives),
  ``last_word`` (what the client gets when none is left);
- its end: ``ending`` (what is said of it: the outcome recorded, the console's lines, its cost,
  over ``cap_note``, ``console_line`` and ``cost``);
- around the turn: ``flowstate`` (what the adapter holds per flow), ``presentation`` (what
  mitmweb shows of it), ``access`` (who may have turns routed), ``base_url``
  (how it came in), ``retries`` (a request that repeats a recent one of its session).

Not here (not about the turn): the flow-metadata keys (webview/), tokunseba's request-id header
and which requests are provider calls (protocols/), the SSE content type (sse.py), what a reply's
headers say about the account's limits (proxy/provider_limits.py), how much of a body the ledger
keeps (ledger/).

The adapter drives one object per stage a flow goes through: how it came in (``Arrival``: base_url),
``Planning`` (the turn planned, round after round; a busy answer: ``say_busy``), its ``Started``
(the flow's state begun, the request aimed: ``Started.aim``), ``FailedAttempt`` (an attempt failed,
the next one planned; a failure read from a held reply: ``Failure.of``; the attempt's request:
``Chain``), what the client gets from here (``LocalResponse``: ``error``, ``upgrade_declined``), the
reply's (``Replying``: its mode, its ``Pump``, what the ``response`` hook does with it), ``Ending``
(what is said of the turn once it ended, mitmweb's mark and comment too: ``Ending.present``), and
for a Responses WebSocket connection ``SocketTurns`` (ws_session: its messages planned, where each
goes, its responses kept).
The package's face is ``__all__`` (what proxy/ and shadow/ take, from here only: tests/
test_exported_members.py); a name is read from its module when first asked, so importing the
package costs nothing. ``from tokunseba.turn import name`` still finds what the one-module
``turn`` had (read lazily from ``plan`` and ``reply``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .base_url import Arrival
    from .disposition import Disposition
    from .ending import Ending
    from .quota_seen import WindowWatch
    from .failed_attempt import FailedAttempt
    from .failover import Broken, Capacity, Chain, Failure, Replan, Slot
    from .flowstate import FlowState
    from .last_word import Told
    from .outcome import Outcome
    from .plan import LocalResponse, Turn, translate_for_endpoint
    from .planner import Planning
    from .presentation import show_client_url
    from .pump import Pump
    from .replying import Replying
    from .retries import RetryWatch
    from .target import field_name
    from .ws_plan import Carrier
    from .ws_session import SocketTurns
    from .ws_transcript import Reply

_MODULES = {"access", "base_url", "budget_gate", "cap_note", "console_line", "cost", "disposition", "ending",
            "failed_attempt", "failover", "flowstate", "last_word", "outcome", "plan", "planner", "presentation",
            "pump", "quota_seen", "replying", "reply", "retries", "stream_watch", "target", "ws_plan", "ws_session",
            "ws_transcript"}

# the face: name -> (its module, its name there); no face name is a module's name (the import
# system would bind the module over it)
_FACE: dict[str, tuple[str, str]] = {
    "Arrival": ("base_url", "Arrival"),
    "Capacity": ("failover", "Capacity"),
    "WindowWatch": ("quota_seen", "WindowWatch"),
    "Ending": ("ending", "Ending"),
    "Disposition": ("disposition", "Disposition"),
    "Replying": ("replying", "Replying"),
    "Broken": ("failover", "Broken"), "Chain": ("failover", "Chain"),
    "Failure": ("failover", "Failure"), "Replan": ("failover", "Replan"),
    "Slot": ("failover", "Slot"),
    "FlowState": ("flowstate", "FlowState"), "Told": ("last_word", "Told"),
    "Outcome": ("outcome", "Outcome"),
    "LocalResponse": ("plan", "LocalResponse"), "Turn": ("plan", "Turn"),
    "translate_for_endpoint": ("plan", "translate_for_endpoint"),
    "Planning": ("planner", "Planning"), "FailedAttempt": ("failed_attempt", "FailedAttempt"),
    "show_client_url": ("presentation", "show_client_url"),
    "Pump": ("pump", "Pump"),
    "RetryWatch": ("retries", "RetryWatch"),
    "field_name": ("target", "field_name"), "Carrier": ("ws_plan", "Carrier"),
    "SocketTurns": ("ws_session", "SocketTurns"), "Reply": ("ws_transcript", "Reply"),
}

__all__ = [
    "Arrival", "Capacity", "WindowWatch", "Disposition",
    "Replying", "Broken", "Chain", "Failure", "Replan", "Slot",
    "FlowState", "Told", "Outcome",
    "LocalResponse", "Turn", "translate_for_endpoint",
    "Planning", "show_client_url", "Pump",
    "RetryWatch", "field_name", "Carrier",
    "SocketTurns", "Reply",
    "FailedAttempt", "Ending",
]


def __getattr__(name: str) -> Any:
    """``from tokunseba.turn import Turn``: a face name read from its module when asked; any other
    name of ``plan`` and ``reply`` (what the one-module ``turn`` had) too."""
    if name.startswith("__") or name in _MODULES:  # a module of the package: the import system loads it
        raise AttributeError(name)
    if name in _FACE:
        module, attr = _FACE[name]
        return getattr(importlib.import_module(f"{__name__}.{module}"), attr)
    for module in ("plan", "reply"):  # what the one-module ``turn`` had, in these two now
        found = getattr(importlib.import_module(f"{__name__}.{module}"), name, _MODULES)
        if found is not _MODULES:
            return found
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
