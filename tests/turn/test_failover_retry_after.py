"""Capacity.say_when: a turn answered 503 because its route's endpoint is cooling down
(``on_failure: error``) says ``retry-after: <seconds left, rounded up>``; nothing else does.
(End to end, through a real mitmdump and the anthropic SDK: tests/e2e/test_cooldown_retry_after_e2e.py.)"""

from __future__ import annotations

import json

import pytest

from tokunseba.turn.failover import Capacity
from tokunseba.routing import load_rules_text
from tokunseba.turn.plan import build_turn, decide_request, prepare_request

RULES = """\
endpoints:
  small:
    protocol: openai
    url: http://127.0.0.1:8001/v1
    max_tokens: 64
    max_concurrency: 1
    cooldown_max_s: 60
routes:
  - name: easy
    to: small
    on_failure: error
{extra}
"""
ANT = dict(host="api.anthropic.com", path="/v1/messages",
           headers=[("x-api-key", "sk-ant-client"), ("anthropic-version", "2023-06-01")],
           body=json.dumps({"model": "claude-x", "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]}))
CHAT = dict(host="api.openai.com", path="/v1/chat/completions", headers=[("authorization", "Bearer sk-client")],
            body=json.dumps({"model": "gpt-x", "messages": [{"role": "user", "content": "hi"}]}))


class Clock:
    t = 1000.0

    def __call__(self) -> float:
        return self.t


def plan(cap: Capacity, client=ANT, extra: str = "", down: bool = False):
    rules = load_rules_text(RULES.format(extra=extra))
    prep = prepare_request(method="POST", host=client["host"], port=443, path=client["path"],
                           headers=client["headers"], body=client["body"].encode())

    def available(ep):
        if down:
            return False
        return cap.unavailable(ep) or True
    turn = build_turn(rules, prep, decide_request(rules, prep, available), env={})
    cap.say_when(turn)
    return rules, turn


@pytest.mark.parametrize("client", [ANT, CHAT], ids=["anthropic", "openai"])
@pytest.mark.parametrize("cooled,left,said", [(30, 0, "30"), (30, 0.2, "30"), (20.5, 0.1, "21"), (12.5, 12.0, "1"),
                                              (600, 0, "60")])  # capped by cooldown_max_s
def test_a_cooling_endpoints_503_says_the_seconds_left_rounded_up(client, cooled, left, said):
    clock = Clock()
    cap = Capacity(clock)
    rules = load_rules_text(RULES.format(extra=""))
    cap.cool(rules.endpoints["small"], cooled, "HTTP 429, retry-after")
    clock.t += left
    _, turn = plan(cap, client)
    assert turn.local is not None and turn.local.status == 503 and turn.outcome == "error"
    assert turn.local.headers["retry-after"] == said
    assert "cooling down" in turn.error


def test_after_the_cooldown_the_turn_is_sent_and_says_nothing():
    clock = Clock()
    cap = Capacity(clock)
    rules = load_rules_text(RULES.format(extra=""))
    cap.cool(rules.endpoints["small"], 2, "HTTP 503, retry-after")
    clock.t += 2.0
    _, turn = plan(cap)
    assert turn.local is None and turn.action == "translate"


def test_a_full_or_down_endpoint_gets_no_retry_after():
    """Full (max_concurrency) or down (a refused connect): 503 as before, no time to promise."""
    cap = Capacity(Clock())
    rules = load_rules_text(RULES.format(extra=""))
    assert cap.acquire(rules.endpoints["small"]) is not None  # max_concurrency 1: now full
    _, turn = plan(cap)
    assert turn.local.status == 503 and "full" in turn.error and "retry-after" not in turn.local.headers

    _, turn = plan(Capacity(Clock()), down=True)
    assert turn.local.status == 503 and "unreachable" in turn.error and "retry-after" not in turn.local.headers


TWO = """\
endpoints:
  small:
    protocol: openai
    url: http://127.0.0.1:8001/v1
    max_tokens: 64
  cloud:
    protocol: anthropic
    url: http://127.0.0.1:8002/v1
    max_tokens: 64
routes:
  - name: first
    to: {first}
    on_failure: {on_failure}
    on_refused: error
  - name: spill
    to: small
"""


def _two(cap: Capacity, client, **kw):
    rules = load_rules_text(TWO.format(**kw))
    prep = prepare_request(method="POST", host=client["host"], port=443, path=client["path"],
                           headers=client["headers"], body=client["body"].encode())
    return rules, prep, (lambda ep: cap.unavailable(ep) or True)


def test_a_refusal_at_a_cooling_endpoint_is_a_400_without_retry_after():
    """Refused before availability is asked (Chat n: 2 toward Anthropic, on_refused: error)."""
    cap = Capacity(Clock())
    body = json.loads(CHAT["body"]) | {"n": 2}
    rules, prep, available = _two(cap, {**CHAT, "body": json.dumps(body)}, first="cloud", on_failure="error")
    cap.cool(rules.endpoints["cloud"], 30, "HTTP 429, retry-after")
    turn = build_turn(rules, prep, decide_request(rules, prep, available), env={})
    cap.say_when(turn)
    assert turn.local.status == 400 and turn.outcome == "refused" and "retry-after" not in turn.local.headers


def test_a_route_that_fails_over_is_sent_to_the_next_not_answered():
    """on_failure: next at a cooling endpoint: the next route takes the turn, nothing is answered."""
    cap = Capacity(Clock())
    rules, prep, available = _two(cap, ANT, first="cloud", on_failure="next")
    cap.cool(rules.endpoints["cloud"], 30, "HTTP 429, retry-after")
    turn = build_turn(rules, prep, decide_request(rules, prep, available), env={})
    cap.say_when(turn)
    assert turn.local is None and turn.endpoint.name == "small"
