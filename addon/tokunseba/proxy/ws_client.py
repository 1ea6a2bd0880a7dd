"""A WebSocket client connection to an endpoint (asyncio + wsproto, mitmproxy's own WebSocket
library): what carries a turn retargeted to a Responses endpoint over that endpoint's WebSocket.

``EndpointSocket.open(url, headers, ssl_context, timeout)`` connects and sends the upgrade;
it returns the open socket, or raises ``NotUpgraded`` when the endpoint answered the upgrade
with anything but 101 (it has no WebSocket there: the turn goes over HTTPS), or the
connection's own error. ``send(text)`` sends one text message; ``receive()`` returns the next
whole text message (pings answered on the way), or None once the connection is closed or cut.
``close()`` closes it. No mitmproxy: plain sockets.
"""

from __future__ import annotations

import asyncio
import ssl
from urllib.parse import urlsplit

from wsproto import ConnectionType, WSConnection
from wsproto.events import (AcceptConnection, BytesMessage, CloseConnection, Ping, RejectConnection, RejectData, Request,
                            TextMessage)

READ_BYTES = 65536


class NotUpgraded(Exception):
    """The endpoint answered the upgrade with another status: it has no WebSocket there."""

    def __init__(self, status: int) -> None:
        super().__init__(f"the endpoint answered the WebSocket upgrade with HTTP {status}")
        self.status = status


class EndpointSocket:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, ws: WSConnection) -> None:
        self.reader, self.writer, self.ws = reader, writer, ws
        self.closed = False
        self._parts: list[str] = []
        self._ready: list[str] = []

    @classmethod
    async def open(cls, url: str, headers: dict[str, str], ssl_context: ssl.SSLContext | None,
                   timeout: float) -> "EndpointSocket":
        u = urlsplit(url)
        tls = u.scheme in ("https", "wss")
        host = u.hostname or ""
        port = u.port or (443 if tls else 80)
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port, ssl=(ssl_context or ssl.create_default_context()) if tls else None,
                                    server_hostname=host if tls else None), timeout)
        ws = WSConnection(ConnectionType.CLIENT)
        authority = host if (u.port is None) else f"{host}:{port}"
        target = (u.path or "/") + (f"?{u.query}" if u.query else "")
        writer.write(ws.send(Request(host=authority, target=target,
                                     extra_headers=[(k.encode(), v.encode()) for k, v in headers.items()])))
        await writer.drain()
        sock = cls(reader, writer, ws)
        try:
            await asyncio.wait_for(sock._handshake(), timeout)
        except BaseException:
            sock.close()
            raise
        return sock

    async def _handshake(self) -> None:
        while True:
            data = await self.reader.read(READ_BYTES)
            self.ws.receive_data(data or None)
            for ev in self.ws.events():
                if isinstance(ev, AcceptConnection):
                    return
                if isinstance(ev, (RejectConnection, RejectData)):
                    raise NotUpgraded(getattr(ev, "status_code", 0) or 0)
            if not data:
                raise ConnectionError("the endpoint closed the connection during the WebSocket upgrade")

    async def send(self, text: str) -> None:
        self.writer.write(self.ws.send(TextMessage(data=text)))
        await self.writer.drain()

    async def receive(self) -> str | None:
        while not self._ready:
            if self.closed:
                return None
            data = await self.reader.read(READ_BYTES)
            self.ws.receive_data(data or None)
            for ev in self.ws.events():
                if isinstance(ev, TextMessage):
                    self._parts.append(ev.data)
                    if ev.message_finished:
                        self._ready.append("".join(self._parts))
                        self._parts = []
                elif isinstance(ev, Ping):
                    self.writer.write(self.ws.send(ev.response()))
                elif isinstance(ev, CloseConnection):
                    self.closed = True
                elif isinstance(ev, BytesMessage):
                    continue  # Responses events are text
            if not data:
                self.closed = True
        return self._ready.pop(0)

    def close(self) -> None:
        self.closed = True
        try:
            self.writer.close()
        except Exception:
            pass
