"""A passed-on WebSocket turn's events as its record reads them (proxy/ws_connection.py
``Waiting``): deltas kept as they came and read only once the turn ends; what the stream
watch makes of the whole is what it makes of the same events over HTTPS."""

from __future__ import annotations

import json

from tokunseba.protocols import openai_responses_ws as p_ws
from tokunseba.proxy.ws_connection import Waiting
from tokunseba.routing import EndpointHealth, load_rules_text
from tokunseba.turn.failover import Capacity
from tokunseba.turn.pump import Pump
from tokunseba.turn.retries import RetryWatch
from tokunseba.turn.ws_plan import plan_message
from tokunseba.turn.ws_transcript import Transcript

from tests.support.ws_upstream import text_events


class _Headers(list):
    def items(self, multi: bool = False):
        return list(self)


def _turn():
    doc = {"type": "response.create", "model": "gpt-5.5", "input": [{"role": "user", "content": "hi"}]}
    planning, _ = plan_message(doc, Transcript(), host="api.openai.com", port=443, path="/v1/responses",
                               headers=_Headers([("authorization", "Bearer sk-client")]),
                               rules=load_rules_text("routes: []\n"), health=EndpointHealth(), capacity=Capacity(),
                               provider_hosts={}, keeper=None)
    assert planning is not None
    planning.next()
    return planning.turn(env={}, retries=RetryWatch(), peer="127.0.0.1", access=(False, False))


def _frames(bad_delta: bool = False) -> list[bytes]:
    frames = [json.dumps(e).replace("{rid}", "resp_1").encode() for e in text_events(["one ", "two"])]
    if bad_delta:
        frames[4] = b'{"type": "response.output_text.delta", "delta": "cut'  # a delta that is not JSON
    return frames


def _as_hooks_read(frames: list[bytes]) -> Waiting:
    """The events as proxy/websocket.py ``_server_message`` hands them to the waiting turn."""
    w, server = Waiting(_turn(), []), p_ws.ServerEvents()
    for payload in frames:
        if p_ws.is_delta(payload) and not server.pending:
            w.delta(payload)
            continue
        for ev in server.feed(payload):
            w.reply.on(ev.doc)
            w.seen(ev)
    return w


def _over_https(frames: list[bytes]):
    """The same events read by a pump as an HTTPS reply's SSE."""
    pump = Pump(_turn())
    pump(b"".join(p_ws.as_sse(p_ws.server_event(f)) for f in frames))
    pump(b"")
    return pump.outcome(200)


def test_deltas_are_kept_as_they_came_and_the_outcome_is_the_https_one():
    w = _as_hooks_read(_frames())
    assert any(data.startswith(b'{"type": "response.output_text.delta"') for data in w.unread)  # untouched
    assert w.first_byte is not None and w.reply.response_id == "resp_1"
    pump = w.watched()
    assert pump is not None and not w.unread
    pump(b"")
    out, https = pump.outcome(200), _over_https(_frames())
    assert out.problem is None and https.problem is None
    assert out.usage is not None and out.usage.reported == https.usage.reported
    assert out.model == https.model == "gpt-5.5"


def test_a_delta_that_is_not_json_is_said_as_over_https():
    w = _as_hooks_read(_frames(bad_delta=True))
    pump = w.watched()
    assert pump is not None
    pump(b"")
    out, https = pump.outcome(200), _over_https(_frames(bad_delta=True))
    assert out.problem is not None and "not valid JSON" in out.problem
    assert out.problem == https.problem


def test_a_warm_up_keeps_nothing():
    w = Waiting(None, None)
    w.delta(_frames()[4])
    assert not w.unread and w.watched() is None
