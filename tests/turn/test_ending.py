"""What is said of a turn once it ended (turn/ending.py): the outcome it is recorded with (its
own; ``error`` when its reply failed, a refusal staying refused; ``capped`` when the endpoint's
cap ended a translated reply, with mitmweb's note and the console's cap line), its console line
and its cost — for a real turn planned by the real rules and request codecs."""

from __future__ import annotations

import json

from tokunseba.neutral import Usage
from tokunseba.routing import load_rules_text
from tokunseba.turn.ending import Ending
from tokunseba.turn.plan import build_turn, decide_request, prepare_request

RULES = """\
endpoints:
  local:
    protocol: openai
    url: http://127.0.0.1:8001/v1
    max_tokens: 512
routes:
  - name: all
    to: local
"""
BODY = json.dumps({"model": "claude-opus-4-8", "max_tokens": 64000, "messages": [{"role": "user", "content": "hi"}]})
CUT = {"stop_reason": "max_tokens", "converted": [
    "stop_reason max_tokens -> end_turn (the endpoint's cap, max_tokens 512, ended the reply; the client asked for 64000)"]}


def _turn():
    rules = load_rules_text(RULES)
    prep = prepare_request(method="POST", host="api.anthropic.com", port=443, path="/v1/messages",
                           headers=[("content-type", "application/json")], body=BODY.encode())
    turn = build_turn(rules, prep, decide_request(rules, prep), env={})
    assert turn.outcome == "translated" and turn.translation is not None and turn.translation.capped is not None
    return turn


def test_a_reply_the_endpoints_cap_ended_is_capped_with_its_note_and_line():
    turn = _turn()
    ending = Ending.of(turn, failed=False, details=CUT)
    assert ending.outcome == "capped" and ending.note is not None and ending.note.startswith("cut by endpoint local's cap")
    line = ending.cap_line()
    assert line is not None and line.startswith(f"tokunseba: {turn.request_id} the reply was cut by endpoint local's cap")


def test_a_reply_the_cap_did_not_end_keeps_the_turns_outcome_and_a_failed_one_is_an_error():
    turn = _turn()
    ending = Ending.of(turn, failed=False, details={"stop_reason": "end_turn"})
    assert (ending.outcome, ending.note, ending.cap_line()) == ("translated", None, None)
    assert Ending.of(turn, failed=True, details=CUT).outcome == "error"  # an error is never said as capped
    turn.outcome = "refused"
    assert Ending.of(turn, failed=True, details={}).outcome == "refused"


def test_the_console_line_and_the_cost_say_the_turn_as_recorded():
    turn = _turn()
    ending = Ending.of(turn, failed=False, details={"stop_reason": "end_turn"})
    usage = Usage("openai", {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10})
    cost = ending.cost(usage, [])
    line = ending.console_line(client=None, status=200, usage=usage, now=turn.started_at + 1.5, cost=cost)
    assert line == (f"{turn.request_id} anthropic claude-opus-4-8 → all → local · translated 200 · "  # no name: its protocol
                    "prompt_tokens=9 completion_tokens=1 total_tokens=10 · $0 local · 1.50 s")  # local: on loopback
    assert Ending(turn, "error").console_line(client="claude-code", status=502, usage=None, now=turn.started_at) \
        .startswith(f"{turn.request_id} claude-code claude-opus-4-8 → all → local · error 502")


def test_an_ending_presents_its_outcome_and_note_on_the_flow():
    from mitmproxy.test import tflow

    from tokunseba.turn.flowstate import FlowState, Shown
    from tokunseba.webview import MARKS

    turn = _turn()
    ending = Ending.of(turn, failed=False, details=CUT)
    flow = tflow.tflow(resp=True)
    state = FlowState(turn, shown=Shown("https://api.anthropic.com/v1/messages"))
    assert ending.present(flow, state, 200)
    assert state.shown is None  # presented once: mitmweb's view of the turn is final
    assert ending.note is not None and ending.note in flow.comment and turn.request_id in flow.comment
    assert flow.marked == MARKS["capped"]
