"""A reply's subscription windows recorded for the account its attempt spent (turn/quota_seen.py):
one row per window, a malformed header said once and recorded each time, an anonymous turn not
recorded, a reply without window headers nothing."""

from __future__ import annotations

from tokunseba.routing import load_rules_text
from tokunseba.routing.quota import account_of, QuotaBoard

from tests.support.windows import ANTHROPIC, NOW, QUOTA_RULES, U


def test_the_watch_records_a_reply_for_the_account_its_attempt_spent():
    import json as _json

    from tokunseba.turn.plan import build_turn, decide_request, prepare_request
    from tokunseba.turn.quota_seen import WindowWatch

    rules = load_rules_text(QUOTA_RULES)
    body = _json.dumps({"model": "claude-opus-4-8", "max_tokens": 5,
                        "messages": [{"role": "user", "content": "hi"}]}).encode()
    mine = [("authorization", "Bearer mine")]
    prep = prepare_request(method="POST", host="api.anthropic.com", port=443, path="/v1/messages", headers=mine,
                           body=body)
    turn = build_turn(rules, prep, decide_request(rules, prep), env={})
    watch = WindowWatch(QuotaBoard(thresholds=(0.8,)))
    seen = watch.reply(turn, mine, {**ANTHROPIC, U + "7d-utilization": "n/a"}, NOW)
    assert seen is not None and seen.account == account_of("api.anthropic.com", mine)
    assert sorted(r[4] for r in seen.rows) == ["5h", "7d", "overage"]  # one row per window
    assert all(r[0] == seen.account.key and r[-1] == turn.request_id for r in seen.rows)
    assert any("7d-utilization skipped" in line for line in seen.lines)
    assert any("window 5h is 85% used" in line for line in seen.lines)
    assert seen.event == ("quota_header_skipped", {"headers": [{"header": U + "7d-utilization",
                                                                "why": "'n/a': not a number"}]})
    again = watch.reply(turn, mine, {**ANTHROPIC, U + "7d-utilization": "n/a"}, NOW + 1)
    assert again.lines == [] and again.event is not None  # said once; recorded each time
    anonymous = watch.reply(turn, [("content-type", "application/json")], ANTHROPIC, NOW)
    assert anonymous.rows == [] and "not recorded" in anonymous.lines[0]
    assert watch.reply(turn, mine, {"content-type": "application/json"}, NOW) is None
