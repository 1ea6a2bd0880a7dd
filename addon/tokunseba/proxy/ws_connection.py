"""One Responses WebSocket connection's state, shared by the WebSocket hooks (proxy/websocket.py)
and its routed turns (proxy/ws_routed.py): ``Session`` (its turns planned, its messages waiting
for the provider's answer, its routed turns' tasks and endpoint WebSockets, the turns not ended
yet) and ``Waiting`` (a message passed on to the provider, its events read by the stream watch
once its turn ends); ``after_relay`` keeps a hook's bookkeeping off the message's way.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from mitmproxy import http

from .. import jsonc
from ..protocols import openai_responses_ws as p_ws
from ..turn import Pump, Reply, SocketTurns, Turn
from .ws_client import EndpointSocket

UNREAD_MAX = 1 << 20  # a passed-on turn's events waiting for its watch: fed to it from this size on


@dataclass
class Waiting:
    """A message passed on to the provider, until its response ends: a turn (recorded), or a
    warm-up (``turn`` None). A turn's events are read by its pump (the stream watch, as over
    HTTPS: turn/pump.py) once it has ended (``watched``), off the way of the messages, which
    have gone on by then (``seen`` keeps them, as SSE, and the time of the first; ``delta``
    keeps a delta's bytes as they came, untouched until then: the watch would only check
    that its client can read it as JSON, and so does ``watched``, feeding it only one that
    is not)."""

    turn: Turn | None
    conversation: list | None
    reply: Reply = field(default_factory=Reply)
    pump: Pump | None = None
    # in order: a delta as it came (a JSON text: it begins with "{"), any other event as SSE ("event:"/"data:")
    unread: list[bytes] = field(default_factory=list)
    unread_bytes: int = 0
    first_byte: float | None = None

    def seen(self, ev: p_ws.ServerEvent) -> None:
        if self.turn is None:
            return
        if self.first_byte is None:
            self.first_byte = time.time()
        self._keep(p_ws.as_sse(ev))

    def delta(self, payload: bytes) -> None:
        """A delta (``p_ws.is_delta``), kept as it came."""
        if self.turn is not None:
            if self.first_byte is None:
                self.first_byte = time.time()
            self._keep(payload)

    def _keep(self, data: bytes) -> None:
        self.unread.append(data)
        self.unread_bytes += len(data)
        if self.unread_bytes > UNREAD_MAX:
            self.watched()

    def watched(self) -> Pump | None:
        """The turn's pump, fed every event seen so far (None: a warm-up)."""
        if self.turn is None:
            return None
        if self.pump is None:
            self.pump = Pump(self.turn)
        if self.unread:
            self.pump(b"".join(_unread_sse(self.unread)))
            self.unread.clear()
            self.unread_bytes = 0
        if self.first_byte is not None:
            self.pump.first_byte = self.first_byte
        return self.pump


def _unread_sse(unread: list[bytes]) -> list[bytes]:
    """What the watch reads of the events kept: every SSE event, and a delta only when it is not
    JSON (as SSE: the watch says why its client cannot read it); a delta that is JSON carries
    nothing else the watch reads (as over HTTPS: turn/stream_watch.py)."""
    out, loads = [], jsonc.loads
    for data in unread:
        if data[:1] == b"{":
            try:
                loads(data)
                continue
            except Exception:
                data = p_ws.as_sse(p_ws.server_event(data))
        out.append(data)
    return out


@dataclass
class Session:
    """One Responses WebSocket connection's state."""

    flow: http.HTTPFlow
    host: str = ""  # the upgrade's host as the client named it (``pretty_host``: read once, not per turn)
    turns_of: SocketTurns = field(default_factory=SocketTurns)  # its turns planned, its responses kept
    waiting: deque[Waiting] = field(default_factory=deque)
    server: p_ws.ServerEvents = field(default_factory=p_ws.ServerEvents)
    routed: set[asyncio.Task] = field(default_factory=set)  # routed turns, streaming back
    sockets: dict[str, EndpointSocket] = field(default_factory=dict)  # endpoint name -> its WebSocket, once opened
    open: dict[str, Turn] = field(default_factory=dict)  # request id -> a turn not ended yet
    turns: int = 0
    last: str = ""  # the last turn's summary (the flow's comment)


def after_relay(fn: Any, *args: Any) -> None:
    """Call ``fn`` once the message in hand is relayed: a hook's bookkeeping (a turn's start,
    its end's records) is kept off the message's way, as an HTTPS turn is recorded once its
    reply has gone (mitmproxy relays a message in the same step of the event loop as its
    hook, when the hooks return without awaiting). Without a running loop: now."""
    try:
        asyncio.get_running_loop().call_soon(fn, *args)
    except RuntimeError:
        fn(*args)
