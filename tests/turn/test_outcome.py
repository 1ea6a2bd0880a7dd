"""How one turn's reply ended (turn/outcome.py): the usage and model a whole reply names, where its
protocol's facts say they live, as reported; a reply that is no JSON object said as such; an
upstream failure said as what happened."""

from __future__ import annotations

import json

from tokunseba.turn.outcome import Outcome, model_of, upstream_failure, usage_of


def test_usage_where_each_protocol_keeps_it():
    u = usage_of("anthropic", {"usage": {"input_tokens": 3, "output_tokens": 1}})
    assert (u.counting, u.reported) == ("anthropic", {"input_tokens": 3, "output_tokens": 1})
    g = usage_of("gemini", json.dumps({"usageMetadata": {"promptTokenCount": 5}}).encode())  # bytes are parsed
    assert (g.counting, g.reported) == ("gemini", {"promptTokenCount": 5})
    assert usage_of("openai-responses", {"usage": {"input_tokens": 2}}).counting == "openai"  # Responses counts as Chat


def test_no_usage_absent_empty_or_unreadable():
    assert usage_of("openai", {"choices": []}) is None
    assert usage_of("gemini", {"usageMetadata": {}}) is None  # Gemini's empty object: nothing reported
    assert usage_of("openai", {"usage": {}}).reported == {}  # an empty ``usage``: as reported
    assert usage_of("openai", b"not json") is None and usage_of("openai", b"") is None
    assert usage_of("openai", {"usage": [1]}) is None and usage_of("smoke-signals", {"usage": {}}) is None


def test_the_model_a_reply_names():
    assert model_of("openai", {"model": "gpt-4o-mini"}) == "gpt-4o-mini"
    assert model_of("gemini", {"modelVersion": "gemini-2.5-flash"}) == "gemini-2.5-flash"
    assert model_of("openai", {"model": ""}) is None and model_of("openai", {"model": 5}) is None
    assert model_of("openai", b"{}") is None and model_of("smoke-signals", {"model": "x"}) is None


def test_a_whole_reply_passed_on():
    body = json.dumps({"model": "gpt-4o-mini", "usage": {"prompt_tokens": 9, "completion_tokens": 1}}).encode()
    o = Outcome.of_whole("openai", 200, "application/json", body)
    assert (o.status, o.problem, o.model) == (200, None, "gpt-4o-mini")
    assert o.usage.reported == o.client_usage == {"prompt_tokens": 9, "completion_tokens": 1}
    bad = Outcome.of_whole("openai", 200, "text/html", b"<html>")
    assert bad.problem == "upstream reply is not valid JSON (text/html, 6 bytes)" and bad.usage is None
    assert Outcome.of_whole("openai", 200, "application/json", b"[]").problem == "upstream reply is not a JSON object"
    assert not bad.failed and bad.details == {} and Outcome(None).details is not bad.details


def test_an_upstream_failure_is_said_as_what_happened():
    assert upstream_failure("peer closed connection without sending complete message body: incomplete chunked read") \
        .startswith("upstream connection broke: peer closed")
    assert upstream_failure("Connection reset by peer") == "upstream connection broke: Connection reset by peer"
    assert upstream_failure("Server disconnected: timeout") == "Server disconnected: timeout"
