"""turn/ws_plan.py: a ``response.create`` message planned as the HTTPS request it stands for,
its body not parsed again: the planning reads the object the body was dumped from, and decides
and records as the planning of the same bytes over HTTPS does."""

from __future__ import annotations

import dataclasses

from tokunseba import jsonc
from tokunseba.routing import EndpointHealth, load_rules_text
from tokunseba.turn.failover import Capacity
from tokunseba.turn.planner import Planning
from tokunseba.turn.retries import RetryWatch
from tokunseba.turn.ws_plan import message_request, plan_message
from tokunseba.turn.ws_transcript import Transcript

RULES = """\
endpoints:
  claude:
    protocol: anthropic
    url: http://127.0.0.1:9/v1
    max_tokens: 1024
routes:
  - name: small-to-claude
    when: {client: openai-responses, max_request_bytes: 400}
    to: claude
    model: claude-sonnet-4-5
"""


class _Headers(list):
    def items(self, multi: bool = False):
        return list(self)


HEADERS = _Headers([("authorization", "Bearer sk-client"), ("user-agent", "codex_cli_rs/0.128.0")])
WHERE = dict(host="api.openai.com", port=443, path="/v1/responses", headers=HEADERS)


def _plan(planning: Planning):
    planning.next()
    return planning.turn(env={}, retries=RetryWatch(), peer="127.0.0.1", access=(False, False))


def _both(doc: dict, transcript: Transcript):
    """The message's planning, and the planning of its body's bytes parsed as over HTTPS."""
    rules, kw = load_rules_text(RULES), dict(health=EndpointHealth(), capacity=Capacity(), provider_hosts={},
                                             keeper=None)
    ws, _ = plan_message(doc, transcript, rules=rules, **WHERE, **kw)
    req, _ = message_request(doc, transcript, **WHERE)
    https = Planning.of(req, rules=rules, **kw)
    assert ws is not None and https is not None
    return ws, https


def _facts(planning: Planning) -> dict:
    f = planning.prep.facts
    assert f is not None
    return {k.name: getattr(f, k.name) for k in dataclasses.fields(f) if k.name != "who"}


def test_the_body_is_not_parsed_again_and_decides_as_its_bytes_do():
    transcript = Transcript()
    first = {"role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    doc = {"type": "response.create", "model": "gpt-5.5", "input": [first], "tools": [], "store": False}
    ws, https = _both(doc, transcript)
    assert ws.prep.req == jsonc.loads(ws.prep.body) == https.prep.req
    assert ws.prep.req["input"][0] is first  # the message's own objects: nothing parsed
    assert _facts(ws) == _facts(https)
    a, b = _plan(ws), _plan(https)
    assert a.outcome == b.outcome == "translated" and a.body == b.body and a.original_body == b.original_body

    reply = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "x" * 500}]}
    transcript.answered("resp_1", [first], [reply], ours=False)
    then = {**doc, "input": [{"role": "user", "content": "more"}], "previous_response_id": "resp_1"}
    ws, https = _both(then, transcript)  # the whole conversation, over the size the route takes
    assert ws.prep.req == jsonc.loads(ws.prep.body) == https.prep.req
    assert len(ws.prep.req["input"]) == 3 and "previous_response_id" not in ws.prep.req
    assert _facts(ws) == _facts(https) and _facts(ws)["request_bytes"] > 400
    a, b = _plan(ws), _plan(https)
    assert a.outcome == b.outcome == "pass_through" and a.original_body == b.original_body


def test_a_message_whose_previous_response_is_unknown_is_planned_on_its_own_input():
    doc = {"type": "response.create", "model": "gpt-5.5", "input": [{"role": "user", "content": "hi"}],
           "previous_response_id": "resp_elsewhere"}
    ws, https = _both(doc, Transcript())
    assert ws.prep.req == jsonc.loads(ws.prep.body) == https.prep.req
    assert ws.prep.req["previous_response_id"] == "resp_elsewhere" and _facts(ws) == _facts(https)
