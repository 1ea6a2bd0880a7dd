"""A loopback relay between mitmproxy and the endpoint of a translated turn.

Why: when an upstream dies in the middle of a chunked stream, mitmproxy fires `error` and
can write nothing more to the client (mitmproxy.md §4), so the client would see a torn
connection instead of an error in its own protocol. Translated flows therefore go
mitmproxy → this relay → endpoint. The relay re-frames the endpoint's reply as a chunked
response that always ends cleanly; when the endpoint breaks, it ends the relayed body
early and notes why, so the stream translator's close() emits the client-protocol error
event (``event: error`` / a Chat error chunk). An endpoint that refuses the connection
becomes a 502 marked with ``x-tokunseba-bridge``, which the adapter turns into an error in
the client's protocol instead of mitmproxy's HTML page.

Runs in mitmproxy's event loop (asyncio + h11, both already mitmproxy dependencies).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

import h11

log = logging.getLogger("tokunseba.bridge")

MARK = "x-tokunseba-bridge"
PREFIX = "/__tokunseba_bridge/"
HOP_BY_HOP = {b"connection", b"keep-alive", b"transfer-encoding", b"content-length", b"upgrade",
              b"proxy-connection", b"te", b"trailer"}
READ = 65536


@dataclass
class Target:
    scheme: str
    host: str
    port: int
    path: str  # with query
    broken: str | None = None  # why the upstream reply was cut short, if it was


class Bridge:
    def __init__(self, connect_timeout: float = 10.0, idle_timeout: float = 600.0,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.targets: dict[str, Target] = {}
        self.server: asyncio.base_events.Server | None = None
        self.port = 0
        self.connect_timeout = connect_timeout
        self.idle_timeout = idle_timeout
        self._ssl: ssl.SSLContext | None = ssl_context  # None: system-independent default (certifi)

    async def start(self) -> None:
        if self.server is None:
            self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
            self.port = self.server.sockets[0].getsockname()[1]

    def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None

    def register(self, url: str) -> tuple[str, str]:
        """Register a real target URL; returns (token, the URL mitmproxy should use)."""
        u = urlsplit(url)
        port = u.port or (443 if u.scheme == "https" else 80)
        token = secrets.token_hex(12)
        self.targets[token] = Target(u.scheme, u.hostname or "", port, (u.path or "/") + (f"?{u.query}" if u.query else ""))
        return token, f"http://127.0.0.1:{self.port}{PREFIX}{token}"

    def finish(self, token: str) -> Target | None:
        return self.targets.pop(token, None)

    def set_ssl_context(self, context: ssl.SSLContext | None) -> None:
        self._ssl = context

    def _ssl_context(self) -> ssl.SSLContext:
        if self._ssl is None:
            try:
                import certifi

                self._ssl = ssl.create_default_context(cafile=certifi.where())
            except Exception:  # pragma: no cover
                self._ssl = ssl.create_default_context()
        return self._ssl

    # ------------------------------------------------------------------ relay
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        down = h11.Connection(h11.SERVER)
        try:
            req, body = await self._read_request(down, reader)
            if req is None:
                return
            token = req.target.decode("ascii", "replace").removeprefix(PREFIX).split("/", 1)[0].split("?", 1)[0]
            target = self.targets.get(token)
            if target is None:
                await self._reply_error(down, writer, 404, "unknown relay token")
                return
            await self._relay(down, writer, req, body, target)
        except Exception as e:  # never let the relay crash the proxy's loop
            log.debug("bridge: %s", e)
        finally:
            try:
                writer.close()
            except Exception:
                pass

    async def _read_request(self, conn: h11.Connection, reader: asyncio.StreamReader):
        req, chunks = None, []
        while True:
            ev = conn.next_event()
            if ev is h11.NEED_DATA:
                data = await reader.read(READ)
                conn.receive_data(data)
                if not data and req is None:
                    return None, b""
                continue
            if isinstance(ev, h11.Request):
                req = ev
            elif isinstance(ev, h11.Data):
                chunks.append(bytes(ev.data))
            elif isinstance(ev, (h11.EndOfMessage, h11.ConnectionClosed)):
                return req, b"".join(chunks)

    async def _reply_error(self, conn: h11.Connection, writer: asyncio.StreamWriter, status: int, msg: str,
                           mark: bytes = b"error") -> None:
        """A relay-made reply, marked (``connect-failed`` / ``upstream-broke`` / ``error``)."""
        body = msg.encode()
        writer.write(conn.send(h11.Response(status_code=status, headers=[
            (b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode()),
            (MARK.encode(), mark), (b"connection", b"close")])))
        writer.write(conn.send(h11.Data(data=body)))
        writer.write(conn.send(h11.EndOfMessage()))
        await writer.drain()

    async def _relay(self, down: h11.Connection, writer: asyncio.StreamWriter, req: h11.Request, body: bytes,
                     target: Target) -> None:
        try:
            ur, uw = await asyncio.wait_for(
                asyncio.open_connection(target.host, target.port,
                                        ssl=self._ssl_context() if target.scheme == "https" else None,
                                        server_hostname=target.host if target.scheme == "https" else None),
                self.connect_timeout)
        except Exception as e:
            target.broken = f"cannot connect to {target.host}:{target.port}: {e or type(e).__name__}"
            await self._reply_error(down, writer, 502, target.broken, b"connect-failed")
            return
        up = h11.Connection(h11.CLIENT)
        started = False
        default_port = 443 if target.scheme == "https" else 80
        host = target.host if target.port == default_port else f"{target.host}:{target.port}"
        headers = [(k, v) for k, v in req.headers if k not in HOP_BY_HOP and k != b"host"]
        headers = [(b"host", host.encode())] + headers + [(b"content-length", str(len(body)).encode()),
                                                           (b"connection", b"close")]
        try:
            uw.write(up.send(h11.Request(method=req.method, target=target.path.encode(), headers=headers)))
            if body:
                uw.write(up.send(h11.Data(data=body)))
            uw.write(up.send(h11.EndOfMessage()))
            await uw.drain()
            while True:
                ev = up.next_event()
                if ev is h11.NEED_DATA:
                    data = await asyncio.wait_for(ur.read(READ), self.idle_timeout)
                    up.receive_data(data)  # b"" = EOF; h11 raises if the body was incomplete
                    continue
                if isinstance(ev, h11.Response):
                    out = [(k, v) for k, v in ev.headers if k not in HOP_BY_HOP]
                    out += [(b"transfer-encoding", b"chunked"), (b"connection", b"close")]
                    writer.write(down.send(h11.Response(status_code=ev.status_code, headers=out, reason=ev.reason)))
                    started = True
                elif isinstance(ev, h11.InformationalResponse):
                    continue
                elif isinstance(ev, h11.Data):
                    writer.write(down.send(h11.Data(data=bytes(ev.data))))
                    await writer.drain()
                elif isinstance(ev, (h11.EndOfMessage, h11.ConnectionClosed)):
                    break
        except Exception as e:
            target.broken = f"upstream connection broke: {e or type(e).__name__}"
            if not started:
                await self._reply_error(down, writer, 502, target.broken, b"upstream-broke")
                return
        finally:
            uw.close()
        if down.our_state is h11.SEND_BODY:
            writer.write(down.send(h11.EndOfMessage()))
        await writer.drain()
