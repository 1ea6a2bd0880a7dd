"""What one turn charges a budget (budgets/cost.py): its reported usage priced, in fixed point."""

from __future__ import annotations

import time

from tokunseba.budgets import Spent
from tokunseba.neutral.usage import Usage


def test_a_turns_charge_is_its_reported_usage_priced_in_fixed_point():
    from tokunseba.budgets import pricing_cost
    from tokunseba.pricing import parse_prices

    table = parse_prices('prices:\n  "oai:gpt-*": {input: 1.25, output: 10, cache_read: 0.125}\n', "p.yaml")
    cost = pricing_cost(table)
    usage = Usage("openai", {"prompt_tokens": 1000, "completion_tokens": 100,
                             "prompt_tokens_details": {"cached_tokens": 400}})
    # 600 uncached x $1.25 + 400 cache reads x $0.125 + 100 output x $10, per million: $0.0018 exactly
    assert cost(Spent("oai", "gpt-paid", "https://oai.example/v1", usage, time.time())) == 1800
    assert cost(Spent("oai", "gpt-paid", "https://oai.example/v1", None, time.time())) is None  # nothing reported
    assert cost(Spent("elsewhere", "mystery-model", "https://elsewhere.example/v1", usage, time.time())) is None
    assert cost(Spent("local", "gemma", "http://127.0.0.1:8080/v1", usage, time.time())) == 0  # a local endpoint
