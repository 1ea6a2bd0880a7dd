"""A loopback relay between mitmproxy and the endpoint of a routed turn.

Why: when an upstream dies in the middle of a chunked stream, mitmproxy fires `error` and
can write nothing more to the client (docs/dev/mitmproxy.md §4), so the client would see a torn
connection instead of an error in its own protocol. Routed flows therefore go
mitmproxy → this relay → endpoint. The relay re-frames the endpoint's reply as a chunked
response that always ends cleanly; when the endpoint breaks, it ends the relayed body
early and notes why (``Target.broken``), so the adapter can end the turn with an error in
the client's protocol. An endpoint that refuses the connection becomes a 502 marked
``x-tokunseba-relay: connect-failed`` (``upstream-broke`` when it broke before its reply
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

Failover (turn/failover.py): a target registered with ``replan`` holds a reply whose status may
be a failure (protocols/failures.py ``may_be_failure``: 408, 429, 5xx, 529, and the 4xx a
context-window error comes with) until it is whole (at most ``HOLD_MAX`` bytes), and classifies
it; a failure, a connect or reset before the status line, or no status line within the
target's ``first_byte_s``, is handed to ``replan``, which returns the next attempt (URL,
headers, body: planned afresh by the adapter) or None (the client gets the failure as it
came: the held reply, or a marked 502). Nothing has reached mitmproxy meanwhile, so the
client sees one reply. Every other reply is relayed at once, as before.

While a turn runs, the relay watches mitmproxy's connection: when it closes (the client
went away), the endpoint's connection is closed at once.

Runs in mitmproxy's event loop. Cheap per chunk: the endpoint's side is an asyncio
``Protocol`` whose ``data_received`` frames the bytes for mitmproxy and writes them at once
(no task wake-up, no HTTP library per chunk: ``proxy/http1.py`` does the framing), writes wait
for mitmproxy only when its connection's buffer is above its high-water mark (the
endpoint's reading pauses meanwhile), and one timer per reply watches for silence (keep-
alives, ``idle_timeout``) instead of a timeout per read.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

from collections.abc import Awaitable, Callable

from . import http1
from .relay_pool import Key, Pool, UpstreamConn, UpstreamProtocol, target_key
from ..encoding import Decoding, EncodingError, is_identity
from ..protocols import may_be_failure
from ..turn import Broken, Failure, Replan
from ..sse import EventBoundary

log = logging.getLogger("tokunseba.relay")

MARK = "x-tokunseba-relay"
PREFIX = "/__tokunseba_relay/"
HOP_BY_HOP = {b"connection", b"keep-alive", b"transfer-encoding", b"content-length", b"upgrade",
              b"proxy-connection", b"te", b"trailer"}
READ = 65536
HIGH_WATER = 256 * 1024  # bytes waiting toward mitmproxy before the endpoint's reading pauses
HOLD_MAX = 256 * 1024  # a failure reply bigger than this is relayed as it is (no error says that much)
KEEPALIVE = b": tokunseba keep-alive\n\n"  # the relay's own keep-alive for a stalled SSE reply
_KEEPALIVE_CHUNK = http1.chunk(KEEPALIVE)


@dataclass
class Target:
    scheme: str
    host: str
    port: int
    path: str  # with query
    broken: Broken | None = None  # why the upstream reply was cut short, if it was
    conn: UpstreamConn | None = None  # opened for this turn by the request hook, not yet used
    keepalive: bool = True  # the relay may add its own keep-alive to a stalled SSE reply
    keepalives: int = 0  # how many it added
    # failover: the next attempt for a failure before the first byte (None: no failover)
    replan: Callable[[Failure, list[tuple[str, str]]], Awaitable[Replan | None]] | None = None
    first_byte_s: float | None = None  # no status line within this many seconds: a failure
    protocol: str | None = None  # the endpoint's protocol (how it words a context-window error)
    gone: bool = False  # mitmproxy's connection closed (the client went away)

    @property
    def key(self) -> Key:
        return (self.scheme, self.host, self.port)

    def retarget(self, plan: Replan) -> None:
        """The next attempt goes to ``plan.url``."""
        u = urlsplit(plan.url)
        self.scheme, self.host = u.scheme, u.hostname or ""
        self.port = u.port or (443 if u.scheme == "https" else 80)
        self.path = (u.path or "/") + (f"?{u.query}" if u.query else "")
        self.broken, self.conn = None, plan.conn
        self.keepalive, self.first_byte_s, self.protocol = plan.keepalive, plan.first_byte_s, plan.protocol
        if not plan.may_fail_over:
            self.replan = None


class Relay:
    def __init__(self, connect_timeout: float = 10.0, idle_timeout: float = 600.0,
                 ssl_context: ssl.SSLContext | None = None, pool_idle_s: float = 30.0,
                 keepalive_s: float = 10.0) -> None:
        self.targets: dict[str, Target] = {}
        self._random = b""  # random bytes for the next tokens (_token)
        self.pool = Pool(pool_idle_s)
        self.server: asyncio.base_events.Server | None = None
        self._listening: asyncio.Future[None] | None = None  # start()'s one listening step
        self.port = 0
        self.connect_timeout = connect_timeout
        self.idle_timeout = idle_timeout
        self.keepalive_s = keepalive_s  # silence before the relay's own keep-alive (0: never)
        self._ssl: ssl.SSLContext | None = ssl_context  # None: system-independent default (certifi)

    async def start(self) -> None:
        """Listen on a free loopback port, once for every caller (``running``, and a turn that came
        before it had ended: mitmproxy listens before the addons' ``running`` hooks are done)."""
        if self._listening is None:
            self._listening = asyncio.ensure_future(self._listen())
        await self._listening

    async def _listen(self) -> None:
        loop = asyncio.get_running_loop()
        def factory() -> asyncio.StreamReaderProtocol:
            return asyncio.StreamReaderProtocol(_WatchedReader(limit=2 ** 16, loop=loop), self._handle, loop=loop)

        self.server = await loop.create_server(factory, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    def stop(self) -> None:
        self._listening = None
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
        transport, proto = await asyncio.wait_for(
            asyncio.get_running_loop().create_connection(UpstreamProtocol, host, port,
                                                         ssl=self._ssl_context() if tls else None,
                                                         server_hostname=host if tls else None),
            self.connect_timeout if timeout is None else timeout)
        self.pool.opened += 1
        return UpstreamConn(key, transport, proto)

    def register(self, url: str, conn: UpstreamConn | None = None, keepalive: bool = True, *,
                 replan=None, first_byte_s: float | None = None, protocol: str | None = None) -> tuple[str, str]:
        """Register a real target URL (and the connection opened for it, if any; ``keepalive``:
        whether the relay may add its keep-alive to a stalled SSE reply; ``replan``: the
        failover callback; ``first_byte_s``: the endpoint's first_byte_timeout_s); returns
        (token, the URL mitmproxy should use)."""
        u = urlsplit(url)
        port = u.port or (443 if u.scheme == "https" else 80)
        token = self._token()
        self.targets[token] = Target(u.scheme, u.hostname or "", port,
                                     (u.path or "/") + (f"?{u.query}" if u.query else ""), conn=conn,
                                     keepalive=keepalive, replan=replan, first_byte_s=first_byte_s,
                                     protocol=protocol)
        return token, f"http://127.0.0.1:{self.port}{PREFIX}{token}"

    def _token(self) -> str:
        """An unguessable relay token (12 random bytes, hex): cut from random bytes fetched
        64 tokens at a time, so a turn costs no system call (which, releasing the GIL on
        mitmproxy's loop, may have to wait for another thread to give it back)."""
        if len(self._random) < 12:
            self._random = secrets.token_bytes(12 * 64)
        raw, self._random = self._random[:12], self._random[12:]
        return raw.hex()

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
        try:
            while True:  # mitmproxy keeps its connection to the relay alive between turns
                req = await _read_request(reader)
                if req is None:
                    return
                method, target_path, headers, body = req
                token = target_path.decode("ascii", "replace").removeprefix(PREFIX).split("/", 1)[0].split("?", 1)[0]
                target = self.targets.get(token)
                if target is None:
                    await _reply_error(writer, 404, "unknown relay token")
                    return
                if not await self._relay(reader, writer, method, headers, body, target):
                    return  # a relay-made reply (connection: close) or a broken exchange
                if (http1.header(headers, b"connection") or b"").lower() == b"close":
                    return
        except Exception as e:  # never let the relay crash the proxy's loop
            log.debug("relay: %s", e)
        finally:
            try:
                writer.close()
            except Exception:
                pass

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, method: bytes, headers: list,
                     body: bytes, target: Target) -> bool:
        """One turn through the relay, attempt after attempt while ``target.replan`` gives
        another; whether the connection to mitmproxy may carry another turn."""
        try:
            while True:
                outcome, failure, ex = await self._attempt(reader, writer, method, headers, body, target)
                if failure is None:
                    return outcome
                plan = None
                if target.replan is not None and not target.gone:
                    hdrs = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in ex.headers] if ex else []
                    try:
                        plan = await target.replan(failure, hdrs)
                    except Exception:  # the failure goes to the client as it came
                        log.exception("tokunseba: planning the next attempt failed")
                if plan is None or target.gone:
                    if plan is not None and plan.conn is not None:
                        self.pool.put(plan.conn)
                    return await self._deliver(writer, target, failure, ex)
                target.retarget(plan)
                headers, body = plan.headers, plan.body
        finally:
            if isinstance(reader, _WatchedReader):
                reader.on_gone = None

    async def _attempt(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, method: bytes, headers: list,
                       body: bytes, target: Target) -> tuple[bool, Failure | None, _Exchange | None]:
        """One attempt: (whether mitmproxy's connection may carry another turn, the failure
        to hand to ``replan`` if it failed before anything was relayed, its exchange)."""
        conn, target.conn = target.conn, None
        hold = target.replan is not None
        for attempt in range(2):
            if conn is None:
                try:
                    conn = self.pool.take(target.key) if attempt == 0 else None
                    conn = conn or await self._open(target.key)
                except Exception as e:
                    target.broken = Broken("unreachable", f"cannot connect to {target.host}:{target.port}: {e or type(e).__name__}")
                    return False, Failure("unreachable", target.broken.message), None
            ex = _Exchange(self, writer, target, conn, method, hold)
            _watch(reader, ex, target)
            outcome = await ex.run(_request_bytes(target, method, headers, body))
            if outcome == "keep":
                conn.uses += 1
                self.pool.put(conn)
                return True, None, ex
            if outcome == "held":
                failure = Failure.of(ex.status, _decoded(bytes(ex.held), http1.header(ex.headers, b"content-encoding")),
                                   target.protocol)
                if ex.held_reusable and not target.gone:
                    conn.uses += 1
                    self.pool.put(conn)
                else:
                    conn.close()
                if failure is None:  # not a failure (a plain 400): the client gets it now
                    return await self._deliver(writer, target, None, ex), None, ex
                return False, failure, ex
            conn.close()
            if outcome == "timeout":
                target.broken = Broken("timeout", f"no status line within {target.first_byte_s:g} s (first_byte_timeout_s)")
                return False, Failure("timeout", target.broken.message), None
            if outcome == "reset":
                return False, Failure("reset", target.broken.message if target.broken else "upstream connection broke"), None
            if outcome != "stale" or target.gone:
                return outcome == "done" and not target.gone, None, ex
            conn = None  # a reused connection the endpoint had closed: once more on a fresh one
        target.broken = target.broken or Broken("reset", "upstream connection broke: the endpoint closed the connection")
        if hold:
            return False, Failure("reset", target.broken.message), None
        await _reply_error(writer, 502, target.broken.message, b"upstream-broke")
        return False, None, None

    async def _deliver(self, writer: asyncio.StreamWriter, target: Target, failure: Failure | None,
                       ex: _Exchange | None) -> bool:
        """No (further) attempt: the client gets this one as it came: a held reply whole, or
        the relay's marked 502 (connect-failed / upstream-broke)."""
        if ex is not None and ex.held_head is not None:
            body = b"" if ex.bodyless else (http1.chunk(bytes(ex.held)) if ex.held else b"") + http1.LAST_CHUNK
            if writer.transport.is_closing() or target.gone:
                return False
            writer.write(ex.held_head + body)
            return True  # a whole reply went to mitmproxy: its connection may carry the next turn
        target.broken = target.broken or (Broken(failure.kind, failure.why) if failure else Broken("reset", "upstream connection broke"))
        mark = b"connect-failed" if failure is not None and failure.kind == "unreachable" else b"upstream-broke"
        if not writer.transport.is_closing():
            await _reply_error(writer, 502, target.broken.message, mark)
        return False


class _WatchedReader(asyncio.StreamReader):
    """The relay's reader of mitmproxy's connection: says at once when it ends (``on_gone``),
    without reading ahead (the next request on the connection stays unread)."""

    on_gone: Callable[[], None] | None = None

    def feed_eof(self) -> None:
        super().feed_eof()
        self._gone()

    def set_exception(self, exc) -> None:
        super().set_exception(exc)
        self._gone()

    def _gone(self) -> None:
        cb, self.on_gone = self.on_gone, None
        if cb is not None:
            cb()


def _watch(reader: asyncio.StreamReader, ex: _Exchange, target: Target) -> None:
    """When mitmproxy closes its connection to the relay (the client went away), end the
    exchange at once: the endpoint's connection is closed, not read to its end."""
    def gone() -> None:
        target.gone = True
        ex._broke(ConnectionResetError("the connection from mitmproxy closed (the client went away)"))

    if not isinstance(reader, _WatchedReader):
        return
    if reader.at_eof() or reader.exception() is not None:
        target.gone = True
        return
    reader.on_gone = gone


class _Exchange:
    """One request/reply on an endpoint connection, driven by its ``UpstreamProtocol`` protocol:
    each piece of the reply is framed and written to mitmproxy as it comes. ``run`` ends
    with "keep" (clean, the endpoint's connection reusable), "done" (the relayed reply
    ended cleanly toward mitmproxy — if the endpoint broke, ``Target.broken`` says why —
    and the endpoint's connection is not reusable), "failed" (a marked 502 made by the
    relay, ``connection: close``), "stale" (a reused connection failed before any reply byte)."""

    def __init__(self, relay: Relay, writer: asyncio.StreamWriter, target: Target, conn: UpstreamConn,
                 method: bytes, hold: bool = False) -> None:
        self.relay, self.writer, self.target, self.conn, self.method = relay, writer, target, conn, method
        self.hold = hold  # failover: hold a reply that may be a failure until it is whole
        self.held_head: bytes | None = None  # the held reply's head, as it would go to mitmproxy
        self.held = bytearray()  # its body so far (de-framed)
        self.held_reusable = False
        self.status = 0
        self.headers: list = []
        self.first_byte: asyncio.TimerHandle | None = None
        self.down = writer.transport
        self.loop = asyncio.get_running_loop()
        self.done: asyncio.Future[str] = self.loop.create_future()
        self.buf = bytearray()  # the reply's head, until complete
        self.body: http1.Body | None = None  # once the head is in
        self.reusable = True  # the endpoint's reply allows another on its connection
        self.got_bytes = False
        self.beat: EventBoundary | None = None  # an SSE reply the relay may keep alive: where its events end
        self.last = self.loop.time()  # when the endpoint's last bytes came
        self.mark = self.last  # the last keep-alive tick
        self.timer: asyncio.TimerHandle | None = None
        self.paused = False
        self.bodyless = False  # a reply that has no body (HEAD, 204, 304): no chunked framing either

    async def run(self, request: bytes) -> str:
        self.conn.proto.sink = self
        try:
            if not self.conn.alive():
                self.ended(None)
            else:
                self.conn.transport.write(request)
                self._schedule()
                if self.target.first_byte_s:
                    self.first_byte = self.loop.call_later(self.target.first_byte_s, self._no_first_byte)
            return await self.done
        finally:
            self.conn.proto.sink = None
            if self.timer is not None:
                self.timer.cancel()
            if self.first_byte is not None:
                self.first_byte.cancel()
            if self.paused:
                self._resume()

    # ---- what the endpoint sends
    def data(self, data: bytes) -> None:
        if self.done.done():  # bytes after the reply: the connection is not reusable
            self.conn.proto.dead = True
            return
        if self.down.is_closing():  # mitmproxy (its client) went away: stop reading the endpoint
            self._broke(ConnectionResetError("the connection from mitmproxy closed"))
            return
        self.got_bytes = True
        self.last = self.loop.time()
        out = b""  # what goes to mitmproxy for these bytes: one write (one send, one read there)
        try:
            body = self.body
            if body is None:
                self.buf += data
                head = self._head()
                if head is None:
                    return
                out = head
                body = self.body
                assert body is not None  # set with the head
                data, self.buf = bytes(self.buf), bytearray()
            piece = body.feed(data) if data else b""
            if self.held_head is not None:
                self._hold(piece)
                return
            if piece:
                if self.beat is not None:
                    self.beat.feed(piece)
                out += http1.chunk(piece)
            if body.done:
                self._finish("keep" if self.reusable and not body.trailing else "done", out)
                return
            if out:
                self.down.write(out)
            if self.down.get_write_buffer_size() > HIGH_WATER:
                self._pause()
        except Exception as e:
            if out:
                self._write(out)
            self._broke(e)

    def _head(self) -> bytes | None:
        """Read the reply's head once complete: the head to send mitmproxy; None while it is
        not complete (1xx heads skipped)."""
        while True:
            head = http1.split_head(self.buf)
            if head is None:
                return None
            line, headers, at = head
            parts = line.split(b" ", 2)
            if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
                raise http1.BadMessage(f"not an HTTP/1.x reply: {line[:80]!r}")
            status = int(parts[1])
            del self.buf[:at]
            if 100 <= status < 200:
                continue  # an interim reply (100 Continue): the real one follows
            if self.first_byte is not None:
                self.first_byte.cancel()
                self.first_byte = None
            self.status, self.headers = status, headers
            self.body = http1.body_for_reply(status, headers, self.method)
            conn_hdr = (http1.header(headers, b"connection") or b"").lower()
            self.reusable = parts[0] == b"HTTP/1.1" and b"close" not in conn_hdr
            reason = parts[2] if len(parts) > 2 else b""
            out = [b"HTTP/1.1 %d %s\r\n" % (status, reason)]
            out += [b"%s: %s\r\n" % (k, v) for k, v in headers if k not in HOP_BY_HOP]
            self.bodyless = self.method == b"HEAD" or status in (204, 304)  # no body, no framing (RFC 9112 §6.3)
            out.append(b"\r\n" if self.bodyless else b"transfer-encoding: chunked\r\n\r\n")
            if self.hold and may_be_failure(status):  # nothing goes on until it is whole and classified
                self.held_head = b"".join(out)
                return b""
            if self.target.keepalive and self.relay.keepalive_s > 0 and _keepable(headers):
                self.beat = EventBoundary()
                self._schedule()
            return b"".join(out)

    def ended(self, exc: Exception | None) -> None:
        """The endpoint's connection ended (``exc``: how, None for a clean close)."""
        if self.done.done():
            return
        self.reusable = False
        if self.body is not None:
            try:
                self.body.eof()
            except http1.Incomplete as e:
                self._broke(exc or e)
                return
            self._finish("done")
            return
        if not self.got_bytes and self.conn.uses > 0:
            self.done.set_result("stale")
            return
        self._broke(exc or ConnectionResetError("the endpoint closed the connection before replying"))

    # ---- a held reply (failover)
    def _hold(self, piece: bytes) -> None:
        self.held += piece
        body = self.body
        assert body is not None  # a reply is held once its head is in
        if body.done:
            self.held_reusable = self.reusable and not body.trailing
            self.done.set_result("held")
        elif len(self.held) > HOLD_MAX:  # too big for an error reply: relayed as it is, from here on
            head, self.held_head = self.held_head, None
            assert head is not None  # only a held reply is held
            self.down.write(head + http1.chunk(bytes(self.held)))
            self.held = bytearray()

    def _no_first_byte(self) -> None:
        """No status line within the endpoint's first_byte_timeout_s."""
        self.first_byte = None
        if not self.done.done() and self.body is None:
            self.reusable = False
            self.done.set_result("timeout")

    # ---- ends
    def _finish(self, outcome: str, before: bytes = b"") -> None:
        if self.held_head is not None and not self.done.done():  # a held reply that ended at its close
            self.held_reusable = False
            self.done.set_result("held")
            return
        if not self.done.done():
            self._write(before if self.bodyless else before + http1.LAST_CHUNK)
            self.done.set_result(outcome)

    def _write(self, data: bytes) -> None:
        if not self.down.is_closing():
            self.down.write(data)

    def _broke(self, e: BaseException) -> None:
        """The reply broke: a relayed body ends cleanly (the adapter says why); before any
        head, a marked 502."""
        if self.done.done():
            return
        if not self.got_bytes and self.conn.uses > 0 and not isinstance(e, TimeoutError):
            self.done.set_result("stale")
            return
        self.target.broken = Broken("reset", f"upstream connection broke: {e or type(e).__name__}")
        if self.held_head is not None:  # cut inside a held reply: held as far as it came
            self.held_reusable = False
            self.done.set_result("held")
            return
        if self.body is None:
            if self.hold:  # before the status line: a failure the adapter may fail over
                self.done.set_result("reset")
                return
            self._write(_error_bytes(502, self.target.broken.message, b"upstream-broke"))
            self.done.set_result("failed")
            return
        self._write(http1.LAST_CHUNK)
        self.done.set_result("done")

    # ---- silence: keep-alives and the idle timeout, one timer per reply (not one per read)
    def _schedule(self) -> None:
        """Wake at the next moment silence matters: the idle timeout, or (an SSE reply the
        relay keeps alive) ``keepalive_s`` after the endpoint's last bytes or the last tick.
        Bytes coming meanwhile only move ``last``: the tick finds it and sleeps again."""
        if self.timer is not None:
            self.timer.cancel()
        due = self.last + self.relay.idle_timeout
        ka = self.relay.keepalive_s
        if self.beat is not None and ka > 0:
            due = min(due, max(self.last, self.mark) + ka)
        self.timer = self.loop.call_at(due, self._tick)

    def _tick(self) -> None:
        self.timer = None
        if self.done.done():
            return
        now = self.loop.time()
        if self.down.is_closing():  # mitmproxy (its client) went away
            self._broke(ConnectionResetError("the connection from mitmproxy closed"))
            return
        if now >= self.last + self.relay.idle_timeout - 1e-3:
            self._broke(TimeoutError(f"no bytes from the endpoint for {self.relay.idle_timeout:g} s"))
            return
        ka = self.relay.keepalive_s
        if self.beat is not None and ka > 0 and now >= max(self.last, self.mark) + ka - 1e-3:
            if self.beat.at_boundary and not self.paused:
                self.down.write(_KEEPALIVE_CHUNK)
                self.target.keepalives += 1
            self.mark = now
        self._schedule()

    # ---- flow control toward mitmproxy
    def _pause(self) -> None:
        self.paused = True
        self.conn.transport.pause_reading()
        self.loop.create_task(self._drain())

    async def _drain(self) -> None:
        try:
            await self.writer.drain()
        except Exception as e:  # mitmproxy's connection went away
            self._broke(e)
        finally:
            self._resume()

    def _resume(self) -> None:
        if self.paused:
            self.paused = False
            try:
                self.conn.transport.resume_reading()
            except Exception:  # pragma: no cover - a closed transport
                pass


async def _read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes, list, bytes] | None:
    """The next request mitmproxy sends on its connection to the relay: (method, target,
    headers, body); None when it closed the connection."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    except asyncio.LimitOverrunError:
        raise http1.HeadTooLarge() from None
    split = http1.split_head(head)
    assert split is not None  # readuntil returned a whole head
    line, headers, _ = split
    parts = line.split(b" ")
    if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
        raise http1.BadMessage(f"not an HTTP/1.x request: {line[:80]!r}")
    framing = http1.Body.of(headers, request=True)
    if framing.done:
        return parts[0], parts[1], headers, b""
    cl = http1.header(headers, b"content-length")
    if cl is not None:
        return parts[0], parts[1], headers, await reader.readexactly(int(cl))
    pieces = []
    while not framing.done:  # a chunked request body
        data = await reader.read(READ)
        if not data:
            raise http1.Incomplete("mitmproxy closed the connection inside a request body")
        pieces.append(framing.feed(data))
    if framing.trailing:
        raise http1.BadMessage("bytes after a request (pipelining is not used by mitmproxy)")
    return parts[0], parts[1], headers, b"".join(pieces)


def _request_bytes(target: Target, method: bytes, headers: list, body: bytes) -> bytes:
    default_port = 443 if target.scheme == "https" else 80
    host = target.host if target.port == default_port else f"{target.host}:{target.port}"
    out = [b"%s %s HTTP/1.1\r\nhost: %s\r\n" % (method, target.path.encode(), host.encode())]
    out += [b"%s: %s\r\n" % (k, v) for k, v in headers if k not in HOP_BY_HOP and k != b"host"]
    out.append(b"content-length: %d\r\n\r\n" % len(body))
    out.append(body)
    return b"".join(out)


def _error_bytes(status: int, msg: str, mark: bytes) -> bytes:
    body = msg.encode()
    reason = {404: b"Not Found", 502: b"Bad Gateway"}.get(status, b"Error")
    return (b"HTTP/1.1 %d %s\r\ncontent-type: text/plain\r\ncontent-length: %d\r\n%s: %s\r\nconnection: close\r\n\r\n%s"
            % (status, reason, len(body), MARK.encode(), mark, body))


async def _reply_error(writer: asyncio.StreamWriter, status: int, msg: str, mark: bytes = b"error") -> None:
    """A relay-made reply, marked (``connect-failed`` / ``upstream-broke`` / ``error``)."""
    writer.write(_error_bytes(status, msg, mark))
    await writer.drain()


def _decoded(body: bytes, coding: bytes | None) -> bytes:
    """A held error body as its endpoint meant it (a client's accept-encoding may have asked
    for gzip); as it came when it cannot be decoded (``Failure.of`` then goes by status alone)."""
    if coding is None or is_identity(coding.decode("latin-1")):
        return body
    try:
        d = Decoding(coding.decode("latin-1"))
        return d.feed(body) + d.close()
    except EncodingError:
        return body


def _keepable(headers) -> bool:
    """An SSE reply the relay can add a comment to: event-stream, not content-encoded."""
    ctype = enc = b""
    for k, v in headers:
        if k == b"content-type":
            ctype = v.lower()
        elif k == b"content-encoding":
            enc = v.strip().lower()
    return ctype.startswith(b"text/event-stream") and enc in (b"", b"identity")
