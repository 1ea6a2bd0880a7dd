"""Token counts follow their turns, end to end (issue 32): a real mitmdump with the addon on a
free loopback port, scripted loopback upstreams standing for each protocol's counter.

- the anthropic SDK's ``messages.count_tokens`` routed to a Gemini endpoint gets the number
  that endpoint's ``countTokens`` replied, and the counter was asked the translated body;
- the google-genai SDK's ``count_tokens`` routed to an Anthropic endpoint gets Anthropic's
  ``count_tokens`` number; the openai SDK's ``responses.input_tokens.count`` likewise;
- a count routed to a Chat endpoint (no counter) is answered with the client's error naming
  the endpoint, and nothing is sent;
- the ledger records each as a count (event ``counted``: the number, the counter, the
  endpoint), never as a turn's usage.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import anthropic
import openai
import pytest
from google import genai
from google.genai import types

from .conftest import Mitmdump, ledger_settled
from tests.support.upstream import Reply, Upstream

KEYS = {"TK_TEST_ANT_KEY": "sk-endpoint-ant-count-0001", "TK_TEST_GEM_KEY": "gem-endpoint-count-0002"}
CLIENT_KEYS = ("sk-ant-client-count-SECRET", "AIza-client-count-SECRET", "sk-oai-client-count-SECRET")

RULES = """\
endpoints:
  ant:
    protocol: anthropic
    url: {ant}/v1
    key_env: TK_TEST_ANT_KEY
  gem:
    protocol: gemini
    url: {gem}/v1beta
    key_env: TK_TEST_GEM_KEY
  chat:
    protocol: openai
    url: {chat}/v1
routes:
  - name: count-nowhere
    when: {{model: "chat-*"}}
    to: chat
  - name: claude-to-gemini
    when: {{client: anthropic}}
    to: gem
    model: gemini-2.5-flash
  - name: others-to-claude
    when: {{client: [gemini, openai-responses]}}
    to: ant
    model: claude-sonnet-4-6
"""


@pytest.fixture(scope="module")
def ups():
    with Upstream() as ant, Upstream() as gem, Upstream() as chat:
        yield {"ant": ant, "gem": gem, "chat": chat}


@pytest.fixture(scope="module")
def count_proxy(ups, tmp_path_factory):
    work = tmp_path_factory.mktemp("count-proxy")
    rules = work / "rules.yaml"
    rules.write_text(RULES.format(ant=ups["ant"].url, gem=ups["gem"].url, chat=ups["chat"].url))
    m = Mitmdump(work, rules, env=KEYS)
    yield m
    m.stop()


@pytest.fixture
def via_proxy(count_proxy, monkeypatch):
    for k, v in count_proxy.client_env().items():
        monkeypatch.setenv(k, v)
    for k in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "GEMINI_API_KEY",
              "GOOGLE_API_KEY"):
        monkeypatch.delenv(k, raising=False)
    return count_proxy


def counted(proxy: Mitmdump, path_like: str) -> tuple[dict, dict]:
    """The last turn whose path is like ``path_like`` and its ``counted`` event."""
    ledger_settled(proxy.ledger)
    with sqlite3.connect(proxy.ledger) as db:
        db.row_factory = sqlite3.Row
        turn = dict(db.execute("SELECT * FROM turns WHERE path LIKE ? ORDER BY started_at DESC LIMIT 1",
                               (path_like,)).fetchone())
        ev = db.execute("SELECT data FROM events WHERE request_id = ? AND kind = 'counted'",
                        (turn["request_id"],)).fetchone()
    return turn, json.loads(ev[0]) if ev else {}


def no_client_key(rec) -> None:
    assert not any(k in v for v in rec.headers.values() for k in CLIENT_KEYS), rec.headers


def test_anthropic_sdk_count_tokens_routed_to_gemini_gets_geminis_number(via_proxy, ups):
    gem = ups["gem"]
    gem.script(Reply.json({"totalTokens": 4242, "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 4242}]}))
    before = len(gem.requests)
    client = anthropic.Anthropic(api_key=CLIENT_KEYS[0], max_retries=0)
    got = client.messages.count_tokens(
        model="claude-haiku-4-5", system="Be brief.", messages=[{"role": "user", "content": "count me"}],
        tools=[{"name": "ls", "description": "list files", "input_schema": {"type": "object", "properties": {}}}])
    assert got.input_tokens == 4242
    (rec,) = gem.requests[before:]
    assert rec.path == "/v1beta/models/gemini-2.5-flash:countTokens"
    assert rec.headers.get("x-goog-api-key") == KEYS["TK_TEST_GEM_KEY"]
    no_client_key(rec)
    inner = rec.json()["generateContentRequest"]  # the translated turn, counted as a whole
    assert inner["model"] == "models/gemini-2.5-flash"
    assert inner["contents"] == [{"role": "user", "parts": [{"text": "count me"}]}]
    assert inner["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert inner["tools"][0]["functionDeclarations"][0]["name"] == "ls"
    turn, ev = counted(via_proxy, "/v1/messages/count_tokens%")
    assert ev == {"input_tokens": 4242, "counter": "Gemini countTokens", "endpoint": "gem"}
    assert (turn["outcome"], turn["endpoint"], turn["target_protocol"], turn["status"]) == \
        ("translated", "gem", "gemini", 200)
    assert turn["usage_input"] is None and turn["usage_reported"] is None  # a count, not a turn's usage
    explained = subprocess.run([str(Path(sys.executable).parent / "tokunseba"), "explain", "--ledger",
                                str(via_proxy.ledger), turn["request_id"]], capture_output=True, text=True, timeout=60)
    assert explained.returncode == 0, explained.stderr
    assert "4242 input tokens, counted by Gemini countTokens of endpoint gem (a count, not a turn's usage)" \
        in explained.stdout


def test_genai_sdk_count_tokens_routed_to_anthropic_gets_anthropics_number(via_proxy, ups):
    ant = ups["ant"]
    ant.script(Reply.json({"input_tokens": 77}))
    before = len(ant.requests)
    client = genai.Client(api_key=CLIENT_KEYS[1], http_options=types.HttpOptions(api_version="v1beta"))
    got = client.models.count_tokens(model="gemini-2.5-flash", contents="how many tokens am I?")
    assert got.total_tokens == 77
    (rec,) = ant.requests[before:]
    assert rec.path == "/v1/messages/count_tokens"
    assert rec.headers.get("x-api-key") == KEYS["TK_TEST_ANT_KEY"] and rec.headers.get("anthropic-version")
    no_client_key(rec)
    assert rec.json() == {"model": "claude-sonnet-4-6",
                          "messages": [{"role": "user", "content": "how many tokens am I?"}]}
    turn, ev = counted(via_proxy, "%:countTokens")
    assert ev == {"input_tokens": 77, "counter": "Anthropic count_tokens", "endpoint": "ant"}
    assert turn["outcome"] == "translated" and turn["usage_input"] is None


def test_openai_sdk_responses_input_tokens_routed_to_anthropic_gets_anthropics_number(via_proxy, ups):
    ant = ups["ant"]
    ant.script(Reply.json({"input_tokens": 19}))
    before = len(ant.requests)
    client = openai.OpenAI(api_key=CLIENT_KEYS[2], max_retries=0)
    got = client.responses.input_tokens.count(model="gpt-5.1-codex", instructions="Be brief.", input="hello")
    assert got.input_tokens == 19 and got.object == "response.input_tokens"
    (rec,) = ant.requests[before:]
    assert rec.path == "/v1/messages/count_tokens"
    no_client_key(rec)
    body = rec.json()
    assert body["system"] == "Be brief." and body["model"] == "claude-sonnet-4-6" and "max_tokens" not in body
    _, ev = counted(via_proxy, "/v1/responses/input_tokens")
    assert ev == {"input_tokens": 19, "counter": "Anthropic count_tokens", "endpoint": "ant"}


def test_a_counter_error_reaches_the_client_in_its_own_envelope(via_proxy, ups):
    ant = ups["ant"]
    ant.script(Reply.json({"type": "error", "error": {"type": "not_found_error", "message": "no such model"}}, 404))
    client = genai.Client(api_key=CLIENT_KEYS[1], http_options=types.HttpOptions(api_version="v1beta"))
    with pytest.raises(genai.errors.ClientError) as ei:
        client.models.count_tokens(model="gemini-2.5-flash", contents="x")
    assert ei.value.code == 404 and ei.value.status == "NOT_FOUND" and "no such model" in ei.value.message


def test_a_count_routed_to_a_chat_endpoint_is_an_error_naming_it_and_nothing_is_sent(via_proxy, ups):
    chat = ups["chat"]
    before = len(chat.requests)
    client = anthropic.Anthropic(api_key=CLIENT_KEYS[0], max_retries=0)
    with pytest.raises(anthropic.BadRequestError) as ei:
        client.messages.count_tokens(model="chat-small", messages=[{"role": "user", "content": "hi"}])
    msg = ei.value.body["error"]["message"]
    assert "endpoint chat (openai)" in msg and "no token counter" in msg and "does not estimate" in msg
    assert len(chat.requests) == before
    turn, ev = counted(via_proxy, "/v1/messages/count_tokens%")
    assert turn["outcome"] == "refused" and ev == {}


# ---------------------------------------------------------------- the real llama-server's own counter

LLAMA_RULES = """\
endpoints:
  llama:
    protocol: openai
    url: {llama}
    model: gemma-3-270m
    max_tokens: 48
    max_tokens_field: max_tokens
    count_tokens: anthropic   # llama-server serves Anthropic's count route beside its Chat Completions
routes:
  - name: all-local
    to: llama
"""


@pytest.fixture(scope="module")
def llama_proxy(tmp_path_factory):
    from .test_localmodel_e2e import _start, _stop  # skipped when not installed; fails under CI

    state = tmp_path_factory.mktemp("count-localmodel-state")
    url = _start("llama-server", state)
    work = tmp_path_factory.mktemp("count-llama-proxy")
    rules = work / "rules.yaml"
    rules.write_text(LLAMA_RULES.format(llama=url))
    m = Mitmdump(work, rules)
    try:
        yield m, url
    finally:
        m.stop()
        _stop("llama-server", state)


@pytest.mark.localmodel
def test_counts_routed_to_the_real_llama_server_are_its_own_numbers(llama_proxy, monkeypatch):
    """With all-local rules, Claude Code's count (the anthropic SDK's count_tokens) and a Gemini
    client's countTokens are answered by llama-server's own counter (its tokenizer over the
    prompt its chat template builds): the numbers it gives for the bodies it was sent, equal to
    the prompt tokens of the same turn sent through the proxy; nothing reaches a cloud host."""
    import httpx

    proxy, url = llama_proxy
    for k, v in proxy.client_env().items():
        monkeypatch.setenv(k, v)
    for k in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(k, raising=False)
    text = "Count the tokens of this sentence, please."
    client = anthropic.Anthropic(api_key=CLIENT_KEYS[0], max_retries=0)
    n = client.messages.count_tokens(model="claude-haiku-4-5", messages=[{"role": "user", "content": text}]).input_tokens
    with httpx.Client(trust_env=False) as direct:  # the server's own number for what it was sent
        own = direct.post(f"{url}/messages/count_tokens", json={"model": "gemma-3-270m",
                                                                "messages": [{"role": "user", "content": text}]})
    assert n == own.json()["input_tokens"] > 0
    turn = client.messages.create(model="claude-haiku-4-5", max_tokens=1, messages=[{"role": "user", "content": text}])
    prompt = turn.usage.input_tokens + (turn.usage.cache_read_input_tokens or 0)
    assert n == prompt, (n, turn.usage)  # the count is what the same turn's prompt costs there

    g = genai.Client(api_key=CLIENT_KEYS[1], http_options=types.HttpOptions(api_version="v1beta"))
    assert g.models.count_tokens(model="gemini-2.5-flash", contents=text).total_tokens == n
    _, ev = counted(proxy, "%:countTokens")
    assert ev == {"input_tokens": n, "counter": "Anthropic count_tokens", "endpoint": "llama"}


# ---------------------------------------------------------------- the real Claude Code's /context

CC_RULES = """\
endpoints:
  gem:
    protocol: gemini
    url: {gem}/v1beta
    key_env: TK_TEST_GEM_KEY
routes:
  - name: claude-code-to-gemini
    when: {{client: anthropic}}
    to: gem
    model: gemini-2.5-flash
"""


@pytest.mark.claudecode
def test_claude_codes_context_view_is_filled_by_the_gemini_counter(tmp_path):
    """`claude -p /context` routed to a Gemini endpoint: each of its count_tokens calls is asked of
    the scripted countTokens (translated: Gemini contents, never Anthropic's body), none goes
    elsewhere, and the view shows the counter's number; the ledger has one count per call."""
    from .test_claude_code_e2e import result_json, run_claude  # skipped when Claude Code is not installed

    with Upstream() as gem:
        gem.responder = lambda rec: (
            Reply.json({"totalTokens": 4321}) if rec.path.endswith(":countTokens") else
            Reply.json({"error": {"code": 500, "message": "no turns in this test", "status": "INTERNAL"}}, 500))
        rules = tmp_path / "rules.yaml"
        rules.write_text(CC_RULES.format(gem=gem.url))
        proxy = Mitmdump(tmp_path, rules, env=KEYS)
        try:
            p = run_claude(proxy, tmp_path, "/context")
            res = result_json(p)
            assert p.returncode == 0 and not res["is_error"], p.stderr[-2000:]
            paths = [r.path for r in gem.requests]
            assert paths and set(paths) == {"/v1beta/models/gemini-2.5-flash:countTokens"}, paths
            for rec in gem.requests:
                body = rec.json()
                inner = body.get("generateContentRequest", body)
                assert set(body) <= {"contents", "generateContentRequest"} and "contents" in inner
                assert "messages" not in inner and "max_tokens" not in inner
                no_client_key(rec)
            assert "| Messages | 4.3k |" in res["result"], res["result"]
            ledger_settled(proxy.ledger)
            with sqlite3.connect(proxy.ledger) as db:
                events = [json.loads(d) for (d,) in db.execute("SELECT data FROM events WHERE kind = 'counted'")]
            assert len(events) == len(paths)
            assert all(e == {"input_tokens": 4321, "counter": "Gemini countTokens", "endpoint": "gem"} for e in events)
        finally:
            proxy.stop()
