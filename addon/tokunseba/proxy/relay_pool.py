"""The relay's connections to endpoints (proxy/relay.py): the endpoint's side of one connection
(an asyncio ``Protocol`` handing what comes to the exchange using it), the connection as the relay
owns it, and the pool of idle keep-alive connections per (scheme, host, port).

Contract: ``Pool.take(key)`` gives an idle connection that is still alive and idle less than
``idle_s`` (the newest first), or None; ``Pool.put(conn)`` keeps a live one (at most
``max_idle_per_key`` per key); a connection that says anything while idle is dead. Runs in
mitmproxy's event loop; no mitmproxy import.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import urlsplit


class Sink(Protocol):
    """What a lent connection hands its bytes and its end to (the relay's exchange)."""

    def data(self, data: bytes) -> None: ...

    def ended(self, exc: Exception | None) -> None: ...


Key = tuple[str, str, int]  # scheme, host, port


class UpstreamProtocol(asyncio.Protocol):
    """The endpoint's side of one connection: hands what comes to the exchange using it
    (``sink``); while idle in the pool, any byte or end marks it dead."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.sink: Sink | None = None
        self.dead = False

    def connection_made(self, transport) -> None:
        self.transport = transport  # asyncio sets TCP_NODELAY on its TCP transports itself

    def data_received(self, data: bytes) -> None:
        if self.sink is not None:
            self.sink.data(data)
        else:  # an idle connection has nothing to say: not reusable
            self.dead = True
            assert self.transport is not None  # bytes come only once connected
            self.transport.close()

    def eof_received(self) -> bool:
        self.dead = True
        if self.sink is not None:
            self.sink.ended(None)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.dead = True
        if self.sink is not None:
            self.sink.ended(exc)


@dataclass(eq=False)
class UpstreamConn:
    """One connection to an endpoint, owned by the relay (idle in the pool, or lent to a turn)."""

    key: Key
    transport: asyncio.Transport
    proto: UpstreamProtocol
    uses: int = 0  # replies it has carried
    idle_since: float = field(default_factory=time.monotonic)

    def alive(self) -> bool:
        return not self.proto.dead and not self.transport.is_closing()

    def close(self) -> None:
        try:
            self.transport.close()
        except Exception:  # pragma: no cover
            pass


class Pool:
    """Idle keep-alive connections per endpoint: newest first, dropped when dead or idle too long."""

    def __init__(self, idle_s: float = 30.0, max_idle_per_key: int = 16) -> None:
        self.idle_s, self.max_idle_per_key = idle_s, max_idle_per_key
        self.idle: dict[Key, list[UpstreamConn]] = {}
        self.reused = 0
        self.opened = 0

    def take(self, key: Key) -> UpstreamConn | None:
        conns = self.idle.get(key)
        now = time.monotonic()
        while conns:
            c = conns.pop()
            if c.alive() and now - c.idle_since < self.idle_s:
                self.reused += 1
                return c
            c.close()
        return None

    def put(self, conn: UpstreamConn) -> None:
        conns = self.idle.setdefault(conn.key, [])
        if not conn.alive() or len(conns) >= self.max_idle_per_key:
            conn.close()
            return
        conn.idle_since = time.monotonic()
        conns.append(conn)

    def close_all(self) -> None:
        for conns in self.idle.values():
            for c in conns:
                c.close()
        self.idle.clear()


def target_key(url: str) -> Key:
    u = urlsplit(url)
    return (u.scheme, u.hostname or "", u.port or (443 if u.scheme == "https" else 80))
