"""Subscription windows (issue 42; the header reader is tested in tests/protocols/test_limits.py):
the account a request spends (a hash, never the credential), the
board of last states, the ``quota`` predicate and its validation, a rejected window's gate."""

from __future__ import annotations

import pytest

from tokunseba.protocols.limits import read_windows
from tokunseba.routing import decide, load_rules_text, RulesError, turn_facts
from tokunseba.routing.quota import account_of, check_quota, gate, humane, quota_problem, QuotaBoard, routed_by_quota

from tests.support.windows import ANTHROPIC, by_name, NOW, QUOTA_RULES


def test_the_account_is_a_hash_of_the_credential_never_the_credential():
    a = account_of("api.anthropic.com", {"authorization": "Bearer sk-ant-oat01-secret-one", "x-other": "1"})
    b = account_of("api.anthropic.com", [(b"Authorization", b"Bearer sk-ant-oat01-secret-two")])
    again = account_of("API.anthropic.com", [("authorization", "Bearer sk-ant-oat01-secret-one")])
    assert a is not None and b is not None and again is not None
    assert a.key != b.key and a.key == again.key
    assert "secret" not in a.key and len(a.key) == 64 and a.short == a.key[:12]
    assert account_of("api.anthropic.com", {"x-api-key": "sk-ant-api-k"}).by == "x-api-key"
    assert account_of("api.anthropic.com", {"content-type": "x"}) is None


def test_the_chatgpt_account_id_names_the_account_across_refreshed_tokens():
    one = account_of("chatgpt.com", {"authorization": "Bearer old-token", "chatgpt-account-id": "acct-1"})
    two = account_of("chatgpt.com", {"authorization": "Bearer new-token", "chatgpt-account-id": "acct-1"})
    assert one == two and one.by == "chatgpt-account-id" and "acct-1" not in one.key


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def facts_for(board, headers, clock):
    f = turn_facts("anthropic", {"model": "claude-haiku-4-5", "messages": [{"role": "user", "content": "hi"}],
                                 "max_tokens": 5}, 10, headers)
    f.quota = board.view(account_of("api.anthropic.com", headers), clock)
    return f


def reading(used: float, status: str = "allowed", reset: float = NOW + 3600):
    return read_windows({"anthropic-ratelimit-unified-5h-utilization": str(used),
                         "anthropic-ratelimit-unified-5h-reset": str(int(reset)),
                         "anthropic-ratelimit-unified-5h-status": status,
                         "anthropic-ratelimit-unified-representative-claim": "five_hour"}, NOW)


def test_the_predicate_holds_above_the_threshold_until_the_reset():
    clock, board = Clock(NOW), QuotaBoard(thresholds=(0.8,))
    mine = {"authorization": "Bearer mine"}
    acct = account_of("api.anthropic.com", mine)
    f = facts_for(board, mine, clock)
    ok, why = check_quota({"above": 0.8}, f)
    assert not ok and "no reply has reported" in why
    assert board.seen(acct, reading(0.5), NOW) == []
    ok, why = check_quota({"above": 0.8}, f)
    assert not ok and "5h 50% used" in why and "not above 0.8" in why
    crossed = board.seen(acct, reading(0.85), NOW + 10)
    assert [c.window for c in crossed] == ["5h"] and "85%" in crossed[0].line()
    assert board.seen(acct, reading(0.86), NOW + 20) == []  # said once
    clock.t = NOW + 30
    ok, why = check_quota({"above": 0.8}, f)
    assert ok and "5h 86% used" in why and "seen 10s ago" in why and "resets in 59m" in why
    assert check_quota({"window": "5h", "above": 0.8}, f)[0]
    assert not check_quota({"window": "7d", "above": 0.8}, f)[0]
    clock.t = NOW + 3601  # the reset passed: the state says nothing any more
    ok, why = check_quota({"above": 0.8}, f)
    assert not ok and "reset since it was seen" in why


def test_two_accounts_never_mix():
    clock, board = Clock(NOW), QuotaBoard()
    a, b = {"authorization": "Bearer a"}, {"x-api-key": "key-b"}
    board.seen(account_of("api.anthropic.com", a), reading(0.9), NOW)
    board.seen(account_of("api.anthropic.com", b), reading(0.1), NOW)
    assert check_quota({"above": 0.8}, facts_for(board, a, clock))[0]
    assert not check_quota({"above": 0.8}, facts_for(board, b, clock))[0]


def test_overage_rejected_alone_refuses_nothing():
    r = read_windows(ANTHROPIC, NOW)  # overage-status rejected (org_level_disabled), the windows allowed
    assert by_name(r)["overage"].status == "rejected" and not any(w.rejected for w in r.windows)
    board, mine = QuotaBoard(), {"authorization": "Bearer mine"}
    board.seen(account_of("h", mine), r, NOW)
    assert board.view(account_of("h", mine), Clock(NOW)).rejected() is None


def test_a_rejected_window_makes_the_accounts_own_endpoints_unavailable():
    clock, board = Clock(NOW), QuotaBoard()
    mine = {"authorization": "Bearer mine"}
    board.seen(account_of("api.anthropic.com", mine), reading(1.0, "rejected"), NOW)
    view = board.view(account_of("api.anthropic.com", mine), clock)
    test = gate(lambda ep: True, view, lambda ep: ep == "own-host")
    assert test("elsewhere") is True
    why = test("own-host")
    assert isinstance(why, str) and why.startswith("quota:") and "rejected" in why
    clock.t = NOW + 3601
    assert test("own-host") is True  # reset: available again




def test_decide_routes_on_the_window_and_explains_which_one():
    rules = load_rules_text(QUOTA_RULES)
    clock, board = Clock(NOW), QuotaBoard()
    mine = {"authorization": "Bearer mine"}
    acct = account_of("api.anthropic.com", mine)
    board.seen(acct, reading(0.5), NOW)
    d = decide(rules, facts_for(board, mine, clock))
    assert d.route is None and routed_by_quota(d) is None
    board.seen(acct, reading(0.85), NOW + 5)
    clock.t = NOW + 65
    d = decide(rules, facts_for(board, mine, clock))
    assert d.endpoint is not None and d.endpoint.name == "local"
    moved = routed_by_quota(d)
    assert moved is not None and moved["to"] == "local" and "5h 85% used" in moved["why"]
    assert "seen 1m 00s ago" in moved["why"] and moved["would_have_used"].startswith("unknown")


@pytest.mark.parametrize("when,says", [
    ("{quota: {above: 1.5}}", "above must be a share between 0 and 1"),
    ("{quota: {above: -0.1}}", "above must be a share between 0 and 1"),
    ("{quota: {above: yes}}", "above must be a share between 0 and 1"),
    ("{quota: {window: 12h, above: 0.8}}", "unknown window '12h'"),
    ("{quota: {window: 5h}}", "needs above"),
    ("{quota: {below: 0.8}}", "unknown key 'below'"),
    ("{quota: 0.8}", "must be a mapping"),
])
def test_check_says_what_is_wrong_with_a_quota_predicate(when, says):
    text = f"routes:\n  - name: r\n    when: {when}\n    to: anthropic\n"
    with pytest.raises(RulesError) as e:
        load_rules_text(text, "f.yaml")
    assert says in str(e.value) and str(e.value).startswith("f.yaml:3:")


def test_valid_quota_predicates_load():
    rules = load_rules_text("routes:\n  - name: r\n    when: {quota: {window: seven_day_opus, above: 0.95}}\n    to: anthropic\n"
                            "  - name: s\n    when: {quota: {window: codex_bengalfox.primary, above: 0}}\n"
                            "    to: anthropic\n")
    assert rules.routes[0].when["quota"] == {"window": "seven_day_opus", "above": 0.95}
    assert quota_problem({"above": 1}) is None


def test_humane_spans():
    assert humane(5) == "5s" and humane(125) == "2m 05s" and humane(3 * 3600 + 300) == "3h 05m"
    assert humane(2 * 86400 + 7200) == "2d 2h" and humane(-3) == "0s"


def test_check_says_where_the_windows_come_from(tmp_path):
    from tokunseba.routing import check_file

    path = tmp_path / "r.yaml"
    path.write_text(QUOTA_RULES)
    ok, lines = check_file(path)
    assert ok and any(line.startswith("when.quota (route easy-local-when-busy): the windows of the account")
                      and "tokunseba quota" in line for line in lines), lines


def test_the_board_loads_what_the_ledger_holds_not_yet_reset():
    rows = [{"account": "a" * 64, "host": "api.anthropic.com", "account_by": "authorization", "window_name": "5h",
             "used": 0.9, "status": "allowed", "resets_at": NOW + 60, "minutes": None, "binding": 1, "seen_at": NOW - 5},
            {"account": "a" * 64, "host": "api.anthropic.com", "account_by": "authorization", "window_name": "7d",
             "used": 0.95, "status": "allowed", "resets_at": NOW - 1, "minutes": None, "binding": 0, "seen_at": NOW - 9}]
    board = QuotaBoard()
    assert board.load(rows, NOW) == 1
    seen = board.windows["a" * 64]
    assert list(seen) == ["5h"] and seen["5h"].state.used == 0.9 and seen["5h"].at == NOW - 5
    assert board.accounts["a" * 64].short == "a" * 12
