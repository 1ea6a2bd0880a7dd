"""Issue 21's spans, end to end: a real mitmdump with --set tokunseba_otlp_endpoint, a real
OTLP/HTTP receiver on loopback decoding the protobuf with opentelemetry-proto
(tests/otlp_receiver.py): one span per turn with the GenAI attributes and tokunseba's own,
a client's traceparent continued, no prompt or reply text unless opted in, and a collector
that is down changes nothing for the clients or the ledger."""

from __future__ import annotations

import sqlite3
import ssl

import httpx
import pytest

from tests.otlp_receiver import OtlpReceiver

from .conftest import Mitmdump, ledger_settled, start_test_proxy
from .test_proxy_e2e import CLIENT_KEY
from .upstream import Reply, Upstream, closed_port

pytestmark = pytest.mark.e2e

USAGE = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
CHAT = {"id": "chatcmpl-otel", "object": "chat.completion", "created": 1, "model": "gpt-local",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "fine words"}, "finish_reason": "stop"}],
        "usage": USAGE}
PROMPT = "the secret prompt words"
TRACE_ID, PARENT_ID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"


@pytest.fixture
def receiver():
    with OtlpReceiver() as r:
        yield r


def _client(proxy) -> httpx.Client:
    return httpx.Client(proxy=proxy.url, verify=ssl.create_default_context(cafile=str(proxy.ca)), timeout=60)


def _turn(client: httpx.Client, model: str, url: str = "https://api.anthropic.com", **headers: str) -> httpx.Response:
    return client.post(f"{url}/v1/messages", headers={"x-api-key": CLIENT_KEY, "anthropic-version": "2023-06-01",
                                                      **headers},
                       json={"model": model, "max_tokens": 5, "messages": [{"role": "user", "content": PROMPT}]})


def _proxy(upstreams, tmp_path, monkeypatch, *extra: str):
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")  # the SDK's batch delay: spans arrive within 0.1 s
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    return start_test_proxy(upstreams, tmp_path, *extra)


def test_one_span_per_turn_with_genai_attributes_and_the_clients_trace(upstreams, receiver, tmp_path, monkeypatch):
    upstreams["oai"].script(Reply.json(CHAT))
    ant = upstreams["ant"]
    ant.script(Reply.json({"id": "msg_pt", "type": "message", "role": "assistant", "model": "m",
                           "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn",
                           "stop_sequence": None}))  # reports no usage
    proxy = _proxy(upstreams, tmp_path, monkeypatch, "--set", f"tokunseba_otlp_endpoint={receiver.url}",
                   "--set", "tokunseba_instance=otel-proxy")
    try:
        with _client(proxy) as c:
            child = _turn(c, "claude-otel", traceparent=f"00-{TRACE_ID}-{PARENT_ID}-01")
            alone = _turn(c, "claude-otel")
            passed = _turn(c, "pass-me", url=ant.url.replace("http://", "http://"))
        for r in (child, alone, passed):
            assert r.status_code == 200, r.text
        spans = {s["attributes"]["tokunseba.request_id"]: s for s in receiver.wait_for(3)}
    finally:
        proxy.stop()
    assert len(spans) == 3 and len(receiver.spans) == 3  # one per turn
    s = spans[child.headers["x-tokunseba-request-id"]]
    a = s["attributes"]
    assert s["name"] == "chat claude-otel" and s["kind"] == 3  # SPAN_KIND_CLIENT
    assert s["path"] == "/v1/traces" and s["resource"]["service.name"] == "tokunseba"
    assert (s["trace_id"], s["parent_span_id"]) == (TRACE_ID, PARENT_ID)  # the client's trace, continued
    assert {k: a[k] for k in ("gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model",
                              "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "server.address",
                              "server.port", "http.response.status_code", "tokunseba.route", "tokunseba.endpoint",
                              "tokunseba.client_protocol", "tokunseba.target_protocol", "tokunseba.outcome",
                              "tokunseba.instance", "tokunseba.stream")} == {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "claude-otel",
        "gen_ai.usage.input_tokens": 11, "gen_ai.usage.output_tokens": 7, "server.address": "127.0.0.1",
        "server.port": upstreams["oai"].port, "http.response.status_code": 200, "tokunseba.route": "a2o",
        "tokunseba.endpoint": "oai", "tokunseba.client_protocol": "anthropic", "tokunseba.target_protocol": "openai",
        "tokunseba.outcome": "translated", "tokunseba.instance": "otel-proxy", "tokunseba.stream": False}
    assert isinstance(a["tokunseba.fields_dropped"], int) and a["gen_ai.response.finish_reasons"]
    assert "tokunseba.failover.attempts" not in a  # no failover: absent, not 0
    assert a["gen_ai.response.model"] == "gpt-local"  # the model the upstream's reply named
    assert s["end"] > s["start"]
    s2 = spans[alone.headers["x-tokunseba-request-id"]]
    assert s2["trace_id"] != TRACE_ID and s2["parent_span_id"] == ""  # a new trace
    p = spans[passed.headers["x-tokunseba-request-id"]]["attributes"]
    assert p["tokunseba.outcome"] == "pass_through" and p["gen_ai.provider.name"] == "anthropic"
    assert "gen_ai.usage.input_tokens" not in p and "gen_ai.usage.output_tokens" not in p  # none reported
    assert "gen_ai.response.model" not in p  # a reply passed on is not read for it
    every = repr(receiver.spans)
    assert PROMPT not in every and "fine words" not in every and CLIENT_KEY not in every  # no text unless asked


FAILOVER_RULES = """\
endpoints:
  busy:
    protocol: openai
    url: {busy}/v1
  oai:
    protocol: openai
    url: {oai}/v1
routes:
  - name: first
    when: {{model: "fo-*"}}
    to: busy
  - name: second
    when: {{model: "fo-*"}}
    to: oai
"""


def test_the_standard_environment_variable_and_a_failed_over_turn(upstreams, receiver, tmp_path, monkeypatch):
    """OTEL_EXPORTER_OTLP_ENDPOINT alone turns spans on (the SDK adds /v1/traces); a turn whose
    first route's endpoint answered 503 and that went on to the next counts its attempts."""
    upstreams["oai"].script(Reply.json(CHAT))
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    monkeypatch.setenv("OTEL_SERVICE_NAME", "team-proxy")
    with Upstream() as busy:
        busy.script(Reply.json({"error": {"message": "overloaded", "type": "server_error"}}, status=503))
        rules = tmp_path / "rules.yaml"
        rules.write_text(FAILOVER_RULES.format(busy=busy.url, oai=upstreams["oai"].url))
        proxy = Mitmdump(tmp_path, rules)
        try:
            with _client(proxy) as c:
                r = _turn(c, "fo-model")
            assert r.status_code == 200, r.text
            (s,) = receiver.wait_for(1)
        finally:
            proxy.stop()
    a = s["attributes"]
    assert s["path"] == "/v1/traces" and s["resource"]["service.name"] == "team-proxy"
    assert (a["tokunseba.route"], a["tokunseba.endpoint"], a["tokunseba.failover.attempts"]) == ("second", "oai", 2)
    assert a["tokunseba.outcome"] == "translated" and a["gen_ai.usage.output_tokens"] == 7


def test_prompt_and_reply_text_only_when_opted_in(upstreams, receiver, tmp_path, monkeypatch):
    upstreams["oai"].script(Reply.json(CHAT))
    proxy = _proxy(upstreams, tmp_path, monkeypatch, "--set", f"tokunseba_otlp_endpoint={receiver.url}",
                   "--set", "tokunseba_otlp_bodies=true")
    try:
        with _client(proxy) as c:
            assert _turn(c, "claude-otel").status_code == 200
        (s,) = receiver.wait_for(1)
    finally:
        proxy.stop()
    assert PROMPT in s["attributes"]["tokunseba.request.body"]
    assert "fine words" in s["attributes"]["tokunseba.response.body"]
    assert CLIENT_KEY not in repr(s)


def test_a_collector_that_is_down_changes_nothing_for_the_clients(upstreams, tmp_path, monkeypatch):
    upstreams["oai"].script(Reply.json(CHAT))
    proxy = _proxy(upstreams, tmp_path, monkeypatch, "--set", f"tokunseba_otlp_endpoint=http://127.0.0.1:{closed_port()}")
    try:
        with _client(proxy) as c:
            got = [_turn(c, "claude-otel") for _ in range(20)]
        assert [r.status_code for r in got] == [200] * 20
        assert all(r.json()["content"][0]["text"] == "fine words" for r in got)
        ledger_settled(proxy.ledger)
    finally:
        proxy.stop()
    with sqlite3.connect(proxy.ledger) as con:
        assert con.execute("SELECT count(*), min(outcome), max(outcome) FROM turns").fetchone() == (
            20, "translated", "translated")
