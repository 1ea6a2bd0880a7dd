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
    when: {client: anthropic, login: api_key}
"""


def _check_login(want: str, f) -> tuple[bool, str]:
    got = f.headers.get("x-login")
    return got == want, f"login {got!r}, rule wants {want}"


@pytest.fixture
def login(monkeypatch):
    monkeypatch.setitem(PREDICATES, "login", Predicate(one_of("chatgpt", "api_key"), _check_login))


def test_a_new_row_is_read_and_decided(login):
    rules = load_rules_text(RULES, "r.yaml")
    assert rules.routes[0].when == {"client": ["anthropic"], "login": "api_key"}
    hit = decide(rules, turn_facts("anthropic", {"model": "m"}, 10, {"X-Login": "api_key"}))
    miss = decide(rules, turn_facts("anthropic", {"model": "m"}, 10, {"X-Login": "chatgpt"}))
    assert (hit.action, hit.trace[0].reasons[1]) == ("route", "login 'api_key', rule wants api_key")
    assert (miss.action, miss.trace[0].matched) == ("pass", False)


def test_a_new_rows_value_is_checked_with_its_line(login):
    with pytest.raises(RulesError) as e:
        load_rules_text(RULES.replace("api_key}", "oauth}"), "r.yaml")
    assert str(e.value) == "r.yaml:4: route 'keyed': when.login must be one of: chatgpt, api_key; got 'oauth'"


def test_without_the_row_the_key_is_unknown():
    with pytest.raises(RulesError) as e:
        load_rules_text(RULES, "r.yaml")
    assert "unknown key 'login'" in str(e.value)
