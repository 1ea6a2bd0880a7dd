"""A scripted upstream model server on loopback for end-to-end tests.

Each request pops the next scripted reply (or repeats the last one), or, when a
``responder`` is set, gets the reply it chooses for that request: status, headers and a
list of body pieces written with delays between them, chunked (HTTP/1.1) or
close-delimited, or cut off mid-stream; or a reset before any reply byte, or a body shorter
than its content-length. Every request is recorded (method, path, headers,
body), and the time each piece was written is kept so tests can prove streaming.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=lambda: {"content-type": "application/json"})
    pieces: list[bytes] = field(default_factory=list)
    delay: float = 0.0  # seconds between pieces
    framing: str = "length"  # length | chunked | close
    die_after: int | None = None  # close the socket abruptly after this many pieces
    short_by: int = 0  # "length" framing: declare this many bytes more than sent, then close

    @classmethod
    def reset(cls) -> "Reply":
        """Read the request, then reset the connection before any reply byte."""
        return cls(framing="reset")

    @classmethod
    def truncated(cls, obj, missing: int = 10) -> "Reply":
        """A JSON reply whose content-length promises ``missing`` bytes more than it sends
        before the connection closes."""
        return cls(200, {"content-type": "application/json"}, [json.dumps(obj).encode()], short_by=missing)

    @classmethod
    def json(cls, obj, status: int = 200) -> "Reply":
        return cls(status, {"content-type": "application/json"}, [json.dumps(obj).encode()])

    @classmethod
    def sse(cls, raw: bytes | list[bytes], delay: float = 0.0, framing: str = "chunked", die_after: int | None = None) -> "Reply":
        if isinstance(raw, bytes):
            pieces = [e + b"\n\n" for e in raw.replace(b"\r\n", b"\n").split(b"\n\n") if e.strip()]
        else:
            pieces = raw
        return cls(200, {"content-type": "text/event-stream", "cache-control": "no-cache"}, pieces, delay, framing, die_after)


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float
    piece_times: list[float] = field(default_factory=list)

    def json(self):
        return json.loads(self.body)


class Upstream:
    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.requests: list[Recorded] = []
        self.responder = None  # Callable[[Recorded], Reply]: when set, it answers instead of the script
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):  # quiet
                pass

            def do_GET(self):
                self._handle()

            def do_POST(self):
                self._handle()

            def _handle(self):
                n = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(n) if n else b""
                rec = Recorded(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body, time.time())
                with outer._lock:
                    outer.requests.append(rec)
                    responder = outer.responder
                if responder is not None:  # a reply chosen by what was asked (concurrent clients)
                    self._send(responder(rec), rec)
                    return
                with outer._lock:
                    if outer.replies:
                        reply = outer.replies.pop(0) if len(outer.replies) > 1 else outer.replies[0]
                    else:
                        reply = Reply.json({"error": "no reply scripted"}, 500)
                self._send(reply, rec)

            def _send(self, reply: Reply, rec: Recorded):
                if reply.framing == "reset":
                    self._die()
                    return
                self.send_response(reply.status)
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                if reply.framing == "length":
                    body = b"".join(reply.pieces)
                    self.send_header("content-length", str(len(body) + reply.short_by))
                    self.end_headers()
                    self.wfile.write(body)
                    self.wfile.flush()
                    rec.piece_times.append(time.time())
                    if reply.short_by:
                        self.close_connection = True
                    return
                if reply.framing == "chunked":
                    self.send_header("transfer-encoding", "chunked")
                else:
                    self.send_header("connection", "close")
                    self.close_connection = True
                self.end_headers()
                self.wfile.flush()
                for i, p in enumerate(reply.pieces):
                    if reply.die_after is not None and i >= reply.die_after:
                        self._die()
                        return
                    if i and reply.delay:
                        time.sleep(reply.delay)
                    data = b"%x\r\n%s\r\n" % (len(p), p) if reply.framing == "chunked" else p
                    try:
                        self.wfile.write(data)
                        self.wfile.flush()
                    except OSError:
                        return
                    rec.piece_times.append(time.time())
                if reply.framing == "chunked":
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()

            def _die(self):
                self.close_connection = True
                try:
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def script(self, *replies: Reply) -> None:
        with self._lock:
            self.replies = list(replies)
            self.requests.clear()

    def __enter__(self) -> "Upstream":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


_HELD: list[socket.socket] = []


def free_port() -> int:
    """A loopback port free now, for a server a test starts next (which may lose it to a race:
    retry where that matters)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def closed_port() -> int:
    """A loopback port with nothing listening, and that nothing else can take: the socket stays
    bound (never listening, so a connect is refused) for the life of the test process. A port
    merely closed again could be handed to the next listener or outgoing connection."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    _HELD.append(s)
    return s.getsockname()[1]
