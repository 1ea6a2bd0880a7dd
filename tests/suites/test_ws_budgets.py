"""A turn that arrives as a Responses WebSocket message is admitted under the spending caps as an
HTTPS turn is (proxy/budgeting.py ``admit_now``, the same ``Caps`` and store): held, refused with
Codex's own usage_limit_reached as a WebSocket ``error`` event, rerouted or warned by ``on_limit``,
and settled from the usage its ``response.completed`` reported (a cut turn keeps its hold)."""

from __future__ import annotations

import json
import time

from tokunseba.budgets import BudgetStore, Caps
from tokunseba.proxy.budgeting import admit_now, settle
from tokunseba.proxy.ws_routed import error_doc, free_slot
from tokunseba.routing import EndpointHealth, load_rules_text
from tokunseba.turn.failover import Capacity
from tokunseba.turn.pump import Pump
from tokunseba.turn.retries import RetryWatch
from tokunseba.turn.ws_plan import HERE, PROVIDER, carrier, plan_message
from tokunseba.turn.ws_transcript import Transcript
from tokunseba.protocols.openai_responses_ws import as_sse, server_event

PASSED = """\
budgets:
  - {name: codex-day, scope: {client: openai-responses}, usd: 0.20, hold: 0.10, window: day}
"""

REROUTED = """\
endpoints:
  paid: {protocol: openai-responses, url: "http://127.0.0.1:8/v1"}
  spare: {protocol: openai-responses, url: "http://127.0.0.1:9/v1"}
routes:
  - {name: paid, when: {client: openai-responses}, to: paid}
  - {name: spare, when: {client: openai-responses}, to: spare}
budgets:
  - {name: paid-cap, scope: {route: paid}, usd: 0.10, hold: 0.10, window: day, on_limit: reroute}
"""


class _Headers(list):
    def items(self, multi: bool = False):
        return list(self)


def _caps(tmp_path, rules) -> Caps:
    return Caps(rules.budgets, BudgetStore(tmp_path / "ledger.db", owner="me", lease_s=30), instance="me",
                cost=lambda spent: None if spent.usage is None else 30_000)  # $0.03 a reported turn


def _message(text: str) -> dict:
    return {"type": "response.create", "model": "gpt-5.5", "input": [{"role": "user", "content": text}]}


def _admitted(caps: Caps, rules, doc: dict, capacity: Capacity | None = None):
    """The message planned and admitted as the WebSocket part does it (websocket.py ``_turn``)."""
    planning, conversation = plan_message(doc, Transcript(), host="api.openai.com", port=443, path="/v1/responses",
                                          headers=_Headers([("authorization", "Bearer sk-client")]), rules=rules,
                                          health=EndpointHealth(), capacity=capacity or Capacity(),
                                          provider_hosts={}, keeper=None)
    assert planning is not None
    connected = free_slot(planning)
    verdict, connected = admit_now(caps, planning, connected, lambda: free_slot(planning))
    turn = planning.turn(env={}, retries=RetryWatch(), peer="127.0.0.1", access=(False, False), connected=connected,
                         verdict=verdict)
    if turn.local is not None and verdict.held:
        caps.release(verdict)
    return turn, carrier(turn, conversation_known=conversation is not None), planning


def _completed(turn, usage: dict | None):
    """The outcome the provider's events give the turn (read as websocket.py reads them)."""
    pump = Pump(turn)
    evs = [{"type": "response.created", "response": {"id": "resp_1", "output": []}},
           {"type": "response.output_text.delta", "delta": "hi"}]
    if usage is not None:
        evs.append({"type": "response.completed", "response": {"id": "resp_1", "output": [], "usage": usage}})
    for ev in evs:
        pump(as_sse(server_event(json.dumps(ev).encode())))
    pump(b"")
    return pump.outcome(200 if usage is not None else None)


def test_two_messages_are_held_the_third_gets_codexs_usage_limit_reached(tmp_path):
    rules = load_rules_text(PASSED, "r.yaml")
    caps = _caps(tmp_path, rules)
    (a, goes_a, _), (b, goes_b, _) = (_admitted(caps, rules, _message(f"turn {i}")) for i in (1, 2))
    assert goes_a == goes_b == PROVIDER and a.budget.held and b.budget.held
    assert [(w.spent, w.held) for w in caps.store.windows()] == [(0, 200_000)]
    c, goes_c, _ = _admitted(caps, rules, _message("turn 3"))
    assert goes_c == HERE and c.outcome == "refused" and c.local is not None and c.local.status == 429
    event = error_doc(c.local.status, c.local.body, c.local.headers)
    err = event["error"]
    assert event["type"] == "error" and event["status"] == 429
    assert err["type"] == "usage_limit_reached" and isinstance(err["resets_at"], int) and err["resets_at"] > time.time()
    assert "codex-day" in err["message"] and c.request_id in err["message"]
    assert event["headers"]["x-should-retry"] == "false" and int(event["headers"]["retry-after"]) >= 61
    assert [(w.spent, w.held) for w in caps.store.windows()] == [(0, 200_000)]  # the refused one held nothing


def test_settled_from_response_completed_and_a_cut_turn_keeps_its_hold(tmp_path):
    rules = load_rules_text(PASSED, "r.yaml")
    caps = _caps(tmp_path, rules)
    done, _, _ = _admitted(caps, rules, _message("answered"))
    cut, _, _ = _admitted(caps, rules, _message("cut"))
    out = _completed(done, {"input_tokens": 7, "output_tokens": 2, "total_tokens": 9})
    assert out.usage is not None and out.usage.reported["input_tokens"] == 7
    assert settle(caps, done, out.usage, time.time(), out.status) == {"charged": {"codex-day": 30_000},
                                                                       "kept_hold": []}
    out = _completed(cut, None)  # the connection closed before response.completed
    assert out.usage is None
    assert settle(caps, cut, out.usage, time.time(), out.status) == {"charged": {}, "kept_hold": ["codex-day"]}
    assert [(w.spent, w.held) for w in caps.store.windows()] == [(30_000 + 100_000, 0)]
    assert [(ch["request_id"], ch["kind"], ch["amount"]) for ch in caps.store.charges()] == [
        (done.request_id, "reported", 30_000), (cut.request_id, "kept_hold", 100_000)]
    nxt, goes, _ = _admitted(caps, rules, _message("after"))  # $0.13 spent: one more hold of $0.10 does not fit
    assert goes == HERE and nxt.outcome == "refused"


def test_on_limit_reroute_hands_the_message_to_the_next_route_and_gives_its_slot_back(tmp_path):
    rules = load_rules_text(REROUTED, "r.yaml")
    caps, capacity = _caps(tmp_path, rules), Capacity()
    first, _, _ = _admitted(caps, rules, _message("one"), capacity)
    assert first.decision.route.name == "paid" and first.budget.held
    second, goes, planning = _admitted(caps, rules, _message("two"), capacity)
    assert second.decision.route.name == "spare" and second.endpoint.name == "spare" and second.local is None
    assert goes != HERE and not second.budget.held  # the cap scoped to the route it left holds nothing
    (kind, event), = [(k, d) for k, d in second.events if k == "budget_rerouted"]
    assert (event["from_route"], event["to_route"], event["budget"]) == ("paid", "spare", "paid-cap")
    assert planning.slot is not None and planning.slot.endpoint == "spare"
    assert capacity.in_flight == {"paid": 1, "spare": 1}  # the first turn's; the second gave paid's back


def test_on_limit_warn_serves_the_message_past_the_cap_and_says_so(tmp_path):
    rules = load_rules_text(PASSED.replace("window: day}", "window: day, on_limit: warn}"), "r.yaml")
    caps = _caps(tmp_path, rules)
    turns = [_admitted(caps, rules, _message(f"t{i}"))[0] for i in range(3)]
    assert all(t.local is None and t.budget.held for t in turns)
    assert "passed" in " ".join(turns[2].budget.lines) and any(k == "budget_passed" for k, _ in turns[2].events)
