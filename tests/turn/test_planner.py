"""The plan of one intercepted request as the object the adapter drives (turn/planner.py):
``Planning`` round after round, then ``Planning.begin``'s ``Started`` — the flow's state, the
request aimed, the client's own request kept — on a real mitmproxy flow."""

from __future__ import annotations

import json

from mitmproxy import http
from mitmproxy.test import tflow, tutils

from tokunseba.routing import EndpointHealth, load_rules_text
from tokunseba.turn.failover import Capacity
from tokunseba.turn.planner import Planning
from tokunseba.turn.retries import RetryWatch
from tokunseba.webview import CLIENT_KEY, ORIGINAL_KEY

RULES = """\
endpoints:
  local:
    protocol: openai
    url: http://127.0.0.1:8001/v1
    key_env: LOCAL_KEY
routes:
  - name: all
    to: local
"""
ENV = {"LOCAL_KEY": "sk-local-0001"}
BODY = json.dumps({"model": "claude-x", "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]}).encode()


def _flow(body: bytes = BODY, path: str = "/v1/messages") -> http.HTTPFlow:
    headers = [("host", "api.anthropic.com"), ("x-api-key", "sk-ant-client-0003"), ("anthropic-version", "2023-06-01"),
               ("content-type", "application/json"), ("user-agent", "claude-cli/2.1.197")]
    req = tutils.treq(scheme=b"https", host="api.anthropic.com", port=443, method=b"POST", path=path.encode(),
                      headers=http.Headers([(k.encode(), v.encode()) for k, v in headers]), content=body)
    return tflow.tflow(req=req)


def _planned(flow: http.HTTPFlow, rules=RULES):
    planning = Planning.of(flow.request, rules=load_rules_text(rules), health=EndpointHealth(), capacity=Capacity(),
                           provider_hosts={}, keeper=None)
    assert planning is not None
    ep, slot = planning.next()
    turn = planning.turn(env=ENV, retries=RetryWatch(), peer="127.0.0.1", access=(False, False),
                         connected=(ep, slot) if ep is not None else None)
    return planning, turn


def test_a_routed_turn_begins_is_aimed_through_the_relay_and_keeps_the_clients_request():
    flow = _flow()
    planning, turn = _planned(flow)
    assert not planning.counts and turn.action == "translate" and planning.slot is not None
    started = planning.begin(flow, turn, listener=None, client_close=False, now=5.0)
    state = started.state
    assert state.turn is turn and state.slot is planning.slot and state.attempt_at == 5.0 and state.chain is not None
    assert started.client_url == "https://api.anthropic.com/v1/messages" and started.keepalive
    assert flow.metadata["tokunseba.request_id"] == turn.request_id and flow.metadata[ORIGINAL_KEY].startswith("{")
    assert flow.metadata[CLIENT_KEY] == "claude-code" and turn.via == "proxy"
    started.aim(flow.request, (4321, "/tk-relay/abc"))
    assert (flow.request.host, flow.request.port, flow.request.path) == ("127.0.0.1", 4321, "/tk-relay/abc")
    assert flow.request.headers["authorization"] == "Bearer sk-local-0001" and "x-api-key" not in flow.request.headers
    assert json.loads(flow.request.content)["messages"]  # the translated body
    assert started.keep_original(flow)  # rewritten: the client's own request is what a replay sends
    assert started.client_headers["x-api-key"] == "sk-ant-client-0003"


def test_a_base_url_listener_marks_the_client_and_a_count_is_known_as_one():
    flow = _flow(path="/v1/messages/count_tokens")
    planning, turn = _planned(flow)
    assert planning.counts
    planning.begin(flow, turn, listener="api.anthropic.com", client_close=True, now=0.0)
    assert flow.metadata[CLIENT_KEY] == "claude-code (base URL)" and turn.via == "base_url"
