"""`check`'s word on money caps (budgets/check.py): a usd budget reaching a model nothing prices
is a warning with its line."""

from __future__ import annotations

from tokunseba.budgets import price_warnings
from tokunseba.routing import load_rules_text

from tests.support.budgets import BASE, FIVE


def test_check_warns_of_a_money_cap_reaching_a_model_nothing_prices():
    rules = load_rules_text(BASE + FIVE.replace("shared: true", "scope: {endpoint: oai}"), "r.yaml")
    got = price_warnings(rules, lambda ep, model: False)
    assert got == ["r.yaml:6: warning: budget 'five' ($5.00) can reach model gpt-paid at endpoint oai, which nothing "
                   "prices: its turns will keep their declared hold ($0.10) as their charge; give it a price (prices: "
                   "{\"oai:gpt-paid\": {input: …, output: …}})"]
    assert price_warnings(rules, lambda ep, model: True) == []
