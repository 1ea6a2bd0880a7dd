"""Issue 12 end to end: shadow turns through a real mitmdump with the addon, scripted upstreams
on loopback, a Claude Code-shaped streamed turn; `tokunseba shadow`, `explain`, `replay` and
`stats --prices` read the ledger the proxy wrote."""

from __future__ import annotations

import json
import os
import subprocess
import time
from decimal import Decimal
from pathlib import Path

import httpx
import pytest

from ..conftest import load_fixture
from .conftest import BIN, KEYS, Mitmdump
from .test_proxy_e2e import CLIENT_KEY, chat_text_stream
from tests.support.upstream import Reply, Upstream

pytestmark = pytest.mark.e2e

FIXTURE = load_fixture("claude-code-print-main-turn.json")
STREAMS = Path(__file__).resolve().parents[1] / "data" / "streams"
PRIMARY_SSE = (STREAMS / "anthropic_validated_text_tool.sse").read_bytes()  # text + get_weather(Paris, celsius)
SKIP_HEADERS = {"host", "content-length", "accept-encoding", "connection", "x-api-key"}

RULES = """\
endpoints:
  oai:
    protocol: openai
    url: {oai}/v1
    key_env: TK_TEST_OAI_KEY
    max_tokens: 2048
  ant:
    protocol: anthropic
    url: {ant}/v1
    key_env: TK_TEST_ANT_KEY
  stall:
    protocol: openai
    url: {stall}/v1
routes:
  - name: shadowed
    when: {{client: anthropic, header: {{x-test-shadow: oai}}}}
    shadow: oai
  - name: stalled
    when: {{client: anthropic, header: {{x-test-shadow: stall}}}}
    shadow: stall
  - name: local-first
    when: {{client: anthropic, model: "local-*"}}
    to: oai
    shadow: ant
"""

# the shadow's whole Chat reply: same text, same tool with the same arguments in another key order
AGREEING = {"id": "chatcmpl-shadow-1", "object": "chat.completion", "created": 1767225600, "model": "local-model",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": "Let me check the weather.",
                "tool_calls": [{"id": "call_s1", "type": "function", "function": {
                    "name": "get_weather", "arguments": "{\"unit\": \"celsius\", \"city\": \"Paris\"}"}}]}}],
            "usage": {"prompt_tokens": 1500, "completion_tokens": 31, "total_tokens": 1531}}
DISAGREEING = {"id": "chatcmpl-shadow-2", "object": "chat.completion", "created": 1767225600, "model": "local-model",
               "choices": [{"index": 0, "finish_reason": "stop",
                            "message": {"role": "assistant", "content": "It is sunny in Paris."}}],
               "usage": {"prompt_tokens": 1500, "completion_tokens": 7, "total_tokens": 1507}}


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "tokunseba"), *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **KEYS})


@pytest.fixture(scope="module")
def stall():
    with Upstream() as up:
        yield up


@pytest.fixture(scope="module")
def shadow_proxy(upstreams, stall, tmp_path_factory):
    work = tmp_path_factory.mktemp("shadow-e2e")
    rules = work / "rules.yaml"
    rules.write_text(RULES.format(oai=upstreams["oai"].url, ant=upstreams["ant"].url, stall=stall.url))
    m = Mitmdump(work, rules, env=KEYS, extra=[
        "--set", f"tokunseba_provider_hosts=127.0.0.1:{upstreams['ant'].port}=anthropic",
        "--set", "tokunseba_shadow_concurrency=2", "--set", "tokunseba_shadow_timeout_s=5"])
    yield m
    m.stop()


def claude_code_turn(proxy: Mitmdump, ant: Upstream, shadow: str | None, model: str | None = None) -> httpx.Response:
    """The captured Claude Code main turn (48 KB, tools, thinking, streamed), sent as Claude Code sends it."""
    headers = {k: v for k, v in FIXTURE["headers"] if k.lower() not in SKIP_HEADERS}
    headers["x-api-key"] = CLIENT_KEY
    if shadow:
        headers["x-test-shadow"] = shadow
    body = dict(FIXTURE["body"], **({"model": model} if model else {}))
    with httpx.Client(proxy=proxy.url, timeout=30, trust_env=False) as c:
        return c.post(f"{ant.url}/v1/messages?beta=true", headers=headers, content=json.dumps(body).encode())


def wait_rows(proxy: Mitmdump, ids: list[str], n: int, timeout: float = 30.0) -> list[dict]:
    """The ledger's shadow rows of these turns once there are ``n`` of them."""
    import sqlite3

    deadline = time.time() + timeout
    while True:
        con = sqlite3.connect(proxy.ledger)
        con.row_factory = sqlite3.Row
        try:
            rows = [dict(r) for r in con.execute(
                f"SELECT * FROM shadows WHERE request_id IN ({','.join('?' * len(ids))}) ORDER BY id", ids)]
        except sqlite3.OperationalError:
            rows = []
        finally:
            con.close()
        if len(rows) >= n or time.time() > deadline:
            return rows
        time.sleep(0.1)


def test_shadowed_turn_serves_the_same_bytes_and_records_the_comparison(shadow_proxy, upstreams):
    oai, ant = upstreams["oai"], upstreams["ant"]
    ant.script(Reply.sse(PRIMARY_SSE))
    oai.script(Reply.json(AGREEING), Reply.json(DISAGREEING))
    plain = claude_code_turn(shadow_proxy, ant, None)
    shadowed = claude_code_turn(shadow_proxy, ant, "oai")
    second = claude_code_turn(shadow_proxy, ant, "oai")
    assert plain.status_code == shadowed.status_code == 200
    assert shadowed.content == plain.content == second.content  # the client's bytes: same with and without shadow
    assert b"event: message_stop" in shadowed.content
    ids = [shadowed.headers["x-tokunseba-request-id"], second.headers["x-tokunseba-request-id"]]
    rows = wait_rows(shadow_proxy, ids, 2)
    assert [r["request_id"] for r in rows] == ids and {r["kind"] for r in rows} == {"shadow"}
    assert json.loads(rows[0]["usage_reported"]) == AGREEING["usage"]  # the shadow's usage, as reported
    assert rows[0]["usage_input"] == 1500 and rows[0]["usage_output"] == 31 and rows[0]["status"] == 200
    assert rows[0]["endpoint"] == "oai" and rows[0]["route"] == "shadowed" and rows[0]["at_original"] == 0
    assert "thinking" in json.loads(rows[0]["dropped"])  # drops recorded for the shadow too
    # the shadow endpoint got a translated, non-streamed request with its own key, never the client's
    assert len(oai.requests) == 2
    for rec in oai.requests:
        assert rec.path == "/v1/chat/completions" and rec.headers["authorization"] == "Bearer " + KEYS["TK_TEST_OAI_KEY"]
        assert all(CLIENT_KEY not in v for v in rec.headers.values())
        assert "x-api-key" not in rec.headers and "stream" not in rec.json()
    rep = json.loads(cli("shadow", "--ledger", str(shadow_proxy.ledger), "--route", "shadowed", "--json").stdout)
    (g,) = rep["groups"]
    assert (g["shadowed"], g["skipped"], g["failed"], g["compared"]) == (2, 0, 0, 2)
    assert g["agree"] == {"stop_reason": 1, "tool_names": 1, "tool_arguments": 1, "text_exact": 1}
    assert g["turns_with_tool_calls"] == 2 and g["tool_arguments_agree_with_tool_calls"] == 1
    assert g["tokens"]["shadow"]["by_counting"]["openai"]["input"] == 3000
    assert g["tokens"]["primary"]["by_counting"]["anthropic"]["output"] == 71 * 2  # the primary's, as reported
    assert g["latency_ms"]["shadow"]["n"] == 2 and g["latency_ms"]["primary"]["n"] == 2
    text = cli("shadow", "--ledger", str(shadow_proxy.ledger))
    assert text.returncode == 0 and "shadowed → oai" in text.stdout
    ex = cli("explain", ids[1], "--ledger", str(shadow_proxy.ledger))
    assert ex.returncode == 0, ex.stderr
    assert "It is sunny in Paris." in ex.stdout and 'tool get_weather({"city":"Paris","unit":"celsius"})' in ex.stdout
    assert "same stop reason: no" in ex.stdout


def test_full_shadow_queue_skips_and_turns_keep_flowing(shadow_proxy, upstreams, stall):
    ant = upstreams["ant"]
    ant.script(Reply.sse(PRIMARY_SSE))
    stall.script(Reply(200, {"content-type": "application/json"}, [b"{", b"}"], delay=10, framing="chunked"))
    replies = [claude_code_turn(shadow_proxy, ant, "stall") for _ in range(5)]
    assert all(r.status_code == 200 and b"event: message_stop" in r.content for r in replies)
    ids = [r.headers["x-tokunseba-request-id"] for r in replies]
    rows = wait_rows(shadow_proxy, ids, 5)
    by_kind = {k: [r for r in rows if r["kind"] == k] for k in ("shadow", "shadow_skipped")}
    assert len(by_kind["shadow_skipped"]) == 3 and len(by_kind["shadow"]) == 2  # the bound is 2
    assert {r["request_id"] for r in by_kind["shadow"]} == set(ids[:2])
    assert all("no reply within 5 s" in r["error"] for r in by_kind["shadow"])
    rep = json.loads(cli("shadow", "--ledger", str(shadow_proxy.ledger), "--route", "stalled", "--json").stdout)
    (g,) = rep["groups"]
    assert (g["shadowed"], g["skipped"], g["failed"], g["compared"]) == (2, 3, 2, 0)


ANT_WHOLE = {"id": "msg_replay_1", "type": "message", "role": "assistant", "model": "claude-replayed",
             "content": [{"type": "text", "text": "Replayed answer."}], "stop_reason": "end_turn",
             "stop_sequence": None, "usage": {"input_tokens": 900, "output_tokens": 4, "cache_read_input_tokens": 2048}}


def test_replay_a_shadowed_turn_to_two_endpoints_and_a_turn_without_body(shadow_proxy, upstreams, tmp_path):
    oai, ant = upstreams["oai"], upstreams["ant"]
    ant.script(Reply.sse(PRIMARY_SSE), Reply.sse(PRIMARY_SSE), Reply.json(ANT_WHOLE))
    oai.script(Reply.json(AGREEING))
    shadowed = claude_code_turn(shadow_proxy, ant, "oai")
    plain = claude_code_turn(shadow_proxy, ant, None)
    rid = shadowed.headers["x-tokunseba-request-id"]
    wait_rows(shadow_proxy, [rid], 1)
    ledger, rules = str(shadow_proxy.ledger), str(shadow_proxy.rules)
    saved = tmp_path / "reply.json"
    # to the Anthropic endpoint: same protocol as the client
    r = cli("replay", rid[:16], "--to", "ant", "--rules", rules, "--ledger", ledger, "--json", "--save", str(saved))
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["request_id"] == rid and got["endpoint"] == "ant" and got["status"] == 200
    assert got["client_reply"] == ANT_WHOLE and saved.read_bytes() == json.dumps(ANT_WHOLE).encode()
    assert got["usage_reported"] == ANT_WHOLE["usage"]
    assert got["facts"]["text"] == "Replayed answer." and got["primary_facts"]["tool_calls"][0]["name"] == "get_weather"
    sent = ant.requests[-1]
    assert sent.headers["x-api-key"] == KEYS["TK_TEST_ANT_KEY"] and "stream" not in sent.json()
    # to the Chat endpoint: translated both ways, the reply shown in the client's protocol
    oai.script(Reply.json(DISAGREEING))
    r = cli("replay", rid, "--to", "oai", "--rules", rules, "--ledger", ledger, "--json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["client_reply"]["type"] == "message" and got["client_reply"]["content"][0]["text"] == "It is sunny in Paris."
    assert got["usage_reported"] == DISAGREEING["usage"] and got["comparison"]["text"]["same"] is False
    assert all(CLIENT_KEY not in v for v in oai.requests[-1].headers.values())
    text = cli("replay", rid, "--to", "oai", "--rules", rules, "--ledger", ledger)
    assert text.returncode == 0 and "It is sunny in Paris." in text.stdout and "recorded as a replay" in text.stdout
    story = json.loads(cli("explain", rid, "--ledger", ledger, "--json").stdout)
    assert [s["kind"] for s in story["shadows"]] == ["shadow", "replay", "replay", "replay"]
    # a turn whose body was not stored: one clear line
    bad = cli("replay", plain.headers["x-tokunseba-request-id"], "--to", "oai", "--rules", rules, "--ledger", ledger)
    assert bad.returncode == 1 and len(bad.stderr.strip().splitlines()) == 1
    assert "no stored request body" in bad.stderr and "Traceback" not in bad.stderr


PRICES = """\
prices:
  oai:local-*: {input: 0.5, output: 1.5, cache_read: 0.05}
  ant:local-*: {input: 3.0, output: 15.0, cache_read: 0.3, cache_write: 3.75}
"""


def test_stats_prices_cost_of_reported_usage_and_would_have_cost_only_where_reported(upstreams, stall, tmp_path,
                                                                                     monkeypatch):
    """Two turns served by the Chat endpoint (translated) and shadowed at the provider the client
    addressed; that provider reports usage for the first and fails the second."""
    import anthropic

    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES.format(oai=upstreams["oai"].url, ant=upstreams["ant"].url, stall=stall.url))
    m = Mitmdump(tmp_path, rules, env=KEYS, extra=[
        "--set", f"tokunseba_provider_hosts=127.0.0.1:{upstreams['ant'].port}=anthropic"])
    try:
        oai, ant = upstreams["oai"], upstreams["ant"]
        oai.script(Reply.sse(chat_text_stream("chatcmpl-priced")))
        ant.script(Reply.json(ANT_WHOLE), Reply.json({"type": "error", "error": {"type": "api_error",
                                                                                   "message": "down"}}, 500))
        for k, v in m.client_env().items():
            monkeypatch.setenv(k, v)
        client = anthropic.Anthropic(api_key=CLIENT_KEY, max_retries=0, base_url=ant.url)
        ids = []
        for _ in range(2):
            with client.messages.with_streaming_response.create(
                    model="local-model-1", max_tokens=50, stream=True,
                    messages=[{"role": "user", "content": "hi"}]) as resp:
                ids.append(resp.headers["x-tokunseba-request-id"])
                for _ in resp.iter_lines():
                    pass
            wait_rows(m, ids, len(ids))
    finally:
        m.stop()
    prices = tmp_path / "prices.yaml"
    prices.write_text(PRICES)
    r = cli("stats", "--ledger", str(m.ledger), "--prices", str(prices), "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)["prices"]
    # served by oai, as it reported: 2610 prompt tokens of which 2048 cached, 58 completion tokens
    served = ((2610 - 2048) * Decimal("0.5") + 58 * Decimal("1.5") + 2048 * Decimal("0.05")) / 10**6  # exact: decimals
    (g,) = rep["served"]
    assert (g["endpoint"], g["model"], g["turns"], g["priced"]) == ("oai", "local-model-1", 2, 2)
    assert Decimal(g["cost"]) == 2 * served and Decimal(rep["served_total"]) == 2 * served
    # the shadow at the original provider, as it reported: 900 input, 4 output, 2048 cache reads
    original = (900 * Decimal("3.0") + 4 * Decimal("15.0") + 2048 * Decimal("0.3")) / 10**6
    (s,) = rep["shadow_and_replay_calls"]
    assert (s["endpoint"], s["turns"], s["priced"], s["no_usage"]) == ("ant", 2, 1, 1)
    assert Decimal(s["cost"]) == original
    o = rep["original_provider"]
    assert (o["turns_served_elsewhere"], o["turns_with_original_usage"]) == (2, 1)  # none for the failed shadow
    assert Decimal(o["would_have_cost"]) == original and Decimal(o["cost_served"]) == served
    text = cli("stats", "--ledger", str(m.ledger), "--prices", str(prices))
    assert text.returncode == 0 and "with that provider's own usage (a shadow or replay to it): 1" in text.stdout
    plain = cli("stats", "--ledger", str(m.ledger))
    # no table: the endpoint on loopback costs 0; the shadow endpoint (a user's, unknown to the library) is unpriced
    assert plain.returncode == 0 and "local: 0" in plain.stdout and "turns served: $0.000000" in plain.stdout


def test_replay_of_a_turn_recorded_with_ledger_bodies(upstreams, stall, tmp_path, monkeypatch):
    """No shadow: the body comes from `--ledger-bodies` (tokunseba_ledger_bodies)."""
    import anthropic

    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES.format(oai=upstreams["oai"].url, ant=upstreams["ant"].url, stall=stall.url))
    m = Mitmdump(tmp_path, rules, env=KEYS, extra=[
        "--set", f"tokunseba_provider_hosts=127.0.0.1:{upstreams['ant'].port}=anthropic",
        "--set", "tokunseba_ledger_bodies=true"])
    try:
        for k, v in m.client_env().items():
            monkeypatch.setenv(k, v)
        upstreams["ant"].script(Reply.json(ANT_WHOLE))
        raw = anthropic.Anthropic(api_key=CLIENT_KEY, max_retries=0, base_url=upstreams["ant"].url) \
            .messages.with_raw_response.create(model="claude-sonnet-4-5", max_tokens=20,
                                               messages=[{"role": "user", "content": "hi"}])
        rid = raw.headers["x-tokunseba-request-id"]
    finally:
        m.stop()
    upstreams["oai"].script(Reply.json(AGREEING))
    r = cli("replay", rid, "--to", "oai", "--rules", str(rules), "--ledger", str(m.ledger), "--json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["primary_facts"]["text"] == "Replayed answer." and got["facts"]["tool_calls"][0]["name"] == "get_weather"
    assert got["comparison"]["tool_names"]["same"] is False and got["usage_reported"] == AGREEING["usage"]
    assert upstreams["oai"].requests[-1].json()["messages"][-1]["content"] == "hi"
