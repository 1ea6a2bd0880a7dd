"""A loopback relay between mitmproxy and the endpoint of a routed turn.

Why: when an upstream dies in the middle of a chunked stream, mitmproxy fires `error` and
can write nothing more to the client (mitmproxy.md §4), so the client would see a torn
connection instead of an error in its own protocol. Routed flows therefore go
mitmproxy → this relay → endpoint. The relay re-frames the endpoint's reply as a chunked
response that always ends cleanly; when the endpoint breaks, it ends the relayed body
early and notes why (``Target.broken``), so the adapter can end the turn with an error in
the client's protocol. An endpoint that refuses the connection becomes a 502 marked
``x-tokunseba-bridge: connect-failed`` (``upstream-broke`` when it broke before its reply
headers), which the adapter turns into an error in the client's protocol instead of
mitmproxy's HTML page.

Connections: the relay owns the connections to endpoints, a pool of keep-alive (and TLS)
connections per (scheme, host, port), each idle at most ``pool_idle_s``. ``connect(url)``
— called from the request hook — takes an idle one or opens one: the connect the turn
needs anyway, done early, so a refused connect is known before the turn is committed to
its route (passive health, endpoints.EndpointHealth) and the healthy path pays no extra
round trip. ``register(url, conn)`` hands that connection to the turn. A reused connection
that fails before any reply byte (the endpoint closed it while idle) is replaced by a fresh
one once. A reply that ends cleanly, with both sides willing, returns its connection to the
pool.

Keep-alives: when an SSE reply (``text/event-stream``, identity-encoded) has been silent
for ``keepalive_s`` seconds (0: never), the relay writes ``KEEPALIVE`` (an SSE comment) into
the relayed body — only at an event boundary (``sse.EventBoundary``), never inside an
unfinished event — and again after each further ``keepalive_s`` of silence, so a client's
read timeout does not fire while the endpoint is alive but slow. A translated turn's
decoder turns it into the client's keep-alive; a passed-on stream carries it as a comment.
``register(..., keepalive=False)`` turns it off for a turn whose client cannot skip a comment
(a Gemini client getting the stream unchanged). Silence longer than ``idle_timeout`` still
ends the turn.

Runs in mitmproxy's event loop (asyncio + h11, both already mitmproxy dependencies).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import ssl
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import h11

from .sse import EventBoundary

log = logging.getLogger("tokunseba.bridge")

MARK = "x-tokunseba-bridge"
PREFIX = "/__tokunseba_bridge/"
HOP_BY_HOP = {b"connection", b"keep-alive", b"transfer-encoding", b"content-length", b"upgrade",
              b"proxy-connection", b"te", b"trailer"}
READ = 65536
KEEPALIVE = b": tokunseba keep-alive\n\n"  # the relay's own keep-alive for a stalled SSE reply


Key = tuple[str, str, int]  # scheme, host, port


@dataclass(eq=False)
class UpstreamConn:
    """One connection to an endpoint, owned by the relay (idle in the pool, or lent to a turn)."""

    key: Key
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    uses: int = 0  # replies it has carried
    idle_since: float = field(default_factory=time.monotonic)

    def alive(self) -> bool:
        return not self.writer.is_closing() and not self.reader.at_eof() and self.reader.exception() is None

    def close(self) -> None:
        try:
            self.writer.close()
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


@dataclass
class Target:
    scheme: str
    host: str
    port: int
    path: str  # with query
    broken: str | None = None  # why the upstream reply was cut short, if it was
    conn: UpstreamConn | None = None  # opened for this turn by the request hook, not yet used
    keepalive: bool = True  # the relay may add its own keep-alive to a stalled SSE reply
    keepalives: int = 0  # how many it added

    @property
    def key(self) -> Key:
        return (self.scheme, self.host, self.port)


class Bridge:
    def __init__(self, connect_timeout: float = 10.0, idle_timeout: float = 600.0,
                 ssl_context: ssl.SSLContext | None = None, pool_idle_s: float = 30.0,
                 keepalive_s: float = 10.0) -> None:
        self.targets: dict[str, Target] = {}
        self.pool = Pool(pool_idle_s)
        self.server: asyncio.base_events.Server | None = None
        self.port = 0
        self.connect_timeout = connect_timeout
        self.idle_timeout = idle_timeout
        self.keepalive_s = keepalive_s  # silence before the relay's own keep-alive (0: never)
        self._ssl: ssl.SSLContext | None = ssl_context  # None: system-independent default (certifi)

    async def start(self) -> None:
        if self.server is None:
            self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
            self.port = self.server.sockets[0].getsockname()[1]

    def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None
        self.pool.close_all()

    async def connect(self, url: str, timeout: float | None = None) -> UpstreamConn:
        """A connection to ``url``'s endpoint: an idle pooled one, else a new one (TCP, and
        TLS for https). Raises OSError / TimeoutError / ssl.SSLError when it cannot connect."""
        key = target_key(url)
        return self.pool.take(key) or await self._open(key, timeout)

    async def _open(self, key: Key, timeout: float | None = None) -> UpstreamConn:
        scheme, host, port = key
        tls = scheme == "https"
        r, w = await asyncio.wait_for(
            asyncio.open_connection(host, port, ssl=self._ssl_context() if tls else None,
                                    server_hostname=host if tls else None),
            self.connect_timeout if timeout is None else timeout)
        self.pool.opened += 1
        return UpstreamConn(key, r, w)

    def register(self, url: str, conn: UpstreamConn | None = None, keepalive: bool = True) -> tuple[str, str]:
        """Register a real target URL (and the connection opened for it, if any; ``keepalive``:
        whether the relay may add its keep-alive to a stalled SSE reply); returns (token, the
        URL mitmproxy should use)."""
        u = urlsplit(url)
        port = u.port or (443 if u.scheme == "https" else 80)
        token = secrets.token_hex(12)
        self.targets[token] = Target(u.scheme, u.hostname or "", port,
                                     (u.path or "/") + (f"?{u.query}" if u.query else ""), conn=conn,
                                     keepalive=keepalive)
        return token, f"http://127.0.0.1:{self.port}{PREFIX}{token}"

    def finish(self, token: str) -> Target | None:
        target = self.targets.pop(token, None)
        if target is not None and target.conn is not None:  # the flow never reached the relay
            self.pool.put(target.conn)
            target.conn = None
        return target

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
            while True:  # mitmproxy keeps its connection to the relay alive between turns
                req, body = await self._read_request(down, reader)
                if req is None:
                    return
                token = req.target.decode("ascii", "replace").removeprefix(PREFIX).split("/", 1)[0].split("?", 1)[0]
                target = self.targets.get(token)
                if target is None:
                    await self._reply_error(down, writer, 404, "unknown relay token")
                    return
                await self._relay(down, writer, req, body, target)
                if down.our_state is not h11.DONE or down.their_state is not h11.DONE:
                    return  # a relay-made reply (connection: close) or a broken exchange
                down.start_next_cycle()
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
        conn, target.conn = target.conn, None
        for attempt in range(2):
            if conn is None:
                try:
                    conn = self.pool.take(target.key) if attempt == 0 else None
                    conn = conn or await self._open(target.key)
                except Exception as e:
                    target.broken = f"cannot connect to {target.host}:{target.port}: {e or type(e).__name__}"
                    await self._reply_error(down, writer, 502, target.broken, b"connect-failed")
                    return
            outcome = await self._exchange(down, writer, req, body, target, conn)
            if outcome == "keep":
                conn.uses += 1
                self.pool.put(conn)
                return
            conn.close()
            if outcome != "stale":
                return
            conn = None  # a reused connection the endpoint had closed: once more on a fresh one
        target.broken = target.broken or "upstream connection broke: the endpoint closed the connection"
        await self._reply_error(down, writer, 502, target.broken, b"upstream-broke")

    async def _exchange(self, down: h11.Connection, writer: asyncio.StreamWriter, req: h11.Request, body: bytes,
                        target: Target, conn: UpstreamConn) -> str:
        """One request/reply on ``conn``: "keep" (clean, reusable), "close" (done, or broken
        and said so), "stale" (a reused connection failed before any reply byte)."""
        up = h11.Connection(h11.CLIENT)
        started = False
        got_bytes = False
        default_port = 443 if target.scheme == "https" else 80
        host = target.host if target.port == default_port else f"{target.host}:{target.port}"
        headers = [(k, v) for k, v in req.headers if k not in HOP_BY_HOP and k != b"host"]
        headers = [(b"host", host.encode())] + headers + [(b"content-length", str(len(body)).encode())]
        ur, uw = conn.reader, conn.writer
        beat: EventBoundary | None = None  # an SSE reply the relay may keep alive: where its events end
        try:
            uw.write(up.send(h11.Request(method=req.method, target=target.path.encode(), headers=headers)))
            if body:
                uw.write(up.send(h11.Data(data=body)))
            uw.write(up.send(h11.EndOfMessage()))
            await uw.drain()
            while True:
                ev = up.next_event()
                if ev is h11.NEED_DATA:
                    data = await self._read_up(ur, beat, target, down, writer)
                    got_bytes = got_bytes or bool(data)
                    up.receive_data(data)  # b"" = EOF; h11 raises if the body was incomplete
                    continue
                if isinstance(ev, h11.Response):
                    out = [(k, v) for k, v in ev.headers if k not in HOP_BY_HOP]
                    out.append((b"transfer-encoding", b"chunked"))
                    writer.write(down.send(h11.Response(status_code=ev.status_code, headers=out, reason=ev.reason)))
                    started = True
                    if target.keepalive and self.keepalive_s > 0 and _keepable(ev.headers):
                        beat = EventBoundary()
                elif isinstance(ev, h11.InformationalResponse):
                    continue
                elif isinstance(ev, h11.Data):
                    chunk = bytes(ev.data)
                    if beat is not None:
                        beat.feed(chunk)
                    writer.write(down.send(h11.Data(data=chunk)))
                    await writer.drain()
                elif isinstance(ev, h11.EndOfMessage):
                    break
                elif isinstance(ev, h11.ConnectionClosed):
                    if not started:
                        raise ConnectionResetError("the endpoint closed the connection before replying")
                    break
        except Exception as e:
            if not got_bytes and conn.uses > 0 and not isinstance(e, asyncio.TimeoutError):
                return "stale"
            target.broken = f"upstream connection broke: {e or type(e).__name__}"
            if not started:
                await self._reply_error(down, writer, 502, target.broken, b"upstream-broke")
                return "close"
        if down.our_state is h11.SEND_BODY:
            writer.write(down.send(h11.EndOfMessage()))
        await writer.drain()
        reusable = (target.broken is None and up.our_state is h11.DONE and up.their_state is h11.DONE
                    and up.trailing_data == (b"", False))
        return "keep" if reusable else "close"

    async def _read_up(self, ur: asyncio.StreamReader, beat: EventBoundary | None, target: Target,
                       down: h11.Connection, writer: asyncio.StreamWriter) -> bytes:
        """The next bytes from the endpoint. While an SSE reply (``beat``) is silent, a
        keep-alive goes to mitmproxy every ``keepalive_s`` when the body stands at an event
        boundary; ``idle_timeout`` of silence raises TimeoutError."""
        if beat is None:
            return await asyncio.wait_for(ur.read(READ), self.idle_timeout)
        deadline = time.monotonic() + self.idle_timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise asyncio.TimeoutError()
            try:  # a cancelled StreamReader.read loses no bytes
                return await asyncio.wait_for(ur.read(READ), min(left, self.keepalive_s))
            except asyncio.TimeoutError:
                if deadline - time.monotonic() <= 0:
                    raise
            if beat.at_boundary:
                writer.write(down.send(h11.Data(data=KEEPALIVE)))
                await writer.drain()
                target.keepalives += 1


def _keepable(headers) -> bool:
    """An SSE reply the relay can add a comment to: event-stream, not content-encoded."""
    ctype = enc = b""
    for k, v in headers:
        if k == b"content-type":
            ctype = v.lower()
        elif k == b"content-encoding":
            enc = v.strip().lower()
    return ctype.startswith(b"text/event-stream") and enc in (b"", b"identity")
