"""The loopback relay for translated flows (proxy/relay.py), driven with raw HTTP/1.1 over
asyncio: a reply relayed as chunked, an endpoint that refuses the connection (502 marked
for the adapter), and an endpoint dying mid-body (the relayed body still ends cleanly and
the target records why); failover: a held 503 or context-window error (gzip too) handed to
replan and the next attempt relayed as the one reply, a plain 400 and a failure with no next
attempt delivered as they came."""

from __future__ import annotations

import asyncio

import pytest

from tokunseba.proxy.relay import MARK, Relay, Replan

from tests.support.upstream import closed_port


async def _serve(handler) -> tuple[asyncio.base_events.Server, int]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def _read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    n = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            n = int(line.split(b":")[1])
    return head + (await reader.readexactly(n) if n else b"")


async def _ask(relay_url: str, body: bytes = b'{"x":1}') -> bytes:
    port = int(relay_url.split(":")[2].split("/")[0])
    path = relay_url.split(str(port), 1)[1]
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(b"POST %s HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\nconnection: close\r\n"
            b"content-length: %d\r\n\r\n%s" % (path.encode(), len(body), body))
    await w.drain()
    data = await asyncio.wait_for(r.read(), 10)
    w.close()
    return data


def _dechunk(raw: bytes) -> tuple[bytes, bytes]:
    head, _, rest = raw.partition(b"\r\n\r\n")
    body = b""
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            return head, body
        body, rest = body + rest[:size], rest[size + 2:]
    raise AssertionError("chunked body did not end with a last chunk")


async def test_relays_reply_as_chunked_and_forwards_the_request():
    seen = []

    async def upstream(reader, writer):
        seen.append(await _read_request(reader))
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: 12\r\n\r\ndata: hi\n\n..")
        await writer.drain()
        writer.close()

    server, port = await _serve(upstream)
    relay = Relay()
    await relay.start()
    try:
        token, url = relay.register(f"http://127.0.0.1:{port}/v1/chat/completions?x=1")
        raw = await _ask(url)
        head, body = _dechunk(raw)
        assert head.startswith(b"HTTP/1.1 200") and b"transfer-encoding: chunked" in head.lower()
        assert body == b"data: hi\n\n.."
        req = seen[0]
        assert req.startswith(b"POST /v1/chat/completions?x=1 HTTP/1.1\r\n")
        assert f"host: 127.0.0.1:{port}".encode() in req.lower() and req.endswith(b'{"x":1}')
        target = relay.finish(token)
        assert target is not None and target.broken is None
    finally:
        relay.stop()
        server.close()


async def test_refused_connection_is_a_marked_502():
    relay = Relay()
    await relay.start()
    try:
        token, url = relay.register(f"http://127.0.0.1:{closed_port()}/v1/chat/completions")
        raw = await _ask(url)
        assert raw.startswith(b"HTTP/1.1 502")
        assert f"{MARK}: connect-failed".encode() in raw.lower()
        assert relay.finish(token).broken.message.startswith("cannot connect")
    finally:
        relay.stop()


async def test_endpoint_dying_mid_body_still_ends_the_relayed_body_cleanly():
    async def upstream(reader, writer):
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                     b"a\r\ndata: one\n\r\n")
        await writer.drain()
        writer.transport.abort()  # reset, no last chunk

    server, port = await _serve(upstream)
    relay = Relay()
    await relay.start()
    try:
        token, url = relay.register(f"http://127.0.0.1:{port}/v1/chat/completions")
        head, body = _dechunk(await _ask(url))
        assert head.startswith(b"HTTP/1.1 200") and body == b"data: one\n"
        assert "broke" in relay.finish(token).broken.message
    finally:
        relay.stop()
        server.close()


async def test_unknown_token_is_404():
    relay = Relay()
    await relay.start()
    try:
        raw = await _ask(f"http://127.0.0.1:{relay.port}/__tokunseba_relay/nope")
        assert raw.startswith(b"HTTP/1.1 404")
    finally:
        relay.stop()


@pytest.mark.parametrize("url,host,port,path", [
    ("https://api.openai.com/v1/chat/completions", "api.openai.com", 443, "/v1/chat/completions"),
    ("http://127.0.0.1:8000/v1/messages?beta=true", "127.0.0.1", 8000, "/v1/messages?beta=true"),
])
def test_register_parses_targets(url, host, port, path):
    b = Relay()
    token, relay = b.register(url)
    t = b.targets[token]
    assert (t.host, t.port, t.path) == (host, port, path) and relay.endswith(token)


async def test_https_endpoint_verified_with_the_given_context(tmp_path):
    """TLS to an https endpoint: trusted through the context mitmproxy's ssl options build,
    refused (a marked 502, never a silent downgrade) when the certificate is not trusted."""
    import ssl
    import subprocess

    key, cert = tmp_path / "k.pem", tmp_path / "c.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)

    async def upstream(reader, writer):
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(upstream, "127.0.0.1", 0, ssl=server_ctx)
    port = server.sockets[0].getsockname()[1]
    trusted = Relay(ssl_context=ssl.create_default_context(cafile=str(cert)))
    default = Relay()
    await trusted.start()
    await default.start()
    try:
        _, url = trusted.register(f"https://127.0.0.1:{port}/v1/chat/completions")
        head, body = _dechunk(await _ask(url))
        assert head.startswith(b"HTTP/1.1 200") and body == b"{}"
        token, url = default.register(f"https://127.0.0.1:{port}/v1/chat/completions")
        raw = await _ask(url)
        assert raw.startswith(b"HTTP/1.1 502") and b"certificate" in raw.lower()
        assert default.finish(token).broken.message.startswith("cannot connect")
    finally:
        trusted.stop()
        default.stop()
        server.close()


async def _ask_keepalive_server(n_replies: int, accepted: list, close_after_first: bool = False,
                                reply: bytes | None = None):
    """An endpoint answering up to ``n_replies`` requests on each connection: ``reply``, or
    a small JSON object numbering the reply."""
    async def upstream(reader, writer):
        accepted.append(1)
        for i in range(n_replies):
            try:
                await _read_request(reader)
            except (asyncio.IncompleteReadError, ConnectionError):
                break
            writer.write(reply or b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 8\r\n\r\n"
                         b"{\"n\": %d}" % i)
            await writer.drain()
            if close_after_first:
                break
        writer.close()

    return await _serve(upstream)


async def test_endpoint_connections_are_kept_alive_and_reused():
    accepted: list = []
    server, port = await _ask_keepalive_server(5, accepted)
    relay = Relay()
    await relay.start()
    try:
        for i in range(3):
            conn = await relay.connect(f"http://127.0.0.1:{port}/v1")  # what the request hook does
            token, url = relay.register(f"http://127.0.0.1:{port}/v1/chat/completions", conn)
            _, body = _dechunk(await _ask(url))
            assert body == b'{"n": %d}' % i and relay.finish(token).broken is None
        assert len(accepted) == 1 and relay.pool.opened == 1 and relay.pool.reused == 2
    finally:
        relay.stop()
        server.close()


async def test_a_pooled_connection_the_endpoint_closed_is_replaced_once():
    accepted: list = []
    server, port = await _ask_keepalive_server(5, accepted, close_after_first=True)
    relay = Relay()
    await relay.start()
    try:
        for _ in range(3):
            token, url = relay.register(f"http://127.0.0.1:{port}/v1/chat/completions")
            head, body = _dechunk(await _ask(url))
            assert head.startswith(b"HTTP/1.1 200") and body == b'{"n": 0}'
            assert relay.finish(token).broken is None
        assert len(accepted) == 3
    finally:
        relay.stop()
        server.close()


async def test_an_unused_connection_goes_back_to_the_pool():
    accepted: list = []
    server, port = await _ask_keepalive_server(5, accepted)
    relay = Relay()
    await relay.start()
    try:
        conn = await relay.connect(f"http://127.0.0.1:{port}/v1")
        token, _ = relay.register(f"http://127.0.0.1:{port}/v1/chat/completions", conn)
        relay.finish(token)  # the flow never reached the relay (answered locally, or failed)
        assert await relay.connect(f"http://127.0.0.1:{port}/v1") is conn
    finally:
        relay.stop()
        server.close()


async def test_mitmproxy_keeps_its_connection_to_the_relay_between_turns():
    accepted: list = []
    server, port = await _ask_keepalive_server(5, accepted)
    relay = Relay()
    await relay.start()
    try:
        r, w = await asyncio.open_connection("127.0.0.1", relay.port)
        for i in range(3):  # three turns, one connection to the relay (as mitmproxy pools it)
            token, url = relay.register(f"http://127.0.0.1:{port}/v1/chat/completions")
            path = url.split(str(relay.port), 1)[1]
            w.write(b"POST %s HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 2\r\n\r\n{}" % path.encode())
            await w.drain()
            head = await r.readuntil(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200") and b"connection: close" not in head.lower()
            body = await r.readuntil(b"0\r\n\r\n")
            assert b'{"n": %d}' % i in body
            relay.finish(token)
        w.close()
        assert len(accepted) == 1  # and one connection to the endpoint
    finally:
        relay.stop()
        server.close()


async def test_a_reply_without_a_body_gets_no_chunked_framing():
    """A 204 has no body (RFC 9112 §6.3): relayed without transfer-encoding or a last chunk,
    so the next reply on mitmproxy's connection to the relay is read from its first byte."""
    accepted: list = []
    server, port = await _ask_keepalive_server(2, accepted, reply=b"HTTP/1.1 204 No Content\r\nx-a: 1\r\n\r\n")
    relay = Relay()
    await relay.start()
    try:
        r, w = await asyncio.open_connection("127.0.0.1", relay.port)
        for _ in range(2):
            token, url = relay.register(f"http://127.0.0.1:{port}/v1/x")
            path = url.split(str(relay.port), 1)[1]
            w.write(b"POST %s HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 2\r\n\r\n{}" % path.encode())
            await w.drain()
            head = await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), 10)
            assert head.startswith(b"HTTP/1.1 204") and b"x-a: 1" in head and b"transfer-encoding" not in head.lower()
            assert relay.finish(token).broken is None
        w.close()
        assert len(accepted) == 1
    finally:
        relay.stop()
        server.close()


async def test_the_endpoint_connection_closes_as_soon_as_mitmproxys_does():
    """The endpoint sends its head and one event, then thinks in silence; mitmproxy (its client
    gone) closes its connection to the relay: the endpoint sees its connection close at once,
    not at its next bytes or the keep-alive tick (issue 19)."""
    closed = asyncio.Event()

    async def upstream(reader, writer):
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                     b"a\r\ndata: hi\n\n\r\n")
        await writer.drain()
        await reader.read()  # b"" when the relay closes its side
        closed.set()

    server, port = await _serve(upstream)
    relay = Relay(keepalive_s=30)
    await relay.start()
    try:
        _, url = relay.register(f"http://127.0.0.1:{port}/v1/chat/completions")
        path = url.split(str(relay.port), 1)[1]
        r, w = await asyncio.open_connection("127.0.0.1", relay.port)
        w.write(b"POST %s HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 2\r\n\r\n{}" % path.encode())
        await w.drain()
        await asyncio.wait_for(r.readuntil(b"data: hi"), 10)
        w.close()
        await asyncio.wait_for(closed.wait(), 0.5)
    finally:
        relay.stop()
        server.close()


async def _failing_over(first_reply: bytes, *, replan_to_second: bool = True):
    """A target whose endpoint answers ``first_reply``; ``replan`` sends the turn to a second
    endpoint answering 200. Returns (the raw reply mitmproxy got, the failures replan saw,
    the bodies each endpoint got)."""
    got: dict[str, list[bytes]] = {"first": [], "second": []}

    def endpoint(name, reply):
        async def serve(reader, writer):
            got[name].append(await _read_request(reader))
            writer.write(reply)
            await writer.drain()
            writer.close()
        return serve

    s1, p1 = await _serve(endpoint("first", first_reply))
    s2, p2 = await _serve(endpoint("second", b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                                             b"content-length: 11\r\n\r\n{\"ok\":true}"))
    seen = []

    async def replan(failure, headers):
        seen.append((failure, headers))
        if not replan_to_second:
            return None
        return Replan(f"http://127.0.0.1:{p2}/v1/chat/completions", [(b"authorization", b"Bearer second-key")],
                      b'{"second":1}', protocol="openai")

    relay = Relay()
    await relay.start()
    try:
        _, url = relay.register(f"http://127.0.0.1:{p1}/v1/chat/completions", replan=replan, protocol="openai")
        raw = await _ask(url)
    finally:
        relay.stop()
        s1.close()
        s2.close()
    return raw, seen, got


async def test_a_held_503_fails_over_and_the_client_sees_one_reply():
    raw, seen, got = await _failing_over(b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
                                         b"retry-after: 7\r\ncontent-length: 19\r\n\r\n{\"error\":\"loading\"}")
    head, body = _dechunk(raw)
    assert head.startswith(b"HTTP/1.1 200") and body == b'{"ok":true}' and b"503" not in raw
    ((failure, headers),) = seen
    assert (failure.kind, failure.status) == ("status", 503) and ("retry-after", "7") in headers
    assert got["second"][0].endswith(b'{"second":1}') and b"authorization: Bearer second-key" in got["second"][0]


async def test_a_gzipped_context_window_error_is_read_and_failed_over():
    import gzip

    err = gzip.compress(b'{"error":{"message":"x","type":"exceed_context_size_error","code":400}}')
    raw, seen, _ = await _failing_over(b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n"
                                       b"content-encoding: gzip\r\ncontent-length: %d\r\n\r\n%s" % (len(err), err))
    assert _dechunk(raw)[1] == b'{"ok":true}'
    assert seen[0][0].kind == "context_window"


async def test_a_plain_400_goes_to_the_client_whole_and_replan_is_not_asked():
    err = b'{"error":"bad temperature"}'
    raw, seen, got = await _failing_over(b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n"
                                         b"content-length: %d\r\n\r\n%s" % (len(err), err))
    head, body = _dechunk(raw)
    assert head.startswith(b"HTTP/1.1 400") and body == err
    assert seen == [] and got["second"] == []


async def test_with_no_next_attempt_the_held_failure_reaches_the_client_as_it_came():
    raw, seen, got = await _failing_over(b"HTTP/1.1 529 Overloaded\r\ncontent-type: application/json\r\n"
                                         b"content-length: 12\r\n\r\n{\"x\":\"busy\"}", replan_to_second=False)
    head, body = _dechunk(raw)
    assert head.startswith(b"HTTP/1.1 529") and body == b'{"x":"busy"}' and len(seen) == 1 and got["second"] == []


async def test_start_listens_once_however_many_callers_wait_for_it():
    """The running hook and a turn that came before it had ended both start the relay: one
    listening socket, one port; after stop, start listens afresh."""
    relay = Relay()
    try:
        await asyncio.gather(relay.start(), relay.start(), relay.start())
        assert relay.port and relay.server is not None and len(relay.server.sockets) == 1
        first = relay.server
        await relay.start()
        assert relay.server is first
        relay.stop()
        await relay.start()
        assert relay.server is not None and relay.server is not first and relay.port
    finally:
        relay.stop()
