"""Responses over WebSocket, the pure parts: what a client message is, the server's events read
from its messages whatever their fragments, SSE carried back as messages whatever its split,
and the connection's transcript (a routed turn between two provider turns)."""

from __future__ import annotations

import json
import time

from tokunseba.turn.plan import is_responses_websocket
from tokunseba.turn.ws_plan import plan_message
from tokunseba.turn.ws_transcript import Reply, Transcript, https_body
from tokunseba.protocols.openai_responses_ws import OTHER, TURN, WARMUP, ServerEvents, SseMessages, as_sse, read_client_message
from tokunseba.turn.stream_watch import StreamWatch

UPGRADE = (("upgrade", "websocket"), ("connection", "Upgrade"))


def test_an_upgrade_of_get_responses_is_a_responses_websocket():
    assert is_responses_websocket(method="GET", host="api.openai.com", path="/v1/responses", headers=UPGRADE)
    assert not is_responses_websocket(method="GET", host="api.openai.com", path="/v1/responses", headers=())
    assert not is_responses_websocket(method="GET", host="example.com", path="/v1/responses", headers=UPGRADE)


def test_client_messages():
    assert read_client_message(b'{"type":"response.create","generate":false,"input":[]}').kind == WARMUP
    turn = read_client_message(b'{"type":"response.create","model":"gpt-5.5","input":[]}')
    assert turn.kind == TURN and turn.doc["model"] == "gpt-5.5"
    assert read_client_message(b'{"type":"response.create","generate":true}').kind == TURN
    assert read_client_message(b'{"type":"session.update"}').kind == OTHER
    assert read_client_message(b"not json").kind == OTHER
    assert read_client_message(b"[1]").kind == OTHER


def _events(n: int = 3) -> list[bytes]:
    evs = [{"type": "response.created", "response": {"id": "resp_1", "output": []}},
           {"type": "response.output_text.delta", "delta": "h\u00e9llo\nthere"},
           {"type": "response.completed", "response": {"id": "resp_1", "output": [{"type": "message"}],
                                                       "usage": {"input_tokens": 7, "output_tokens": 2}}}]
    return [json.dumps(e, ensure_ascii=False).encode() for e in evs[:n]]


def test_server_events_never_depend_on_the_fragments_of_a_message():
    for payload in _events():
        whole = ServerEvents().feed(payload)
        assert len(whole) == 1 and whole[0].payload == payload
        for i in range(len(payload) + 1):  # every split in two
            d = ServerEvents()
            assert d.feed(payload[:i], end=False) == [] and d.pending == (i > 0)
            assert d.feed(payload[i:]) == whole
        for size in (1, 2, 5):  # and into many fragments
            d = ServerEvents()
            parts = [payload[k:k + size] for k in range(0, len(payload), size)]
            got = [ev for p in parts[:-1] for ev in d.feed(p, end=False)] + d.feed(parts[-1])
            assert got == whole


def test_server_events_are_the_same_events_as_over_https():
    d = ServerEvents()
    evs = [ev for p in _events() for ev in d.feed(p)]
    assert [e.type for e in evs] == ["response.created", "response.output_text.delta", "response.completed"]
    assert [e.terminal for e in evs] == [False, False, True] and evs[0].response_id == "resp_1"
    w = StreamWatch("openai-responses")
    for e in evs:
        w.feed(as_sse(e))
    w.close()
    assert w.verdict() is None and w.usage is not None and w.usage.reported["input_tokens"] == 7


def test_a_turn_cut_before_its_end_is_not_complete():
    w = StreamWatch("openai-responses")
    for e in ServerEvents().feed(_events(2)[0]) + ServerEvents().feed(_events(2)[1]):
        w.feed(as_sse(e))
    w.close()
    assert w.verdict() is not None


def test_sse_comes_back_as_one_message_per_event_whatever_its_split():
    sse = b"".join(b"event: x\ndata: " + p + b"\n\n" for p in _events()) + b": keep-alive\n\n"
    whole = SseMessages()
    want = whole.feed(sse) + whole.close()
    assert want == _events()
    for i in range(len(sse) + 1):
        m = SseMessages()
        assert m.feed(sse[:i]) + m.feed(sse[i:]) + m.close() == want
    m = SseMessages()
    assert [x for k in range(len(sse)) for x in m.feed(sse[k:k + 1])] + m.close() == want


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


def test_an_error_event_says_its_status_and_message():
    from tokunseba.protocols.openai_responses_ws import server_event

    ev = server_event(b'{"type":"error","status":429,"error":{"type":"rate_limit_error","message":"slow down"}}')
    assert ev.terminal and ev.failure() == (429, "slow down")
    assert server_event(b'{"type":"error","error":{}}').failure() == (500, "upstream error event")
    assert server_event(b'{"type":"response.completed","response":{"id":"r"}}').failure() is None


def test_a_delta_is_typed_from_its_first_bytes_and_the_rest_parsed():
    from tokunseba.protocols.openai_responses_ws import server_event

    for raw in (b'{"type":"response.output_text.delta","delta":"x"}', b'{"type": "response.output_text.delta"}'):
        ev = server_event(raw)
        assert ev.type == "response.output_text.delta" and ev.doc is None and not ev.terminal
    ev = server_event(b'{"type": "response.created", "response": {"id": "resp_2"}}')
    assert ev.doc is not None and ev.response_id == "resp_2"
    assert server_event(b'{"delta":"x","type":"response.output_text.delta"}').doc is not None  # other order: parsed


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
    evs = ServerEvents().feed(_events(1)[0]) + ServerEvents().feed(failed.encode())
    assert evs[-1].terminal and evs[-1].failure() is None  # not an ``error`` event: the watch judges it
    w = StreamWatch("openai-responses")
    for e in evs:
        w.feed(as_sse(e))
    w.close()
    assert w.verdict() is not None and "boom" in w.verdict()


def test_a_delta_is_known_from_its_first_bytes():
    from tokunseba.protocols.openai_responses_ws import delta_type

    assert delta_type(b'{"type":"response.output_text.delta","delta":"a"}') == b"response.output_text.delta"
    assert delta_type(b'{"type": "response.function_call_arguments.delta"}') == b"response.function_call_arguments.delta"
    assert delta_type(b'{"type":"response.completed"}') is None and delta_type(b"[]") is None
    assert delta_type(b'{"delta":"a","type":"response.output_text.delta"}') is None  # other order: the full path


def test_a_chatgpt_login_session_over_websocket_is_seen_too():
    from tokunseba.routing import EndpointHealth, load_rules_text
    from tokunseba.turn.failover import Capacity
    from tokunseba.turn.ws_plan import plan_message

    assert is_responses_websocket(method="GET", host="chatgpt.com", path="/backend-api/codex/responses",
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
