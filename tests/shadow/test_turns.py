"""Shadow turns, replay and prices without a proxy: the route keys, the facts read from
replies of each protocol (whole and streamed, at every split of the stream), the
comparison, the request a shadow sends, the price table and the ledger rows."""

from __future__ import annotations

import json
import sqlite3
from decimal import Decimal
from pathlib import Path

import pytest

from tokunseba.errors import TranslationError
from tokunseba.ledger import Ledger
from tokunseba.ledger.schema import MIGRATIONS
from tokunseba.neutral.usage import Usage
from tokunseba.pricing import billed_of, parse_prices, price_report, PricesError, usage_cost
from tokunseba.routing import decide, load_rules_text, RulesError, turn_facts
from tokunseba.routing.endpoints import Endpoint
from tokunseba.shadow.reply_facts import Facts
from tokunseba.shadow.turns import build_request, compare, should_shadow

from tests.conftest import load_fixture

ENDPOINTS = """\
endpoints:
  local:
    protocol: openai
    url: http://127.0.0.1:28431/v1
    key_env: LOCAL_KEY
    model: gemma-3-270m
    max_tokens: 512
routes:
"""


# ---------------------------------------------------------------- rules


def test_shadow_keys_load_and_a_shadow_only_route_passes_the_turn_through():
    rules = load_rules_text(ENDPOINTS + """\
  - name: title-turns
    when: {client: anthropic, model: "*haiku*"}
    shadow: local
    shadow_sample: 0.25
  - name: main
    when: {client: anthropic}
    to: local
    shadow: anthropic
""", "s.yaml")
    title, main = rules.routes
    assert (title.to, title.shadow, title.shadow_sample) == (None, "local", 0.25)
    assert (main.to, main.shadow, main.shadow_sample) == ("local", "anthropic", 1.0)
    haiku = turn_facts("anthropic", {"model": "claude-haiku-4-5", "messages": []}, 10, {})
    d = decide(rules, haiku)
    assert d.action == "pass" and d.route is title and d.endpoint is None
    sonnet = turn_facts("anthropic", {"model": "claude-sonnet-4-5", "messages": []}, 10, {})
    d = decide(rules, sonnet)
    assert d.action == "route" and d.route is main and d.endpoint.name == "local"
    assert [w for w in rules.warnings if "count requests" not in w] == []  # local has no token counter (issue 32)


@pytest.mark.parametrize("route,line,fragment", [
    ("  - name: r\n    shadow: nowhere\n", 10, "unknown endpoint 'nowhere' in 'shadow'"),
    ("  - name: r\n    shadow: local\n    shadow_sample: 1.5\n", 11, "shadow_sample must be a number from 0 to 1, got '1.5'"),
    ("  - name: r\n    shadow: local\n    shadow_sample: often\n", 11, "shadow_sample must be a number from 0 to 1"),
    ("  - name: r\n    to: local\n    shadow_sample: 0.5\n", 11, "shadow_sample without 'shadow'"),
    ("  - name: r\n    when: {client: anthropic}\n", 9, "has no 'to' (the endpoint to send matching turns to) and no 'shadow'"),
])
def test_shadow_key_mistakes_are_one_line_with_file_and_line(route, line, fragment):
    with pytest.raises(RulesError) as ei:
        load_rules_text(ENDPOINTS + route, "s.yaml")
    msg = str(ei.value)
    assert msg.startswith(f"s.yaml:{line}:") and fragment in msg and "\n" not in msg, msg


def test_a_shadow_some_clients_cannot_reach_is_a_load_warning():
    rules = load_rules_text(ENDPOINTS + "  - name: r\n    when: {client: [anthropic, gemini]}\n    shadow: local\n", "s.yaml")
    (w,) = rules.warnings
    assert w.startswith("s.yaml:9: warning: route 'r' shadow → local (openai)") and "gemini turns are not shadowed or replayed yet" in w


def test_sampling():
    assert should_shadow(1.0, 0.999999) and not should_shadow(0.0, 0.0)
    assert should_shadow(0.25, 0.2) and not should_shadow(0.25, 0.25)


# ---------------------------------------------------------------- facts of replies



def test_comparison_is_facts_only():
    a = Facts("tool_use", "same", [{"id": "1", "name": "get", "arguments": {"a": 1, "b": [1, 2]}}], {"x": 1}, "anthropic")
    b = Facts("tool_use", "same", [{"id": "2", "name": "get", "arguments": {"b": [1, 2.0], "a": 1}}], None, None)
    c = compare(a, b)
    assert c["compared"] and c["stop_reason"]["same"] and c["tool_names"]["same"] and c["tool_arguments_equal"]
    assert c["text"] == {"same": True, "primary_chars": 4, "shadow_chars": 4}
    assert c["usage"] == {"primary": {"x": 1}, "primary_counting": "anthropic", "shadow": None, "shadow_counting": None}
    b.tool_calls[0]["arguments"] = {"a": True, "b": [1, 2]}  # true is not 1
    assert compare(a, b)["tool_arguments_equal"] is False
    b.tool_calls.append({"id": "3", "name": "put", "arguments": {}})
    assert compare(a, b)["tool_names"]["same"] is False and compare(a, b)["tool_arguments_equal"] is False
    failed = compare(a, Facts(error="timeout"))
    assert not failed["compared"] and failed["stop_reason"]["same"] is None and failed["errors"]["shadow"] == "timeout"


# ---------------------------------------------------------------- the shadow's request


LOCAL = Endpoint("local", "openai", "http://127.0.0.1:28431/v1", "LOCAL_KEY", "gemma-3-270m", 512,
                 max_tokens_field="max_tokens")


def test_shadow_request_is_translated_non_streamed_with_the_endpoint_key_only():
    fx = load_fixture("claude-code-title-haiku.json")
    out = build_request("anthropic", "messages", json.dumps(fx["body"]).encode(), LOCAL, {"LOCAL_KEY": "sk-local-1"})
    body = json.loads(out.body)
    assert out.url == "http://127.0.0.1:28431/v1/chat/completions" and out.model == "gemma-3-270m"
    assert "stream" not in body and "stream_options" not in body and body["max_tokens"] <= 512
    assert out.headers == {"content-type": "application/json", "accept": "application/json",
                           "accept-encoding": "identity", "authorization": "Bearer sk-local-1"}
    assert any("non-streamed" in p for p in out.plumbing) and out.dropped  # thinking, metadata...
    none = build_request("anthropic", "messages", json.dumps(fx["body"]).encode(), LOCAL, {})
    assert "authorization" not in none.headers  # no key set: none sent, never the client's


def test_shadow_request_same_protocol_and_refusals():
    ant = Endpoint("ant", "anthropic", "http://127.0.0.1:9/v1", "ANT_KEY")
    out = build_request("anthropic", "messages", b'{"model":"m","stream":true,"max_tokens":5,"messages":[]}', ant,
                        {"ANT_KEY": "k"})
    assert json.loads(out.body) == {"model": "m", "max_tokens": 5, "messages": []}
    assert out.headers["x-api-key"] == "k" and out.headers["anthropic-version"]
    gem = Endpoint("gem", "gemini", "http://127.0.0.1:9/v1beta")
    for client, kind, ep, body in [("anthropic", "messages", gem, b"{}"), ("anthropic", "count_tokens", ant, b"{}"),
                                   ("anthropic", "messages", ant, b"[1]"), ("anthropic", "messages", ant, b"{")]:
        with pytest.raises(TranslationError):
            build_request(client, kind, body, ep, {})


# ---------------------------------------------------------------- prices


def test_price_table_and_cost_of_reported_usage():
    prices = parse_prices("prices:\n  anthropic:claude-haiku-*: {input: 1.0, output: 5.0, cache_read: 0.1, "
                          "cache_write: 1.25}\n  local:*: {input: 0, output: 0}\n", "p.yaml")
    assert [p.endpoint for p in prices] == ["anthropic", "local"]
    billed = billed_of("anthropic", {"input_tokens": 100, "output_tokens": 10, "cache_read_input_tokens": 1000,
                                     "cache_creation_input_tokens": 0})
    cost, parts, unpriced = usage_cost(prices[0], billed)
    assert cost == Decimal(100 * 1 + 10 * 5) / 10**6 + Decimal(1000) * Decimal("0.1") / 10**6 and unpriced == {}
    assert sum(parts.values()) == cost  # exact: decimals from the file's text, never floats
    # OpenAI counting: prompt_tokens include the cached ones; no cache_read price: listed, not guessed
    billed = billed_of("openai", {"prompt_tokens": 300, "completion_tokens": 20,
                                  "prompt_tokens_details": {"cached_tokens": 200}})
    cost, parts, unpriced = usage_cost(prices[1], billed)
    assert cost == 0 and unpriced == {"cache_read": 200}


@pytest.mark.parametrize("text,line,fragment", [
    ("prices:\n  haiku: {input: 1}\n", 2, "must be ENDPOINT:MODEL_GLOB"),
    ("prices:\n  a:b: {input: -1}\n", 2, "prices.a:b.input must be a number ≥ 0"),
    ("prices:\n  a:b: {inputs: 1}\n", 2, "unknown key 'inputs'"),
    ("cost: {}\n", 1, "the price file has no 'prices' mapping"),
    ("prices: [\n", 2, "YAML syntax error"),
])
def test_price_table_mistakes_are_one_line(text, line, fragment):
    with pytest.raises(PricesError) as ei:
        parse_prices(text, "p.yaml")
    assert str(ei.value).startswith(f"p.yaml:{line}:") and fragment in str(ei.value), str(ei.value)


def test_would_have_cost_needs_the_original_providers_own_usage():
    prices = parse_prices("prices:\n  local:*: {input: 0.1, output: 0.2}\n  anthropic:*: {input: 3, output: 15}\n")
    turn = {"request_id": "tk-1", "endpoint": "local", "model_used": "gemma", "outcome": "translated",
            "usage_reported": {"prompt_tokens": 10, "completion_tokens": 5}, "usage_protocol": "openai",
            "usage_input": 10, "usage_output": 5}
    local_shadow = {"request_id": "tk-1", "kind": "shadow", "endpoint": "local2", "model": "x", "at_original": 0,
                    "usage_reported": {"input_tokens": 7, "output_tokens": 1}, "usage_input": 7, "usage_output": 1}
    rep = price_report([turn], [local_shadow], prices)
    assert rep["original_provider"]["turns_with_original_usage"] == 0  # never estimated from another model
    at_provider = {**local_shadow, "endpoint": "anthropic", "at_original": 1, "usage_protocol": "anthropic"}
    rep = price_report([turn], [at_provider], prices)
    o = rep["original_provider"]
    assert o["turns_with_original_usage"] == 1
    assert o["would_have_cost"] == Decimal(7 * 3 + 1 * 15) / 10**6
    assert o["cost_served"] == (10 * Decimal("0.1") + 5 * Decimal("0.2")) / 10**6


# ---------------------------------------------------------------- ledger


def test_shadow_rows_are_linked_and_usage_is_as_reported(tmp_path):
    with Ledger(tmp_path / "l.db") as led:
        led.start_turn("tk-p", started_at=1.0, client_protocol="anthropic", host="h", path="/v1/messages",
                       requested_model="m", stream=True)
        led.update_turn("tk-p", latency_ms=12.0)
        led.add_shadow("tk-p", "shadow", started_at=1.0, usage=Usage("openai", {"prompt_tokens": 9,
                                                                                 "completion_tokens": 2}),
                       endpoint="local", route="r", status=200, latency_ms=30.0, comparison={"compared": True},
                       request_body=b'{"x": "Bearer sk-ant-abcdefghijkl123"}', dropped=["thinking"])
        led.add_shadow("tk-p", "shadow_skipped", started_at=2.0, endpoint="local", route="r", error="full")
        rows = led.shadows()
        assert [r["kind"] for r in rows] == ["shadow", "shadow_skipped"]
        assert rows[0]["usage_reported"] == {"prompt_tokens": 9, "completion_tokens": 2}
        assert (rows[0]["usage_input"], rows[0]["usage_output"], rows[0]["usage_cache_read"]) == (9, 2, None)
        assert rows[0]["primary_latency_ms"] == 12.0 and rows[0]["dropped"] == ["thinking"]
        assert rows[1]["usage_reported"] is None and rows[1]["usage_input"] is None
        (full,) = [r for r in led.shadows(request_id="tk-p", bodies=True) if r["kind"] == "shadow"]
        assert b"sk-ant-abcdefghijkl123" not in full["request_body"]  # redacted like everything else


def test_an_older_ledger_gets_the_shadows_table(tmp_path):
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
    for name, statements in MIGRATIONS[:2]:
        for sql in statements:
            conn.execute(sql)
        conn.execute("INSERT INTO _migrations VALUES (?, 1.0)", (name,))
    conn.close()
    with Ledger(path, readonly=True) as ro:
        assert ro.shadows() == []  # read before migrating: no table, no rows
    with Ledger(path) as led:
        assert "0003_shadows" in led.schema() and led.shadows() == []


def test_the_pure_parts_do_no_io():
    """shadow/turns.py, shadow/reply_facts.py, shadow/view.py and pricing/ never send, listen or
    open a database; the sending lives in shadow/sender.py (the addon) and shadow/replay.py (the CLI)."""
    import ast

    pkg = Path(__file__).resolve().parents[2] / "addon" / "tokunseba"
    banned = {"asyncio", "socket", "sqlite3", "http", "httpx", "mitmproxy", "urllib", "..ledger", "..proxy", ".ledger",
              ".proxy", ".sender", ".replay"}
    pricing = [f"pricing/{f.name}" for f in sorted((pkg / "pricing").glob("*.py"))]
    for name in ("shadow/turns.py", "shadow/reply_facts.py", "shadow/view.py", *pricing):
        tree = ast.parse((pkg / name).read_text())
        names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {("." * n.level) + (n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert not names & banned, (name, names & banned)
