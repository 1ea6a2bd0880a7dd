"""Loops finish where they started (issue 18, reasoning/loop_route.py): a turn answering tool calls made
by a translated reply goes to that endpoint and model while a route to it takes the client;
otherwise the rules decide, and the trace says why the loop was not followed."""

from __future__ import annotations

import json
import time

from tokunseba.reasoning.state import Record, call_key
from tokunseba.reasoning.store import Keeper, ReasoningStore
from tokunseba.routing import load_rules_text
from tokunseba.turn.plan import build_turn, decide_request, prepare_request

RULES = """\
endpoints:
  ds: {protocol: openai, url: "http://127.0.0.1:9/v1"}
  other: {protocol: openai, url: "http://127.0.0.1:10/v1"}
routes:
  - name: plan
    when: {client: anthropic, last_user_matches: "(?i)^run"}
    to: ds
    model: deepseek-reasoner
  - name: rest
    when: {client: anthropic}
    to: other
"""

BODY = {"model": "claude-x", "max_tokens": 100, "messages": [
    {"role": "user", "content": "run it"},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "call_ds01", "name": "Bash", "input": {}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_ds01", "content": "ok"}]}]}


def keeper(*recs) -> Keeper:
    k = Keeper(ReasoningStore(None))
    k.store.put([(call_key("call_ds01"), r) for r in recs])
    return k


def ds_record(endpoint="ds", model="deepseek-reasoner", protocol="openai") -> Record:
    return Record(endpoint, model, protocol, {"field": "reasoning_content", "text": "thought"}, "tk-origin", time.time())


def prep_for(k, body=BODY):
    raw = json.dumps(body).encode()
    p = prepare_request(method="POST", host="api.anthropic.com", port=443, path="/v1/messages", headers=[], body=raw)
    p.keeper = k
    return p


def test_the_follow_up_goes_where_its_calls_were_made_with_their_reasoning():
    rules = load_rules_text(RULES)
    p = prep_for(keeper(ds_record()))
    d = decide_request(rules, p)
    assert (d.decision.route.name, d.decision.endpoint.name, d.decision.model) == ("plan", "ds", "deepseek-reasoner")
    turn = build_turn(rules, p, d, env={})
    sent = json.loads(turn.body)
    assert sent["model"] == "deepseek-reasoner" and sent["messages"][1]["reasoning_content"] == "thought"
    kinds = dict(turn.events)
    assert kinds["tool_loop"]["followed"] and "made by ds/deepseek-reasoner (tk-origin)" in kinds["tool_loop"]["why"]
    assert kinds["state_restored"]["keys"] == ["call_ds01"]
    assert turn.summary().endswith("restored: reasoning_content of 1 call")  # mitmweb's comment


def test_without_known_calls_or_with_tool_loops_route_the_rules_decide():
    rules = load_rules_text(RULES)
    assert decide_request(rules, prep_for(keeper())).decision.route.name == "rest"  # nothing known of call_ds01
    assert decide_request(rules, prep_for(None)).decision.route.name == "rest"  # no store
    off = load_rules_text("tool_loops: route\n" + RULES)
    assert decide_request(off, prep_for(keeper(ds_record()))).decision.route.name == "rest"


def test_not_followed_when_no_route_takes_the_client_or_the_endpoint_is_down_said_in_the_trace():
    only_chat = RULES.replace("when: {client: anthropic, last_user_matches", "when: {client: openai, last_user_matches")
    d = decide_request(load_rules_text(only_chat), prep_for(keeper(ds_record())))
    assert d.decision.route.name == "rest" and "no route to ds takes anthropic clients now" in d.decision.trace[0]["reasons"][0]
    rules = load_rules_text(RULES)
    d = decide_request(rules, prep_for(keeper(ds_record())), reachable=lambda ep: ep.name != "ds")
    assert d.decision.route.name == "rest" and "ds is unreachable" in d.decision.trace[0]["reasons"][0]
    turn = build_turn(rules, prep_for(keeper(ds_record())), d, env={})
    assert "reasoning" not in turn.body.decode() and dict(turn.events)["state_withheld"]["origin"] == "ds/deepseek-reasoner"
    assert dict(turn.events)["tool_loop"]["followed"] is False
    assert turn.summary().endswith("withheld: state of 1 call")


def test_a_new_user_turn_is_routed_by_its_rule():
    body = {**BODY, "messages": [*BODY["messages"], {"role": "assistant", "content": "done"},
                                 {"role": "user", "content": "something else"}]}
    assert decide_request(load_rules_text(RULES), prep_for(keeper(ds_record()), body)).decision.route.name == "rest"
