"""gpt-5.5 (classic) Codex's ``tool_search_call`` / ``tool_search_output`` items in a Responses
history (its client-side search of deferred tools: the tools found are declared inside the
history): carried as they are wherever the target speaks Responses (a retarget to another
Responses endpoint, over HTTPS or its WebSocket; a turn passed through), refused with the reason
for Anthropic, Chat and Gemini targets (translate/openai_responses/decode.py
``DECODE_REFUSED_ITEMS``: there is no truthful mapping), and read cleanly in a reply."""

from __future__ import annotations

import json

import pytest

from tokunseba.routing import EndpointHealth, load_rules_text
from tokunseba.translate.openai_responses.decode import DECODE_REFUSED_ITEMS
from tokunseba.turn.failover import Capacity
from tokunseba.turn.pump import Pump
from tokunseba.turn.retries import RetryWatch
from tokunseba.turn.ws_plan import ENDPOINT_WS, PROVIDER, carrier, plan_message
from tokunseba.turn.ws_transcript import Reply, Transcript
from tokunseba.protocols.openai_responses_ws import as_sse, server_event

from tests.support.planning import plan_request

CALL = {"type": "tool_search_call", "id": "tsc_1", "call_id": "call_ts1", "execution": "client",
        "status": "completed", "arguments": {"query": "calendar event", "limit": 3}}
OUTPUT = {"type": "tool_search_output", "id": "tso_1", "call_id": "call_ts1", "execution": "client",
          "status": "completed", "tools": [{"type": "function", "name": "create_event", "description": "Create one.",
                                            "parameters": {"type": "object", "properties": {}}}]}
INPUT = [{"role": "user", "content": "find the calendar tool"}, CALL, OUTPUT, {"role": "user", "content": "use it"}]

RULES = """\
endpoints:
  resp: {protocol: openai-responses, url: "http://127.0.0.1:9/v1"}
  ant: {protocol: anthropic, url: "http://127.0.0.1:10/v1", max_tokens: 1024}
  chat: {protocol: openai, url: "http://127.0.0.1:11/v1"}
  gem: {protocol: gemini, url: "http://127.0.0.1:12/v1beta"}
routes:
  - {name: same, when: {client: openai-responses, model: retarget-me}, to: resp}
  - {name: renamed, when: {client: openai-responses, model: rename-me}, to: resp, model: gpt-5.5-mini}
  - {name: to-ant, when: {client: openai-responses, model: ant-me}, to: ant, model: claude-sonnet-4-5, on_refused: error}
  - {name: to-chat, when: {client: openai-responses, model: chat-me}, to: chat, model: qwen, on_refused: error}
  - {name: to-gem, when: {client: openai-responses, model: gem-me}, to: gem, model: gemini-2.5-flash, on_refused: error}
  - {name: soft, when: {client: openai-responses, model: soft-me}, to: ant, model: claude-sonnet-4-5}
"""
HEADERS = [("host", "api.openai.com"), ("authorization", "Bearer sk-client"), ("content-type", "application/json")]


def _body(model: str) -> bytes:
    """The client's bytes, spaced as no serialiser here would write them."""
    return (b'{ "model" : "' + model.encode() + b'",  "stream": true, "input" : '
            + json.dumps(INPUT, indent=1).encode() + b' }')


def _plan(model: str):
    return plan_request(load_rules_text(RULES), method="POST", host="api.openai.com", port=443, path="/v1/responses",
                        headers=HEADERS, body=_body(model), env={})


def test_a_retarget_to_another_responses_endpoint_sends_the_clients_bytes():
    t = _plan("retarget-me")
    assert (t.action, t.outcome, t.target_protocol) == ("retarget", "retargeted", "openai-responses")
    assert t.body is None  # not re-serialised: the items go out byte for byte


def test_a_retarget_with_a_model_override_changes_only_the_model_bytes():
    t = _plan("rename-me")
    assert t.body == _body("rename-me").replace(b'"rename-me"', b'"gpt-5.5-mini"')


def test_a_turn_no_rule_takes_passes_through_untouched():
    t = _plan("gpt-5.5")
    assert t.action == "pass" and t.body is None and t.local is None


@pytest.mark.parametrize("model", ["ant-me", "chat-me", "gem-me"])
def test_another_protocol_refuses_them_with_the_reason_in_the_clients_protocol(model):
    t = _plan(model)
    assert (t.action, t.outcome) == ("respond", "refused") and t.local is not None and t.local.status == 400
    said = json.loads(t.local.body)["error"]["message"]
    assert "input[1]: tool_search_call item" in said and "declared inside the history" in said, said


def test_a_route_that_may_skip_them_leaves_the_turn_at_its_provider_and_says_why():
    t = _plan("soft-me")
    assert t.action == "pass"
    refused = [d for k, d in t.events if k == "route_refused"]
    assert refused and "tool_search_call item" in refused[0]["reason"]


def test_the_codec_table_has_their_row_and_its_reason():
    assert DECODE_REFUSED_ITEMS["tool_search_call"] == DECODE_REFUSED_ITEMS["tool_search_output"]
    assert "only the Responses protocol" in DECODE_REFUSED_ITEMS["tool_search_call"]


class _Headers(list):
    def items(self, multi: bool = False):
        return list(self)


def _over_websocket(model: str, transcript: Transcript | None = None):
    doc = {"type": "response.create", "model": model, "input": INPUT}
    planning, conversation = plan_message(doc, transcript or Transcript(), host="api.openai.com", port=443,
                                          path="/v1/responses", headers=_Headers(HEADERS),
                                          rules=load_rules_text(RULES), health=EndpointHealth(), capacity=Capacity(),
                                          provider_hosts={}, keeper=None)
    assert planning is not None
    planning.next()
    turn = planning.turn(env={}, retries=RetryWatch(), peer="127.0.0.1", access=(False, False))
    return doc, planning, turn, carrier(turn, conversation_known=conversation is not None)


def test_over_websocket_a_retarget_and_a_passed_on_turn_carry_them_as_sent():
    doc, planning, turn, goes = _over_websocket("retarget-me")
    assert goes == ENDPOINT_WS and json.loads(planning.prep.body)["input"] == INPUT
    doc, planning, turn, goes = _over_websocket("gpt-5.5")
    assert goes == PROVIDER and Transcript().for_provider(doc) is None  # the message goes on untouched


def test_a_reply_carrying_a_tool_search_call_is_read_cleanly_and_kept_for_the_transcript():
    t = _plan("gpt-5.5")
    events = [{"type": "response.created", "response": {"id": "resp_ts", "model": "gpt-5.5", "output": []}},
              {"type": "response.output_item.added", "output_index": 0, "item": {**CALL, "status": "in_progress"}},
              {"type": "response.output_item.done", "output_index": 0, "item": CALL},
              {"type": "response.completed", "response": {"id": "resp_ts", "model": "gpt-5.5", "output": [CALL],
                                                          "usage": {"input_tokens": 9, "output_tokens": 2}}}]
    pump, reply = Pump(t), Reply()
    for ev in events:
        e = server_event(json.dumps(ev).encode())
        reply.on(e.doc)
        pump(as_sse(e))
    pump(b"")
    out = pump.outcome(200)
    assert out.problem is None and out.usage is not None
    assert reply.response_id == "resp_ts" and reply.output == [CALL]
