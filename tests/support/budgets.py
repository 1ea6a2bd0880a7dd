"""A rules file with one paid route and an open ``budgets:`` list, its budgets read, and a shared
$5-a-day budget: shared by the budget tests (tests/budgets/, tests/routing/test_budgets.py)."""

from __future__ import annotations

from tokunseba.routing import load_rules_text

BASE = """\
endpoints:
  oai: {protocol: openai, url: "https://oai.example/v1", model: gpt-paid}
routes:
  - {name: paid, when: {client: openai}, to: oai}
budgets:
"""


def budgets(text: str):
    return load_rules_text(BASE + text, "r.yaml").budgets.budgets


FIVE = "  - {name: five, usd: 5.00, hold: 0.10, window: day, shared: true}\n"
