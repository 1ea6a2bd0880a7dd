"""The claim of issue 23 made true: a fifth protocol needs its codec and one module of facts,
nothing else. Toy Chat (Cohere-style: SSE, a bearer key, one host; tests/toy/facts.py and
tests/toy/codec.py) is registered only inside this test, and then it is detected, routed,
translated both ways (requests, whole replies, streams, errors), watched when passed on,
recorded with its usage, shadowed and replayed, by the product's own modules. No file in
addon/ names it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.upstream import Reply, Upstream
from tests.support.planning import plan_request
from tests.toy import codec as tc
from tests.toy import facts as tf
from tokunseba import protocols, translate
from tokunseba.ledger import Ledger
from tokunseba.turn.outcome import usage_of
from tokunseba.protocols.detect import Detected, detect
from tokunseba.turn.pump import Pump
from tokunseba.shadow.replay import replay
from tokunseba.shadow.reply_facts import reply_facts
from tokunseba.routing import load_rules
from tokunseba.shadow.turns import build_request, compare
from tokunseba.sse import SSEDecoder
from tokunseba.turn.stream_watch import NO_TERMINAL, StreamWatch
from tokunseba.turn.plan import LocalResponse
from tokunseba.turn.reply import stream_translator, translate_whole
from tokunseba.validate import first_problem

ADDON = Path(__file__).resolve().parents[2] / "addon" / "tokunseba"
ENV = {"ANT_KEY": "sk-ant-endpoint-1", "TOY_API_KEY": "toy-endpoint-key-2"}
TOY_USAGE = {"input_tokens": 11, "output_tokens": 7}


@pytest.fixture
def toy():
    """Toy Chat registered for this test only: its facts and its codec."""
    protocols.register(tf.FACTS, tc.CODEC)
    yield
    protocols.unregister(tf.NAME)


@pytest.fixture
def toy_upstream():
    with Upstream() as up:
        yield up


@pytest.fixture
def ant_upstream():
    with Upstream() as up:
        yield up


@pytest.fixture
def rules(toy, tmp_path, toy_upstream, ant_upstream):
    path = tmp_path / "rules.yaml"
    path.write_text(f"""\
endpoints:
  ant:
    protocol: anthropic
    url: {ant_upstream.url}/v1
    key_env: ANT_KEY
    max_tokens: 256
  toyep:
    protocol: toy
    url: {toy_upstream.url}/v2
    key_env: TOY_API_KEY
routes:
  - name: toy-same
    when: {{client: toy, model: "same-*"}}
    to: toyep
  - name: toy-to-claude
    when: {{client: toy}}
    to: ant
    model: claude-x
  - name: claude-to-toy
    when: {{client: anthropic}}
    to: toyep
    model: toy-model
""")
    r = load_rules(str(path))
    assert [w for w in r.warnings if "count requests" not in w] == []  # the toy has no token counter (issue 32)
    return r


def _toy_request(model: str = "toy-client-model", stream: bool = False) -> bytes:
    return json.dumps({"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 64,
                       "stream": stream}).encode()


def _ant_request(stream: bool = False) -> bytes:
    return json.dumps({"model": "claude-sonnet", "max_tokens": 64, "stream": stream,
                       "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}).encode()


def _plan(rules, host: str, path: str, body: bytes, headers: list[tuple[str, str]]):
    return plan_request(rules, method="POST", host=host, port=443, path=path, body=body, env=ENV,
                        headers=[("content-type", "application/json"), *headers])


TOY_WHOLE = json.dumps({"id": "toy-r1", "model": "toy-model", "finish_reason": "COMPLETE",
                        "message": {"role": "assistant", "content": [{"type": "text", "text": "hello from toy"}]},
                        "usage": TOY_USAGE}).encode()
TOY_STREAM = (b'event: message-start\ndata: {"type":"message-start","id":"toy-r1"}\n\n'
              b'event: content-delta\ndata: {"type":"content-delta","text":"hello "}\n\n'
              b'event: content-delta\ndata: {"type":"content-delta","text":"from toy"}\n\n'
              b'event: message-end\ndata: {"type":"message-end","finish_reason":"COMPLETE",'
              b'"usage":{"input_tokens":11,"output_tokens":7}}\n\n')
ANT_USAGE = {"input_tokens": 5, "output_tokens": 3}
ANT_WHOLE = json.dumps({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
                        "content": [{"type": "text", "text": "hello from claude"}], "stop_reason": "end_turn",
                        "stop_sequence": None, "usage": ANT_USAGE}).encode()
ANT_STREAM = (b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message",'
              b'"role":"assistant","model":"claude-x","content":[],"stop_reason":null,"stop_sequence":null,'
              b'"usage":{"input_tokens":5,"output_tokens":1}}}\n\n'
              b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
              b'"content_block":{"type":"text","text":""}}\n\n'
              b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
              b'"delta":{"type":"text_delta","text":"hello from claude"}}\n\n'
              b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
              b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn",'
              b'"stop_sequence":null},"usage":{"output_tokens":3}}\n\n'
              b'event: message_stop\ndata: {"type":"message_stop"}\n\n')


def test_nothing_in_the_product_names_the_toy():
    assert not [f for f in ADDON.rglob("*.py") if "toy" in f.read_text().lower()]


def test_unregistered_it_is_unknown_and_registered_it_is_detected(toy):
    assert detect(tf.HOST, "/v2/chat") == Detected("toy", "chat")
    assert detect(tf.HOST, "/v2/models") is None  # not a turn: passes through
    assert detect("llm.corp.example:8080", "/api/v2/chat", extra_hosts={"llm.corp.example:8080": "toy"}) \
        == Detected("toy", "chat")
    protocols.unregister("toy")
    assert detect(tf.HOST, "/v2/chat") is None
    protocols.register(tf.FACTS, tc.CODEC)


def test_every_fact_a_protocol_needs_is_there(toy):
    from tests.suites.test_protocol_registry import test_every_registered_protocol_has_every_fact
    test_every_registered_protocol_has_every_fact("toy")
    assert ("toy", "anthropic") in translate.pairs() and translate.pairs()[("toy", "gemini")] is None
    assert first_problem("toy", {"messages": []}) == ("messages", "must not be empty")
    assert json.loads(LocalResponse.error("toy", 429, "slow down").body) == {"message": "slow down"}


def test_a_toy_turn_is_routed_and_translated_to_an_anthropic_endpoint_and_back(rules, ant_upstream):
    turn = _plan(rules, tf.HOST, "/v2/chat", _toy_request(), [("authorization", "Bearer toy-CLIENT-key")])
    assert (turn.action, turn.client_protocol, turn.target_protocol) == ("translate", "toy", "anthropic")
    assert turn.url == f"{ant_upstream.url}/v1/messages" and turn.set_headers["x-api-key"] == ENV["ANT_KEY"]
    assert turn.set_headers["anthropic-version"]  # the facts' sent_headers
    assert "authorization" not in (turn.keep_headers or ())  # the client's key stays behind
    sent = json.loads(turn.body)
    assert sent["model"] == "claude-x" and sent["max_tokens"] == 64 and sent["messages"][0]["role"] == "user"
    # whole reply
    status, _, body, rep = translate_whole(turn, 200, ANT_WHOLE)
    out = json.loads(body)
    assert status == 200 and out["message"]["content"][0]["text"] == "hello from claude"
    assert out["usage"] == ANT_USAGE and rep.usage.reported == ANT_USAGE
    # stream, through the product's pump
    pump = Pump(turn, stream_translator(turn))
    got = b"".join(b"".join(pump(ANT_STREAM[i:i + 13])) for i in range(0, len(ANT_STREAM), 13)) + b"".join(pump(b""))
    events = [(e.event, json.loads(e.data)) for e in SSEDecoder().feed(got)]
    assert "".join(d["text"] for n, d in events if n == "content-delta") == "hello from claude"
    assert events[-1] == ("message-end", {"type": "message-end", "finish_reason": "COMPLETE", "usage": ANT_USAGE})
    assert pump.outcome(200).usage.reported == {"input_tokens": 5, "output_tokens": 3}
    # an upstream error, in the toy's envelope
    st, _, err, _ = translate_whole(turn, 429, b'{"type":"error","error":{"type":"rate_limit_error","message":"slow"}}')
    assert st == 429 and json.loads(err) == {"message": "slow"}


def test_an_anthropic_turn_is_routed_to_the_toy_endpoint_recorded_with_its_usage(rules, toy_upstream, tmp_path):
    turn = _plan(rules, "api.anthropic.com", "/v1/messages", _ant_request(stream=True),
                 [("x-api-key", "sk-ant-CLIENT"), ("anthropic-version", "2023-06-01")])
    assert (turn.action, turn.target_protocol) == ("translate", "toy")
    assert turn.url == f"{toy_upstream.url}/v2/chat"
    assert turn.set_headers["authorization"] == f"Bearer {ENV['TOY_API_KEY']}"  # the facts' auth header
    assert json.loads(turn.body) == {"messages": [{"role": "user", "content": "hi"}], "model": "toy-model",
                                     "max_tokens": 64, "stream": True}
    pump = Pump(turn, stream_translator(turn))
    out = b"".join(b"".join(pump(TOY_STREAM[i:i + 7])) for i in range(0, len(TOY_STREAM), 7)) + b"".join(pump(b""))
    events = [json.loads(e.data) for e in SSEDecoder().feed(out)]
    assert [e["type"] for e in events][-1] == "message_stop"
    assert "".join(e["delta"]["text"] for e in events if e["type"] == "content_block_delta") == "hello from toy"
    outcome = pump.outcome(200)
    assert outcome.problem is None and outcome.usage.reported == TOY_USAGE
    ledger = Ledger(tmp_path / "ledger.db")
    try:
        ledger.start_turn(turn.request_id, started_at=turn.started_at, client_protocol=turn.client_protocol,
                          host=turn.host, path=turn.path, requested_model=turn.requested_model, stream=True)
        ledger.update_turn(turn.request_id, outcome="translated", status=200, usage_reported=outcome.usage.reported,
                           usage_protocol=outcome.usage.counting)
        row = ledger.get_turn(turn.request_id)
    finally:
        ledger.close()
    assert (row["usage_input"], row["usage_output"], row["usage_protocol"]) == (11, 7, "anthropic")
    # whole
    status, _, body, rep = translate_whole(turn, 200, TOY_WHOLE)
    doc = json.loads(body)
    assert doc["content"][0]["text"] == "hello from toy" and doc["usage"]["input_tokens"] == 11
    assert rep.usage.reported == TOY_USAGE


def test_a_toy_turn_passed_on_is_watched_and_its_usage_read(rules):
    turn = _plan(rules, tf.HOST, "/v2/chat", _toy_request("same-model", stream=True), [("authorization", "Bearer x")])
    assert turn.action == "retarget" and turn.url.endswith("/v2/chat")
    w = StreamWatch("toy")
    for i in range(0, len(TOY_STREAM), 5):
        w.feed(TOY_STREAM[i:i + 5])
    w.close()
    assert w.verdict() is None and w.completed and w.usage.reported == TOY_USAGE
    cut = StreamWatch("toy")
    cut.feed(TOY_STREAM[: TOY_STREAM.index(b"event: message-end")])
    cut.close()
    assert cut.verdict() == NO_TERMINAL
    assert usage_of("toy", TOY_WHOLE).reported == TOY_USAGE


def test_toy_replies_have_facts_and_a_claude_turn_is_shadowed_to_the_toy(rules):
    whole, streamed = reply_facts("toy", TOY_WHOLE), reply_facts("toy", TOY_STREAM)
    assert whole == streamed and whole.text == "hello from toy" and whole.usage == TOY_USAGE
    out = build_request("anthropic", "messages", _ant_request(), rules.endpoints["toyep"], ENV)
    assert out.url.endswith("/v2/chat") and out.headers["authorization"] == f"Bearer {ENV['TOY_API_KEY']}"
    assert json.loads(out.body)["messages"] == [{"role": "user", "content": "hi"}]
    cmp = compare(reply_facts("anthropic", ANT_WHOLE), whole)
    assert cmp["compared"] and cmp["stop_reason"]["same"] is True and cmp["usage"]["shadow"] == TOY_USAGE


@pytest.mark.parametrize("direction", ["claude-to-toy", "toy-to-claude"])
def test_a_recorded_turn_is_replayed_across_the_toy(rules, toy_upstream, ant_upstream, tmp_path, direction):
    if direction == "claude-to-toy":
        client, host, path, req, recorded, ep, up, answer = ("anthropic", "api.anthropic.com", "/v1/messages",
                                                             _ant_request(), ANT_WHOLE, "toyep", toy_upstream,
                                                             TOY_WHOLE)
    else:
        client, host, path, req, recorded, ep, up, answer = ("toy", tf.HOST, "/v2/chat", _toy_request(), TOY_WHOLE,
                                                             "ant", ant_upstream, ANT_WHOLE)
    up.script(Reply(200, {"content-type": "application/json"}, [answer]))
    ledger = Ledger(tmp_path / "ledger.db", store_bodies=True)  # as `tokunseba run --ledger-bodies`
    try:
        ledger.start_turn("tk-1", started_at=1.0, client_protocol=client, host=host, path=path,
                          requested_model="m", stream=False)
        ledger.update_turn("tk-1", outcome="pass_through", status=200, request_body=req, response_body=recorded)
        done = replay(ledger, ledger.get_turn("tk-1"), rules.endpoints[ep], ENV, timeout=10)
        shadows = ledger.shadows(request_id="tk-1")
    finally:
        ledger.close()
    assert done.client_status == 200
    if client == "anthropic":
        assert json.loads(done.client_body)["content"][0]["text"] == "hello from toy"
        assert up.requests[-1].path == "/v2/chat"
        assert up.requests[-1].headers["authorization"] == f"Bearer {ENV['TOY_API_KEY']}"
        assert done.row["facts"]["usage"] == TOY_USAGE
    else:
        assert json.loads(done.client_body)["message"]["content"][0]["text"] == "hello from claude"
        assert up.requests[-1].path == "/v1/messages" and up.requests[-1].headers["x-api-key"] == ENV["ANT_KEY"]
        assert done.row["facts"]["usage"] == ANT_USAGE
    assert len(shadows) == 1 and shadows[0]["usage_input"] is not None
