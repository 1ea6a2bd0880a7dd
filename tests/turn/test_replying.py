"""turn/replying.py: a turn's reply stage as the adapter (proxy/reply.py) drives it, on turns
planned by real rules: the reply's mode (a reply of the other shape is SHAPE_ERROR, said why),
its pump, what the response hook does, a whole reply translated as a value, and what the client
and the ledger are told of a failure."""

from __future__ import annotations

import json

from tokunseba.errors import TranslationError
from tokunseba.routing import load_rules_text
from tokunseba.states import Do, ReplyMode
from tokunseba.turn.pump import Pump
from tokunseba.turn.replying import Replying

from tests.support.planning import plan_request

RULES = """\
endpoints:
  local:
    protocol: openai
    url: http://127.0.0.1:8000/v1
  remote-ant:
    protocol: anthropic
    url: https://llm.example.com/v1
routes:
  - name: translated
    when: {client: anthropic, model: "claude-*"}
    to: local
  - name: retargeted
    when: {client: anthropic, model: "far-*"}
    to: remote-ant
"""
HEADERS = [("Host", "api.anthropic.com"), ("X-Api-Key", "sk-ant-client"), ("Anthropic-Version", "2023-06-01"),
           ("Content-Type", "application/json")]


def _turn(model: str, *, stream: bool):
    body = json.dumps({"model": model, "max_tokens": 64, "stream": stream,
                       "messages": [{"role": "user", "content": "hi"}]}).encode()
    turn = plan_request(load_rules_text(RULES, "rules.yaml"), method="POST", host="api.anthropic.com", port=443,
                        path="/v1/messages", headers=HEADERS, body=body, env={})
    assert turn is not None
    return turn


def test_a_translated_stream_gets_a_translating_pump():
    replying = Replying(_turn("claude-1", stream=True))
    mode = replying.mode(200, "text/event-stream; charset=utf-8")
    assert mode == ReplyMode.TRANSLATE_STREAM
    pump = replying.pump(mode, content_encoding=None)
    assert isinstance(pump, Pump) and pump.t is not None and pump.target is None
    assert replying.mode(429, "text/event-stream") == ReplyMode.TRANSLATE_WHOLE  # an error is never streamed through


def test_a_whole_reply_where_a_stream_was_due_is_a_shape_error_said_why():
    replying = Replying(_turn("far-1", stream=True))
    assert replying.mode(200, "application/json") == ReplyMode.SHAPE_ERROR
    assert replying.pump(ReplyMode.SHAPE_ERROR, content_encoding=None) is None  # buffered: the hook answers
    shape = replying.shape(200, "application/json")
    assert shape is not None and "where a stream was due" in shape
    d = replying.dispose(mark=None, mode=ReplyMode.SHAPE_ERROR, status=200, has_pump=False, shape=shape)
    assert d.do == Do.ANSWER_SHAPE and d.message == shape


def test_a_retargeted_stream_is_passed_on_and_a_whole_reply_judged():
    replying = Replying(_turn("far-1", stream=False))
    assert replying.mode(200, "application/json") == ReplyMode.LEAVE
    d = replying.dispose(mark=None, mode=ReplyMode.LEAVE, status=200, has_pump=False)
    assert d.do == Do.JUDGE_WHOLE and d.strict  # the turn's own action read: retargeted, strict
    raw = Replying(_turn("far-1", stream=True))
    pump = raw.pump(raw.mode(200, "text/event-stream"), content_encoding=None)
    assert isinstance(pump, Pump) and pump.t is None


def test_a_whole_reply_that_cannot_be_translated_is_a_value():
    done = Replying(_turn("claude-1", stream=False)).translate_whole(200, b"<html>not json</html>")
    assert done.status == 502 and done.failure and done.body == b""


def test_what_a_failure_is_told():
    assert Replying.failure_message(TranslationError(400, "no such field")) == "no such field"
    assert Replying.failure_message(ValueError("x")) == "tokunseba: could not translate the reply: x"
    assert Replying.upstream_failure("peer closed connection") == "upstream connection broke: peer closed connection"
    assert Replying.upstream_failure("timed out") == "timed out"
