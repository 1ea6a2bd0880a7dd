"""count_tokens: probe, end to end (issue 32): a real mitmdump with the addon on a free loopback
port; an endpoint without a counter of its own answers counts with the turn itself (not
streamed, at most 1 output token), and the client gets the input that turn reported.

- a scripted Chat server that insists on what a probe is (max_tokens 1, no stream, no reasoning)
  answers the anthropic SDK's count_tokens; the ledger records the count as a count;
- the real llama-server: the anthropic SDK's count equals the prompt tokens of the same turn sent
  through the proxy, and equals llama-server's own Anthropic count route.
"""

from __future__ import annotations

import json
import sqlite3

import anthropic
import pytest

from .conftest import Mitmdump, ledger_settled
from tests.support.upstream import Recorded, Reply, Upstream

CLIENT_KEY = "sk-ant-client-probe-SECRET"
RULES = """\
endpoints:
  local:
    protocol: openai
    url: {url}/v1
    model: {model}
    max_tokens: 48
    max_tokens_field: max_tokens
    count_tokens: probe
routes:
  - name: all-local
    to: local
unmatched: refuse
"""


def probe_only(rec: Recorded) -> Reply:
    """A Chat server that answers only what a probe is: a 1-token whole turn, no reasoning."""
    body = rec.json()
    if rec.path != "/v1/chat/completions" or body.get("max_tokens") != 1 or "stream" in body \
            or "reasoning_effort" in body or body.get("model") != "local-m":
        return Reply.json({"error": {"message": f"not a probe: {rec.path} {sorted(body)}", "type": "bad"}}, 400)
    return Reply.json({"id": "chatcmpl-p", "object": "chat.completion", "created": 1, "model": "local-m",
                       "choices": [{"index": 0, "finish_reason": "length",
                                    "message": {"role": "assistant", "content": "I"}}],
                       "usage": {"prompt_tokens": 57, "completion_tokens": 1, "total_tokens": 58}})


def via(proxy: Mitmdump, monkeypatch) -> anthropic.Anthropic:
    for k, v in proxy.client_env().items():
        monkeypatch.setenv(k, v)
    for k in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(k, raising=False)
    return anthropic.Anthropic(api_key=CLIENT_KEY, max_retries=0)


def test_a_count_is_answered_by_a_one_token_probe_of_a_server_without_a_counter(tmp_path, monkeypatch):
    with Upstream() as chat:
        chat.responder = probe_only
        rules = tmp_path / "rules.yaml"
        rules.write_text(RULES.format(url=chat.url, model="local-m"))
        proxy = Mitmdump(tmp_path, rules)
        try:
            client = via(proxy, monkeypatch)
            got = client.messages.count_tokens(
                model="claude-haiku-4-5", system="Be brief.", thinking={"type": "enabled", "budget_tokens": 2048},
                messages=[{"role": "user", "content": "how many tokens?"}])
            assert got.input_tokens == 57
            (rec,) = chat.requests
            assert CLIENT_KEY not in json.dumps(rec.headers)
            assert rec.json()["messages"] == [{"role": "system", "content": "Be brief."},
                                              {"role": "user", "content": "how many tokens?"}]
            ledger_settled(proxy.ledger)
            with sqlite3.connect(proxy.ledger) as db:
                (data,) = db.execute("SELECT data FROM events WHERE kind = 'counted'").fetchone()
                usage = db.execute("SELECT usage_input FROM turns").fetchone()[0]
            assert json.loads(data) == {"input_tokens": 57, "endpoint": "local",
                                        "counter": "OpenAI Chat Completions probe (a turn of at most 1 output token)"}
            assert usage is None  # a count, not a turn's usage
        finally:
            proxy.stop()


@pytest.mark.localmodel
def test_a_probe_of_the_real_llama_server_counts_what_the_same_turn_costs_there(tmp_path_factory, monkeypatch):
    import httpx

    from .test_localmodel_e2e import _start, _stop  # skipped when not installed; fails under CI

    state = tmp_path_factory.mktemp("probe-localmodel-state")
    url = _start("llama-server", state)
    work = tmp_path_factory.mktemp("probe-llama-proxy")
    rules = work / "rules.yaml"
    rules.write_text(RULES.format(url=url.removesuffix("/v1"), model="gemma-3-270m"))
    proxy = Mitmdump(work, rules)
    try:
        client = via(proxy, monkeypatch)
        text = "Count the tokens of this sentence, please."
        msgs = [{"role": "user", "content": text}]
        n = client.messages.count_tokens(model="claude-haiku-4-5", messages=msgs).input_tokens
        turn = client.messages.create(model="claude-haiku-4-5", max_tokens=1, messages=msgs)
        assert n == turn.usage.input_tokens + (turn.usage.cache_read_input_tokens or 0) > 0, (n, turn.usage)
        with httpx.Client(trust_env=False) as direct:  # llama-server's own counter agrees
            own = direct.post(f"{url}/messages/count_tokens", json={"model": "gemma-3-270m", "messages": msgs})
        assert n == own.json()["input_tokens"]
    finally:
        proxy.stop()
        _stop("llama-server", state)
