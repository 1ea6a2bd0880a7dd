"""What tokunseba holds for one in-flight flow (``FlowState``) and what mitmweb shows of it
(``Shown``). Plain data: no mitmproxy, no I/O."""

from __future__ import annotations

from collections.abc import Callable

from dataclasses import dataclass, field

from .failover import Chain, Slot
from .pump import Pump
from .plan import Turn
from ..states import ReplyMode


@dataclass
class Shown:
    """What mitmweb shows of one in-flight turn: the URL the client asked for (restored on the
    flow once the request has left) and the key values to keep out of its comment."""

    client_url: str | None
    client_target: tuple | None = None  # the client's scheme, host, port, path, authority, Host (target.target_of)
    secrets: set[str] = field(default_factory=set)
    added_keys: list[str] = field(default_factory=list)  # credential headers tokunseba set (the endpoint's key)


@dataclass
class FlowState:
    """All tokunseba holds for one in-flight flow, from the request hook that plans its turn
    to the ``response`` / ``error`` hook that ends it (one entry of ``Tokunseba.flows``).

    Kept in a dict keyed by flow id, not in ``flow.metadata``: mitmproxy deep-copies a
    flow's metadata into saved flows and into the copy a replay sends, and this holds live
    objects (the stream callable, the relay's token) that belong to this flow only."""

    turn: Turn
    shown: Shown | None = None  # mitmweb presentation; None once the outcome was presented
    relay_token: str | None = None  # the relay's target of a routed turn (proxy/relay.py)
    shadowed: bool = False  # a shadow waits for this turn's reply, to compare with it
    mode: ReplyMode | None = None  # how the reply is handled (turn.response_mode), from responseheaders
    pump: Pump | None = None  # the stream callable of a streamed reply
    chain: Chain | None = None  # a routed turn: what plans its next attempt after a failure (turn/failover.py)
    slot: Slot | None = None  # the endpoint slot its current attempt holds (turn/failover.py)
    attempt_at: float = 0.0  # when its current attempt started (time.monotonic)
    client_close: bool = False  # the client's request said Connection: close (its rewritten copy no longer does)
    # what the request hook left for once the request has gone (a request passed on as sent:
    # mitmweb's record of it and the turn's start records, which nothing reads before its reply);
    # run by ``settle``: the event loop's next step, or the first of the flow's later hooks
    pending: Callable[[], None] | None = None

    def settle(self) -> None:
        """Run what the request hook left (``pending``), once."""
        pending, self.pending = self.pending, None
        if pending is not None:
            pending()
