"""count_tokens: probe (issue 32): a count routed to an endpoint without a counter of its own is
asked as the turn itself, not streamed, with a maximum output of 1 token; its reply's reported
input is the number, in the client's own count shape; never an estimate."""

from __future__ import annotations

import json

import pytest

from tests.support.planning import plan_request
from tokunseba.errors import TranslationError
from tokunseba.routing import load_rules_text
from tokunseba.turn import count_reply

RULES = """\
endpoints:
  local: {protocol: openai, url: "http://127.0.0.1:9201/v1", max_tokens_field: max_tokens, count_tokens: probe}
  resp: {protocol: openai-responses, url: "http://127.0.0.1:9202/v1", count_tokens: probe}
  ant: {protocol: anthropic, url: "http://127.0.0.1:9203/v1", max_tokens: 100, count_tokens: probe}
routes:
  - {name: claude-local, when: {client: anthropic, model: "local-*"}, to: local, model: gemma}
  - {name: gemini-local, when: {client: gemini}, to: local, model: gemma}
  - {name: claude-resp, when: {client: anthropic, model: "resp-*"}, to: resp, model: gpt-x}
  - {name: codex-ant, when: {client: openai-responses}, to: ant, model: claude-x}
"""
HOSTS = {"anthropic": "api.anthropic.com", "gemini": "generativelanguage.googleapis.com",
         "openai-responses": "api.openai.com"}


@pytest.fixture(scope="module")
def rules():
    r = load_rules_text(RULES, "probe.yaml")
    assert not [w for w in r.warnings if "count requests" in w]  # every endpoint here can count
    return r


def plan(rules, client: str, path: str, body: dict):
    return plan_request(rules, method="POST", host=HOSTS[client], port=443, path=path,
                        headers=[("content-type", "application/json")], body=json.dumps(body).encode(), env={})


def test_claude_codes_count_is_asked_of_a_chat_server_as_a_one_token_turn(rules):
    t = plan(rules, "anthropic", "/v1/messages/count_tokens?beta=true",
             {"model": "local-haiku", "system": "Be brief.", "thinking": {"type": "enabled", "budget_tokens": 2000},
              "messages": [{"role": "user", "content": "count me"}]})
    assert (t.outcome, t.url) == ("translated", "http://127.0.0.1:9201/v1/chat/completions")
    sent = json.loads(t.body)
    assert sent == {"model": "gemma", "messages": [{"role": "system", "content": "Be brief."},
                                                   {"role": "user", "content": "count me"}], "max_tokens": 1}
    (translated,) = [d for k, d in t.events if k == "protocol_translated"]
    assert translated["count"]["counter"] == "OpenAI Chat Completions probe (a turn of at most 1 output token)"
    assert "reasoning_effort" in translated["count"]["left_out"]  # the thinking asked: not for a 1-token turn
    status, _, out, counted = count_reply(t, 200, json.dumps({
        "id": "c", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": "x"},
                                                             "finish_reason": "length"}],
        "usage": {"prompt_tokens": 17, "completion_tokens": 1, "total_tokens": 18}}).encode())
    assert (status, json.loads(out)) == (200, {"input_tokens": 17})
    assert counted.record() == {"input_tokens": 17, "counter": translated["count"]["counter"], "endpoint": "local"}


def test_a_gemini_count_probes_through_the_gemini_turn_it_counts(rules):
    t = plan(rules, "gemini", "/v1beta/models/gemini-2.5-flash:countTokens",
             {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]})
    assert json.loads(t.body)["max_tokens"] == 1 and "stream" not in json.loads(t.body)
    assert json.loads(count_reply(t, 200, b'{"usage":{"prompt_tokens":5,"completion_tokens":1}}')[2]) == {"totalTokens": 5}


def test_a_responses_endpoint_probes_with_max_output_tokens(rules):
    t = plan(rules, "anthropic", "/v1/messages/count_tokens", {"model": "resp-m", "messages": [{"role": "user", "content": "x"}]})
    assert t.url == "http://127.0.0.1:9202/v1/responses" and json.loads(t.body)["max_output_tokens"] == 1
    assert json.loads(count_reply(t, 200, b'{"usage":{"input_tokens":9,"output_tokens":1}}')[2]) == {"input_tokens": 9}


def test_an_anthropic_probe_counts_the_cached_tokens_once(rules):
    t = plan(rules, "openai-responses", "/v1/responses/input_tokens", {"model": "gpt-5.1-codex", "input": "hello"})
    assert json.loads(t.body)["max_tokens"] == 1 and t.url == "http://127.0.0.1:9203/v1/messages"
    got = count_reply(t, 200, b'{"usage":{"input_tokens":3,"cache_read_input_tokens":40,'
                              b'"cache_creation_input_tokens":2,"output_tokens":1}}')
    assert json.loads(got[2]) == {"object": "response.input_tokens", "input_tokens": 45}


def test_a_probe_reply_without_usage_is_an_error_never_an_estimate(rules):
    t = plan(rules, "anthropic", "/v1/messages/count_tokens", {"model": "local-m", "messages": [{"role": "user", "content": "x"}]})
    with pytest.raises(TranslationError) as e:
        count_reply(t, 200, b'{"choices":[]}')
    assert e.value.status == 502 and "does not estimate" in e.value.message
