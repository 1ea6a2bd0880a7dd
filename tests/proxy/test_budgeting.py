"""proxy/budgeting.py's admissions: ``admit_off_loop`` (caps counted in PostgreSQL: each store
call in a thread) gives the verdict ``admit_now`` gives, reroute included, and never runs the
store on the event loop's thread; ``admits_off_loop`` says which caps need it."""

from __future__ import annotations

import asyncio
import threading

from tokunseba.budgets import BudgetStore, Caps
from tokunseba.proxy.budgeting import admit_now, admit_off_loop, admits_off_loop
from tokunseba.proxy.ws_routed import free_slot
from tokunseba.routing import EndpointHealth, load_rules_text
from tokunseba.turn.failover import Capacity
from tokunseba.turn.ws_plan import plan_message
from tokunseba.turn.ws_transcript import Transcript

from tests.suites.test_ws_budgets import REROUTED, _Headers, _message


def _caps(tmp_path, rules, name: str) -> Caps:
    return Caps(rules.budgets, BudgetStore(tmp_path / f"{name}.db", owner="me", lease_s=30), instance="me",
                cost=lambda spent: None if spent.usage is None else 30_000)


def _planning(rules, capacity: Capacity):
    planning, _ = plan_message(_message("hello"), Transcript(), host="api.openai.com", port=443, path="/v1/responses",
                               headers=_Headers([("authorization", "Bearer sk-client")]), rules=rules,
                               health=EndpointHealth(), capacity=capacity, provider_hosts={}, keeper=None)
    assert planning is not None
    return planning


def test_admitted_off_the_loop_as_at_once_reroute_included_the_store_called_from_another_thread(tmp_path):
    rules = load_rules_text(REROUTED, "r.yaml")
    now_caps, off_caps = _caps(tmp_path, rules, "now"), _caps(tmp_path, rules, "off")
    called_from: list[int] = []
    admit = off_caps.admit

    def watched(*a, **kw):
        called_from.append(threading.get_ident())
        return admit(*a, **kw)

    off_caps.admit = watched  # type: ignore[method-assign]
    results = {}
    for name, caps in (("now", now_caps), ("off", off_caps)):
        capacity = Capacity()
        seen = []
        for _ in range(2):  # the second passes the route's cap: rerouted to the next route
            planning = _planning(rules, capacity)
            connected = free_slot(planning)
            if name == "now":
                verdict, connected = admit_now(caps, planning, connected, lambda p=planning: free_slot(p))
            else:
                async def off(p=planning, c=connected):
                    loop_thread = threading.get_ident()
                    got = await admit_off_loop(caps, p, c, lambda: free_slot(p))
                    return loop_thread, got
                loop_thread, (verdict, connected) = asyncio.run(off())
                assert called_from and all(t != loop_thread for t in called_from)
            seen.append(([a.budget.name for a in verdict.held], [k for k, _ in verdict.events],
                         connected[0].name if connected else None))
        results[name] = (seen, dict(capacity.in_flight))
    assert results["off"] == results["now"]
    assert results["now"][0] == [(["paid-cap"], ["budget_held"], "paid"), ([], ["budget_rerouted"], "spare")]
    assert results["now"][1] == {"paid": 1, "spare": 1}  # the rerouted turn gave paid's slot back


def test_which_caps_are_admitted_off_the_loop(tmp_path):
    rules = load_rules_text(REROUTED, "r.yaml")
    assert admits_off_loop(None) is False
    assert admits_off_loop(_caps(tmp_path, rules, "sqlite")) is False  # a short local transaction
    pg = Caps(rules.budgets, BudgetStore("postgresql://tk@127.0.0.1:9/none", owner="me", lease_s=30), instance="me",
              cost=lambda spent: None)
    assert admits_off_loop(pg) is True  # a round trip (not connected: the store connects when first used)
