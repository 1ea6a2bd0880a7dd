"""The mitmproxy adapter (tokunseba.proxy.mitm) driven through mitmproxy's own test helpers
(docs/dev/mitmproxy.md §7): options, the request hook on real HTTPFlow objects, mitmweb's comment /
mark / original-request view, fail-closed behaviour, the stream pump and the ledger row."""

from __future__ import annotations

import asyncio
import json

import pytest
from mitmproxy import contentviews, exceptions, http
from mitmproxy.addons.proxyserver import Proxyserver
from mitmproxy.test import taddons, tflow, tutils

import tokunseba.proxy.mitm as mitm
import tokunseba.proxy.route as route  # where a request is applied
import tokunseba.turn.planner as planner  # where it is planned
from tokunseba import sse
from tokunseba.proxy.relay import PREFIX, Relay, Target
from tokunseba.ledger import Ledger
from tokunseba.proxy.mitm import MARKS, ORIGINAL_KEY, Tokunseba
from tokunseba.proxy import recorder
from tokunseba.proxy.recorder import START_AFTER_S
from tokunseba.turn.pump import Pump
from tokunseba.turn.target import point_at, set_target, target_of
from tokunseba.sse import SSEDecoder
from tokunseba.turn.plan import REQUEST_ID_HEADER
from tokunseba.turn.reply import stream_translator

from tests.support.upstream import closed_port

CLIENT_KEY = "sk-ant-client-SECRET-0001"
EP_KEY = "sk-endpoint-SECRET-0002"

RULES = """\
endpoints:
  oai:
    protocol: openai
    url: http://127.0.0.1:{port}/v1
    key_env: TK_UNIT_EP_KEY
  ant:
    protocol: anthropic
    url: http://127.0.0.1:{port}/v1
    key_env: TK_UNIT_EP_KEY
  down:
    protocol: openai
    url: http://127.0.0.1:{closed}/v1
  gem:
    protocol: gemini
    url: http://127.0.0.1:{port}/v1beta
routes:
  - name: strict-gemini
    when: {{client: anthropic, model: "strict-*"}}
    to: gem
    on_refused: error
  - name: down-first
    when: {{model: "claude-down-*"}}
    to: down
  - name: retarget
    when: {{client: anthropic, model: "retarget-*"}}
    to: ant
    model: other-model
  - name: easy-turns
    when: {{client: anthropic, model: "claude-*"}}
    to: oai
"""

ANT_BODY = {"model": "claude-haiku-4-5", "max_tokens": 50, "metadata": {"user_id": "u-1"},
            "thinking": {"type": "adaptive"},
            "messages": [{"role": "user", "content": "Summarise: \u00e9t\u00e9"}]}

def comment_of(f) -> str:
    """The flow's comment after its headline (the outcome's emoji and status word, a failed turn's
    error) and its request id: ``<headline> · <request id> · <details>``."""
    rid = f.metadata["tokunseba.request_id"]
    if f.comment.startswith(rid + " · "):  # in flight: no headline yet
        return f.comment[len(rid) + 3:]
    assert f" · {rid} · " in f.comment and f.comment[:1] in "⚪➡🔁⛔❌⏹", f.comment
    return f.comment.split(f" · {rid} · ", 1)[1]



@pytest.fixture
async def endpoint_port():
    """A real loopback TCP server, so the addon's connect probe succeeds."""
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    yield server.sockets[0].getsockname()[1]
    server.close()


@pytest.fixture
def rules_file(tmp_path, endpoint_port):
    p = tmp_path / "rules.yaml"
    p.write_text(RULES.format(port=endpoint_port, closed=closed_port()))
    return p


def context(a: Tokunseba) -> taddons.context:
    """A mitmproxy test context; Proxyserver declares connection_strategy (it does not listen)."""
    return taddons.context(Proxyserver(), a)


@pytest.fixture
async def addon(tmp_path, rules_file, monkeypatch):
    monkeypatch.setenv("TK_UNIT_EP_KEY", EP_KEY)
    a = Tokunseba()
    with context(a) as tctx:
        tctx.configure(a, tokunseba_connect_timeout_ms=0, tokunseba_rules=str(rules_file), tokunseba_ledger=str(tmp_path / "ledger.db"))
        await a.running()
        a.tctx = tctx
        yield a
        a.done()


def make_flow(body: bytes | dict = b"", *, host="api.anthropic.com", path="/v1/messages", method="POST",
              headers: list[tuple[str, str]] | None = None) -> http.HTTPFlow:
    if isinstance(body, dict):
        body = json.dumps(body, indent=1, ensure_ascii=False).encode()
    hdrs = headers if headers is not None else [
        ("host", host), ("x-api-key", CLIENT_KEY), ("anthropic-version", "2023-06-01"),
        ("anthropic-beta", "interleaved-thinking-2025-05-14"), ("content-type", "application/json"),
        ("content-length", str(len(body)))]
    req = tutils.treq(scheme=b"https", host=host, port=443, method=method.encode(), path=path.encode(),
                      headers=http.Headers([(k.encode(), v.encode()) for k, v in hdrs]), content=body)
    return tflow.tflow(req=req)


def anthropic_error(flow: http.HTTPFlow) -> dict:
    assert flow.response is not None
    assert flow.response.headers["content-type"] == "application/json"
    body = json.loads(flow.response.content)
    assert body["type"] == "error" and set(body["error"]) == {"type", "message"}
    return body["error"]


# ---------------------------------------------------------------- options


def test_bad_rules_file_raises_options_error_with_file_and_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("endpoints:\n  x:\n    protocol: openai\n    url: http://127.0.0.1:1/v1\n    colour: red\n")
    a = Tokunseba()
    with taddons.context(a) as tctx:
        with pytest.raises(exceptions.OptionsError) as ei:
            tctx.configure(a, tokunseba_connect_timeout_ms=0, tokunseba_rules=str(bad))
    assert f"{bad}:5:" in str(ei.value) and "colour" in str(ei.value)


def test_missing_rules_file_raises_options_error(tmp_path):
    a = Tokunseba()
    with taddons.context(a) as tctx:
        with pytest.raises(exceptions.OptionsError, match="no such rules file"):
            tctx.configure(a, tokunseba_connect_timeout_ms=0, tokunseba_rules=str(tmp_path / "nope.yaml"))


def test_bad_provider_hosts_option_raises(tmp_path):
    a = Tokunseba()
    with taddons.context(a) as tctx:
        with pytest.raises(exceptions.OptionsError, match="HOST"):
            tctx.configure(a, tokunseba_provider_hosts=["llm.internal=cobol"])


async def test_running_forces_lazy_connections_and_starts_the_relay(addon):
    assert addon.tctx.options.connection_strategy == "lazy"
    assert addon.relay.port > 0
    assert addon.status().startswith("rules=") and "routes=4" in addon.status()


async def test_running_settles_the_process_and_done_gives_the_collector_back(tmp_path, rules_file, monkeypatch):
    """Once running, the loop gets the interpreter back from other threads within
    SWITCH_INTERVAL_S and start-up's objects are frozen out of the collector; done unfreezes them."""
    import gc
    import sys

    from tokunseba.proxy.mitm import SWITCH_INTERVAL_S

    before = sys.getswitchinterval()
    monkeypatch.setenv("TK_UNIT_EP_KEY", EP_KEY)
    a = Tokunseba()
    try:
        with context(a) as tctx:
            tctx.configure(a, tokunseba_connect_timeout_ms=0, tokunseba_rules=str(rules_file),
                           tokunseba_ledger=str(tmp_path / "ledger.db"))
            await a.running()
            assert sys.getswitchinterval() <= SWITCH_INTERVAL_S
            assert gc.get_freeze_count() > 0
            a.done()
            assert gc.get_freeze_count() == 0
    finally:
        sys.setswitchinterval(before)


# ---------------------------------------------------------------- request hook


async def test_translated_flow_goes_to_the_relay(addon, endpoint_port):
    f = make_flow(ANT_BODY)
    original = f.request.content
    await addon.request(f)
    assert f.response is None
    token = addon.flows[f.id].relay_token
    assert f.request.url == f"http://127.0.0.1:{addon.relay.port}{PREFIX}{token}"
    assert f.request.headers["host"] == f"127.0.0.1:{addon.relay.port}"
    target = addon.relay.targets[token]
    assert (target.scheme, target.host, target.port, target.path) == ("http", "127.0.0.1", endpoint_port,
                                                                      "/v1/chat/completions")
    # credentials: the client's key and Anthropic headers gone, the endpoint's own key set
    h = f.request.headers
    assert "x-api-key" not in h and not any(k.lower().startswith("anthropic-") for k in h)
    assert h["authorization"] == f"Bearer {EP_KEY}"
    assert int(h["content-length"]) == len(f.request.content)
    sent = json.loads(f.request.content)
    assert sent["model"] == "claude-haiku-4-5" and "thinking" not in sent and "metadata" not in sent
    # mitmweb: the decision as comment, a mark per outcome, the client's original body kept
    assert comment_of(f) == "easy-turns → oai · anthropic→openai · dropped: thinking, metadata.user_id"
    assert f.marked == MARKS["translated"] == ":repeat:"
    assert f.metadata[ORIGINAL_KEY] == original.decode()
    assert f.metadata["tokunseba.request_id"].startswith("tk-")


async def test_original_request_view_shows_the_clients_body(addon):
    f = make_flow(ANT_BODY)
    original = f.request.content.decode()
    await addon.request(f)
    pretty = contentviews.prettify_message(f.request, f, view_name="tokunseba-original")
    assert pretty.view_name == "tokunseba-original"
    head, body = pretty.text.split("\n\n", 1)
    # request line, where it went, the client's headers with the key redacted; then indented JSON
    assert head.splitlines()[0] == "POST https://api.anthropic.com/v1/messages"
    assert head.splitlines()[1].startswith("# sent to http://127.0.0.1:") and "(oai, openai)" in head
    assert "x-api-key: <redacted>" in head and CLIENT_KEY not in pretty.text and EP_KEY not in pretty.text
    assert json.loads(body) == json.loads(original) == ANT_BODY
    assert body == json.dumps(ANT_BODY, indent=2, ensure_ascii=False)  # one field a line, client's key order
    assert json.loads(f.request.content) != ANT_BODY  # the request itself is the translated one
    # never picked automatically; plain sentences (never an error) elsewhere
    assert contentviews.prettify_message(f.request, f).view_name != "tokunseba-original"
    other = make_flow(b'{"a":1}', host="example.com")
    pretty = contentviews.prettify_message(other.request, other, view_name="tokunseba-original")
    assert pretty.view_name == "tokunseba-original" and pretty.text.startswith("not rewritten by tokunseba")
    f.response = http.Response.make(200, b'{"type":"message"}', {"content-type": "application/json"})
    on_response = contentviews.prettify_message(f.response, f, view_name="tokunseba-original")
    assert on_response.text.startswith("tokunseba-original shows the client's original request: open it under the Request tab")


async def test_same_protocol_retarget(addon, endpoint_port):
    f = make_flow({**ANT_BODY, "model": "retarget-me"})
    before = f.request.content
    await addon.request(f)
    # every routed turn goes through the relay, which holds the endpoint's real URL
    target = addon.relay.targets[addon.flows[f.id].relay_token]
    assert f.request.url == f"http://127.0.0.1:{addon.relay.port}{PREFIX}{addon.flows[f.id].relay_token}"
    assert (target.scheme, target.host, target.port, target.path) == ("http", "127.0.0.1", endpoint_port,
                                                                      "/v1/messages")
    assert target.conn is not None  # opened before the turn was committed to the route
    assert f.request.content == before.replace(b'"retarget-me"', b'"other-model"')
    assert f.request.headers["x-api-key"] == EP_KEY  # another host: the endpoint's key
    assert f.request.headers["anthropic-version"] == "2023-06-01"
    assert f.marked == MARKS["retargeted"] and comment_of(f) == "retarget → ant · retarget anthropic"
    assert f.metadata[ORIGINAL_KEY] == before.decode()


async def test_unmatched_provider_call_passes_byte_identical(addon):
    f = make_flow({**ANT_BODY, "model": "opus-unrouted"})
    before = f.request.get_state()
    await addon.request(f)
    assert f.request.get_state() == before
    assert f.response is None
    assert comment_of(f) == "pass-through (no route matched)" and f.marked == MARKS["pass_through"]
    assert ORIGINAL_KEY not in f.metadata


async def test_unreachable_endpoint_is_marked_down_and_skipped(addon, endpoint_port):
    """Passive health: the turn's own connect fails, the endpoint is down for a back-off and
    the turn goes to the next route; later turns skip it without trying."""
    down = addon.rules.endpoints["down"]
    oai = addon.rules.endpoints["oai"]
    f = make_flow({**ANT_BODY, "model": "claude-down-1"})
    await addon.request(f)
    assert f.response is None
    assert f.marked == MARKS["translated"] and comment_of(f).startswith("easy-turns → oai")
    assert not addon.health.reachable(down) and addon.health.reachable(oai)
    opened = addon.relay.pool.opened
    g = make_flow({**ANT_BODY, "model": "claude-down-2"})
    await addon.request(g)
    assert comment_of(g).startswith("easy-turns → oai")
    assert addon.relay.pool.opened == opened + 1  # only the connection g itself needed: nothing probed


async def test_unreachable_first_choice_falls_back_on_a_fresh_start(addon):
    f = make_flow({**ANT_BODY, "model": "claude-down-1"})  # nothing probed yet (fresh start / rules reload)
    await addon.request(f)
    assert f.response is None, f.response and f.response.content
    assert f.marked == MARKS["translated"] and comment_of(f).startswith("easy-turns → oai")


@pytest.mark.parametrize("model,path,marker,needle", [
    ("strict-1", "/v1/messages", "refused", "Gemini rejects the function name"),
    ("claude-x", "/v1/messages/count_tokens", "refused", "does not estimate"),
])
async def test_locally_answered_turns(addon, model, path, marker, needle):
    tools = [{"name": "7zip", "input_schema": {"type": "object"}}] if model == "strict-1" else []
    f = make_flow({"model": model, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}], "tools": tools},
                  path=path)
    await addon.request(f)
    assert f.response.status_code == 400
    err = anthropic_error(f)
    assert err["type"] == "invalid_request_error" and needle in err["message"]
    assert f.response.headers[REQUEST_ID_HEADER] == f.metadata["tokunseba.request_id"]
    assert f.marked == MARKS[marker] and comment_of(f).startswith(f"{'strict-gemini' if model == 'strict-1' else 'easy-turns'} →")
    assert f.request.host == "api.anthropic.com"  # nothing retargeted: the answer is local


@pytest.mark.parametrize("make", [
    lambda: make_flow(method="GET", path="/api/claude_code/settings"),
    lambda: make_flow(b'{"events":[]}', path="/api/event_logging/batch"),
    lambda: make_flow(b'{"model":"claude-x","messages":[]}', host="example.com"),
    lambda: make_flow(b'{"model":"claude-x"}', method="PUT"),
])
async def test_non_provider_flows_are_untouched(addon, make):
    f = make()
    before = f.request.get_state()
    await addon.request(f)
    assert f.request.get_state() == before
    assert f.response is None and f.comment == "" and not f.marked and f.metadata == {}
    assert f.id not in addon.flows


async def test_flow_with_a_response_already_is_left_alone(addon):
    f = make_flow(ANT_BODY)
    f.response = http.Response.make(200, b"{}", {"content-type": "application/json"})
    before = f.request.get_state()
    await addon.request(f)
    assert f.request.get_state() == before and f.comment == ""


# ---------------------------------------------------------------- fail closed


def _boom(*a, **kw):
    raise RuntimeError("boom")


async def test_planning_failure_answers_provider_calls_with_an_error(addon, monkeypatch):
    monkeypatch.setattr(planner, "prepare_request", _boom)
    f = make_flow(ANT_BODY)
    await addon.request(f)
    assert f.response.status_code == 500
    err = anthropic_error(f)
    assert err == {"type": "api_error", "message": "tokunseba internal error: boom"}
    # an OpenAI client gets its own envelope
    g = make_flow(b'{"model":"gpt-4.1","messages":[]}', host="api.openai.com", path="/v1/chat/completions",
                  headers=[("host", "api.openai.com"), ("authorization", "Bearer x")])
    await addon.request(g)
    assert g.response.status_code == 500 and json.loads(g.response.content)["error"]["type"] == "server_error"


async def test_planning_failure_leaves_other_traffic_alone(addon, monkeypatch):
    monkeypatch.setattr(planner, "prepare_request", _boom)
    for f in (make_flow(method="GET", path="/api/claude_code/settings"),
              make_flow(b'{"a":1}', host="example.com", path="/upload")):
        before = f.request.get_state()
        await addon.request(f)
        assert f.response is None and f.request.get_state() == before and f.comment == ""


async def test_apply_failure_answers_with_the_turns_request_id(addon, monkeypatch):
    monkeypatch.setattr(route.Route, "apply", _boom)
    f = make_flow(ANT_BODY)
    await addon.request(f)
    assert f.response.status_code == 500
    assert anthropic_error(f)["message"] == "tokunseba internal error: boom"
    assert f.response.headers[REQUEST_ID_HEADER].startswith("tk-")


async def test_translated_flow_before_running_starts_the_relay(tmp_path, rules_file, monkeypatch):
    """mitmproxy listens for clients before the addons' running hooks are done: a routed turn
    that comes first starts the relay itself and goes through it."""
    monkeypatch.setenv("TK_UNIT_EP_KEY", EP_KEY)
    a = Tokunseba()
    with context(a) as tctx:
        tctx.configure(a, tokunseba_connect_timeout_ms=0, tokunseba_rules=str(rules_file), tokunseba_ledger=str(tmp_path / "l.db"))
        f = make_flow(ANT_BODY)  # running() never ran
        await a.request(f)
        assert f.response is None
        assert a.core.relay.port and f.request.port == a.core.relay.port and f.request.path.startswith(PREFIX)
        a.done()


async def never_listens(self) -> None:
    """A relay that cannot listen (its start does nothing)."""


async def test_translated_flow_without_the_relay_fails_closed(tmp_path, rules_file, monkeypatch):
    monkeypatch.setenv("TK_UNIT_EP_KEY", EP_KEY)
    monkeypatch.setattr(Relay, "start", never_listens)
    a = Tokunseba()
    with context(a) as tctx:
        tctx.configure(a, tokunseba_connect_timeout_ms=0, tokunseba_rules=str(rules_file), tokunseba_ledger=str(tmp_path / "l.db"))
        f = make_flow(ANT_BODY)
        await a.request(f)
        assert f.response.status_code == 500
        assert "relay is not running" in anthropic_error(f)["message"]
        a.done()


async def test_failed_flow_is_marked_as_an_error(tmp_path, rules_file, monkeypatch):
    monkeypatch.setenv("TK_UNIT_EP_KEY", EP_KEY)
    monkeypatch.setattr(Relay, "start", never_listens)
    a = Tokunseba()
    with context(a) as tctx:
        tctx.configure(a, tokunseba_connect_timeout_ms=0, tokunseba_rules=str(rules_file), tokunseba_ledger=str(tmp_path / "l.db"))
        f = make_flow(ANT_BODY)
        await a.request(f)
        a.done()
    assert f.response.status_code == 500
    assert f.marked == MARKS["error"]


# ---------------------------------------------------------------- stream pump


CHAT_SSE = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in [
    {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
     "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]},
    {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
     "choices": [{"index": 0, "delta": {"content": "Hel"}, "finish_reason": None}]},
    {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
     "choices": [{"index": 0, "delta": {"content": "lo"}, "finish_reason": None}]},
    {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
     "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [],
     "usage": {"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13}},
]) + b"data: [DONE]\n\n"


async def _translated_turn(addon):
    f = make_flow({**ANT_BODY, "stream": True})
    await addon.request(f)
    return f, addon.flows[f.id].turn


def _events(chunks: list[bytes]) -> list[tuple[str, dict]]:
    d = SSEDecoder()
    evs = d.feed(b"".join(chunks)) + d.close()
    return [(e.event, json.loads(e.data)) for e in evs]


async def test_pump_joins_output_and_never_returns_empty_bytes(addon):
    f, turn = await _translated_turn(addon)
    pump = Pump(turn, stream_translator(turn))
    out: list[bytes] = []
    # one call carrying all upstream events -> exactly one joined chunk
    head, rest = CHAT_SSE[:CHAT_SSE.index(b"\n\n", 200) + 2], CHAT_SSE[CHAT_SSE.index(b"\n\n", 200) + 2:]
    r = pump(head)
    assert isinstance(r, list) and len(r) == 1 and r[0].count(b"event: ") >= 3
    out += r
    # byte-by-byte: every partial call gives [] (never b"", which would end a chunked body)
    for i in range(len(rest)):
        r = pump(rest[i:i + 1])
        assert isinstance(r, list) and len(r) <= 1 and b"" not in r
        out += r
    r = pump(b"")
    assert b"" not in r
    out += r
    names = [e for e, _ in _events(out)]
    assert names[0] == "message_start" and names[-1] == "message_stop" and "error" not in names
    text = "".join(d["delta"]["text"] for e, d in _events(out) if e == "content_block_delta")
    assert text == "Hello"
    assert pump.first_byte is not None


class _Exploding:
    """Wraps a real translator; feed raises after ``ok`` calls."""

    def __init__(self, inner, ok: int = 1, fail_raises: bool = False):
        self.inner, self.ok, self.fail_raises, self.calls = inner, ok, fail_raises, 0
        self.report = inner.report

    @property
    def client_usage(self):
        return self.inner.client_usage

    def feed(self, data: bytes) -> bytes:
        self.calls += 1
        if self.calls > self.ok:
            raise ValueError("decoder exploded")
        return self.inner.feed(data)

    def close(self) -> bytes:
        return self.inner.close()

    def fail(self, message: str) -> bytes:
        if self.fail_raises:
            raise RuntimeError("fail exploded too")
        return self.inner.fail(message)


async def test_pump_turns_a_translator_exception_into_an_error_event(addon):
    f, turn = await _translated_turn(addon)
    t = _Exploding(stream_translator(turn), ok=1)
    pump = Pump(turn, t)
    first = pump(CHAT_SSE[:CHAT_SSE.index(b"\n\n") + 2])
    assert len(first) == 1 and b"message_start" in first[0]
    err = pump(CHAT_SSE[CHAT_SSE.index(b"\n\n") + 2:])
    assert len(err) == 1
    (name, data), = _events(err)
    assert name == "error" and data["type"] == "error" and data["error"]["type"] == "api_error"
    assert "stream translation failed: decoder exploded" in data["error"]["message"]
    assert pump.failed
    assert pump(b"more") == [] and pump(b"") == []  # nothing after the error event


async def test_pump_survives_a_failing_fail(addon):
    f, turn = await _translated_turn(addon)
    pump = Pump(turn, _Exploding(stream_translator(turn), ok=0, fail_raises=True))
    assert pump(CHAT_SSE) == [] and pump(b"") == []


ANT_SSE = (b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message",'
           b'"role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,'
           b'"usage":{"input_tokens":7,"output_tokens":1}}}\n\nevent: message_delta\ndata: {"type":"message_delta",'
           b'"delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":3}}\n\n'
           b'event: message_stop\ndata: {"type":"message_stop"}\n\n')


async def test_raw_pump_passes_bytes_unchanged_and_sniffs_usage(addon):
    f = make_flow({**ANT_BODY, "model": "retarget-me", "stream": True})
    await addon.request(f)
    turn = addon.flows[f.id].turn
    pump = Pump(turn)
    ant = ANT_SSE
    out = [c for i in range(0, len(ant), 17) for c in pump(ant[i:i + 17])]
    assert b"".join(out) == ant and b"" not in out
    assert pump(b"") == []
    assert pump.watch.usage.reported == {"input_tokens": 7, "output_tokens": 3}
    assert pump.watch.verdict() is None  # its terminal event came: a clean stream


async def test_relayed_raw_pump_ends_at_an_event_its_client_could_not_read(addon):
    """A retargeted (relayed, unchanged) stream: the events before a bad one go on as they
    came; an event that is not JSON, or one larger than the SSE cap, never reaches the
    client: an error event in its protocol ends the stream there, and the outcome says why."""
    f = make_flow({**ANT_BODY, "model": "retarget-me", "stream": True})
    await addon.request(f)
    turn = addon.flows[f.id].turn
    head = ANT_SSE[:ANT_SSE.index(b"event: message_delta")]
    bad = b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end\n\n'
    big = b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":' \
          b'"text_delta","text":"' + b"x" * 5000 + b'"}}\n\n'
    for upstream, why in ((bad, "upstream sent an event that is not valid JSON"),
                          (big, "upstream sent an SSE event larger than 4096 bytes"),
                          (big.replace(b"\n\n", b""), "upstream sent an SSE event larger than 4096 bytes")):
        sse.set_max_event_bytes(4096)
        try:
            pump = Pump(turn, target=Target("http", "127.0.0.1", 1, "/v1/messages"))
            out = pump(head) + pump(upstream) + pump(ANT_SSE[len(head):]) + pump(b"")
        finally:
            sse.set_max_event_bytes(sse.DEFAULT_MAX_EVENT_BYTES)
        events = _events(out)
        assert b"".join(out).startswith(head) and [e for e, _ in events][-1] == "error", events
        assert why in events[-1][1]["error"]["message"] and "message_stop" not in [e for e, _ in events]
        outcome = pump.outcome(200)
        assert outcome.problem.startswith(why) and not pump.completed


# ---------------------------------------------------------------- hooks through to the ledger


CHAT_REPLY = {"id": "chatcmpl-w", "object": "chat.completion", "created": 1, "model": "local-m",
              "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Hi"}}],
              "usage": {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10}}


async def _ledger_turn(addon, tmp_path, rid: str) -> tuple[dict, list[str]]:
    """The turn's row and event kinds once recorded: a completion waits for mitmproxy to have
    written the reply (these test flows stay live, so until recorder.after_sent gives up) and
    the ledger's writer thread commits it."""
    for _ in range(recorder.AFTER_SENT_MAX_TURNS + 5):
        await asyncio.sleep(0)
    assert addon.ledger.flush(10)
    with Ledger(tmp_path / "ledger.db", readonly=True) as led:
        (row,) = [t for t in led.turns() if t["request_id"] == rid]
        return row, [e["kind"] for e in led.events(rid)]


async def test_whole_reply_is_translated_and_recorded(addon, tmp_path):
    f = make_flow(ANT_BODY)
    await addon.request(f)
    rid = f.metadata["tokunseba.request_id"]
    f.response = tutils.tresp(headers=http.Headers(content_type="application/json"), content=None)
    addon.responseheaders(f)
    assert f.response.stream is False and addon.flows[f.id].mode == "translate-whole"
    f.response.content = json.dumps(CHAT_REPLY).encode()
    addon.response(f)
    msg = json.loads(f.response.content)
    assert msg["type"] == "message" and msg["content"] == [{"type": "text", "text": "Hi"}]
    assert msg["usage"] == {"input_tokens": 9, "output_tokens": 1}
    assert f.response.headers[REQUEST_ID_HEADER] == rid
    assert f.id not in addon.flows  # per-flow state released
    row, kinds = await _ledger_turn(addon, tmp_path, rid)
    assert (row["outcome"], row["status"], row["rule"], row["endpoint"]) == ("translated", 200, "easy-turns", "oai")
    assert (row["client_protocol"], row["target_protocol"]) == ("anthropic", "openai")
    assert row["usage_reported"] == CHAT_REPLY["usage"] and row["usage_input"] == 9 and row["usage_output"] == 1
    assert row["latency_ms"] >= 0 and row["ttfb_ms"] is not None
    assert kinds == ["routed", "left_behind", "protocol_translated", "completed"]
    with Ledger(tmp_path / "ledger.db", readonly=True) as led:
        dump = json.dumps(led.turns()) + json.dumps(led.events(rid))
    assert CLIENT_KEY not in dump and EP_KEY not in dump


async def test_streamed_reply_goes_through_the_pump_and_is_recorded(addon, tmp_path):
    f = make_flow({**ANT_BODY, "stream": True})
    await addon.request(f)
    rid = f.metadata["tokunseba.request_id"]
    f.response = tutils.tresp(headers=http.Headers(content_type="text/event-stream", content_length="999"), content=None)
    addon.responseheaders(f)
    pump = f.response.stream
    assert isinstance(pump, Pump) and pump.t is not None
    h = f.response.headers
    assert "content-length" not in h and h["transfer-encoding"] == "chunked"
    assert h["content-type"].startswith("text/event-stream") and h[REQUEST_ID_HEADER] == rid
    out = [c for i in range(0, len(CHAT_SSE), 50) for c in pump(CHAT_SSE[i:i + 50])] + pump(b"")
    assert [e for e, _ in _events(out)][-1] == "message_stop"
    addon.response(f)
    row, kinds = await _ledger_turn(addon, tmp_path, rid)
    assert row["outcome"] == "translated" and row["status"] == 200 and row["stream"] is True
    assert row["usage_reported"] == {"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13}
    assert row["usage_client"] == {"input_tokens": 11, "output_tokens": 2}
    assert kinds[-1] == "completed" and row["error"] is None


async def test_upstream_error_reaches_the_client_in_its_protocol_and_ledger(addon, tmp_path):
    f = make_flow(ANT_BODY)
    await addon.request(f)
    rid = f.metadata["tokunseba.request_id"]
    f.response = tutils.tresp(status_code=429, headers=http.Headers(content_type="application/json"), content=None)
    addon.responseheaders(f)
    f.response.content = json.dumps({"error": {"message": "slow down", "type": "rate_limit", "param": None,
                                               "code": None}}).encode()
    addon.response(f)
    assert f.response.status_code == 429
    err = anthropic_error(f)
    assert err["type"] == "rate_limit_error" and "slow down" in err["message"]
    row, kinds = await _ledger_turn(addon, tmp_path, rid)
    assert row["status"] == 429 and "upstream_error" in kinds


async def test_headers_left_behind_go_in_every_spelling_and_display_redaction_covers_every_field(addon):
    body = json.dumps(ANT_BODY).encode()
    f = make_flow(body, headers=[("host", "api.anthropic.com"), ("x-api-key", CLIENT_KEY), ("X-API-KEY", CLIENT_KEY),
                                 ("anthropic-version", "2023-06-01"), ("content-type", "application/json"),
                                 ("content-length", str(len(body)))])
    await addon.request(f)
    names = [k.lower() for k, _ in f.request.headers.fields]
    assert b"x-api-key" not in names and f.request.headers["authorization"] == f"Bearer {EP_KEY}"
    assert [n for n in names if n == b"content-type"] == [b"content-type"]  # what stays is left as it was
    g = make_flow(body, host="api.openai.com", path="/v1/models", method="GET",
                  headers=[("host", "api.openai.com"), ("Authorization", f"Bearer {CLIENT_KEY}"),
                           ("authorization", f"Bearer {CLIENT_KEY}"), ("accept", "application/json")])
    mitm.DisplayRedaction(addon).response(g)  # a provider host, not a turn: redacted for display all the same
    assert [(k, v) for k, v in g.request.headers.fields if k.lower() == b"authorization"] == \
        [(b"Authorization", mitm.REDACTED_BYTES), (b"authorization", mitm.REDACTED_BYTES)]
    assert g.request.headers["accept"] == "application/json"


async def test_a_turns_start_is_recorded_after_the_request_hook_and_before_the_reply(addon, tmp_path):
    f = make_flow(ANT_BODY)
    await addon.request(f)
    rid = f.metadata["tokunseba.request_id"]
    assert rid in addon.unstarted  # mitmproxy sends the request on first, in this same step
    await asyncio.sleep(0)
    assert rid in addon.unstarted  # a short turn's start waits for its end (recorder.START_AFTER_S)
    await asyncio.sleep(START_AFTER_S + 0.05)  # a turn still running then: its start goes to the writer
    assert rid not in addon.unstarted
    assert addon.ledger.flush(10)
    with Ledger(tmp_path / "ledger.db", readonly=True) as led:
        (row,) = [t for t in led.turns() if t["request_id"] == rid]
        kinds = [e["kind"] for e in led.events(rid)]
    assert row["outcome"] is None and row["rule"] == "easy-turns" and row["endpoint"] == "oai"  # open, decided
    assert "routed" in kinds and "completed" not in kinds


async def test_a_record_of_the_turn_in_the_same_step_queues_its_start_first(addon, tmp_path):
    f = make_flow(ANT_BODY)
    await addon.request(f)
    rid = f.metadata["tokunseba.request_id"]
    f.error = tflow.terr("[Errno 111] Connection refused")
    addon.error(f)  # before the loop's next step
    assert rid not in addon.unstarted
    row, kinds = await _ledger_turn(addon, tmp_path, rid)
    assert row["rule"] == "easy-turns" and row["outcome"] == "error" and row["client_protocol"] == "anthropic"
    assert kinds[0] == "routed" and kinds[-1] == "completed"


async def test_connection_error_is_recorded(addon, tmp_path):
    f = make_flow(ANT_BODY)
    await addon.request(f)
    rid = f.metadata["tokunseba.request_id"]
    f.error = tflow.terr("[Errno 104] Connection reset by peer")
    addon.error(f)
    row, kinds = await _ledger_turn(addon, tmp_path, rid)
    assert row["outcome"] == "error" and row["status"] is None
    assert row["error"] == "upstream connection broke: [Errno 104] Connection reset by peer"
    assert kinds[-2:] == ["upstream_error", "completed"]
    assert f.id not in addon.flows


async def test_client_cancel_is_recorded_as_cancelled_not_as_an_upstream_error(addon, tmp_path):
    f = make_flow(ANT_BODY)
    await addon.request(f)
    rid = f.metadata["tokunseba.request_id"]
    f.error = tflow.terr("Client disconnected.")
    addon.error(f)
    row, kinds = await _ledger_turn(addon, tmp_path, rid)
    assert row["outcome"] == "cancelled" and row["error"] == "Client disconnected."
    assert kinds[-2:] == ["client_cancelled", "completed"] and "upstream_error" not in kinds


async def test_client_hanging_up_after_the_terminal_event_is_a_completed_turn(addon, tmp_path):
    """Codex resets its HTTP/2 stream as soon as it has response.completed: that turn is
    complete (status and usage kept), not cancelled."""
    f = make_flow({**ANT_BODY, "stream": True})
    await addon.request(f)
    rid = f.metadata["tokunseba.request_id"]
    f.response = tutils.tresp(headers=http.Headers(content_type="text/event-stream"), content=None)
    addon.responseheaders(f)
    pump = f.response.stream
    pump(CHAT_SSE)  # everything up to [DONE]; the stream's clean end never comes
    f.error = tflow.terr("stream reset by client (CANCEL)")
    addon.error(f)
    row, kinds = await _ledger_turn(addon, tmp_path, rid)
    assert row["outcome"] == "translated" and row["status"] == 200
    assert row["usage_reported"] == {"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13}
    assert kinds[-2:] == ["client_closed", "completed"]


async def test_client_hanging_up_after_the_error_event_that_ended_a_translated_stream_is_that_error(addon, tmp_path):
    """The endpoint sent a chunk that is not JSON: the client was told so in an error event of
    its protocol, and its SDK closed the stream on it before the endpoint's stream ended. The
    turn is that error (as when the client waits for the end), not a cancel."""
    f = make_flow({**ANT_BODY, "stream": True})
    await addon.request(f)
    rid = f.metadata["tokunseba.request_id"]
    f.response = tutils.tresp(headers=http.Headers(content_type="text/event-stream"), content=None)
    addon.responseheaders(f)
    told = b"".join(f.response.stream(CHAT_SSE[:CHAT_SSE.index(b"\n\n") + 2] + b'data: {"choices": [\n\n'))
    assert b"event: error" in told and b"not valid JSON" in told
    f.error = tflow.terr("Client disconnected.")
    addon.error(f)
    row, kinds = await _ledger_turn(addon, tmp_path, rid)
    assert (row["outcome"], row["status"]) == ("error", 200) and "not valid JSON" in row["error"]
    assert kinds[-2:] == ["client_closed", "completed"] and "client_cancelled" not in kinds


async def test_client_hanging_up_mid_stream_is_cancelled(addon, tmp_path):
    f = make_flow({**ANT_BODY, "stream": True})
    await addon.request(f)
    rid = f.metadata["tokunseba.request_id"]
    f.response = tutils.tresp(headers=http.Headers(content_type="text/event-stream"), content=None)
    addon.responseheaders(f)
    f.response.stream(CHAT_SSE[:120])
    f.error = tflow.terr("stream reset by client (CANCEL)")
    addon.error(f)
    row, kinds = await _ledger_turn(addon, tmp_path, rid)
    assert row["outcome"] == "cancelled" and kinds[-2:] == ["client_cancelled", "completed"]


async def test_completion_is_recorded_only_after_mitmproxy_wrote_the_reply(addon, tmp_path):
    """The response hook comes before mitmproxy writes the reply's last bytes; the turn is
    recorded complete only once the flow is no longer live (the bytes were handed over)."""
    f = make_flow(ANT_BODY)
    await addon.request(f)
    rid = f.metadata["tokunseba.request_id"]
    f.response = tutils.tresp(headers=http.Headers(content_type="application/json"), content=None)
    addon.responseheaders(f)
    f.response.content = json.dumps(CHAT_REPLY).encode()
    addon.response(f)
    for _ in range(10):
        await asyncio.sleep(0)
    assert addon.ledger.flush(10)
    with Ledger(tmp_path / "ledger.db", readonly=True) as led:
        assert not [t for t in led.turns() if t["request_id"] == rid and t["outcome"]]  # the client has not got it all
    assert rid in addon.unstarted  # nor started: a short turn's start goes with its end
    f.live = False  # what mitmproxy's flow_done does right after writing the end of the reply
    for _ in range(3):
        await asyncio.sleep(0)
    assert addon.ledger.flush(10)
    with Ledger(tmp_path / "ledger.db", readonly=True) as led:
        row = led.get_turn(rid)
    assert (row["outcome"], row["status"]) == ("translated", 200) and rid not in addon.unstarted


async def test_an_upstream_event_past_the_cap_ends_the_turn_with_an_error_in_the_clients_protocol(addon, tmp_path):
    from tokunseba import sse

    addon.tctx.configure(addon, tokunseba_max_event_bytes=4096)
    try:
        f = make_flow({**ANT_BODY, "stream": True})
        await addon.request(f)
        rid = f.metadata["tokunseba.request_id"]
        f.response = tutils.tresp(headers=http.Headers(content_type="text/event-stream"), content=None)
        addon.responseheaders(f)
        pump = f.response.stream
        out = pump(CHAT_SSE[:150])
        huge = b"data: " + b"x" * 65536  # no line end, ever
        for i in range(0, len(huge), 1000):
            out += pump(huge[i:i + 1000])
        out += pump(b"more") + pump(b"")
        kinds = [e for e, _ in _events(out)]
        assert kinds[-1] == "error" and "larger than 4096 bytes" in _events(out)[-1][1]["error"]["message"]
        addon.response(f)
        row, _ = await _ledger_turn(addon, tmp_path, rid)
        assert row["outcome"] == "error" and "larger than 4096 bytes" in row["error"]
    finally:
        addon.tctx.configure(addon, tokunseba_max_event_bytes=sse.DEFAULT_MAX_EVENT_BYTES)
    with pytest.raises(exceptions.OptionsError, match="tokunseba_max_event_bytes"):
        addon.tctx.configure(addon, tokunseba_max_event_bytes=0)


async def test_client_hanging_up_after_a_retargeted_streams_terminal_event_is_a_completed_turn(addon, tmp_path):
    """The same for a stream passed on unchanged: its watch saw the terminal event."""
    f = make_flow({**ANT_BODY, "model": "retarget-me", "stream": True})
    await addon.request(f)
    rid = f.metadata["tokunseba.request_id"]
    f.response = tutils.tresp(headers=http.Headers(content_type="text/event-stream"), content=None)
    addon.responseheaders(f)
    ant = ANT_SSE
    assert b"".join(f.response.stream(ant)) == ant  # whole events go on at once
    f.error = tflow.terr("stream reset by client (CANCEL)")
    addon.error(f)
    row, kinds = await _ledger_turn(addon, tmp_path, rid)
    assert (row["outcome"], row["status"], row["usage_output"]) == ("retargeted", 200, 3)
    assert kinds[-2:] == ["client_closed", "completed"]


async def test_keepalive_option_reaches_the_relay_and_bad_values_are_one_line_errors(addon):
    assert addon.relay.keepalive_s == 10.0  # the default
    addon.tctx.configure(addon, tokunseba_keepalive_s="0.5")
    assert addon.relay.keepalive_s == 0.5
    for bad in ("-1", "soon", "inf", "nan"):
        with pytest.raises(exceptions.OptionsError, match="tokunseba_keepalive_s"):
            addon.tctx.configure(addon, tokunseba_keepalive_s=bad)
    addon.tctx.configure(addon, tokunseba_keepalive_s="0")
    assert addon.relay.keepalive_s == 0


@pytest.mark.parametrize("model", ["retarget-me", "opus-unrouted"])
async def test_a_whole_reply_passed_on_is_parsed_once(addon, tmp_path, model, monkeypatch):
    """Issue 10 item 5: the response hook judges a whole reply passed on (retarget,
    pass-through) by parsing it once — its shape and its usage from the same parse —
    instead of parsing it twice while the first parse was still held. Usage still recorded."""
    import tokunseba.turn.stream_watch as sw

    parses = []
    real = sw.jsonc.loads
    monkeypatch.setattr(sw.jsonc, "loads", lambda data: parses.append(len(data)) or real(data))
    f = make_flow({**ANT_BODY, "model": model})
    await addon.request(f)
    rid = f.metadata["tokunseba.request_id"]
    f.response = tutils.tresp(headers=http.Headers(content_type="application/json"), content=None)
    addon.responseheaders(f)
    reply = json.dumps({"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "stop_reason": "end_turn",
                        "content": [{"type": "text", "text": "w" * 100_000}],
                        "usage": {"input_tokens": 3, "output_tokens": 4}}).encode()
    f.response.content = reply
    addon.response(f)
    assert f.response.content == reply  # passed on unchanged
    assert parses.count(len(reply)) == 1
    row, _ = await _ledger_turn(addon, tmp_path, rid)
    assert row["status"] == 200 and row["usage_input"] == 3 and row["usage_output"] == 4


@pytest.mark.parametrize("host_header", [True, False])
@pytest.mark.parametrize("authority", [b"", b"api.anthropic.com"])
def test_pointing_at_the_relay_and_back_is_the_url_setter_without_its_parse(authority, host_header):
    """target.point_at makes what ``req.url = relay URL`` makes (fields, Host header,
    authority); target.set_target puts the client's request back exactly."""
    def req():
        r = make_flow(ANT_BODY).request
        r.data.authority = authority
        if not host_header:  # HTTP/2: the authority only
            r.headers.pop("host", None)
        else:
            r.headers.insert(0, "x-first", "1")  # the Host field keeps its place
        return r

    fast, slow = req(), req()
    before = fast.get_state()
    target = target_of(fast)
    point_at(fast, "http", "127.0.0.1", 4321, PREFIX + "tok")
    slow.url = f"http://127.0.0.1:4321{PREFIX}tok"
    assert fast.get_state() == slow.get_state() and fast.url == slow.url
    set_target(fast, target)
    assert fast.get_state() == before


@pytest.mark.parametrize("values", [
    {},
    {"content-type": "application/json", "accept-encoding": "identity", "accept": "text/event-stream",
     "authorization": "Bearer k", "x-new": "1"},
    {"Content-Type": "a", "content-type": "b"},  # the same name twice: the first's spelling, the last's value
    {"X-API-KEY": "k2", "host": "h:1"},
])
def test_set_headers_is_the_item_setter_in_one_pass(values):
    from tokunseba.turn.target import set_headers

    def headers():
        return http.Headers([(b"Host", b"api"), (b"x-api-key", b"k1"), (b"Content-Type", b"text/plain"),
                             (b"accept", b"*/*"), (b"X-Api-Key", b"dup"), (b"user-agent", b"u")])

    fast, slow = headers(), headers()
    set_headers(fast, values)
    for k, v in values.items():
        slow[k] = v
    assert fast.fields == slow.fields
