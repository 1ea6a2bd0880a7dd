"""provider_reach: connecting to a pass-through turn's provider host before mitmproxy does
(real loopback sockets), and the reason said in plain words."""

from __future__ import annotations

import asyncio
import socket
import ssl

from tokunseba.proxy.provider_reach import (
    Reach,
    Unreachable,
    answer_unreachable,
    describe,
)
from tokunseba.turn.planner import say_endpoint_unreachable
from tokunseba.turn.plan import prepare_request, build_turn, decide_request
from tokunseba.routing import load_rules


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_a_name_that_does_not_resolve_is_said_as_such():
    try:
        socket.getaddrinfo(None, None)  # fails in the C library: no query leaves the machine
    except socket.gaierror as e:
        bad = describe(e, "api.anthropic.com", 443, 10)
    assert (bad.kind, bad.status) == ("dns", 502)
    assert bad.reason == "the name does not resolve (Name or service not known)"
    assert bad.message() == ("tokunseba: cannot reach api.anthropic.com:443: the name does not resolve "
                             "(Name or service not known); the turn was not sent")


def test_reasons_in_plain_words():
    assert describe(ConnectionRefusedError(111, "refused"), "h", 1, 10).reason == "connection refused"
    t = describe(TimeoutError(), "h", 1, 2.5)
    assert (t.kind, t.status, t.reason) == ("timeout", 504, "no connection within 2.5 s")
    assert describe(ssl.SSLError(1, "WRONG_VERSION_NUMBER"), "h", 1, 1).kind == "tls"
    assert describe(UnicodeError("label too long"), "h", 1, 1).kind == "dns"


def test_message_names_the_asked_host_and_where_it_was_sought():
    bad = Unreachable("127.0.0.1", 4000, "refused", "connection refused")
    assert bad.message("api.openai.com", "tk-1") == ("tokunseba: cannot reach api.openai.com (at 127.0.0.1:4000): "
                                                     "connection refused; the turn was not sent (request tk-1)")
    assert bad.message("127.0.0.1") == "tokunseba: cannot reach 127.0.0.1:4000: connection refused; the turn was not sent"


def test_refused_then_fresh_after_an_answer_then_checked_again_after_forget():
    async def go():
        r = Reach()
        port = _closed_port()
        bad = await r.check("127.0.0.1", port, tls=False, ssl_context=None, timeout=2)
        assert bad is not None and bad.kind == "refused" and r.checks == 1
        r.answered("127.0.0.1", port)  # a turn to it got a reply: not checked again while fresh
        assert await r.check("127.0.0.1", port, tls=False, ssl_context=None, timeout=2) is None
        assert r.checks == 1
        r.forget("127.0.0.1", port)
        assert (await r.check("127.0.0.1", port, tls=False, ssl_context=None, timeout=2)).kind == "refused"
        assert r.checks == 2

    asyncio.run(go())


def test_concurrent_checks_of_one_host_share_one_connect_and_a_good_one_is_remembered():
    async def go():
        accepted = []
        server = await asyncio.start_server(lambda rd, wr: (accepted.append(1), wr.close()), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        r = Reach()
        got = await asyncio.gather(*[r.check("127.0.0.1", port, tls=False, ssl_context=None, timeout=2)
                                     for _ in range(5)])
        assert got == [None] * 5 and r.checks == 1
        assert await r.check("127.0.0.1", port, tls=False, ssl_context=None, timeout=2) is None
        assert r.checks == 1 and r.fresh("127.0.0.1", port)
        server.close()
        await server.wait_closed()

    asyncio.run(go())


def test_a_tls_server_that_never_answers_times_out_as_a_504():
    async def go():
        silent = socket.create_server(("127.0.0.1", 0))
        try:
            bad = await Reach().check("127.0.0.1", silent.getsockname()[1], tls=True,
                                      ssl_context=ssl.create_default_context(), timeout=0.3)
        finally:
            silent.close()
        assert (bad.kind, bad.status, bad.reason) == ("timeout", 504, "no connection within 0.3 s")

    asyncio.run(go())


def test_answer_unreachable_answers_in_the_clients_protocol():
    rules = load_rules(None)
    prep = prepare_request(method="POST", host="generativelanguage.googleapis.com", port=443,
                           path="/v1beta/models/gemini-2.5-flash:generateContent", headers=[],
                           body=b'{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}')
    turn = build_turn(rules, prep, decide_request(rules, prep, lambda ep: True), env={})
    assert turn.action == "pass"
    answer_unreachable(turn, Unreachable("generativelanguage.googleapis.com", 443, "dns", "the name does not resolve"),
                       asked="generativelanguage.googleapis.com")
    assert (turn.action, turn.outcome, turn.local.status) == ("respond", "error", 502)
    body = turn.local.body.decode()
    assert '"status":"' in body.replace(" ", "") and "cannot reach generativelanguage.googleapis.com:443" in body
    assert turn.local.headers["x-tokunseba-request-id"] == turn.request_id
    assert turn.request_id in turn.error
    assert turn.events[-1][0] == "upstream_unreachable"


def test_an_unreachable_endpoint_the_route_answers_for_is_named_with_its_host_and_why(tmp_path):
    rules_file = tmp_path / "r.yaml"
    rules_file.write_text("endpoints:\n  local:\n    protocol: openai\n    url: http://127.0.0.1:9/v1\n"
                          "routes:\n  - name: all-local\n    to: local\n    on_unreachable: error\n")
    rules = load_rules(str(rules_file))
    prep = prepare_request(method="POST", host="api.anthropic.com", port=443, path="/v1/messages", headers=[],
                           body=b'{"model":"claude-haiku-4-5","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}')
    turn = build_turn(rules, prep, decide_request(rules, prep, lambda ep: False), env={})
    assert turn.outcome == "error" and turn.local.status == 503
    say_endpoint_unreachable(turn, {"127.0.0.1:9": "connection refused"})
    assert turn.error == ("route all-local: endpoint local is unreachable (on_failure: error): "
                          "127.0.0.1:9: connection refused")
    body = turn.local.body.decode()
    assert "127.0.0.1:9: connection refused; the turn was not sent (request " + turn.request_id in body
    assert turn.local.headers["x-tokunseba-request-id"] == turn.request_id
