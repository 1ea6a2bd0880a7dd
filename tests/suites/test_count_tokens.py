"""Token counts follow their turns (issue 32): a count request is routed by the turn's rules and,
when its endpoint speaks another protocol, translated as that turn would be and asked of that
endpoint's own counter (protocols.<name>.COUNTER); the number comes back in the client's count
shape, never estimated. Pure planning and reply translation here (no mitmproxy): the e2e test
is tests/e2e/test_count_tokens_e2e.py."""

from __future__ import annotations

import json

import pytest

from tests.conftest import load_fixture
from tests.support.planning import plan_request
from tokunseba import protocols
from tokunseba.errors import TranslationError
from tokunseba.turn.disposition import translate_whole_reply
from tokunseba.routing import RulesError, load_rules_text
from tokunseba.turn.reply import count_reply, response_mode, translate_whole

RULES = """\
endpoints:
  ant: {protocol: anthropic, url: "http://127.0.0.1:9001/v1", key_env: ANT_KEY, accepts: [text, images, documents]}
  gem: {protocol: gemini, url: "http://127.0.0.1:9002/v1beta", key_env: GEM_KEY}
  resp: {protocol: openai-responses, url: "http://127.0.0.1:9003/v1", key_env: RESP_KEY}
  chat: {protocol: openai, url: "http://127.0.0.1:9004/v1"}
  mute-ant: {protocol: anthropic, url: "http://127.0.0.1:9005/v1", count_tokens: none}
routes:
  - {name: to-chat, when: {model: "chat-*"}, to: chat}
  - {name: to-mute, when: {model: "mute-*"}, to: mute-ant}
  - {name: tools-to-resp, when: {client: anthropic, tools: true}, to: resp, model: gpt-5.1}
  - {name: a2g, when: {client: anthropic}, to: gem, model: gemini-2.5-flash}
  - {name: g2a, when: {client: gemini, model: "gemini-*"}, to: ant, model: claude-sonnet-4-6}
  - {name: g2r, when: {client: gemini}, to: resp, model: gpt-5.1}
  - {name: r2a, when: {client: openai-responses, model: "gpt-*"}, to: ant, model: claude-sonnet-4-6}
  - {name: r2g, when: {client: openai-responses}, to: gem, model: gemini-2.5-flash}
"""
ENV = {"ANT_KEY": "sk-ant-endpoint", "GEM_KEY": "gem-endpoint", "RESP_KEY": "sk-resp-endpoint"}

HOSTS = {"anthropic": "api.anthropic.com", "gemini": "generativelanguage.googleapis.com",
         "openai-responses": "api.openai.com"}
CLIENT_KEYS = {"anthropic": ("x-api-key", "sk-ant-CLIENT"), "gemini": ("x-goog-api-key", "AIza-CLIENT"),
               "openai-responses": ("authorization", "Bearer sk-CLIENT")}
# what each counter replies, and what each client's count reply is
COUNTER_REPLIES = {"anthropic": {"input_tokens": 321},
                   "gemini": {"totalTokens": 321, "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 321}]},
                   "openai-responses": {"object": "response.input_tokens", "input_tokens": 321}}
CLIENT_SHAPES = {"anthropic": {"input_tokens": 321}, "gemini": {"totalTokens": 321},
                 "openai-responses": {"object": "response.input_tokens", "input_tokens": 321}}


@pytest.fixture(scope="module")
def rules():
    return load_rules_text(RULES, "count.yaml")


def plan(rules, client: str, path: str, body: dict, headers=()):
    name, value = CLIENT_KEYS[client]
    hdrs = [("content-type", "application/json"), (name, value), *headers]
    return plan_request(rules, method="POST", host=HOSTS[client], port=443, path=path, headers=hdrs,
                        body=json.dumps(body).encode(), env=ENV)


ANT_COUNT = "/v1/messages/count_tokens?beta=true"
GEM_COUNT = "/v1beta/models/{model}:countTokens"
RESP_COUNT = "/v1/responses/input_tokens"


def count_request(client: str, model: str) -> tuple[str, dict]:
    """A count request of ``client`` for a small turn with a system prompt."""
    if client == "anthropic":
        return ANT_COUNT, {"model": model, "system": "Be brief.", "messages": [{"role": "user", "content": "hi"}]}
    if client == "gemini":
        return GEM_COUNT.format(model=model), {"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
                                               "systemInstruction": {"parts": [{"text": "Be brief."}]}}
    return RESP_COUNT, {"model": model, "instructions": "Be brief.", "input": "hi"}


# (client, client model, endpoint's protocol, counter path at the endpoint)
PAIRS = [
    ("anthropic", "claude-haiku-4-5", "gemini", "http://127.0.0.1:9002/v1beta/models/gemini-2.5-flash:countTokens"),
    ("gemini", "gemini-2.5-flash", "anthropic", "http://127.0.0.1:9001/v1/messages/count_tokens"),
    ("gemini", "other-model", "openai-responses", "http://127.0.0.1:9003/v1/responses/input_tokens"),
    ("openai-responses", "gpt-5.1-codex", "anthropic", "http://127.0.0.1:9001/v1/messages/count_tokens"),
    ("openai-responses", "o-model", "gemini", "http://127.0.0.1:9002/v1beta/models/gemini-2.5-flash:countTokens"),
]


@pytest.mark.parametrize("client,model,target,url", PAIRS, ids=[f"{c}->{t}" for c, _, t, _ in PAIRS])
def test_a_count_is_translated_and_asked_of_the_targets_own_counter(rules, client, model, target, url):
    path, body = count_request(client, model)
    t = plan(rules, client, path, body)
    assert (t.action, t.outcome, t.target_protocol) == ("translate", "translated", target)
    assert t.url == url and t.counter is protocols.get(target).counter and not t.stream
    sent = json.loads(t.body)
    # the counter's own request shape: the translated turn, without what a counter does not take
    if target == "anthropic":
        assert sent == {"model": "claude-sonnet-4-6", "messages": [{"role": "user", "content": "hi"}],
                        "system": "Be brief."}
        assert t.set_headers["anthropic-version"] == "2023-06-01"
    elif target == "gemini":
        assert sent == {"generateContentRequest": {
            "model": "models/gemini-2.5-flash", "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
            "systemInstruction": {"parts": [{"text": "Be brief."}]}}}
    else:
        assert sent["model"] == "gpt-5.1" and sent["instructions"] == "Be brief."
        assert "stream" not in sent and "max_output_tokens" not in sent and "store" not in sent
    # the endpoint's own key goes; the client's stays behind
    assert t.key_injected and CLIENT_KEYS[client][1] not in json.dumps(t.set_headers)
    assert CLIENT_KEYS[client][0] not in (t.keep_headers or set())
    event = dict(t.events)["protocol_translated"]
    assert event["count"]["counter"] == protocols.get(target).counter.name
    assert "max_tokens" not in event["plumbing"]  # the placeholder a translation needs is not sent
    # the counter's reply -> the client's count shape, with the counter's number
    raw = json.dumps(COUNTER_REPLIES[target]).encode()
    assert response_mode(t, 200, "application/json") == "translate-whole"
    st, headers, out, counted = count_reply(t, 200, raw)
    assert (st, json.loads(out), headers["content-type"]) == (200, CLIENT_SHAPES[client], "application/json")
    assert counted.record() == {"input_tokens": 321, "counter": protocols.get(target).counter.name,
                                "endpoint": t.endpoint.name}
    done = translate_whole_reply(t, 200, raw)
    assert done.failure is None and json.loads(done.body) == CLIENT_SHAPES[client] and done.counted == counted
    assert done.report is None  # a count is no turn's usage
    assert json.loads(translate_whole(t, 200, raw)[2]) == CLIENT_SHAPES[client]


def test_claude_codes_context_count_follows_the_tool_turns_route_with_its_tools(rules):
    """Claude Code's /context count (captured) names a tool: the rule for tool turns takes it,
    as it would take the turn (same `when`), and the tool is counted too."""
    fx = load_fixture("claude-code-count-tokens.json")
    t = plan(rules, "anthropic", ANT_COUNT, fx["body"], headers=[("anthropic-beta", "token-counting-2024-11-01")])
    assert t.decision.route.name == "tools-to-resp" and t.url == "http://127.0.0.1:9003/v1/responses/input_tokens"
    sent = json.loads(t.body)
    assert sent["model"] == "gpt-5.1" and [x["name"] for x in sent["tools"]] == ["Skill"]
    assert sent["input"] == [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "foo"}]}]
    assert "anthropic-beta" not in (t.keep_headers or set())
    assert json.loads(count_reply(t, 200, b'{"object":"response.input_tokens","input_tokens":1234}')[2]) == \
        {"input_tokens": 1234}


def test_gemini_clis_image_count_goes_to_anthropic_with_its_image(rules):
    fx = load_fixture("gemini-cli-count-tokens.json")
    t = plan(rules, "gemini", "/v1beta/models/gemini-2.5-flash:countTokens", fx["body"])
    assert t.url == "http://127.0.0.1:9001/v1/messages/count_tokens"
    sent = json.loads(t.body)
    assert set(sent) == {"model", "messages"}
    (msg,) = sent["messages"]
    assert [b["type"] for b in msg["content"]] == ["text", "text", "image", "text"]
    assert msg["content"][2]["source"]["media_type"] == "image/png"
    assert json.loads(count_reply(t, 200, b'{"input_tokens":87}')[2]) == {"totalTokens": 87}


def test_a_gemini_count_of_a_whole_generate_content_request_is_routed_and_counted_as_that_turn(rules):
    inner = {"model": "models/gemini-2.5-flash", "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
             "tools": [{"functionDeclarations": [{"name": "ls", "parameters": {"type": "OBJECT"}}]}]}
    t = plan(rules, "gemini", "/v1beta/models/gemini-2.5-flash:countTokens", {"generateContentRequest": inner})
    assert t.decision.route.name == "g2a"
    sent = json.loads(t.body)
    assert [x["name"] for x in sent["tools"]] == ["ls"] and sent["messages"] == [{"role": "user", "content": "hi"}]


def test_the_count_error_of_a_counter_reaches_the_client_in_its_own_envelope(rules):
    path, body = count_request("gemini", "gemini-2.5-flash")
    t = plan(rules, "gemini", path, body)
    err = b'{"type":"error","error":{"type":"not_found_error","message":"model: claude-sonnet-4-6 not found"}}'
    assert response_mode(t, 404, "application/json") == "translate-whole"
    done = translate_whole_reply(t, 404, err)
    doc = json.loads(done.body)
    assert done.status == 404 and doc["error"]["status"] == "NOT_FOUND" and "not found" in doc["error"]["message"]
    assert done.counted is None


def test_a_counter_reply_without_a_number_is_an_error_never_an_estimate(rules):
    path, body = count_request("anthropic", "claude-haiku-4-5")
    t = plan(rules, "anthropic", path, body)
    with pytest.raises(TranslationError) as ei:
        count_reply(t, 200, b'{"promptTokensDetails": []}')
    assert ei.value.status == 502 and "gem" in ei.value.message and "does not estimate" in ei.value.message
    done = translate_whole_reply(t, 200, b"not json")
    assert done.failure is not None and "Gemini countTokens" in done.failure and done.counted is None


@pytest.mark.parametrize("client", ["anthropic", "gemini", "openai-responses"])
def test_an_endpoint_without_a_counter_is_named_in_the_clients_error(rules, client):
    path, body = count_request(client, "chat-model")
    t = plan(rules, client, path, body)
    assert (t.action, t.outcome, t.url, t.body) == ("respond", "refused", None, None)
    msg = json.loads(t.local.body)["error"]["message"]
    assert "endpoint chat (openai)" in msg and "OpenAI Chat Completions has no token counter" in msg
    assert "does not estimate" in msg and t.local.status == 400


def test_count_tokens_none_says_so(rules):
    path, body = count_request("gemini", "mute-model")
    t = plan(rules, "gemini", path, body)
    msg = json.loads(t.local.body)["error"]["message"]
    assert t.outcome == "refused" and "endpoint mute-ant (anthropic)" in msg and "count_tokens: none" in msg


def test_a_count_to_its_own_protocol_is_retargeted_to_the_endpoints_counter(rules):
    body = {"model": "gpt-5.1", "input": "hi"}
    r = load_rules_text("endpoints:\n  resp: {protocol: openai-responses, url: 'http://127.0.0.1:9003/v1'}\n"
                        "routes:\n  - {name: r, to: resp, model: gpt-x}\n")
    t = plan(r, "openai-responses", RESP_COUNT, body)
    assert (t.action, t.url) == ("retarget", "http://127.0.0.1:9003/v1/responses/input_tokens")
    assert json.loads(t.body)["model"] == "gpt-x" and t.counter is None


@pytest.mark.parametrize("text,line,want", [
    ("  c: {protocol: openai, url: 'http://x/v1', count_tokens: native}\n", 2,
     "count_tokens: native, but OpenAI Chat Completions has no token counter of its own"),
    ("  c:\n    protocol: anthropic\n    url: http://x/v1\n    count_tokens: estimate\n", 5,
     "count_tokens must be one of: native, none"),
])
def test_count_tokens_is_checked_at_load_with_its_line(text, line, want):
    with pytest.raises(RulesError) as ei:
        load_rules_text("endpoints:\n" + text + "routes: []\n", "r.yaml")
    assert f"r.yaml:{line}:" in str(ei.value) and want in str(ei.value)


def test_each_protocols_counter_lives_in_its_facts():
    have = {p.name: p.counter for p in protocols.all_protocols()}
    assert have["openai"] is None  # Chat Completions has no counter
    for name, counter in have.items():
        if counter is not None:
            assert counter.kind in protocols.get(name).paths and counter.kind in protocols.get(name).count_kinds
            assert counter.read(counter.answer(7)) == 7  # a client's own count reply reads as its number
            assert counter.read({"input_tokens": -1, "totalTokens": True}) is None


LLAMA_RULES = """\
endpoints:
  llama: {protocol: openai, url: "http://127.0.0.1:9006/v1", model: gemma-3-270m, count_tokens: anthropic}
  mute-ant: {protocol: anthropic, url: "http://127.0.0.1:9005/v1", count_tokens: none}
routes:
  - {name: mute, when: {model: "mute-*"}, to: mute-ant}
  - {name: local, to: llama, model: gemma-3-270m}
"""


@pytest.fixture(scope="module")
def llama_rules():
    return load_rules_text(LLAMA_RULES, "llama.yaml")


def test_a_chat_endpoint_may_count_with_the_anthropic_route_its_server_also_serves(llama_rules):
    """llama-server serves Anthropic's count_tokens beside its Chat Completions: an Anthropic
    client's count goes there in its own shape, with the route's model (no translation)."""
    ep = llama_rules.endpoints["llama"]
    assert (ep.counter_protocol, ep.counter.name, ep.no_counter_why) == ("anthropic", "Anthropic count_tokens", None)
    body = {"model": "claude-haiku-4-5", "system": "Be brief.", "messages": [{"role": "user", "content": "hi"}]}
    t = plan(llama_rules, "anthropic", ANT_COUNT, body, headers=[("anthropic-beta", "token-counting-2024-11-01")])
    assert (t.action, t.url, t.target_protocol) == ("translate", "http://127.0.0.1:9006/v1/messages/count_tokens",
                                                    "anthropic")
    assert json.loads(t.body) == {**body, "model": "gemma-3-270m"}
    assert "x-api-key" not in (t.keep_headers or set()) and "anthropic-beta" not in (t.keep_headers or set())
    assert json.loads(count_reply(t, 200, b'{"input_tokens":26}')[2]) == {"input_tokens": 26}


def test_a_gemini_count_to_that_chat_endpoint_is_translated_for_its_anthropic_counter(llama_rules):
    path, body = count_request("gemini", "gemini-2.5-flash")
    t = plan(llama_rules, "gemini", path, body)
    assert t.url == "http://127.0.0.1:9006/v1/messages/count_tokens"
    assert json.loads(t.body) == {"model": "gemma-3-270m", "messages": [{"role": "user", "content": "hi"}],
                                  "system": "Be brief."}
    assert json.loads(count_reply(t, 200, b'{"input_tokens":43}')[2]) == {"totalTokens": 43}


def test_count_tokens_none_on_an_endpoint_of_the_clients_own_protocol_is_not_sent_there(llama_rules):
    t = plan(llama_rules, "anthropic", ANT_COUNT, {"model": "mute-1", "messages": [{"role": "user", "content": "x"}]})
    assert t.outcome == "refused" and t.url is None and "count_tokens: none" in json.loads(t.local.body)["error"]["message"]


def test_count_tokens_names_a_protocol_with_a_counter():
    with pytest.raises(RulesError) as ei:
        load_rules_text("endpoints:\n  c: {protocol: openai, url: 'http://x/v1', count_tokens: openai}\nroutes: []\n",
                        "r.yaml")
    assert "r.yaml:2:" in str(ei.value) and "count_tokens must be one of: native, none, probe, anthropic" in str(ei.value)


def test_a_server_without_the_borrowed_count_route_is_named_in_the_clients_error(llama_rules):
    """count_tokens: anthropic on a server that does not serve that route (llama-cpp-python:
    404 {"detail":"Not Found"}): the Anthropic client gets its own envelope naming the endpoint."""
    t = plan(llama_rules, "anthropic", ANT_COUNT, {"model": "m", "messages": [{"role": "user", "content": "x"}]})
    done = translate_whole_reply(t, 404, b'{"detail":"Not Found"}')
    doc = json.loads(done.body)
    assert done.status == 404 and doc["type"] == "error" and doc["error"]["type"] == "not_found_error"
    assert "Anthropic count_tokens route of endpoint llama (count_tokens: anthropic) answered 404: Not Found" \
        in doc["error"]["message"]


def test_mitmwebs_summary_names_the_counter(rules):
    path, body = count_request("anthropic", "claude-haiku-4-5")
    assert plan(rules, "anthropic", path, body).summary() == "a2g → gem · anthropic→gemini · count by Gemini countTokens"
