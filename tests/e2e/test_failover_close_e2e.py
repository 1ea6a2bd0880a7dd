"""A client that asks for ``Connection: close`` gets its connection closed once the turn's
reply is complete, whether the first attempt answered or the turn failed over to the next
route (the relay's retried reply must end the client's exchange like any other). The
client here reads to EOF, as an HTTP/1.0-style client does, instead of by the framing."""

from __future__ import annotations

import json
import socket
import ssl

import pytest

from .test_failover_e2e import FAILURES, start, stream_ok, whole_ok
from tests.support.upstream import Upstream

pytestmark = pytest.mark.e2e

READ_TIMEOUT = 15.0  # far below the 30 s a held connection would cost, far above a turn here


def post_until_eof(proxy, body: dict) -> bytes:
    """POST to api.anthropic.com through the proxy with Connection: close; everything until EOF."""
    raw = socket.create_connection(("127.0.0.1", proxy.port), timeout=READ_TIMEOUT)
    raw.sendall(b"CONNECT api.anthropic.com:443 HTTP/1.1\r\nHost: api.anthropic.com:443\r\n\r\n")
    head = b""
    while b"\r\n\r\n" not in head:
        head += raw.recv(4096)
    assert head.startswith(b"HTTP/1.1 200"), head
    tls = ssl.create_default_context(cafile=str(proxy.ca)).wrap_socket(raw, server_hostname="api.anthropic.com")
    data = json.dumps(body).encode()
    tls.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: api.anthropic.com\r\nContent-Type: application/json\r\n"
                b"x-api-key: sk-ant-client-DO-NOT-LEAK\r\nanthropic-version: 2023-06-01\r\nConnection: close\r\n"
                b"Content-Length: %d\r\n\r\n" % len(data) + data)
    got = b""
    try:
        while chunk := tls.recv(65536):
            got += chunk
    except TimeoutError:
        pytest.fail(f"the proxy kept the connection open {READ_TIMEOUT} s after the reply: {got[:300]!r}")
    except ssl.SSLError:
        pass  # closed without close_notify: still closed
    finally:
        tls.close()
    return got


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("fail_first", [False, True], ids=["answered", "failed-over"])
def test_connection_close_is_honoured_after_the_turn(tmp_path, fail_first, stream):
    ok = (lambda cid: stream_ok(cid)) if stream else whole_ok
    with Upstream() as small, Upstream() as big:
        proxy = start(tmp_path, small, big)
        try:
            if fail_first:
                small.script(FAILURES["503"]())
                big.script(ok("chatcmpl-big"))
            else:
                small.script(ok("chatcmpl-small"))
            got = post_until_eof(proxy, {"model": "claude-x", "max_tokens": 50, "stream": stream,
                                         "messages": [{"role": "user", "content": "hi"}]})
            assert got.startswith(b"HTTP/1.1 200"), got[:300]
            assert b"connection: close" in got.split(b"\r\n\r\n")[0].lower()
            assert (b"message_stop" if stream else b'"text":"ok"') in got.replace(b" ", b"")
            assert len(big.requests) == (1 if fail_first else 0)
        finally:
            proxy.stop()
