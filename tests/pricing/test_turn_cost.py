"""What a turn costs (pricing/turn_cost.py, issue 40): the price library's list prices for a Claude
Code turn with cache reads and for a Chat turn whose prompt_tokens include the cached ones, the
long-context tier, an unknown model unpriced, the user's table over the library, a local endpoint
at 0, exact money. The expected figures are computed from the library's own published per-token
rates (tests/support/prices.py), never from pricing/'s code."""

from __future__ import annotations

import time
from decimal import Decimal

import pytest

from tokunseba.pricing import billed_of, cost_of, cost_text, library_version, parse_prices, Source, total

from tests.support.prices import ANTHROPIC, CLAUDE_CODE_USAGE, MTOK, OPENAI, rates


def priced(counting: str, usage: dict, model: str, url: str | None, endpoint: str | None = None,
           table: list | None = None):
    return cost_of(model=model, endpoint=endpoint, url=url, billed=billed_of(counting, usage), at=time.time(),
                   table=table or [])


def test_a_claude_code_turn_with_cache_reads_at_the_librarys_rates():
    r = rates("anthropic", "claude-sonnet-4-5")
    u = CLAUDE_CODE_USAGE  # Anthropic's input_tokens exclude the cache: each count at its own rate
    want = (u["input_tokens"] * r["input"] + u["cache_read_input_tokens"] * r["cache_read"]
            + u["cache_creation_input_tokens"] * r["cache_write"] + u["output_tokens"] * r["output"]) / MTOK
    cost = priced("anthropic", u, "claude-sonnet-4-5-20250929", ANTHROPIC, "anthropic")
    assert cost.kind is Source.LIBRARY and cost.usd == want
    assert cost.source == f"genai-prices {library_version()} (anthropic claude-sonnet-4-5)"
    assert cost.parts == {"input": 4 * r["input"] / MTOK, "cache_read": 23_890 * r["cache_read"] / MTOK,
                          "cache_write": 1_536 * r["cache_write"] / MTOK, "output": 412 * r["output"] / MTOK}
    assert sum(cost.parts.values()) == cost.usd


def test_the_long_context_tier_applies_to_the_whole_input_as_the_library_says():
    u = {"input_tokens": 150_000, "cache_read_input_tokens": 60_000, "output_tokens": 1_000}
    r = rates("anthropic", "claude-sonnet-4-5", tier_input=210_000)  # input + cache read pass 200K
    assert r["input"] > rates("anthropic", "claude-sonnet-4-5")["input"]
    want = (150_000 * r["input"] + 60_000 * r["cache_read"] + 1_000 * r["output"]) / MTOK
    assert priced("anthropic", u, "claude-sonnet-4-5", ANTHROPIC).usd == want


def test_a_chat_turn_whose_prompt_tokens_include_the_cached_ones():
    r = rates("openai", "gpt-4o-mini")
    u = {"prompt_tokens": 2_000, "completion_tokens": 100, "total_tokens": 2_100,
         "prompt_tokens_details": {"cached_tokens": 1_500}, "completion_tokens_details": {"reasoning_tokens": 0}}
    want = ((2_000 - 1_500) * r["input"] + 1_500 * r["cache_read"] + 100 * r["output"]) / MTOK
    cost = priced("openai", u, "gpt-4o-mini", OPENAI, "openai")
    assert cost.usd == want and cost.parts["input"] == 500 * r["input"] / MTOK  # the cached part priced once


def test_an_unknown_model_is_unpriced_never_guessed():
    cost = priced("openai", {"prompt_tokens": 10, "completion_tokens": 2}, "my-finetune-7", OPENAI, "openai")
    assert (cost.kind, cost.usd) == (Source.UNPRICED, None)
    assert cost.source == "unpriced: no price for my-finetune-7 at openai"
    # a host the library does not know: not priced by the model's name alone
    cost = priced("openai", {"prompt_tokens": 10, "completion_tokens": 2}, "gpt-4o-mini",
                  "https://llm.corp.example/v1", "corp")
    assert cost.kind is Source.UNPRICED and cost_text(cost) == "unpriced"


def test_the_users_table_overrides_the_library():
    table = parse_prices("prices:\n  local:*: {input: 0.05, output: 0.1}\n"
                         "  anthropic:claude-sonnet-*: {input: 2.5, output: 12.5, cache_read: 0.25, cache_write: 3}\n",
                         "prices.yaml")
    cost = priced("anthropic", CLAUDE_CODE_USAGE, "claude-sonnet-4-5", ANTHROPIC, "anthropic", table)
    assert cost.kind is Source.TABLE and cost.source == "your table: prices.yaml line 3"
    assert cost.usd == (4 * Decimal("2.5") + 412 * Decimal("12.5") + 23_890 * Decimal("0.25") + 1_536 * 3) / MTOK
    # a reported count the row has no price for: listed, not guessed
    cost = priced("anthropic", CLAUDE_CODE_USAGE, "qwen3", "http://127.0.0.1:8080/v1", "local", table)
    assert cost.kind is Source.TABLE and cost.unpriced_tokens == {"cache_read": 23_890, "cache_write": 1_536}
    assert cost_text(cost) == "$0.000041+"  # 4 × 0.05 + 412 × 0.1 per million, and tokens left unpriced


@pytest.mark.parametrize("url", ["http://127.0.0.1:8080/v1", "http://localhost:11434/v1", "http://[::1]:8000/v1"])
def test_a_local_endpoint_costs_nothing_unless_priced(url):
    cost = priced("openai", {"prompt_tokens": 900, "completion_tokens": 50}, "gpt-4o-mini", url, "local")
    assert (cost.kind, cost.usd, cost.source, cost_text(cost)) == (Source.LOCAL, 0, "local: 0", "$0 local")


def test_no_usage_reported_is_no_cost():
    cost = cost_of(model="gpt-4o", endpoint="openai", url=OPENAI, billed=billed_of("openai", {}), at=0, table=[])
    assert cost.kind is Source.NO_USAGE and cost_text(cost) == "-"


def test_money_is_summed_exactly():
    """A thousand turns of 7 input tokens at $0.15 / MTok add up to exactly 1000 × their cost:
    decimals, never floats summed."""
    one = priced("openai", {"prompt_tokens": 7, "completion_tokens": 0}, "gpt-4o-mini", OPENAI)
    usd, n, unpriced = total([one] * 1000)
    assert usd == 1000 * one.usd == Decimal("0.00105") and (n, unpriced) == (1000, 0)
    assert isinstance(one.usd, Decimal) and isinstance(usd, Decimal)
