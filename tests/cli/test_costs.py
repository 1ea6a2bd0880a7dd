"""What the read commands need to show cost (cli/costs.py): the price table from --prices, else the
rules file of $TOKUNSEBA_RULES, else none; each turn's cost from the ledger, a routed turn priced at
the URL its ``routed`` event says it went to."""

from __future__ import annotations

import argparse
from decimal import Decimal

import pytest

from tokunseba.cli.costs import add_prices_option, price_table, routed_urls, turn_costs
from tokunseba.ledger import Ledger
from tokunseba.pricing import PricesError, Source


def args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_prices_option(p)
    return p.parse_args(list(argv))


def test_the_price_table_from_the_option_else_the_rules_file(tmp_path, monkeypatch):
    prices = tmp_path / "prices.yaml"
    prices.write_text("prices:\n  local:*: {input: 0.5, output: 1}\n")
    rules = tmp_path / "rules.yaml"
    rules.write_text("routes: []\nprices:\n  anthropic:*: {input: 2}\n")
    monkeypatch.setenv("TOKUNSEBA_RULES", str(rules))
    (p,) = price_table(args("--prices", str(prices)))
    assert p.per_million == {"input": Decimal("0.5"), "output": Decimal(1)}
    (r,) = price_table(args())
    assert r.per_million == {"input": Decimal(2)}
    monkeypatch.delenv("TOKUNSEBA_RULES")
    assert price_table(args()) == []
    prices.write_text("prices:\n  local: {input: 1}\n")
    with pytest.raises(PricesError, match="key 'local' must be ENDPOINT:MODEL_GLOB"):
        price_table(args("--prices", str(prices)))


def test_each_turns_cost_with_the_url_a_routed_turn_went_to(tmp_path):
    with Ledger(tmp_path / "l.db") as led:
        led.start_turn("tk-local", started_at=1000.0, client_protocol="anthropic", host="api.anthropic.com",
                       path="/v1/messages", requested_model="claude-haiku-4-5", stream=False)
        led.update_turn("tk-local", rule="easy", endpoint="mine", target_protocol="openai", model_used="qwen3",
                        outcome="translated", status=200, usage_protocol="openai",
                        usage_reported={"prompt_tokens": 30, "completion_tokens": 3})
        led.event("tk-local", "routed", {"decision": "route", "rule": "easy", "endpoint": "mine",
                                         "url": "http://127.0.0.1:8080/v1"}, ts=1000.0)
        led.start_turn("tk-none", started_at=1001.0, client_protocol="anthropic", host="api.anthropic.com",
                       path="/v1/messages", requested_model="claude-haiku-4-5", stream=False)
        led.update_turn("tk-none", outcome="pass_through", status=529, error="upstream 529: Overloaded")
        turns = led.turns()
        assert routed_urls(led, turns) == {"tk-local": "http://127.0.0.1:8080/v1"}
        costs = turn_costs(led, turns, [])
    assert set(costs) == {"tk-local", "tk-none"}
    assert (costs["tk-local"].kind, costs["tk-local"].usd) == (Source.LOCAL, 0)  # a routed endpoint on loopback
    assert costs["tk-none"].kind is Source.NO_USAGE
