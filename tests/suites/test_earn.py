"""Earned routes without a proxy: the Wilson bound, the strata keys, each agreement fact (with
the real Claude Code title turn's schema), the fold of a stratum's comparisons, a session's
tier, the `earn:` rule key and the decision taken on it."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokunseba.routing import (
    Earn, EarnBook, EarnState, RulesError, decide, load_rules_text, stratum_of, turn_facts, wilson_lower,
)
from tokunseba.routing.strata import size_bucket, tool_set
from tokunseba.shadow.agreement import verdict
from tokunseba.shadow.reply_facts import Facts

from tests.conftest import load_fixture


def title_turn():
    fx = load_fixture("claude-code-title-haiku.json")
    return fx["body"], {k: v for k, v in fx["headers"]}


def title_facts(session="s-1"):
    body, headers = title_turn()
    headers["X-Claude-Code-Session-Id"] = session
    return turn_facts("anthropic", body, 2213, headers)


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


# ---------------------------------------------------------------- strata


def test_stratum_of_the_title_turn():
    s = stratum_of("cc", title_facts())
    assert (s.client, s.agent, s.tools, s.thinking, s.size) == ("anthropic", "background", "none", False, "≤4KB")
    assert s.key == "route=cc client=anthropic agent=background tools=none thinking=off size=≤4KB"


def test_tool_set_is_a_stable_hash_of_the_sorted_names():
    assert tool_set(["Bash", "Read", "Edit"]) == tool_set(["Edit", "Bash", "Read", "Read"])
    assert tool_set(["Bash", "Read"]) != tool_set(["Bash", "Edit"])
    assert tool_set([]) == "none"
    assert tool_set(["Bash", "Read"]).startswith("2:") and len(tool_set(["Bash"])) == 2 + 8


def test_stratum_of_a_main_turn_with_tools_and_thinking():
    body = {"model": "m", "max_tokens": 10, "thinking": {"type": "enabled", "budget_tokens": 1024},
            "tools": [{"name": "Bash", "input_schema": {}}, {"name": "Read", "input_schema": {}}],
            "messages": [{"role": "user", "content": "x" * 40000}]}
    f = turn_facts("anthropic", body, 40100, {"x-claude-code-session-id": "s", "user-agent": "claude-cli/2.1 (external, cli)"})
    s = stratum_of("r", f)
    assert s.tools == tool_set(["Bash", "Read"]) and s.thinking and s.size == "≤128KB" and s.agent == "main"
    assert size_bucket(10**9) == ">256KB"


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


# ---------------------------------------------------------------- agreement facts


def _schema():
    return title_facts().output_schema


def test_structured_turn_both_valid_same_keys_agree():
    v = verdict(_schema(), False, Facts(text='{"title": "Fix the login bug"}'), Facts(text=' {"title": "Login fix"}\n'))
    assert v == {"kind": "structured", "agree": True, "failed": [],
                 "facts": {"reference_valid": True, "candidate_valid": True, "same_keys": True}}


@pytest.mark.parametrize("text, why", [
    ("Fix the login bug", "not JSON"),
    ('```json\n{"title": "x"}\n```', "not JSON"),
    ('{"title": 3}', "not valid against the request's schema at title"),
    ('{"title": "x", "extra": 1}', "not valid against the request's schema"),  # additionalProperties: false
    ("{}", "not valid against the request's schema"),  # required: title
])
def test_structured_turn_candidate_invalid_disagrees(text, why):
    v = verdict(_schema(), False, Facts(text='{"title": "Fix it"}'), Facts(text=text))
    assert v["agree"] is False and v["facts"]["candidate_valid"] is False
    assert any(why in f for f in v["failed"]), v


def test_structured_turn_reference_invalid_is_not_agreement():
    v = verdict(_schema(), False, Facts(text="oops"), Facts(text='{"title": "x"}'))
    assert v["agree"] is False and v["facts"] == {"reference_valid": False, "candidate_valid": True, "same_keys": False}


def test_structured_turn_same_keys_is_a_fact_of_its_own():
    schema = {"type": "object", "properties": {"a": {}, "b": {}}}
    v = verdict(schema, False, Facts(text='{"a": 1}'), Facts(text='{"a": 1, "b": 2}'))
    assert v["agree"] is False and v["failed"] == ["not the same keys"]


def call(name, args, id_="c1"):
    return {"id": id_, "name": name, "arguments": args}


def test_tool_turn_same_calls_agree_and_arguments_are_json_equal():
    ref = Facts(stop_reason="tool_use", tool_calls=[call("Bash", {"command": "ls", "timeout": 1})])
    cand = Facts(stop_reason="tool_use", tool_calls=[call("Bash", {"timeout": 1.0, "command": "ls"}, "other")])
    assert verdict(None, True, ref, cand)["agree"] is True


@pytest.mark.parametrize("cand, failed", [
    (Facts(stop_reason="tool_use", tool_calls=[call("Bash", {"command": "ls -la"})]), "Bash: arguments differ"),
    (Facts(stop_reason="tool_use", tool_calls=[call("Read", {"command": "ls"})]), "tool names ['Bash'] vs ['Read']"),
    (Facts(stop_reason="tool_use", tool_calls=[]), "tool names ['Bash'] vs []"),
    (Facts(stop_reason="max_tokens", tool_calls=[call("Bash", {"command": "ls"})]), "stop reason tool_use vs max_tokens"),
])
def test_tool_turn_disagreements(cand, failed):
    ref = Facts(stop_reason="tool_use", tool_calls=[call("Bash", {"command": "ls"})])
    v = verdict(None, True, ref, cand)
    assert v["kind"] == "tool" and v["agree"] is False and failed in v["failed"]


def test_edit_tools_agree_on_paths():
    ref = Facts(stop_reason="tool_use", tool_calls=[call("Edit", {"file_path": "/a.py", "old_string": "x", "new_string": "y"})])
    same = Facts(stop_reason="tool_use", tool_calls=[call("Edit", {"file_path": "/a.py", "old_string": "x = 1", "new_string": "y = 1"})])
    other = Facts(stop_reason="tool_use", tool_calls=[call("Edit", {"file_path": "/b.py", "old_string": "x", "new_string": "y"})])
    assert verdict(None, True, ref, same)["agree"] is True
    assert verdict(None, True, ref, other)["agree"] is False
    patch = "*** Begin Patch\n*** Update File: src/a.py\n@@\n-x\n+y\n*** End Patch"
    p1 = Facts(stop_reason="tool_use", tool_calls=[call("apply_patch", patch)])
    p2 = Facts(stop_reason="tool_use", tool_calls=[call("apply_patch", patch.replace("+y", "+z"))])
    assert verdict(None, True, p1, p2)["agree"] is True


def test_plain_text_turns_are_never_counted():
    v = verdict(None, False, Facts(text="hello", stop_reason="end_turn"), Facts(text="hello", stop_reason="end_turn"))
    assert v["kind"] == "text" and v["agree"] is None  # even the same text: not counted
    v = verdict(None, True, Facts(text="done", stop_reason="end_turn"), Facts(text="ok", stop_reason="end_turn"))
    assert v["kind"] == "text" and v["agree"] is None
    v = verdict(None, True, Facts(text="done"), Facts(tool_calls=[call("Bash", {})], stop_reason="tool_use"))
    assert v["agree"] is False


def test_failures():
    assert verdict(_schema(), False, Facts(error="HTTP 500"), Facts(text='{"title": "x"}'))["agree"] is None
    assert verdict(_schema(), False, Facts(text='{"title": "x"}'), Facts(error="timeout"))["agree"] is False


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


# ---------------------------------------------------------------- earn --report


def _seed(led, *, strata_mix, seed=7):
    """A ledger whose shadow rows interleave turns of two strata: titles the candidate always gets
    right, tool turns it gets right half the time; every reference reports 1000 input + 100 output."""
    import random

    from tokunseba.routing.strata import Stratum

    rng = random.Random(seed)
    titles = Stratum("cc", "anthropic", "background", "none", False, "≤4KB").record()
    tools = Stratum("cc", "anthropic", "main", "2:abcdef12", False, "≤128KB").record()
    kinds = [k for k, n in strata_mix for _ in range(n)]
    rng.shuffle(kinds)
    tool_turns = 0
    for i, kind in enumerate(kinds):
        rid = f"tk-{i:04d}"
        led.start_turn(rid, started_at=100.0 + i, client_protocol="anthropic", host="h", path="/v1/messages",
                       requested_model="m", stream=False)
        led.update_turn(rid, usage_protocol="anthropic", usage_reported={"input_tokens": 1000, "output_tokens": 100})
        if kind == "title":
            v = {"kind": "structured", "agree": True, "failed": [],
                 "facts": {"reference_valid": True, "candidate_valid": True, "same_keys": True}}
        else:
            tool_turns += 1
            ok = tool_turns % 2 == 0
            v = {"kind": "tool", "agree": ok, "failed": [] if ok else ["Bash: arguments differ"],
                 "facts": {"same_tool_names": True, "same_stop_reason": True}}
        led.add_shadow(rid, "shadow", started_at=100.0 + i, route="cc", endpoint="cand", status=200,
                       comparison={"compared": True, "stratum": titles if kind == "title" else tools, "verdict": v,
                                   "earn": {"role": "learning", "candidate": "cand", "bar": 0.9, "min_turns": 20,
                                            "canary": 0.05}})


def test_report_pairs_and_beats_its_shuffled_control(tmp_path):
    from tokunseba.cli.earn_report import route_report
    from tokunseba.ledger import Ledger

    with Ledger(tmp_path / "l.db") as led:
        _seed(led, strata_mix=[("title", 150), ("tool", 150)])
        rows = led.shadows()
    rep = route_report(rows, "cc", Earn("cand", 0.9, 20, 0.05), bars=(0.9, 0.95))
    assert rep["comparisons"] == rep["counted"] == 300 and rep["counted_without_usage"] == 0
    assert rep["paired"] == {"structured: both valid, same keys": 150, "tool: the same calls and stop reason": 75,
                             "tool: same names, other arguments or paths": 75}
    for b in rep["bars"]:
        assert b["moved"] > 0 and b["disagreed"] == 0  # only titles were earned
        assert b["saved_tokens"] == 1100 * b["moved"]  # the reference's reported input + output, nothing estimated
        c = b["control"]
        # at equal agreement (no more disagreements than the earned routing), chance saves far less
        assert b["saved_tokens"] > 2 * c["saved_tokens_at_equal_agreement"]
        assert c["disagreed"] > 5 and c["luck"] == 0.0
        assert c["saved_tokens"] == pytest.approx(b["saved_tokens"], rel=0.01)  # the same share: cost-matched
    assert rep["bars"][0]["moved"] >= rep["bars"][1]["moved"]  # a higher bar earns later


def test_report_through_the_cli(tmp_path):
    import json
    import subprocess
    import sys

    from tokunseba.ledger import Ledger

    with Ledger(tmp_path / "l.db") as led:
        _seed(led, strata_mix=[("title", 60), ("tool", 60)])
    p = subprocess.run([sys.executable, "-m", "tokunseba.cli", "earn", "--report", "--ledger", str(tmp_path / "l.db")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "cc → cand: 120 comparisons, 120 counted" in p.stdout and "CONTROL SAVED AT EQUAL" in p.stdout
    j = subprocess.run([sys.executable, "-m", "tokunseba.cli", "earn", "--report", "--json", "--ledger",
                        str(tmp_path / "l.db")], capture_output=True, text=True, timeout=60)
    (route,) = json.loads(j.stdout)["routes"]
    assert [b["bar"] for b in route["bars"]] == [0.8, 0.9, 0.95, 0.99]


def test_a_candidate_some_clients_cannot_reach_is_a_warning():
    rules = load_rules_text(RULES.replace("local: {protocol: openai,", "local: {protocol: gemini,")
                            .replace('"http://127.0.0.1:9/v1"', '"http://127.0.0.1:9/v1beta"'))
    (w,) = [w for w in rules.warnings if "earn →" in w]
    assert w.startswith("<rules>:5: warning: route 'cc' earn → local (gemini): shadows and replays to gemini") \
        and w.endswith("; such turns are never earned") and w.count("not built yet") == 1
