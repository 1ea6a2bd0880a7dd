"""The caps of a running proxy (budgets/caps.py): settlement at the reported cost or the kept hold
(a swept hold never charged twice), a window that resets during a long turn, warn budgets holding
past the cap, the ledger away, each protocol's "stop now" answer and the message naming the budget."""

from __future__ import annotations

import json
import time

import pytest

from tokunseba import protocols
from tokunseba.budgets import BudgetStore, Caps, limit_message, Spent
from tokunseba.neutral.usage import Usage
from tokunseba.routing import load_rules_text

from tests.support.budgets import BASE, FIVE


def _caps(tmp_path, text: str, cost=lambda s: 100_000) -> Caps:
    rules = load_rules_text(BASE + text, "r.yaml")
    return Caps(rules.budgets, BudgetStore(tmp_path / "l.db", owner="me", lease_s=5), instance="me", cost=cost)


def test_settlement_is_the_reported_cost_or_the_kept_hold_and_a_swept_hold_is_not_charged_twice(tmp_path):
    caps = _caps(tmp_path, FIVE, cost=lambda s: None if s.usage is None else 42_000)
    now = time.time()
    usage = Usage("openai", {"prompt_tokens": 1, "completion_tokens": 2})
    a, b, c = (caps.admit({"endpoint": "oai"}, request_id=f"r{i}", now=now) for i in range(3))
    assert caps.settle(a, Spent("oai", "gpt-paid", None, usage, now), request_id="r0", now=now) == {"five": 42_000}
    assert caps.settle(b, Spent("oai", "gpt-paid", None, None, now), request_id="r1", now=now) == {"five": None}
    assert caps.store.sweep(now + 6) == 1  # c's lease ran out: charged its hold
    caps.settle(c, Spent("oai", "gpt-paid", None, usage, now), request_id="r2", now=now + 7)  # then it ended
    (w,) = caps.store.windows()
    assert (w.spent, w.held) == (42_000 + 100_000 + 42_000, 0)
    kinds = [(ch["request_id"], ch["kind"], ch["amount"]) for ch in caps.store.charges()]
    assert kinds == [("r0", "reported", 42_000), ("r1", "kept_hold", 100_000), ("r2", "swept", 100_000),
                     ("r2", "after_sweep", -58_000)]


def test_a_window_that_resets_during_a_long_turn_charges_the_window_it_started_in(tmp_path):
    caps = _caps(tmp_path, "  - {name: roll, usd: 1.00, hold: 0.50, window: 1h}\n")
    t0 = time.time()
    v = caps.admit({"endpoint": "oai"}, request_id="long", now=t0)
    later = t0 + 2 * 3600  # the window closed while the stream went on
    caps.settle(v, Spent("oai", "gpt-paid", None, None, t0), request_id="long", now=later)
    w2 = caps.admit({"endpoint": "oai"}, request_id="next", now=later)
    assert w2.refused is None and w2.held[0].window_start == later  # a fresh window
    rows = sorted(caps.store.windows(), key=lambda w: w.window_start)
    assert [(r.window_start, r.spent, r.held) for r in rows] == [(t0, 500_000, 0), (later, 0, 500_000)]


def test_warn_holds_past_the_cap_and_the_soft_line_says_so(tmp_path):
    caps = _caps(tmp_path, "  - {name: w, usd: 0.20, hold: 0.10, window: day, warn_at: 0.5, on_limit: warn}\n")
    now = time.time()
    v1 = caps.admit({}, request_id="a", now=now)
    v2 = caps.admit({}, request_id="b", now=now)
    v3 = caps.admit({}, request_id="c", now=now)
    assert v1.lines and "at 50%" in v1.lines[0] and [k for k, _ in v1.events] == ["budget_warning", "budget_held"]
    assert v3.refused is None and v3.held and "passed: $0.30 spent and held of $0.20" in v3.lines[0]
    assert not v2.stops and not v3.stops


def test_the_ledger_away_serves_or_refuses_as_the_rules_say(tmp_path):
    rules = load_rules_text("on_ledger_unavailable: refuse\n" + BASE + FIVE, "r.yaml")
    away = BudgetStore(f"{tmp_path}/no/such/dir/\0bad.db", owner="me")
    v = Caps(rules.budgets, away, instance="me", cost=lambda s: None).admit({}, request_id="r", now=time.time())
    assert v.refuse_away and v.stops and "on_ledger_unavailable: refuse" in v.lines[0]
    rules = load_rules_text(BASE + FIVE, "r.yaml")
    v = Caps(rules.budgets, away, instance="me", cost=lambda s: None).admit({}, request_id="r", now=time.time())
    assert v.away and not v.stops and "served without a hold" in v.lines[0]


@pytest.mark.parametrize("protocol, check", [
    ("anthropic", lambda st, h, b: int(h["retry-after"]) >= 61 and h["x-should-retry"] == "false"
     and b["type"] == "error" and b["error"]["type"] == "rate_limit_error"),
    ("openai", lambda st, h, b: h["x-should-retry"] == "false" and b["error"]["type"] == "insufficient_quota"
     and b["error"]["code"] == "insufficient_quota"),
    ("openai-responses", lambda st, h, b: b["error"]["type"] == "usage_limit_reached"
     and isinstance(b["error"]["resets_at"], int) and h["x-should-retry"] == "false"),
    ("gemini", lambda st, h, b: b["error"]["status"] == "RESOURCE_EXHAUSTED" and
     b["error"]["details"][0]["@type"] == "type.googleapis.com/google.rpc.RetryInfo"
     and int(b["error"]["details"][0]["retryDelay"].rstrip("s")) > 300),
])
def test_each_protocol_says_stop_now_in_its_own_shape(protocol, check):
    now = time.time()
    for reset_in in (5.0, 3 * 3600.0):  # a reset seconds away still says "do not retry soon"
        status, headers, body = protocols.get(protocol).stop_now("budget 'b' reached", reset_in, now + reset_in)
        doc = json.loads(body)
        assert status == 429 and check(status, headers, doc), (headers, doc)
        assert "budget 'b' reached" in json.dumps(doc)
    _, h, _ = protocols.get("anthropic").stop_now("x", 3 * 3600.0, now)
    assert h["retry-after"] == str(3 * 3600)


def test_the_message_names_the_budget_spent_of_limit_and_the_reset(tmp_path):
    caps = _caps(tmp_path, "  - {name: tiny, usd: 0.10, hold: 0.10, window: day, tz: Europe/Berlin}\n")
    now = time.time()
    caps.admit({}, request_id="a", now=now)
    v = caps.admit({}, request_id="b", now=now)
    assert v.stops and v.refused is not None
    msg = limit_message(v.refused, now, "tk-b")
    assert msg.startswith("tokunseba: budget 'tiny' reached: $0.00 spent of $0.10 and $0.10 held by turns in flight "
                          "this day (Europe/Berlin) window; it resets at ")
    assert "Europe/Berlin (in " in msg and "(request tk-b)" in msg
