"""A failed attempt's consequences and the next attempt as the relay sends it
(turn/failover.py)."""

from __future__ import annotations

from tokunseba.turn.failover import Capacity
from tokunseba.turn.failover import Failure
from tokunseba.turn.failover import failure_line, note_failure, replan_of, where_next
from tokunseba.routing.endpoints import EndpointHealth

from tests.turn.test_failover import ENV, _first, next_turn


def _note(failure, headers=()):
    rules, chain, first = _first()
    capacity, health = Capacity(), EndpointHealth()
    tried = note_failure(first, failure, list(headers), ms=12.5, now=1000.0, capacity=capacity, health=health)
    return rules, chain, first, tried, capacity, health


def test_a_hint_cools_the_endpoint_and_is_the_log_line():
    rules, chain, first, tried, capacity, health = _note(Failure("status", "HTTP 429: slow down", 429),
                                                         [("retry-after", "7")])
    assert (tried.route, tried.endpoint, tried.kind, tried.status, tried.ms) == ("easy", "small", "status", 429, 12.5)
    assert tried.cooled_s == 7 and tried.backoff_s == 0 and capacity.cooling_left(first.endpoint) > 0
    nxt = next_turn(rules, chain, first, reachable=lambda ep: True, env=ENV)
    assert failure_line(first, tried, Failure("status", "HTTP 429: slow down", 429), nxt) == (
        f"tokunseba: {first.request_id}: small (route easy) failed: HTTP 429: slow down; cooled for 7 s; next: big")
    assert failure_line(first, tried, Failure("status", "x", 429), None).endswith(
        "; no next route: the client gets this failure")
    assert where_next(nxt) == "big"
    replan = replan_of(nxt, chain)
    assert replan.url == "https://big.example/v1/messages" and replan.protocol == "anthropic"
    assert dict(replan.headers)[b"x-api-key"] == b"sk-big-0002"


def test_no_hint_backs_off_a_context_window_does_neither_unreachable_marks_it_down():
    *_, tried, capacity, health = _note(Failure("status", "HTTP 503", 503))
    assert tried.cooled_s == 0 and tried.backoff_s > 0
    *_, tried, capacity, health = _note(Failure("context_window", "too long", 400))
    assert tried.cooled_s == 0 and tried.backoff_s == 0
    _, _, first, tried, capacity, health = _note(Failure("unreachable", "refused"))
    assert tried.backoff_s > 0 and not health.reachable(first.endpoint)
