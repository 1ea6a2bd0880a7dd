"""A failed attempt and what follows it, as the one object the adapter drives
(turn/failed_attempt.py): noted on its chain, the next attempt chosen among the endpoints
available, the chain moved on or given up with what the client is told."""

from __future__ import annotations

from tokunseba.routing.endpoints import EndpointHealth
from tokunseba.turn.failed_attempt import FailedAttempt
from tokunseba.turn.failover import Capacity, Failure

from tests.turn.test_failover import ENV, _first


def _failed(turn, chain, rules, failure, *, capacity=None, health=None, headers=()):
    return FailedAttempt.of(turn, chain, failure, list(headers), ms=20.0, now=1000.0, rules=rules,
                            health=health or EndpointHealth(), capacity=capacity or Capacity(), env=ENV)


def test_a_failure_is_noted_and_the_next_route_takes_the_turn():
    rules, chain, first = _first()
    capacity = Capacity()
    failed = _failed(first, chain, rules, Failure("status", "HTTP 503: loading", 503), capacity=capacity)
    assert [(a.endpoint, a.status) for a in chain.failed] == [("small", 503)]
    assert failed.tried.backoff_s > 0 and capacity.cooling_left(first.endpoint) > 0  # no hint: the passive back-off
    assert failed.rounds == 2 * len(rules.endpoints) + 1
    nxt = failed.candidate()
    assert nxt is not None and nxt.endpoint.name == "big" and nxt.request_id == first.request_id
    moved = failed.settle(nxt)
    assert moved.replan is not None and moved.replan.url.startswith("https://big.example/")
    assert moved.record["next"] == "big" and moved.line.endswith("; next: big")
    assert nxt.failed_over == "small (503) → big" and not chain.gave_up and chain.told is None


def test_when_nothing_is_left_the_chain_gives_up_and_says_what_the_client_is_told():
    rules, chain, first = _first(unmatched="unmatched: refuse")  # after spill: nothing (not the client's own host)
    capacity, health = Capacity(), EndpointHealth()
    failed = _failed(first, chain, rules, Failure("status", "HTTP 503: loading", 503), capacity=capacity, health=health)
    nxt = failed.candidate()
    failed.settle(nxt)
    again = _failed(nxt, chain, rules, Failure("unreachable", "connection refused"), capacity=capacity, health=health)
    assert again.candidate() is None  # spill was the last route
    moved = again.settle(None)
    assert moved.replan is None and chain.gave_up and moved.record["next"] is None
    assert chain.told is not None and first.request_id in chain.told.message  # two attempts: the last word


def test_a_route_that_says_on_failure_error_does_not_move_on():
    rules, chain, first = _first(extra="    on_failure: error")
    failed = _failed(first, chain, rules, Failure("status", "HTTP 503: loading", 503))
    assert failed.candidate() is None
    failed.settle(None)  # one attempt: its failure goes to the client as it came
    assert chain.gave_up and chain.told is None



def test_the_slot_the_failed_attempt_held_is_given_back_by_its_holder():
    rules, chain, first = _first()
    capacity = Capacity()

    class Holder:  # as a FlowState or a Planning holds its attempt's slot
        slot = capacity.acquire(first.endpoint)

    holder = Holder()
    slot = holder.slot
    assert slot is not None and capacity.in_flight[first.endpoint.name] == 1
    FailedAttempt.of(first, chain, Failure("status", "HTTP 503: loading", 503), [], ms=20.0, now=1000.0, rules=rules,
                     health=EndpointHealth(), capacity=capacity, env=ENV, held=holder)
    assert holder.slot is None and not slot.held and capacity.in_flight.get(first.endpoint.name, 0) == 0
