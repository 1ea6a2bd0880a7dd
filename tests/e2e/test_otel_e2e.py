"""Issue 21's spans, end to end: a real mitmdump with --set tokunseba_otlp_endpoint, a real
OTLP/HTTP receiver on loopback decoding the protobuf with opentelemetry-proto
(tests/support/otlp_receiver.py): one span per turn with the GenAI attributes and tokunseba's own,
a client's traceparent continued, no prompt or reply text unless opted in, and a collector
that is down changes nothing for the clients or the ledger."""

from __future__ import annotations

import json
import sqlite3
import ssl

import httpx
import pytest

from tests.support.otlp_receiver import OtlpReceiver

from .conftest import Mitmdump, ledger_settled, start_test_proxy
from .test_proxy_e2e import CLIENT_KEY
from tests.support.upstream import Reply, Upstream, closed_port

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
    # its cost (issue 40): the endpoint is on loopback, so 0, and the span says why
    assert (a["tokunseba.cost_usd"], a["tokunseba.cost_source"]) == (0.0, "local: 0")
    assert s["end"] > s["start"]
    s2 = spans[alone.headers["x-tokunseba-request-id"]]
    assert s2["trace_id"] != TRACE_ID and s2["parent_span_id"] == ""  # a new trace
    p = spans[passed.headers["x-tokunseba-request-id"]]["attributes"]
    assert p["tokunseba.outcome"] == "pass_through" and p["gen_ai.provider.name"] == "anthropic"
    assert "gen_ai.usage.input_tokens" not in p and "gen_ai.usage.output_tokens" not in p  # none reported
    assert "tokunseba.cost_usd" not in p and "tokunseba.cost_source" not in p  # no usage, no cost
    assert p["gen_ai.response.model"] == "m"  # a reply passed on names its model too (read, not parsed twice)
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


# ---- gen_ai.response.model of replies passed on (retargeted, passed through), whole and streamed

PASSED_RULES = """\
endpoints:
  ant2:
    protocol: anthropic
    url: {url}/v1
  chat2:
    protocol: openai
    url: {url}/v1
  resp2:
    protocol: openai-responses
    url: {url}/v1
  gem2:
    protocol: gemini
    url: {url}/v1beta
routes:
  - name: ant-retarget
    when: {{client: anthropic, model: "rt-*"}}
    to: ant2
  - name: chat-retarget
    when: {{client: openai, model: "rt-*"}}
    to: chat2
  - name: resp-retarget
    when: {{client: openai-responses, model: "rt-*"}}
    to: resp2
  - name: gem-retarget
    when: {{client: gemini, model: "rt-*"}}
    to: gem2
"""


def _sse(*events: tuple[str | None, dict]) -> list[bytes]:
    return [(f"event: {name}\n".encode() if name else b"") + b"data: " + json.dumps(data).encode() + b"\n\n"
            for name, data in events]


def _replies(model: str) -> dict[tuple[str, bool], Reply]:
    """Each protocol's reply, whole and streamed, naming ``model`` (suffixed -whole / -stream)."""
    w, st = f"{model}-whole", f"{model}-stream"
    text = {"type": "text", "text": "hi"}
    ant_msg = {"id": "msg_1", "type": "message", "role": "assistant", "model": w, "content": [text],
               "stop_reason": "end_turn", "stop_sequence": None, "usage": {"input_tokens": 3, "output_tokens": 1}}
    chat_chunk = lambda delta, finish=None: ("data", {"id": "chatcmpl-1", "object": "chat.completion.chunk",  # noqa: E731
                                                      "created": 1, "model": st, "choices": [
                                                          {"index": 0, "delta": delta, "finish_reason": finish}]})
    resp_item = {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
                 "content": [{"type": "output_text", "text": "hi", "annotations": []}]}
    resp = lambda m, status, output: {"id": "resp_1", "object": "response", "created_at": 1, "status": status,  # noqa: E731
                                      "model": m, "output": output,
                                      **({"usage": {"input_tokens": 3, "output_tokens": 1, "total_tokens": 4}}
                                         if status == "completed" else {})}
    gem = lambda m, finish=None: {"candidates": [{"content": {"role": "model", "parts": [{"text": "hi"}]},  # noqa: E731
                                                  "index": 0, **({"finishReason": finish} if finish else {})}],
                                  "modelVersion": m}
    return {
        ("anthropic", False): Reply.json(ant_msg),
        ("anthropic", True): Reply.sse(_sse(
            ("message_start", {"type": "message_start", "message": {**ant_msg, "model": st, "content": [],
                                                                    "stop_reason": None}}),
            ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text",
                                                                                                  "text": ""}}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                     "delta": {"type": "text_delta", "text": "hi"}}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                               "usage": {"output_tokens": 1}}),
            ("message_stop", {"type": "message_stop"}))),
        ("openai", False): Reply.json({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": w,
                                       "choices": [{"index": 0, "finish_reason": "stop",
                                                    "message": {"role": "assistant", "content": "hi"}}]}),
        ("openai", True): Reply.sse(_sse((None, chat_chunk({"role": "assistant", "content": ""})[1]),
                                         (None, chat_chunk({"content": "hi"})[1]),
                                         (None, chat_chunk({}, "stop")[1])) + [b"data: [DONE]\n\n"]),
        ("openai-responses", False): Reply.json(resp(w, "completed", [resp_item])),
        ("openai-responses", True): Reply.sse(_sse(
            ("response.created", {"type": "response.created", "sequence_number": 0,
                                  "response": resp(st, "in_progress", [])}),
            ("response.output_item.added", {"type": "response.output_item.added", "sequence_number": 1,
                                            "output_index": 0, "item": {**resp_item, "status": "in_progress",
                                                                        "content": []}}),
            ("response.output_text.delta", {"type": "response.output_text.delta", "sequence_number": 2,
                                            "item_id": "msg_1", "output_index": 0, "content_index": 0,
                                            "delta": "hi"}),
            ("response.output_item.done", {"type": "response.output_item.done", "sequence_number": 3,
                                           "output_index": 0, "item": resp_item}),
            ("response.completed", {"type": "response.completed", "sequence_number": 4,
                                    "response": resp(st, "completed", [resp_item])}))),
        ("gemini", False): Reply.json(gem(w, "STOP")),
        ("gemini", True): Reply.sse(_sse((None, gem(st)), (None, gem(st, "STOP")))),
    }


def _ask(c: httpx.Client, protocol: str, stream: bool, model: str, base: str | None = None) -> httpx.Response:
    if protocol == "anthropic":
        return c.post(f"{base or 'https://api.anthropic.com'}/v1/messages",
                      headers={"x-api-key": CLIENT_KEY, "anthropic-version": "2023-06-01"},
                      json={"model": model, "max_tokens": 5, "stream": stream,
                            "messages": [{"role": "user", "content": "hi"}]})
    if protocol == "openai":
        return c.post("https://api.openai.com/v1/chat/completions", headers={"authorization": "Bearer sk-client"},
                      json={"model": model, "stream": stream, "messages": [{"role": "user", "content": "hi"}]})
    if protocol == "openai-responses":
        return c.post("https://api.openai.com/v1/responses", headers={"authorization": "Bearer sk-client"},
                      json={"model": model, "stream": stream, "input": "hi"})
    kind = "streamGenerateContent?alt=sse" if stream else "generateContent"
    return c.post(f"https://generativelanguage.googleapis.com/v1beta/models/{model}:{kind}",
                  headers={"x-goog-api-key": "AIza-client"}, json={"contents": [{"role": "user", "parts": [{"text": "hi"}]}]})


def test_replies_passed_on_name_their_model_whole_and_streamed(receiver, tmp_path, monkeypatch):
    """gen_ai.response.model for replies tokunseba does not translate: a turn retargeted to an
    endpoint of its own protocol (all four, whole and streamed: a whole reply's model, Gemini's
    modelVersion, a stream's first event) and a turn passed through to its provider host. The
    client gets the upstream's bytes as they were (the model read on the side)."""
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    with Upstream() as up, Upstream() as provider:
        rules = tmp_path / "rules.yaml"
        rules.write_text(PASSED_RULES.format(url=up.url))
        proxy = Mitmdump(tmp_path, rules, extra=["--set", f"tokunseba_otlp_endpoint={receiver.url}",
                                                 "--set", f"tokunseba_provider_hosts=127.0.0.1:{provider.port}=anthropic"])
        want: dict[str, tuple[str, str]] = {}  # request id -> (expected response model, outcome)
        try:
            with _client(proxy) as c:
                for protocol in ("anthropic", "openai", "openai-responses", "gemini"):
                    for stream in (False, True):
                        reply = _replies(f"{protocol}-up")[(protocol, stream)]
                        up.script(reply)
                        r = _ask(c, protocol, stream, "rt-model")
                        assert r.status_code == 200, (protocol, stream, r.text)
                        assert r.content == b"".join(reply.pieces), (protocol, stream)  # passed on untouched
                        want[r.headers["x-tokunseba-request-id"]] = (
                            f"{protocol}-up-{'stream' if stream else 'whole'}", "retargeted")
                for stream in (False, True):
                    reply = _replies("provider")[("anthropic", stream)]
                    provider.script(reply)
                    r = _ask(c, "anthropic", stream, "claude-passed", base=provider.url)
                    assert r.status_code == 200 and r.content == b"".join(reply.pieces), r.text
                    want[r.headers["x-tokunseba-request-id"]] = (
                        f"provider-{'stream' if stream else 'whole'}", "pass_through")
            spans = {s["attributes"]["tokunseba.request_id"]: s["attributes"] for s in receiver.wait_for(len(want))}
        finally:
            proxy.stop()
    got = {rid: (spans[rid].get("gen_ai.response.model"), spans[rid]["tokunseba.outcome"]) for rid in want}
    assert got == want
