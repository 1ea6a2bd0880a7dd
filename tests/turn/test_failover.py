"""failover.Failure.of / retry_hint, capacity.Capacity, and the rules keys of issue 19
(on_failure with its alias on_unreachable, first_byte_timeout_s, cooldown_max_s,
max_concurrency, queue_s, decide(after=...))."""

from __future__ import annotations

import asyncio
import email.utils
import json
import re
import textwrap

import pytest

from tokunseba.proxy.core import Capacity
from tokunseba.routing.endpoints import Endpoint
from tokunseba.turn.failover import Failure, retry_hint
from tokunseba.protocols.failures import CONTEXT_STATUSES, FAILOVER_STATUSES, may_be_failure
from tokunseba.proxy.relay import HOLD_MAX  # what the relay holds of a reply that may be a failure
from tokunseba.routing import RulesError, TurnFacts, check_file, decide, load_rules_text


def _oai(message, code=None, etype="invalid_request_error") -> bytes:
    return json.dumps({"error": {"message": message, "type": etype, "param": None, "code": code}}).encode()


@pytest.mark.parametrize("status", sorted(FAILOVER_STATUSES))
def test_every_failover_status_is_a_failure_whatever_the_body(status):
    f = Failure.of(status, b"<html>busy</html>")
    assert f is not None and f.kind == "status" and f.status == status and f.short() == str(status)
    assert may_be_failure(status)


@pytest.mark.parametrize("status,body", [
    (400, _oai("This model's maximum context length is 4096 tokens. However, you requested 9000 tokens.",
               "context_length_exceeded")),  # OpenAI / vLLM
    (400, json.dumps({"error": {"code": 400, "message": "the request exceeds the available context size, try "
                                "increasing it", "type": "exceed_context_size_error", "n_prompt_tokens": 5000,
                                "n_ctx": 4096}}).encode()),  # llama-server
    (400, json.dumps({"type": "error", "error": {"type": "invalid_request_error",
                                                 "message": "prompt is too long: 208310 tokens > 200000 maximum"}}).encode()),
    (400, json.dumps({"error": {"code": 400, "status": "INVALID_ARGUMENT", "message":
                                "The input token count (1200000) exceeds the maximum number of tokens allowed "
                                "(1048576)."}}).encode()),  # Gemini
    (413, b"context window exceeded"),
])
def test_context_window_errors_are_failures(status, body):
    f = Failure.of(status, body, "openai")
    assert f is not None and f.kind == "context_window" and "context-window" in f.why


@pytest.mark.parametrize("status,body", [
    (400, _oai("Invalid value for 'temperature'")),
    (401, _oai("bad key", etype="authentication_error")),
    (404, b"not found"), (422, b'{"detail": "field required"}'), (413, b"request entity too large"),
])
def test_the_requests_own_fault_is_answered(status, body):
    assert Failure.of(status, body, "openai") is None and Failure.of(status, body) is None


# one sample of each CONTEXT_WINDOW row, as its endpoint sends it
CONTEXT_SAMPLES = {
    ("openai", 0): _oai("Too long", "context_length_exceeded"),
    ("openai", 1): json.dumps({"error": {"code": 400, "message": "x", "type": "exceed_context_size_error"}}).encode(),
    ("openai", 2): json.dumps({"error": {"code": 400, "message": "the request exceeds the available context size, "
                                        "try increasing it", "type": "server_error"}}).encode(),
    ("openai", 3): _oai("This model's maximum context length is 4096 tokens. However, you requested 5000 tokens"),
    ("openai", 4): b'{"error": "context length exceeded"}',  # Ollama's flat envelope
    ("openai-responses", 0): _oai("Your input exceeds the context window of this model.", "context_length_exceeded"),
    ("openai-responses", 1): _oai("Your input exceeds the context window of this model."),
    ("anthropic", 0): json.dumps({"type": "error", "error": {"type": "invalid_request_error",
                                                             "message": "prompt is too long: 208310 tokens > 200000 maximum"}}).encode(),
    ("anthropic", 1): json.dumps({"type": "error", "error": {"type": "invalid_request_error", "message":
                                                             "input length and `max_tokens` exceed context limit: 198000 + 64000 > 200000"}}).encode(),
    ("gemini", 0): json.dumps({"error": {"code": 400, "status": "INVALID_ARGUMENT", "message":
                                         "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."}}).encode(),
}


def test_every_context_window_row_has_a_sample_recognised_by_failover_and_by_the_translators():
    """Each row of protocols/failures.CONTEXT_WINDOW matches its sample, for its own protocol;
    and the error envelopes' reader (the same is_context_window, which makes Claude Code read
    "prompt is too long") agrees on every sample. (tests/protocols/test_failures.py holds the rows
    of the two tables this one replaced.)"""
    from tokunseba.neutral.error import parse_error_body
    from tokunseba.protocols.failures import CONTEXT_WINDOW, is_context_window

    assert set(CONTEXT_SAMPLES) == {(p, i) for p, rows in CONTEXT_WINDOW.items() for i in range(len(rows))}
    for (proto, i), body in CONTEXT_SAMPLES.items():
        f = Failure.of(400, body, proto)
        assert f is not None and f.kind == "context_window", (proto, i)
        assert is_context_window(parse_error_body(400, body)), (proto, i)


def test_only_failure_and_context_statuses_are_held():
    assert not may_be_failure(200) and not may_be_failure(401) and not may_be_failure(404)
    assert all(may_be_failure(s) for s in CONTEXT_STATUSES) and HOLD_MAX >= 64 * 1024


def test_retry_hint_seconds_date_ms_and_resets():
    now = 1_800_000_000.0
    assert retry_hint([("Retry-After", "30")], now) == (30.0, "retry-after")
    date = email.utils.formatdate(now + 42, usegmt=True)
    s, name = retry_hint([("retry-after", date)], now)
    assert name == "retry-after" and 41 <= s <= 43
    assert retry_hint([("retry-after-ms", "1500")], now) == (1.5, "retry-after-ms")
    assert retry_hint([("retry-after", "soon")], now) is None
    assert retry_hint([("retry-after", email.utils.formatdate(now - 5, usegmt=True))], now) is None  # past
    # OpenAI: the used-up limit's reset
    h = [("x-ratelimit-remaining-requests", "0"), ("x-ratelimit-reset-requests", "6m0s"),
         ("x-ratelimit-remaining-tokens", "100"), ("x-ratelimit-reset-tokens", "250ms")]
    assert retry_hint(h, now) == (360.0, "x-ratelimit-reset-requests")
    # Anthropic: an RFC 3339 time
    from datetime import datetime, timezone
    at = datetime.fromtimestamp(now + 20, timezone.utc).isoformat().replace("+00:00", "Z")
    s, name = retry_hint([("anthropic-ratelimit-tokens-remaining", "0"), ("anthropic-ratelimit-tokens-reset", at)], now)
    assert name == "anthropic-ratelimit-tokens-reset" and abs(s - 20) < 0.01
    assert retry_hint([("x-ratelimit-reset-requests", "1s")], now) is None  # not used up: no hint


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


EP = Endpoint("local", "openai", "http://127.0.0.1:1/v1", max_concurrency=1, queue_s=0.5, cooldown_max_s=60)


def test_cooldown_is_capped_and_expires():
    clock = Clock()
    cap = Capacity(clock)
    assert cap.cool(EP, 600, "HTTP 429, retry-after: 600") == 60
    assert "cooling down" in cap.unavailable(EP) and "429" in cap.unavailable(EP)
    clock.t += 60.1
    assert cap.unavailable(EP) is None
    assert cap.cool(Endpoint("x", "openai", "http://h/v1", cooldown_max_s=0), 30, "y") == 0


def test_slots_queue_and_release():
    async def main():
        cap = Capacity()
        a = cap.acquire(EP)
        assert a is not None and cap.acquire(EP) is None
        assert "full (1 of max_concurrency 1" in cap.unavailable(EP)
        assert cap.unavailable(EP, queue=True) is None  # queue_s: the turn may wait for the slot
        assert await cap.wait(EP, 0.05) is None  # nobody released it
        waiting = asyncio.ensure_future(cap.wait(EP, 5))
        await asyncio.sleep(0.01)
        a.release()
        a.release()  # twice: once counted
        b = await waiting
        assert b is not None and cap.in_flight == {"local": 1}
        b.release()
        assert cap.in_flight == {}
    asyncio.run(main())


RULES = """\
endpoints:
  small:
    protocol: openai
    url: http://127.0.0.1:1/v1
    first_byte_timeout_s: 2
    max_concurrency: 1
    queue_s: 0.5
    cooldown_max_s: 30
  big:
    protocol: openai
    url: http://127.0.0.1:2/v1
routes:
  - name: easy
    when: {model: "claude-*"}
    to: small
  - name: other
    when: {model: "gpt-*"}
    to: big
  - name: fallback
    to: big
    on_failure: error
"""


def _facts(model="claude-x"):
    return TurnFacts("anthropic", model, False, False, False, 10, "hi", {})


def test_new_endpoint_keys_and_on_failure_load():
    rules = load_rules_text(RULES)
    small = rules.endpoints["small"]
    assert (small.first_byte_timeout_s, small.max_concurrency, small.queue_s, small.cooldown_max_s) == (2.0, 1, 0.5, 30.0)
    big = rules.endpoints["big"]
    assert (big.first_byte_timeout_s, big.max_concurrency, big.queue_s, big.cooldown_max_s) == (None, None, 0.0, 60.0)
    assert [r.on_failure for r in rules.routes] == ["next", "next", "error"]


def test_decide_after_goes_to_the_next_matching_route_then_unmatched():
    rules = load_rules_text(RULES)
    d = decide(rules, _facts(), after="easy")
    assert d.action == "route" and d.route.name == "fallback"  # "other" does not match
    assert [t["route"] for t in d.trace] == ["other", "fallback"]
    d = decide(rules, _facts(), after="fallback")
    assert d.action == "pass" and d.reason == "no route matched"


def test_decide_skips_an_unavailable_endpoint_with_the_reason():
    rules = load_rules_text(RULES)
    d = decide(rules, _facts(), reachable=lambda ep: "cooling down (HTTP 429; 20.0 s left)" if ep.name == "small" else True)
    assert d.route.name == "fallback" and d.trace[0]["unavailable"].startswith("cooling down")
    d = decide(rules, _facts(), reachable=lambda ep: "full" if ep.name == "big" else True, after="easy")
    assert d.action == "error" and "on_failure: error" in d.reason and "is full" in d.reason


@pytest.mark.parametrize("extra,what", [
    ("    on_failure: retry\n", "on_failure must be one of: next, error; got 'retry'"),
    ("    on_failure: next\n    on_unreachable: error\n", "on_unreachable: error contradicts on_failure: next"),
])
def test_bad_on_failure(extra, what):
    text = RULES.replace("    to: small\n", "    to: small\n" + extra)
    with pytest.raises(RulesError) as ei:
        load_rules_text(text, "r.yaml")
    assert what in str(ei.value) and str(ei.value).startswith("r.yaml:")


@pytest.mark.parametrize("key,value,what", [
    ("first_byte_timeout_s", "0", "first_byte_timeout_s must be a number of seconds above 0"),
    ("first_byte_timeout_s", "soon", "first_byte_timeout_s must be a number"),
    ("max_concurrency", "0", "max_concurrency must be an integer of 1 or more"),
    ("max_concurrency", "1.5", "max_concurrency must be an integer"),
    ("cooldown_max_s", "-1", "cooldown_max_s must be a number of seconds, 0 or more"),
])
def test_bad_endpoint_keys_say_file_and_line(key, value, what):
    text = RULES.replace("    first_byte_timeout_s: 2\n", f"    first_byte_timeout_s: 2\n    {key}: {value}\n"
                         if key != "first_byte_timeout_s" else f"    first_byte_timeout_s: {value}\n")
    with pytest.raises(RulesError) as ei:
        load_rules_text(text, "r.yaml")
    assert what in str(ei.value) and str(ei.value).startswith("r.yaml:")


def test_queue_s_needs_max_concurrency():
    text = RULES.replace("    max_concurrency: 1\n", "")
    with pytest.raises(RulesError) as ei:
        load_rules_text(text, "r.yaml")
    assert "queue_s without max_concurrency" in str(ei.value)


def test_check_says_on_unreachable_is_the_alias(tmp_path):
    p = tmp_path / "r.yaml"
    p.write_text(RULES.replace("    to: small\n", "    to: small\n    on_unreachable: skip\n"))
    ok, lines = check_file(p)
    assert ok
    assert any(line.startswith("on_failure: error for fallback; next for the others") for line in lines)
    assert "note: on_unreachable (route easy) is the older name of on_failure (skip = next); both mean the same" in lines


# ---- what the CLI shows of failover (turns.attempts)

def test_log_stats_and_explain_show_the_attempts(tmp_path, capsys):
    import time as _time

    from tokunseba.cli.main import main
    from tokunseba.ledger import Ledger

    path = tmp_path / "ledger.db"
    now = _time.time()
    with Ledger(path) as led:
        led.start_turn("tk-failed-over", started_at=now - 5, client_protocol="anthropic", host="api.anthropic.com",
                       path="/v1/messages", requested_model="claude-x", stream=True)
        led.update_turn("tk-failed-over", rule="spill", endpoint="big", target_protocol="openai", outcome="translated",
                        status=200, latency_ms=30.0, trace=[
                            {"route": "easy", "matched": True, "reasons": [], "refused": None, "unreachable": False},
                            {"route": "spill", "matched": True, "reasons": [], "refused": None, "unreachable": False}],
                        attempts=[{"route": "easy", "endpoint": "small", "kind": "status", "status": 429,
                                   "why": "HTTP 429: slow down", "ms": 4.5, "cooled_s": 30, "backoff_s": 0},
                                  {"route": "spill", "endpoint": "big", "kind": "answered", "status": 200,
                                   "why": None, "ms": 20.0}])
        led.start_turn("tk-cooled-next", started_at=now - 2, client_protocol="anthropic", host="api.anthropic.com",
                       path="/v1/messages", requested_model="claude-x", stream=True)
        led.update_turn("tk-cooled-next", rule="spill", endpoint="big", target_protocol="openai", outcome="translated",
                        status=200, latency_ms=10.0, trace=[
                            {"route": "easy", "matched": True, "reasons": [], "refused": None, "unreachable": True,
                             "unavailable": "cooling down (HTTP 429, retry-after; 27.0 s left)"},
                            {"route": "spill", "matched": True, "reasons": [], "refused": None, "unreachable": False}])
        led.start_turn("tk-gave-up", started_at=now - 1, client_protocol="anthropic", host="api.anthropic.com",
                       path="/v1/messages", requested_model="claude-x", stream=False)
        led.update_turn("tk-gave-up", rule="spill", endpoint="big", target_protocol="openai", outcome="error",
                        status=529, latency_ms=10.0,
                        attempts=[{"route": "easy", "endpoint": "small", "kind": "status", "status": 503, "why": "x",
                                   "ms": 1.0}, {"route": "spill", "endpoint": "big", "kind": "status", "status": 529,
                                                "why": "HTTP 529: Overloaded", "ms": 2.0}])
    assert main(["log", "--ledger", str(path)]) == 0
    out = capsys.readouterr().out
    assert "spill → big (failed over from small 429)" in out
    assert "spill → big (failed over from small 503)" in out  # its last attempt failed too: the client got that
    assert main(["stats", "--ledger", str(path)]) == 0
    out = capsys.readouterr().out
    assert "failed over 2" in out and "failover: 2 turns went on to a later attempt" in out
    assert re.search(r"small\s+2\s+2\s+1", out) and re.search(r"big\s+1\s+0\s+0", out), out
    assert main(["stats", "--ledger", str(path), "--json"]) == 0
    st = json.loads(capsys.readouterr().out)
    assert st["failed_over"] == 2
    assert st["failover_by_endpoint"] == [{"endpoint": "small", "failed": 2, "moved_on": 2, "cooled": 1},
                                          {"endpoint": "big", "failed": 1, "moved_on": 0, "cooled": 0}]
    assert main(["explain", "--ledger", str(path), "tk-failed-over"]) == 0
    out = capsys.readouterr().out
    assert "  1. easy → small: failed (status) after 4.5 ms; moved on to the next route" in out
    assert "HTTP 429: slow down" in out and "cooled down for 30 s" in out
    assert "  2. spill → big: answered, status 200, after 20.0 ms" in out
    assert main(["explain", "--ledger", str(path), "tk-cooled-next"]) == 0
    out = capsys.readouterr().out
    assert "easy: matched, but the endpoint was cooling down (HTTP 429, retry-after; 27.0 s left)" in out


def test_back_off_is_per_endpoint_doubles_and_resets():
    clock = Clock()
    cap = Capacity(clock)
    other = Endpoint("other-model", "openai", "http://127.0.0.1:1/v1")  # same host and port
    assert cap.back_off(EP, "503") == 2
    assert cap.unavailable(EP).startswith("cooling down (backing off after 503") and cap.unavailable(other) is None
    clock.t += 2.1
    assert cap.unavailable(EP) is None
    assert cap.back_off(EP, "503") == 4 and cap.back_off(EP, "503") == 8
    for _ in range(5):
        cap.back_off(EP, "503")
    assert cap.back_off(EP, "503") == 30
    cap.ok(EP)
    clock.t += 31
    assert cap.back_off(EP, "reset") == 2


# ---- turn/failover.py: the next attempt, planned afresh from the client's own request

from tokunseba.turn.failover import Attempted, Chain, next_turn  # noqa: E402
from tokunseba.turn.plan import build_turn, decide_request, prepare_request  # noqa: E402

CHAIN_RULES = """\
endpoints:
  small:
    protocol: openai
    url: http://127.0.0.1:8001/v1
    key_env: SMALL_KEY
  big:
    protocol: anthropic
    url: https://big.example/v1
    key_env: BIG_KEY
routes:
  - name: easy
    to: small
{extra}
  - name: spill
    to: big
{unmatched}
"""
ENV = {"SMALL_KEY": "sk-small-0001", "BIG_KEY": "sk-big-0002"}
CLIENT_HEADERS = [("Host", "api.anthropic.com"), ("X-Api-Key", "sk-ant-client-0003"), ("Content-Type", "application/json"),
                  ("Anthropic-Version", "2023-06-01"), ("Content-Length", "99"), ("User-Agent", "claude-cli/2.1")]
BODY = json.dumps({"model": "claude-x", "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]}).encode()


def _first(extra="", unmatched=""):
    rules = load_rules_text(CHAIN_RULES.format(extra=extra, unmatched=unmatched))
    prep = prepare_request(method="POST", host="api.anthropic.com", port=443, path="/v1/messages",
                           headers=CLIENT_HEADERS, body=BODY)
    turn = build_turn(rules, prep, decide_request(rules, prep), env=ENV)
    fields = tuple((k.encode(), v.encode()) for k, v in CLIENT_HEADERS)
    return rules, Chain(prep, "https://api.anthropic.com/v1/messages", fields), turn


def test_the_next_attempt_is_planned_afresh_with_only_its_own_key():
    rules, chain, first = _first()
    assert first.endpoint.name == "small" and first.action == "translate"
    chain.failed.append(Attempted("easy", "small", "status", 503, "HTTP 503: loading", 3.0))
    nxt = next_turn(rules, chain, first, reachable=lambda ep: True, env=ENV)
    assert nxt.endpoint.name == "big" and nxt.action == "retarget" and nxt.request_id == first.request_id
    assert chain.attempt_url(nxt) == "https://big.example/v1/messages"
    hdrs = {k.decode(): v.decode() for k, v in chain.attempt_headers(nxt)}
    assert hdrs["x-api-key"] == "sk-big-0002"  # big's own key, in place of the client's
    assert "sk-small-0001" not in json.dumps(hdrs) and "sk-ant-client-0003" not in json.dumps(hdrs)
    assert all(k == k.lower() for k in hdrs) and "host" not in hdrs
    assert json.loads(chain.attempt_body(nxt))["messages"] == [{"role": "user", "content": "hi"}]
    nxt.failed_over = chain.text("big")
    assert nxt.summary().endswith("failed over: small (503) → big")


def test_no_next_attempt_under_on_failure_error_or_refuse():
    rules, chain, first = _first(extra="    on_failure: error")
    assert next_turn(rules, chain, first, reachable=lambda ep: True, env=ENV) is None
    rules, chain, first = _first(unmatched="unmatched: refuse")
    nxt = next_turn(rules, chain, first, reachable=lambda ep: True, env=ENV)
    assert nxt.endpoint.name == "big"
    assert next_turn(rules, chain, nxt, reachable=lambda ep: True, env=ENV) is None  # no route after spill: refuse


def test_unmatched_pass_goes_to_the_clients_own_host_with_its_own_headers():
    rules, chain, first = _first()
    nxt = next_turn(rules, chain, first, reachable=lambda ep: ep.name != "big" or "cooling down", env=ENV)
    assert nxt.action == "pass" and chain.attempt_url(nxt) == "https://api.anthropic.com/v1/messages"
    hdrs = {k.decode(): v.decode() for k, v in chain.attempt_headers(nxt)}
    assert hdrs["x-api-key"] == "sk-ant-client-0003" and chain.attempt_body(nxt) == BODY


def test_a_relay_failure_is_typed_and_reads_as_its_message():
    """proxy/relay.py reports why an exchange broke as a Broken(kind, message): the adapter reads
    its kind (a refused connect marks the endpoint down), the ledger and the client its text."""
    from tokunseba.turn.failover import Broken

    refused, reset = Broken("unreachable", "cannot connect to h:1: refused"), Broken("reset", "upstream connection broke")
    assert refused.refused and not reset.refused and reset.kind == "reset"
    assert refused.message == "cannot connect to h:1: refused" and f"{reset}" == reset.message == "upstream connection broke"
    assert not isinstance(refused, str) and refused != "cannot connect to h:1: refused"  # a value, not a text
    with pytest.raises(AttributeError):
        refused.kind = "reset"  # type: ignore[misc]  # frozen
