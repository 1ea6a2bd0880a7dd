"""What the client hears when no attempt of its turn served it (turn/last_word.py): every
failure kind of the failover table x a last hop that could not be reached, broke, timed out
or answered x the four client protocols, streamed and whole (an error before the first byte
is a whole JSON error either way): status, envelope, retry-after and message. And when every
route is busy before anything is sent: 429 / 503 with retry-after, never a 400."""

from __future__ import annotations

import json

import pytest

from tokunseba import protocols
from tokunseba.neutral.error import parse_error_body
from tokunseba.turn.failover import Attempted
from tokunseba.turn.failover import Capacity
from tokunseba.turn.failover import Failure
from tokunseba.turn.last_word import answer, busy, choose, final, say_busy, story, waits
from tokunseba.routing.endpoints import EndpointHealth
from tokunseba.routing import load_rules_text
from tokunseba.turn.plan import build_turn, decide_request, prepare_request

CLIENTS = ("anthropic", "openai", "openai-responses", "gemini")


def _oai(msg, code=None, etype="server_error"):
    return json.dumps({"error": {"message": msg, "type": etype, "param": None, "code": code}}).encode()


# failure kind -> (status, body, retry-after hint) as an endpoint sends it
ANSWERS = {
    "429": (429, _oai("Rate limit reached", "rate_limit_exceeded", "rate_limit_error"), 7.0),
    "503": (503, _oai("Loading model"), None),
    "529": (529, b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}', None),
    "500": (500, b"<html>boom</html>", None),
    "408": (408, _oai("request timeout"), None),
    "context-openai": (400, _oai("This model's maximum context length is 4096 tokens.", "context_length_exceeded",
                                 "invalid_request_error"), None),
    "context-llama": (400, json.dumps({"error": {"code": 400, "type": "exceed_context_size_error",
                                                 "message": "the request exceeds the available context size"}}).encode(),
                      None),
    "context-anthropic": (400, b'{"type":"error","error":{"type":"invalid_request_error",'
                               b'"message":"prompt is too long: 210000 tokens > 200000 maximum"}}', None),
    "context-gemini": (400, json.dumps({"error": {"code": 400, "status": "INVALID_ARGUMENT", "message":
                                                  "The input token count (300000) exceeds the maximum number of "
                                                  "tokens allowed (131072)."}}).encode(), None),
}
NO_STATUS = {  # failure kinds that send no status line
    "unreachable": Failure("unreachable", "cannot connect to api.anthropic.com:443: [Errno 111] Connection refused"),
    "timeout": Failure("timeout", "no status line within 2 s (first_byte_timeout_s)"),
    "reset": Failure("reset", "upstream connection broke: reset by peer"),
}


def attempt(name: str, kind_key: str, *, host: str | None = None, route: str | None = "easy") -> Attempted:
    if kind_key in NO_STATUS:
        f, hint = NO_STATUS[kind_key], None
    else:
        status, body, hint = ANSWERS[kind_key]
        f = Failure.of(status, body)
        assert f is not None, kind_key
    return Attempted(route, name, f.kind, f.status, f.why, 5.0, host=host or f"{name}.example",
                     retry_after_s=hint, error=f.error)


def provider_down() -> Attempted:
    return attempt(None, "unreachable", host="api.anthropic.com", route=None)  # type: ignore[arg-type]


def envelope_ok(client: str, body: bytes) -> dict:
    doc = json.loads(body)
    if client == "anthropic":
        assert doc["type"] == "error" and set(doc["error"]) == {"type", "message"}
    elif client == "gemini":
        assert set(doc["error"]) == {"code", "message", "status"}
    else:
        assert set(doc["error"]) == {"message", "type", "param", "code"}
    return doc


def context_said(client: str, doc: dict) -> bool:
    """The client's own "too long" error, as its clients act on it."""
    if client == "anthropic":
        return doc["error"]["type"] == "invalid_request_error" and "prompt is too long" in doc["error"]["message"].lower()
    if client == "gemini":
        return doc["error"]["status"] == "INVALID_ARGUMENT"
    return doc["error"]["code"] == "context_length_exceeded"


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("last", ["unreachable", "timeout", "reset", "503"])
@pytest.mark.parametrize("first", sorted(ANSWERS))
def test_an_endpoints_real_answer_wins_over_a_later_hop(first, last, client, stream):
    chain = [attempt("local", first), provider_down() if last == "unreachable" else attempt("big", last)]
    if first == "429" or first.startswith("context"):
        want = 0  # a 429 over a 503, a context window over everything
    elif last == "503" and first != "408" and first != "500" and first != "503" and first != "529":
        want = 1
    else:
        want = 0  # a status over no status; among equal statuses, the earliest
    assert choose(chain) == want
    told = answer(client, chain, "tk-abc")
    r = told.reply
    doc = envelope_ok(client, r.body)
    assert r.headers["content-type"] == "application/json" and r.headers["x-tokunseba-request-id"] == "tk-abc"
    err = parse_error_body(r.status, r.body)
    # the message names every attempt in order, and never says the turn was not sent
    assert "local answered" in err.message and "; then " in err.message and "not sent" not in err.message
    assert err.message.index("local") < err.message.index("api.anthropic.com" if last == "unreachable" else "big")
    assert "(request tk-abc)" in err.message
    chosen = chain[told.chosen]
    if first.startswith("context"):
        assert context_said(client, doc), (client, doc)
        assert r.status == 400 and "retry-after" not in r.headers
    elif first == "429":
        assert r.status == 429 and r.headers["retry-after"] == "7" and "(retry after 7 s)" in err.message
        assert "Rate limit reached" in err.message
    else:
        assert not context_said(client, doc)
        assert "retry-after" not in r.headers
        want_status = chosen.status
        if client == "anthropic" and want_status == 503:
            want_status = 529  # Anthropic says overloaded with 529 (protocols/anthropic.STATUS_FROM_OTHERS)
        elif client != "anthropic" and want_status == 529:
            want_status = 503
        assert r.status == want_status
    if last == "unreachable":
        assert "api.anthropic.com could not be reached: cannot connect to api.anthropic.com:443" in err.message


@pytest.mark.parametrize("client", CLIENTS)
def test_a_context_window_wins_over_everything_wherever_it_is(client):
    chain = [attempt("local", "429"), attempt("mid", "context-llama"), attempt("big", "503"), provider_down()]
    told = answer(client, chain)
    assert told.chosen == 1 and told.reply.status == 400
    assert context_said(client, envelope_ok(client, told.reply.body))
    assert "retry-after" not in told.reply.headers


@pytest.mark.parametrize("client", CLIENTS)
def test_nothing_answered_is_a_502_or_504_naming_every_hop(client):
    told = answer(client, [attempt("local", "unreachable"), provider_down()])
    assert told.reply.status == 502 and told.chosen == 0
    msg = parse_error_body(told.reply.status, told.reply.body).message
    assert msg.startswith("tokunseba: local could not be reached: ") and "; then api.anthropic.com could not" in msg
    told = answer(client, [attempt("local", "timeout"), provider_down()])
    assert told.reply.status == 504 and "local did not answer in time" in told.reply.body.decode()


def test_two_rate_limits_the_soonest_hint_wins():
    a, b = attempt("local", "429"), attempt("big", "429")
    b.retry_after_s = 2.5
    told = answer("anthropic", [a, b])
    assert told.chosen == 1 and told.reply.headers["retry-after"] == "3"
    assert story([a, b]) == ("local answered 429 (retry after 7 s): Rate limit reached; "
                             "then big answered 429 (retry after 3 s): Rate limit reached")


RULES = """\
endpoints:
  small: {{protocol: openai, url: "http://127.0.0.1:9/v1", max_tokens: 50}}
  big: {{protocol: openai, url: "http://127.0.0.1:10/v1", max_tokens: 50}}
routes:
  - name: easy
    when: {{model: "claude-*"}}
    to: small
  - name: spill
    when: {{model: "claude-*"}}
    to: big
unmatched: {unmatched}
"""
BODY = json.dumps({"model": "claude-x", "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]}).encode()


def _busy_turn(unmatched: str, capacity: Capacity, health: EndpointHealth):
    rules = load_rules_text(RULES.format(unmatched=unmatched))
    prep = prepare_request(method="POST", host="api.anthropic.com", port=443, path="/v1/messages",
                           headers=[("host", "api.anthropic.com"), ("content-type", "application/json")], body=BODY)

    def available(ep):
        if not health.reachable(ep):
            return False
        return capacity.unavailable(ep) or True
    turn = build_turn(rules, prep, decide_request(rules, prep, available), env={})
    return rules, turn


@pytest.mark.parametrize("rate_limited", [True, False])
def test_every_route_busy_under_refuse_is_429_or_503_with_the_soonest_retry_after(rate_limited):
    capacity, health = Capacity(), EndpointHealth()
    rules = load_rules_text(RULES.format(unmatched="refuse"))
    small, big = rules.endpoints["small"], rules.endpoints["big"]
    if rate_limited:
        capacity.cool(small, 6.8, "HTTP 429, retry-after")
    else:
        capacity.back_off(small, "503")  # 2 s
    health.failed(big, "connection refused")  # 2 s
    rules, turn = _busy_turn("refuse", capacity, health)
    assert turn.local is not None and turn.local.status == 400  # what decide says alone
    assert say_busy(turn, rules, capacity, health)
    r = turn.local
    assert r.status == (429 if rate_limited else 503) and r.status != 400
    assert r.headers["retry-after"] == "2"  # the soonest: big's back-off (2 s), before small's cooldown
    msg = parse_error_body(r.status, r.body).message
    assert "route easy: small is cooling down" in msg and "route spill: big is unreachable (connection refused)" in msg
    assert turn.outcome == "error" and ("busy" in [k for k, _ in turn.events])


def test_the_clients_own_host_unreachable_after_busy_routes_is_busy_too():
    capacity, health = Capacity(), EndpointHealth()
    rules = load_rules_text(RULES.format(unmatched="pass"))
    capacity.cool(rules.endpoints["small"], 7, "HTTP 429, retry-after")
    capacity.cool(rules.endpoints["big"], 30, "HTTP 429, retry-after")
    rules, turn = _busy_turn("pass", capacity, health)
    assert turn.local is None and turn.action == "pass"
    turn.local = turn.client_error(502, "cannot reach")  # as provider_reach.answer_unreachable would
    assert say_busy(turn, rules, capacity, health, then="api.anthropic.com could not be reached: connection refused")
    assert turn.local.status == 429 and turn.local.headers["retry-after"] == "7"
    assert "; then api.anthropic.com could not be reached" in turn.local.body.decode()


def test_a_turn_no_route_matched_stays_refused():
    capacity, health = Capacity(), EndpointHealth()
    rules = load_rules_text(RULES.format(unmatched="refuse").replace('"claude-*"', '"nothing-*"'))
    prep = prepare_request(method="POST", host="api.anthropic.com", port=443, path="/v1/messages",
                           headers=[("host", "api.anthropic.com")], body=BODY)
    turn = build_turn(rules, prep, decide_request(rules, prep), env={})
    assert not say_busy(turn, rules, capacity, health) and turn.local.status == 400


@pytest.mark.parametrize("client", CLIENTS)
def test_busy_speaks_every_clients_envelope(client):
    capacity, health = Capacity(), EndpointHealth()
    rules = load_rules_text(RULES.format(unmatched="refuse"))
    capacity.cool(rules.endpoints["small"], 4.2, "HTTP 429, retry-after")
    ws = waits([{"route": "easy", "unreachable": True, "unavailable": "cooling down (HTTP 429)"}], rules, capacity, health)
    reply, msg = busy(client, ws, request_id="tk-1")
    envelope_ok(client, reply.body)
    assert reply.status == 429 and reply.headers["retry-after"] == "5" and "retry after 5 s" in msg
    assert protocols.for_errors(client).name == client


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("last", ["refused", "known down", "on_failure: error", "unmatched: refuse"])
@pytest.mark.parametrize("first", sorted(ANSWERS))
def test_with_no_next_attempt_the_failure_goes_as_it_came_in_the_clients_protocol(first, last, client, stream):
    """The next route refuses the turn or its endpoint is known down (not tried), or nothing
    comes next: one attempt, whose failure the client gets as it came, translated into its
    protocol (a context window as its own "too long"), status kept (529/503 as the protocol
    says overloaded); no story to tell."""
    from tokunseba import translate

    chain = [attempt("local", first)]
    assert final(client, chain, "tk-1") is None
    status, body, _ = ANSWERS[first]
    st, out = translate.error("openai", client, status, body) if client != "openai" else (status, body)
    if client == "openai":  # the endpoint's own protocol: byte for byte
        assert out == body
        return
    doc = envelope_ok(client, out)
    if first.startswith("context"):
        assert st == 400 and context_said(client, doc), (client, doc)
    elif first == "429":
        assert st == 429 and "Rate limit reached" in parse_error_body(st, out).message
    else:
        assert st in (status, 503, 529) and not context_said(client, doc)
