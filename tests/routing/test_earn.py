"""Earned routes without a proxy (routing/earn.py): the Wilson bound, the fold of a stratum's
comparisons, a session's tier, the `earn:` rule key and the decision taken on it. The strata keys
are in test_strata.py, the agreement facts in tests/shadow/test_agreement.py, the report in
tests/cli/test_earn_report.py."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, strategies as st

from tokunseba.routing import decide, Earn, EarnBook, EarnState, load_rules_text, RulesError, stratum_of, wilson_lower

from tests.support.title_turn import title_facts


# ---------------------------------------------------------------- Wilson


def test_wilson_known_values():
    assert wilson_lower(0, 0) == 0.0
    assert math.isclose(wilson_lower(200, 200), 0.98115, abs_tol=1e-4)
    assert math.isclose(wilson_lower(4, 4), 0.51010, abs_tol=1e-4)
    assert math.isclose(wilson_lower(8, 10), 0.49016, abs_tol=1e-4)


@given(st.integers(min_value=1, max_value=5000), st.data())
def test_wilson_lower_is_a_lower_bound(n, data):
    k = data.draw(st.integers(min_value=0, max_value=n))
    lo = wilson_lower(k, n)
    assert 0.0 <= lo <= k / n + 1e-12
    if k < n:  # one more agreement never lowers the bound
        assert wilson_lower(k + 1, n) >= lo
    assert wilson_lower(k, n + 1) <= lo + 1e-12 or k == n  # one more disagreement never raises it


@given(st.integers(min_value=1, max_value=400))
def test_wilson_bound_grows_with_evidence_at_equal_rate(n):
    assert wilson_lower(2 * n, 2 * n) > wilson_lower(n, n)


# ---------------------------------------------------------------- the fold and the book


AGREE = {"kind": "structured", "agree": True, "failed": []}
DISAGREE = {"kind": "structured", "agree": False, "failed": ["candidate reply not JSON"]}
TEXT = {"kind": "text", "agree": None, "failed": []}
EARN = Earn("local", bar=0.5, min_turns=4, canary=1.0)


def feed(book, facts, verdicts, t0=1000.0):
    st_ = stratum_of("cc", facts).record()
    for i, v in enumerate(verdicts):
        book.observe("cc", "local", st_, v, t0 + i, f"tk-{i}")


def test_a_stratum_learns_earns_returns_and_learns_again():
    book, facts = EarnBook(), title_facts()
    feed(book, facts, [AGREE] * 3 + [TEXT] * 5)
    call = book.status("cc", EARN, facts)
    assert call.standing["state"] == "learning" and not call.to_candidate
    assert call.text.startswith("learning: 3 of 4, agreement 1.00 (lower bound 0.44")
    assert call.standing["text_turns"] == 5
    feed(book, facts, [AGREE], t0=2000)
    call = book.status("cc", EARN, facts)
    assert call.to_candidate and call.standing["state"] == EarnState.EARNED
    assert call.text.startswith("earned: stratum route=cc client=anthropic agent=background tools=none thinking=off "
                                "size=≤4KB, agreement 1.00 (lower bound 0.51) over 4 turns since ")
    feed(book, facts, [DISAGREE], t0=3000)  # 4 of 5: the bound falls to 0.38
    call = book.status("cc", EARN, facts)
    assert call.standing["state"] == "returned" and not call.to_candidate
    assert call.standing["counted"] == 0  # the count starts again
    assert call.standing["transitions"][-1]["to"] == "returned"
    assert book.standings("cc", EARN)[0].worst[0]["request_id"] == "tk-0"


def test_a_stricter_bar_refolds_the_same_evidence():
    book, facts = EarnBook(), title_facts()
    feed(book, facts, [AGREE] * 4)
    assert book.status("cc", EARN, facts).to_candidate
    assert not book.status("cc", Earn("local", bar=0.9, min_turns=4), facts).to_candidate


def test_a_session_that_left_the_candidate_never_comes_back():
    book = EarnBook()
    a, b = title_facts("sess-a"), title_facts("sess-b")
    feed(book, a, [AGREE] * 4)
    ca = book.status("cc", EARN, a)
    assert ca.to_candidate
    book.served(ca, on_candidate=True)
    feed(book, a, [DISAGREE], t0=3000)  # returned
    ca = book.status("cc", EARN, a)
    assert not ca.to_candidate
    book.served(ca, on_candidate=False)  # session a left the candidate
    feed(book, a, [AGREE] * 4, t0=4000)  # earned again
    assert book.status("cc", EARN, b).to_candidate
    again = book.status("cc", EARN, a)
    assert not again.to_candidate and again.session_left
    assert "left the candidate before (a session's tier only rises)" in again.text


def test_book_loads_ledger_rows():
    facts = title_facts()
    st_ = stratum_of("cc", facts).record()
    rows = [{"route": "cc", "endpoint": "local", "started_at": 10.0 + i, "request_id": f"tk-{i}",
             "comparison": {"stratum": st_, "verdict": AGREE, "earn": {"role": "learning", "candidate": "local"}}}
            for i in range(4)] + [{"route": "cc", "endpoint": "local", "started_at": 20.0, "comparison": {"compared": True}}]
    book = EarnBook()
    assert book.load(rows) == 4
    assert book.status("cc", EARN, facts).to_candidate


def test_book_reads_its_source_once_on_first_use_and_orders_it_before_new_comparisons():
    facts = title_facts()
    st_ = stratum_of("cc", facts).record()
    reads = []

    def source():
        reads.append(1)
        return [{"route": "cc", "endpoint": "local", "started_at": 10.0 + i, "request_id": f"tk-{i}",
                 "comparison": {"stratum": st_, "verdict": AGREE, "earn": {"candidate": "local"}}} for i in range(3)]

    book = EarnBook(source)
    assert reads == []  # nothing read until the book is used
    feed(book, facts, [AGREE], t0=2000)  # a new comparison: the ledger's 3 are read first
    assert reads == [1]
    call = book.status("cc", EARN, facts)
    assert call.to_candidate and call.standing["counted"] == 4
    assert book.ready() == 0 and reads == [1]  # once


def test_book_whose_source_fails_learns_from_nothing():
    def broken():
        raise OSError("the ledger is closed")

    book = EarnBook(broken)
    assert book.ready() == 0
    assert not book.status("cc", EARN, title_facts()).to_candidate


def test_ledger_earn_comparisons_are_the_rows_with_a_stratum(tmp_path):
    from tokunseba.ledger import Ledger

    led = Ledger(str(tmp_path / "l.db"))
    st_ = stratum_of("cc", title_facts()).record()
    for i, comparison in enumerate([{"stratum": st_, "verdict": AGREE}, {"compared": True}, None]):
        led.add_shadow(f"tk-{i}", "shadow", started_at=100.0 - i, route="cc", endpoint="local", comparison=comparison)
    rows = led.earn_comparisons()
    assert [(r["request_id"], r["route"], r["endpoint"], r["comparison"]["stratum"]["key"]) for r in rows] == \
        [("tk-0", "cc", "local", st_["key"])]
    assert EarnBook(led.earn_comparisons).ready() == 1


# ---------------------------------------------------------------- the rule key and the decision


RULES = """\
endpoints:
  local: {protocol: openai, url: "http://127.0.0.1:9/v1", model: small}
  prim: {protocol: anthropic, url: "http://127.0.0.1:8/v1"}
routes:
  - name: cc
    when: {client: anthropic}
    to: prim
    earn: {to: local, bar: 0.5, min_turns: 4, canary: 1}
"""


def test_earn_key():
    r = load_rules_text(RULES).routes[0]
    assert r.earn == Earn("local", 0.5, 4, 1.0)
    assert load_rules_text(RULES.replace("earn: {to: local, bar: 0.5, min_turns: 4, canary: 1}",
                                         "earn: {to: local}")).routes[0].earn == Earn("local", 0.95, 200, 0.05)


@pytest.mark.parametrize("earn, error", [
    ("earn: {to: local, bar: 1.5}", "earn.bar must be a number from 0 to 1, got '1.5'"),
    ("earn: {to: local, canary: -1}", "earn.canary must be a number from 0 to 1"),
    ("earn: {to: local, min_turns: 0}", "earn.min_turns must be a whole number of at least 1"),
    ("earn: {to: nowhere}", "earn: unknown endpoint 'nowhere' in 'to'"),
    ("earn: {bar: 0.9}", "earn has no 'to' (the candidate endpoint)"),
    ("earn: {to: prim}", "earn.to is the route's own target 'prim'"),
    ("earn: {to: local, sample: 1}", "earn: unknown key 'sample'"),
    ("earn: {to: local}\n    shadow: local", "earn shadows its turns to its candidate itself; drop 'shadow:'"),
])
def test_earn_key_errors(earn, error):
    with pytest.raises(RulesError) as e:
        load_rules_text(RULES.replace("earn: {to: local, bar: 0.5, min_turns: 4, canary: 1}", earn))
    assert error in str(e.value), e.value.errors


def test_decide_sends_an_earned_stratum_to_the_candidate():
    rules = load_rules_text(RULES)
    book, facts = EarnBook(), title_facts()
    learning = decide(rules, facts, earned=book.status)
    assert learning.endpoint.name == "prim" and learning.earn is not None and not learning.earn.to_candidate
    feed(book, facts, [AGREE] * 4)
    earned = decide(rules, facts, earned=book.status)
    assert earned.endpoint.name == "local" and earned.model == "small"
    assert "(earned: stratum route=cc" in earned.reason
    down = decide(rules, facts, earned=book.status, reachable=lambda ep: ep.name != "local")
    assert down.endpoint.name == "prim" and "cannot take this turn (unreachable)" in down.earn.text
    assert decide(rules, facts).endpoint.name == "prim"  # no book: the route's own target


def test_a_candidate_some_clients_cannot_reach_is_a_warning():
    rules = load_rules_text(RULES.replace("local: {protocol: openai,", "local: {protocol: gemini,")
                            .replace('"http://127.0.0.1:9/v1"', '"http://127.0.0.1:9/v1beta"'))
    (w,) = [w for w in rules.warnings if "earn →" in w]
    assert w.startswith("<rules>:5: warning: route 'cc' earn → local (gemini): shadows and replays to gemini") \
        and w.endswith("; such turns are never earned") and w.count("not built yet") == 1
