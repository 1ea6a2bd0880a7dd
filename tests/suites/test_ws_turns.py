"""Responses over WebSocket, the pure parts of the turn: the server's events read as over HTTPS, the
connection's transcript (a routed turn between two provider turns) and each message's plan (the wire
format itself: tests/protocols/test_openai_responses_ws.py)."""

from __future__ import annotations

import json
import time

from tokunseba.protocols.openai_responses_ws import is_upgrade
from tokunseba.turn.ws_plan import plan_message
from tokunseba.turn.ws_transcript import Reply, Transcript, https_body
from tokunseba.protocols.openai_responses_ws import ServerEvents, as_sse
from tokunseba.turn.stream_watch import StreamWatch
from tests.support.ws_upstream import frame_events

UPGRADE = (("upgrade", "websocket"), ("connection", "Upgrade"))


def test_an_upgrade_of_get_responses_is_a_responses_websocket():
    assert is_upgrade(method="GET", host="api.openai.com", path="/v1/responses", headers=UPGRADE)
    assert not is_upgrade(method="GET", host="api.openai.com", path="/v1/responses", headers=())
    assert not is_upgrade(method="GET", host="example.com", path="/v1/responses", headers=UPGRADE)


def test_server_events_are_the_same_events_as_over_https():
    d = ServerEvents()
    evs = [ev for p in frame_events() for ev in d.feed(p)]
    assert [e.type for e in evs] == ["response.created", "response.output_text.delta", "response.completed"]
    assert [e.terminal for e in evs] == [False, False, True] and evs[0].response_id == "resp_1"
    w = StreamWatch("openai-responses")
    for e in evs:
        w.feed(as_sse(e))
    w.close()
    assert w.verdict() is None and w.usage is not None and w.usage.reported["input_tokens"] == 7


def test_a_turn_cut_before_its_end_is_not_complete():
    w = StreamWatch("openai-responses")
    for e in ServerEvents().feed(frame_events(2)[0]) + ServerEvents().feed(frame_events(2)[1]):
        w.feed(as_sse(e))
    w.close()
    assert w.verdict() is not None


def _create(input_items, prev=None, **kw):
    d = {"type": "response.create", "model": "gpt-5.5", "input": input_items, **kw}
    if prev:
        d["previous_response_id"] = prev
    return d


def test_transcript_carries_a_routed_turn_between_two_provider_turns():
    t = Transcript()
    u1, a1 = {"role": "user", "content": "one"}, {"type": "message", "role": "assistant", "content": "A1"}
    warm = _create([], generate=False)
    assert t.for_provider(warm) is None
    t.answered("resp_warm", t.conversation(warm), [], ours=False)
    # 1: at the provider, continuing its own warm-up: untouched
    first = _create([u1], prev="resp_warm")
    assert t.for_provider(first) is None and t.conversation(first) == [u1]
    t.answered("resp_p1", t.conversation(first), [a1], ours=False)
    # 2: routed elsewhere: carries the whole conversation, no previous id
    u2, a2 = {"role": "user", "content": "two"}, {"type": "message", "role": "assistant", "content": "A2"}
    second = _create([u2], prev="resp_p1")
    conv = t.conversation(second)
    assert conv == [u1, a1, u2]
    body = https_body(second, conv)
    assert "previous_response_id" not in body and body["input"] == conv and body["stream"] is True
    assert "type" not in body and "generate" not in body
    t.answered("resp_tk2", conv, [a2], ours=True)
    # 3: back at the provider, naming a response it never produced: the whole conversation instead
    u3 = {"role": "user", "content": "three"}
    third = _create([u3], prev="resp_tk2")
    sent = t.for_provider(third)
    assert sent is not None and "previous_response_id" not in sent
    assert sent["input"] == [u1, a1, u2, a2, u3] and sent["type"] == "response.create"


def test_an_unknown_previous_response_has_no_conversation():
    t = Transcript()
    assert t.conversation(_create([{"role": "user", "content": "x"}], prev="resp_gone")) is None
    assert t.for_provider(_create([], prev="resp_gone")) is None  # the provider may know it: untouched
    body = https_body(_create([], prev="resp_gone"), None)
    assert body["previous_response_id"] == "resp_gone"


def test_the_transcript_is_bounded():
    from tokunseba.turn.ws_transcript import MAX_RESPONSES

    t = Transcript()
    for i in range(MAX_RESPONSES + 5):
        t.answered(f"r{i}", [], [], ours=i % 2 == 0)
    assert len(t) == MAX_RESPONSES and t.conversation(_create([], prev="r0")) is None and not t.ours("r0")


def test_reply_collects_the_response_id_and_its_output():
    r = Reply()
    item = {"type": "function_call", "call_id": "call_1", "name": "exec", "arguments": "{}"}
    r.on({"type": "response.created", "response": {"id": "resp_9", "output": []}})
    r.on({"type": "response.output_item.done", "item": item})
    r.on({"type": "response.completed", "response": {"id": "resp_9", "output": []}})
    assert r.response_id == "resp_9" and r.output == [item]
    r2 = Reply()
    r2.on({"type": "response.completed", "response": {"id": "resp_8", "output": [item]}})
    assert r2.output == [item]


# ---------------------------------------------------------------- per-message decisions

RULES = """\
endpoints:
  claude:
    protocol: anthropic
    url: http://127.0.0.1:9/v1
    max_tokens: 1024
  elsewhere:
    protocol: openai-responses
    url: http://127.0.0.1:8/v1
routes:
  - name: to-claude
    when: {client: openai-responses, model: route-me}
    to: claude
    model: claude-sonnet-4-5
  - name: to-elsewhere
    when: {client: openai-responses, model: retarget-me}
    to: elsewhere
"""


def _decide(doc: dict, transcript: Transcript | None = None, rules: str = RULES, *, endpoint_websocket: bool = True):
    from tokunseba.routing import EndpointHealth, load_rules_text
    from tokunseba.turn.failover import Capacity
    from tokunseba.turn.retries import RetryWatch
    from tokunseba.turn.ws_plan import carrier, plan_message

    t = transcript if transcript is not None else Transcript()
    planning, conversation = plan_message(doc, t, host="api.openai.com", port=443, path="/v1/responses",
                                          headers=_Headers([("authorization", "Bearer sk-client")]),
                                          rules=load_rules_text(rules), health=EndpointHealth(), capacity=Capacity(),
                                          provider_hosts={}, keeper=None)
    assert planning is not None
    planning.next()
    turn = planning.turn(env={}, retries=RetryWatch(), peer="127.0.0.1", access=(False, False))
    return turn, carrier(turn, conversation_known=conversation is not None, endpoint_websocket=endpoint_websocket)


class _Headers(list):
    def items(self, multi: bool = False):
        return list(self)


def test_a_message_no_rule_takes_stays_at_the_provider():
    from tokunseba.turn.ws_plan import PROVIDER

    turn, goes = _decide(_create([{"role": "user", "content": "hi"}]))
    assert goes == PROVIDER and turn.outcome == "pass_through" and turn.requested_model == "gpt-5.5"
    assert turn.client_protocol == "openai-responses" and turn.stream


def test_a_message_routed_to_another_protocol_goes_over_https_with_the_whole_conversation():
    from tokunseba.turn.ws_plan import HTTPS

    t = Transcript()
    u1, a1 = {"role": "user", "content": "first words"}, {"type": "message", "role": "assistant",
                                                          "content": [{"type": "output_text", "text": "A1"}]}
    t.answered("resp_p1", [u1], [a1], ours=False)
    turn, goes = _decide(_create([{"role": "user", "content": "second"}], prev="resp_p1", model="route-me"), t)
    assert goes == HTTPS and turn.outcome == "translated" and turn.target_protocol == "anthropic"
    sent = json.loads(turn.body)
    assert json.dumps(sent["messages"]).count("first words") == 1 and "A1" in json.dumps(sent["messages"])
    assert turn.set_headers.get("authorization") is None or "sk-client" not in turn.set_headers["authorization"]


def test_a_message_retargeted_to_a_responses_endpoint_goes_over_its_websocket_unless_it_has_none():
    from tokunseba.turn.ws_plan import ENDPOINT_WS, HTTPS

    doc = _create([{"role": "user", "content": "x"}], model="retarget-me")
    turn, goes = _decide(doc)
    assert goes == ENDPOINT_WS and turn.outcome == "retargeted" and turn.url == "http://127.0.0.1:8/v1/responses"
    assert _decide(doc, endpoint_websocket=False)[1] == HTTPS


def test_a_refused_message_and_a_routed_one_without_its_conversation_are_answered_here():
    from tokunseba.turn.ws_plan import HERE

    turn, goes = _decide(_create([], model="nobody"), rules="unmatched: refuse\n" + RULES)
    assert goes == HERE and turn.outcome == "refused" and turn.local is not None and turn.local.status == 400
    turn, goes = _decide(_create([], prev="resp_unknown", model="retarget-me"))
    assert goes == HERE and turn.outcome == "retargeted"  # planned, but it cannot be carried whole


def test_an_unknown_previous_response_keeps_a_translated_route_off_as_over_https():
    from tokunseba.turn.ws_plan import PROVIDER

    turn, goes = _decide(_create([], prev="resp_unknown", model="route-me"))
    assert goes == PROVIDER and any(k == "route_refused" and "previous_response_id" in d["reason"]
                                    for k, d in turn.events)


def test_a_failed_response_is_judged_an_error_as_over_https():
    failed = json.dumps({"type": "response.failed", "response": {"id": "resp_f", "status": "failed", "output": [],
                                                                 "error": {"code": "server_error", "message": "boom"}}})
    evs = ServerEvents().feed(frame_events(1)[0]) + ServerEvents().feed(failed.encode())
    assert evs[-1].terminal and evs[-1].failure() is None  # not an ``error`` event: the watch judges it
    w = StreamWatch("openai-responses")
    for e in evs:
        w.feed(as_sse(e))
    w.close()
    assert w.verdict() is not None and "boom" in w.verdict()


def test_a_chatgpt_login_session_over_websocket_is_seen_too():
    from tokunseba.routing import EndpointHealth, load_rules_text
    from tokunseba.turn.failover import Capacity
    from tokunseba.turn.ws_plan import plan_message

    assert is_upgrade(method="GET", host="chatgpt.com", path="/backend-api/codex/responses",
                                  headers=UPGRADE)
    planning, _ = plan_message(_create([{"role": "user", "content": "hi"}]), Transcript(), host="chatgpt.com",
                               port=443, path="/backend-api/codex/responses", headers=_Headers(),
                               rules=load_rules_text("routes: []\n"), health=EndpointHealth(), capacity=Capacity(),
                               provider_hosts={}, keeper=None)
    assert planning is not None and planning.prep.det.protocol == "openai-responses"


class _Fields(list):
    """A message's upgrade headers as the WebSocket part hands them (mitmproxy's Headers: items and fields)."""

    def items(self, multi: bool = False):
        return list(self)

    @property
    def fields(self):
        return tuple((k.encode(), v.encode()) for k, v in self)


def test_a_websocket_turn_reads_its_accounts_subscription_windows_as_an_https_turn_does():
    """The quota predicate (issue 42) on a Codex turn sent as a WebSocket message: the ChatGPT
    account's primary window read 85% used in a reply, so the turn goes to the rule's endpoint;
    another account's turn stays with its provider."""
    from tokunseba.protocols.limits import read_windows
    from tokunseba.routing import EndpointHealth, load_rules_text
    from tokunseba.routing.quota import QuotaBoard, account_of
    from tokunseba.turn.failover import Capacity

    rules = load_rules_text("endpoints:\n  spare: {protocol: openai-responses, url: 'http://127.0.0.1:9/v1'}\n"
                            "routes:\n  - {name: near-limit, when: {client: openai-responses, quota: {above: 0.8}},"
                            " to: spare}\n", "r.yaml")
    now = time.time()
    board = QuotaBoard()
    mine = _Fields([("authorization", "Bearer tok-mine"), ("chatgpt-account-id", "acct-mine")])
    theirs = _Fields([("authorization", "Bearer tok-theirs"), ("chatgpt-account-id", "acct-theirs")])
    board.seen(account_of("chatgpt.com", mine), read_windows({
        "x-codex-primary-used-percent": "85", "x-codex-primary-window-minutes": "300",
        "x-codex-primary-reset-at": str(int(now) + 3600)}, now), now)
    doc = {"type": "response.create", "model": "gpt-5.5", "input": [{"role": "user", "content": "hi"}]}

    def planned(headers):
        planning, _ = plan_message(doc, Transcript(), host="chatgpt.com", port=443, path="/backend-api/codex/responses",
                                   headers=headers, rules=rules, health=EndpointHealth(), capacity=Capacity(),
                                   provider_hosts={}, keeper=None, quota=board)
        assert planning is not None
        ep, _slot = planning.next()
        return ep

    assert planned(mine) is not None and planned(mine).name == "spare"
    assert planned(theirs) is None  # its own account's windows: none seen, the predicate does not hold
