"""turn/ws_session.py: one Responses WebSocket connection's turns, driven as proxy/websocket.py
drives them: a turn planned by the rules, where it is carried, its response kept, and the next
message rewritten only when it continues a response tokunseba made."""

from __future__ import annotations

import json

from tokunseba import jsonc
from tokunseba.routing import EndpointHealth, load_rules_text
from tokunseba.turn.failover import Capacity
from tokunseba.turn.retries import RetryWatch
from tokunseba.turn.ws_plan import Carrier
from tokunseba.turn.ws_session import SocketTurns
from tokunseba.turn.ws_transcript import Reply

RULES = """\
endpoints:
  claude:
    protocol: anthropic
    url: http://127.0.0.1:9/v1
    max_tokens: 1024
routes:
  - name: to-claude
    when: {client: openai-responses, model: route-me}
    to: claude
    model: claude-sonnet-4-5
"""


class _Headers(list):
    def items(self, multi: bool = False):
        return list(self)


def _create(input_items, prev=None, **kw):
    d = {"type": "response.create", "model": "gpt-5.5", "input": input_items, **kw}
    if prev:
        d["previous_response_id"] = prev
    return d


def _plan(turns: SocketTurns, doc: dict):
    planning, conversation = turns.plan(doc, host="api.openai.com", port=443, path="/v1/responses",
                                        headers=_Headers([("authorization", "Bearer sk-client")]),
                                        rules=load_rules_text(RULES), health=EndpointHealth(), capacity=Capacity(),
                                        provider_hosts={}, keeper=None)
    assert planning is not None
    planning.next()
    turn = planning.turn(env={}, retries=RetryWatch(), peer="127.0.0.1", access=(False, False))
    return turn, conversation, turns.carrier(turn, conversation_known=conversation is not None)


def _reply(response_id: str, text: str) -> Reply:
    r = Reply()
    item = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}
    r.on({"type": "response.output_item.done", "item": item})
    r.on({"type": "response.completed", "response": {"id": response_id, "output": [item]}})
    return r


def test_a_provider_turn_then_a_routed_one_then_the_provider_again():
    turns = SocketTurns()
    u1 = {"role": "user", "content": "first words"}
    turn, conversation, goes = _plan(turns, _create([u1]))
    assert goes is Carrier.PROVIDER and turn.outcome == "pass_through" and conversation == [u1]
    turns.answered(_reply("resp_p1", "A1"), conversation, ours=False)

    second = _create([{"role": "user", "content": "second"}], prev="resp_p1", model="route-me")
    turn, conversation, goes = _plan(turns, second)
    assert goes is Carrier.HTTPS and turn.outcome == "translated" and turn.target_protocol == "anthropic"
    assert conversation is not None and len(conversation) == 3  # u1, A1, then its own
    assert json.dumps(json.loads(turn.body)["messages"]).count("first words") == 1
    turns.answered(_reply("resp_ours", "A2"), conversation, ours=True)

    third = _create([{"role": "user", "content": "third"}], prev="resp_ours")
    instead = turns.for_provider(third)  # the provider never produced resp_ours: the whole conversation
    assert instead is not None and "previous_response_id" not in instead and len(instead["input"]) == 5
    assert turns.for_provider(_create([], prev="resp_p1")) is None  # its own response: untouched


def test_an_unknown_previous_response_is_answered_here_when_routed():
    turns = SocketTurns()
    turn, conversation, goes = _plan(turns, _create([], prev="resp_unknown", model="route-me"))
    assert conversation is None and turns.conversation(_create([], prev="resp_unknown")) is None
    assert goes is Carrier.PROVIDER  # a translated route is refused as over HTTPS: the provider keeps it


def test_where_a_turn_goes_is_recorded_as_the_words_it_always_was():
    assert [str(c) for c in Carrier] == ["provider websocket", "endpoint websocket", "https", "here"]
    assert jsonc.dumps({"carried": Carrier.ENDPOINT_WS}) in ('{"carried":"endpoint websocket"}',
                                                             '{"carried": "endpoint websocket"}')
