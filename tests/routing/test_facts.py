"""A ``when`` predicate is one row of routing/facts.py's ``PREDICATES`` (issue 38): a row added
there, and nowhere else, is accepted by the rules file, its value read and checked at load time
(``FILE:LINE``), and tested by ``decide`` with its reason in the trace."""

from __future__ import annotations

import pytest

from tokunseba.routing import PREDICATES, Predicate, RulesError, decide, load_rules_text, turn_facts
from tokunseba.routing.facts import one_of

RULES = """\
routes:
  - name: keyed
    to: anthropic
    when: {client: anthropic, plan: plus}
"""


def _check_plan(want: str, f) -> tuple[bool, str]:
    got = f.headers.get("x-plan")
    return got == want, f"plan {got!r}, rule wants {want}"


@pytest.fixture
def plan(monkeypatch):
    monkeypatch.setitem(PREDICATES, "plan", Predicate(one_of("pro", "plus"), _check_plan))


def test_a_new_row_is_read_and_decided(plan):
    rules = load_rules_text(RULES, "r.yaml")
    assert rules.routes[0].when == {"client": ["anthropic"], "plan": "plus"}
    hit = decide(rules, turn_facts("anthropic", {"model": "m"}, 10, {"X-Plan": "plus"}))
    miss = decide(rules, turn_facts("anthropic", {"model": "m"}, 10, {"X-Plan": "pro"}))
    assert (hit.action, hit.trace[0].reasons[1]) == ("route", "plan 'plus', rule wants plus")
    assert (miss.action, miss.trace[0].matched) == ("pass", False)


def test_a_new_rows_value_is_checked_with_its_line(plan):
    with pytest.raises(RulesError) as e:
        load_rules_text(RULES.replace("plus}", "oauth}"), "r.yaml")
    assert str(e.value) == "r.yaml:4: route 'keyed': when.plan must be one of: pro, plus; got 'oauth'"


def test_without_the_row_the_key_is_unknown():
    with pytest.raises(RulesError) as e:
        load_rules_text(RULES, "r.yaml")
    assert "unknown key 'plan'" in str(e.value)


def test_tool_names_of_each_protocol():
    chat = {"model": "m", "messages": [], "tools": [{"type": "function", "function": {"name": "a"}}]}
    resp = {"model": "m", "input": [], "tools": [{"type": "function", "name": "b"},
                                                 {"type": "namespace", "name": "ns", "tools": [{"name": "c"}]}]}
    assert turn_facts("openai", chat, 1, {}).tool_names == ("a",)
    assert turn_facts("openai-responses", resp, 1, {}).tool_names == ("b", "ns.c")
    schema = {"type": "object"}
    assert turn_facts("openai", {**chat, "response_format": {"type": "json_schema", "json_schema": {
        "name": "x", "schema": schema}}}, 1, {}).output_schema == schema
    assert turn_facts("openai-responses", {**resp, "text": {"format": {"type": "json_schema", "schema": schema}}},
                      1, {}).output_schema == schema
