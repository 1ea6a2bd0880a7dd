"""Responses over WebSocket through a real mitmdump with the addon: a WebSocket client speaking
Codex's wire (a warm-up, then turns continuing with ``previous_response_id``) to a scripted
Responses endpoint that speaks WebSocket (tests/support/ws_upstream.py, reached as api.openai.com
by point_hosts.py). Every turn is in the ledger with its usage; the warm-up is not a turn; a
turn routed to an Anthropic endpoint goes over HTTPS and its events come back into the same
WebSocket; the next turn back at the provider carries the whole conversation; a cut
mid-turn is interrupted."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import ssl
from pathlib import Path

import subprocess

import pytest
from mitmproxy import io
from websockets.asyncio.client import connect

from tokunseba.webview.view import MARKS

from .conftest import BIN, Mitmdump, ledger_settled
from .test_codex_default_e2e import rendered
from tests.support.upstream import Upstream
from tests.support.ws_upstream import WsScript, WsUpstream, text_events
from tests.support.console import said_status

from tokunseba.neutral.events import BlockDelta, BlockStart, BlockStop, MessageStart, MessageStop
from tokunseba.neutral.usage import Usage
from tokunseba.protocols.anthropic import COUNTING_NAME as ANTHROPIC

pytestmark = [pytest.mark.e2e]
HERE = Path(__file__).resolve().parent
KEY = "sk-ws-client-key-0123456789"
ENDPOINT_KEY = "sk-ws-endpoint-anthropic-42"

RULES = """\
endpoints:
  claude:
    protocol: anthropic
    url: {url}/v1
    key_env: TK_TEST_WS_KEY
    max_tokens: 8192
routes:
  - name: routed-model
    when: {{client: openai-responses, model: route-me}}
    to: claude
    model: claude-sonnet-4-5
"""


def _proxy(tmp_path: Path, ws: WsUpstream, rules: str | None = None, extra: list[str] | None = None,
           ledger: str | None = None) -> Mitmdump:
    path = None
    if rules is not None:
        path = tmp_path / "rules.yaml"
        path.write_text(rules)
    return Mitmdump(tmp_path, path, env={"TK_TEST_POINT": f"api.openai.com=http://127.0.0.1:{ws.port}",
                                         "TK_TEST_WS_KEY": ENDPOINT_KEY},
                    extra=["-s", str(HERE.parent / "support" / "point_hosts.py"), *(extra or [])], ledger=ledger)


class Client:
    """Codex's wire over one WebSocket through the proxy."""

    def __init__(self, m: Mitmdump) -> None:
        self.m = m

    async def __aenter__(self) -> "Client":
        ctx = ssl.create_default_context(cafile=str(self.m.ca))
        self.ws = await connect("wss://api.openai.com/v1/responses", proxy=self.m.url, ssl=ctx,
                                additional_headers={"authorization": f"Bearer {KEY}",
                                                    "openai-beta": "responses_websockets=2026-02-06",
                                                    "session-id": "ws-session-1"}, max_size=None)
        return self

    async def __aexit__(self, *exc) -> None:
        await self.ws.close()

    async def send(self, doc: dict) -> list[dict]:
        """Send one message; the events until the response ends."""
        await self.ws.send(json.dumps(doc))
        events = []
        while True:
            ev = json.loads(await asyncio.wait_for(self.ws.recv(), 30))
            events.append(ev)
            if ev.get("type") in ("response.completed", "response.failed", "response.incomplete", "error"):
                return events


def create(input_items, prev=None, model="gpt-5.5", **kw) -> dict:
    d = {"type": "response.create", "model": model, "instructions": "be brief", "input": input_items,
         "tools": [], "store": False, "prompt_cache_key": "ws-session-1", **kw}
    if prev:
        d["previous_response_id"] = prev
    return d


def user(text: str) -> dict:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def _turns(ledger: Path) -> list[dict]:
    con = sqlite3.connect(ledger)
    con.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in con.execute("SELECT * FROM turns ORDER BY started_at")]
    finally:
        con.close()


def _rid(events: list[dict]) -> str:
    return events[-1]["response"]["id"]


def test_every_turn_over_websocket_is_recorded_and_warmups_are_not(tmp_path):
    saved = tmp_path / "flows.mitm"
    with WsUpstream() as ws:
        ws.script(WsScript(text_events(["hello ", "over websocket"]), delay=0.005))
        m = _proxy(tmp_path, ws, extra=["-w", str(saved)])
        try:
            async def session():
                async with Client(m) as c:
                    warm = await c.send(create([], generate=False))
                    first = await c.send(create([user("say hi")], prev=_rid(warm)))
                    second = await c.send(create([user("again")], prev=_rid(first)))
                    return warm, first, second
            warm, first, second = asyncio.run(session())
            ledger_settled(m.ledger)
        finally:
            m.stop()
    assert "".join(e.get("delta", "") for e in first) == "hello over websocket"
    # the messages reached the provider as the client sent them, over its WebSocket: no POST
    assert [msg.get("previous_response_id") for msg in ws.messages] == [None, _rid(warm), _rid(first)]
    assert ws.messages[2]["input"] == [user("again")]
    assert [r[0] for r in ws.requests] == ["GET"]
    turns = _turns(m.ledger)
    assert len(turns) == 2, turns  # the warm-up is no turn
    for t in turns:
        assert t["client_protocol"] == "openai-responses" and t["outcome"] == "pass_through" and t["status"] == 200
        assert json.loads(t["usage_reported"])["input_tokens"] == 5120
        assert t["requested_model"] == "gpt-5.5" and t["session_id"] == "ws-session-1"
    assert not said_status(m.log(), 426)
    assert sum(t["request_id"] in m.log() for t in turns) == 2  # the console lines
    said = subprocess.run([str(BIN / "tokunseba"), "explain", "--ledger", str(m.ledger), turns[-1]["request_id"]],
                          capture_output=True, text=True)
    assert said.returncode == 0 and "openai-responses" in said.stdout and "5120" in said.stdout, said.stdout
    # mitmweb's view of the connection: its flow names the last turn, marked as passed through
    with saved.open("rb") as f:
        flows = [fl for fl in io.FlowReader(f).stream() if getattr(fl, "websocket", None) is not None]
    assert len(flows) == 1 and turns[-1]["request_id"] in flows[0].comment and "2 turns" in flows[0].comment
    assert flows[0].marked == MARKS["pass_through"]


def test_a_turn_routed_elsewhere_comes_back_into_the_same_websocket(tmp_path):
    call_text = "routed answer from claude"
    with WsUpstream() as ws, Upstream() as ant:
        ws.script(WsScript(text_events(["provider ", "answer"])))
        ant.script(rendered("anthropic", [
            MessageStart("msg_ws_ant1", "claude-sonnet-4-5"), BlockStart(0, "text"),
            BlockDelta(0, call_text[:9]), BlockDelta(0, call_text[9:]), BlockStop(0),
            MessageStop("end_turn", None, Usage(ANTHROPIC, {"input_tokens": 321, "output_tokens": 7}))]))
        m = _proxy(tmp_path, ws, RULES.format(url=ant.url))
        try:
            async def session():
                async with Client(m) as c:
                    warm = await c.send(create([], generate=False))
                    first = await c.send(create([user("one")], prev=_rid(warm)))
                    routed = await c.send(create([user("two")], prev=_rid(first), model="route-me"))
                    third = await c.send(create([user("three")], prev=_rid(routed)))
                    return first, routed, third
            first, routed, third = asyncio.run(session())
            ledger_settled(m.ledger)
        finally:
            m.stop()
    assert routed[-1]["type"] == "response.completed", routed
    assert "".join(e.get("delta", "") for e in routed if e["type"] == "response.output_text.delta") == call_text
    # the routed turn went over HTTPS, with the whole conversation and the endpoint's own key
    posts = [r for r in ant.requests if r.method == "POST"]
    assert len(posts) == 1 and posts[0].headers["x-api-key"] == ENDPOINT_KEY
    assert all(KEY not in v for v in posts[0].headers.values())
    texts = json.dumps(posts[0].json()["messages"])
    assert "one" in texts and "provider answer" in texts and "two" in texts
    # the provider never saw the routed turn; the next turn names no response it never produced
    assert len(ws.turns()) == 2
    back = ws.turns()[1]
    assert "previous_response_id" not in back
    assert json.dumps(back["input"]).count(call_text) == 1 and back["input"][-1] == user("three")
    turns = _turns(m.ledger)
    assert [t["outcome"] for t in turns] == ["pass_through", "translated", "pass_through"]
    con = sqlite3.connect(m.ledger)
    kinds = [k for (k,) in con.execute("SELECT kind FROM events WHERE request_id = ?", (turns[2]["request_id"],))]
    con.close()
    assert "websocket_rewritten" in kinds and "websocket" in kinds
    assert json.loads(turns[1]["usage_reported"])["input_tokens"] == 321 and turns[1]["endpoint"] == "claude"


def test_a_cut_mid_turn_is_interrupted(tmp_path):
    with WsUpstream() as ws:
        ws.script(WsScript(text_events(["never ", "finished"]), delay=0.01, cut_after=4))
        m = _proxy(tmp_path, ws)
        try:
            async def session():
                async with Client(m) as c:
                    await c.ws.send(json.dumps(create([user("hi")])))
                    try:
                        while True:
                            await asyncio.wait_for(c.ws.recv(), 10)
                    except Exception:
                        return
            asyncio.run(session())
            ledger_settled(m.ledger)
        finally:
            m.stop()
    turns = _turns(m.ledger)
    assert len(turns) == 1 and turns[0]["outcome"] == "interrupted", turns
    assert "mid-turn" in (turns[0]["error"] or "")


RETARGET_RULES = """\
endpoints:
  elsewhere:
    protocol: openai-responses
    url: {url}/v1
    key_env: TK_TEST_WS_KEY
routes:
  - name: retarget-model
    when: {{client: openai-responses, model: route-ws}}
    to: elsewhere
"""


def test_a_turn_retargeted_to_a_responses_endpoint_goes_over_its_websocket(tmp_path):
    with WsUpstream() as ws, WsUpstream() as other:
        ws.script(WsScript(text_events(["at the ", "provider"])))
        other.script(WsScript(text_events(["at the ", "other endpoint"]), delay=0.005))
        m = _proxy(tmp_path, ws, RETARGET_RULES.format(url=other.url))
        try:
            async def session():
                async with Client(m) as c:
                    warm = await c.send(create([], generate=False))
                    first = await c.send(create([user("one")], prev=_rid(warm)))
                    second = await c.send(create([user("two")], prev=_rid(first), model="route-ws"))
                    third = await c.send(create([user("three")], prev=_rid(second), model="route-ws"))
                    return second, third
            second, third = asyncio.run(session())
            ledger_settled(m.ledger)
        finally:
            m.stop()
    for got in (second, third):
        assert "".join(e.get("delta", "") for e in got if e["type"] == "response.output_text.delta") == \
            "at the other endpoint"
    # one WebSocket to the endpoint for both turns, with its own key and never the client's
    assert len(other.upgrades) == 1 and other.upgrades[0]["authorization"] == f"Bearer {ENDPOINT_KEY}"
    assert all(KEY not in v for v in other.upgrades[0].values())
    assert [r[0] for r in other.requests] == ["GET"]  # no POST
    sent = other.turns()
    assert len(sent) == 2 and all("previous_response_id" not in t for t in sent)
    assert sent[0]["input"][0] == user("one") and sent[0]["input"][-1] == user("two")  # the whole conversation
    assert sent[1]["input"][-1] == user("three") and len(sent[1]["input"]) == len(sent[0]["input"]) + 2
    assert len(ws.turns()) == 1
    turns = _turns(m.ledger)
    assert [t["outcome"] for t in turns] == ["pass_through", "retargeted", "retargeted"]
    assert all(json.loads(t["usage_reported"])["input_tokens"] == 5120 for t in turns)


def test_a_client_that_leaves_after_the_terminal_event_of_a_turn_over_https_got_the_whole_turn(tmp_path):
    """The endpoint's HTTPS stream has sent its terminal event (the client has it and closes its
    WebSocket) but not yet its end: the turn is whole (retargeted, its usage), not interrupted.
    Seen once under load, where the gap between the two is wide; here the endpoint waits 1.5 s
    after its terminal event before it ends the stream."""
    from .test_codex_e2e import responses_stream
    from tests.support.upstream import Reply

    with WsUpstream() as ws, Upstream() as other:
        ws.script(WsScript(text_events(["unused"])))
        pieces = [e + b"\n\n" for e in b"".join(responses_stream(["whole ", "turn"])).split(b"\n\n") if e.strip()]
        other.script(Reply.json({"error": {"message": "not here"}}, 404),
                     Reply.sse([b"".join(pieces), b": the stream's end, a while after its terminal event\n\n"],
                               delay=1.5))
        m = _proxy(tmp_path, ws, RETARGET_RULES.format(url=other.url))
        try:
            async def session():
                async with Client(m) as c:
                    return await c.send(create([user("one")], model="route-ws"))
            got = asyncio.run(session())  # the client leaves once it has response.completed
            ledger_settled(m.ledger)
        finally:
            m.stop()
    assert "".join(e.get("delta", "") for e in got if e["type"] == "response.output_text.delta") == "whole turn"
    turns = _turns(m.ledger)
    assert len(turns) == 1 and turns[0]["outcome"] == "retargeted" and turns[0]["status"] == 200, turns
    assert json.loads(turns[0]["usage_reported"])["input_tokens"] == 5120


def test_a_turn_retargeted_to_an_endpoint_without_websocket_goes_over_https(tmp_path):
    from .test_codex_e2e import responses_stream
    from tests.support.upstream import Reply

    with WsUpstream() as ws, Upstream() as other:
        ws.script(WsScript(text_events(["unused"])))
        other.script(Reply.json({"error": {"message": "not here"}}, 404),
                     Reply.sse(responses_stream(["over ", "https"]), delay=0.005))
        m = _proxy(tmp_path, ws, RETARGET_RULES.format(url=other.url))
        try:
            async def session():
                async with Client(m) as c:
                    return await c.send(create([user("one")], model="route-ws"))
            got = asyncio.run(session())
            ledger_settled(m.ledger)
        finally:
            m.stop()
    assert "".join(e.get("delta", "") for e in got if e["type"] == "response.output_text.delta") == "over https"
    assert [(r.method, r.path) for r in other.requests] == [("GET", "/v1/responses"), ("POST", "/v1/responses")]
    post = other.requests[1]
    assert post.json()["stream"] is True and post.json()["input"] == [user("one")] and "type" not in post.json()
    assert post.headers["authorization"] == f"Bearer {ENDPOINT_KEY}"
    turns = _turns(m.ledger)
    assert len(turns) == 1 and turns[0]["outcome"] == "retargeted"
    assert json.loads(turns[0]["usage_reported"])["input_tokens"] == 5120


def test_a_turn_the_provider_fails_is_an_error_and_a_refused_one_never_leaves(tmp_path):
    failed = {"type": "error", "status": 429,
              "error": {"type": "rate_limit_error", "code": "rate_limit_exceeded", "message": "slow down"}}
    with WsUpstream() as ws:
        ws.script(WsScript([failed]))
        m = _proxy(tmp_path, ws, "unmatched: refuse\n" + RETARGET_RULES.format(url=ws.url).replace("route-ws", "gpt-5.5"))
        try:
            async def session():
                async with Client(m) as c:
                    a = await c.send(create([user("one")]))
                    b = await c.send(create([user("two")], model="other-model"))
                    return a, b
            a, b = asyncio.run(session())
            ledger_settled(m.ledger)
        finally:
            m.stop()
    assert a == [failed]  # the endpoint's error event, as it came (over its WebSocket)
    assert b[-1]["type"] == "error" and "unmatched: refuse" in b[-1]["error"]["message"]
    assert len(ws.turns()) == 1  # the refused turn never left
    turns = _turns(m.ledger)
    assert [t["outcome"] for t in turns] == ["error", "refused"], turns
    assert turns[0]["status"] == 429 and "slow down" in turns[0]["error"]


TOOL_SEARCH = [  # gpt-5.5 (classic) Codex's search of its deferred tools, as its history carries it
    {"type": "tool_search_call", "id": "tsc_ws1", "call_id": "call_ts1", "execution": "client", "status": "completed",
     "arguments": {"query": "calendar event", "limit": 3}},
    {"type": "tool_search_output", "id": "tso_ws1", "call_id": "call_ts1", "execution": "client", "status": "completed",
     "tools": [{"type": "function", "name": "create_event", "description": "Create an event.",
                "parameters": {"type": "object", "properties": {"title": {"type": "string"}}}}]},
]

FAILOVER_RULES = """\
endpoints:
  cut:
    protocol: openai-responses
    url: {cut}/v1
  busy:
    protocol: openai-responses
    url: {busy}/v1
  elsewhere:
    protocol: openai-responses
    url: {other}/v1
    key_env: TK_TEST_WS_KEY
routes:
  - {{name: first, when: {{client: openai-responses, model: route-ws}}, to: cut}}
  - {{name: second, when: {{client: openai-responses, model: route-ws}}, to: busy}}
  - {{name: third, when: {{client: openai-responses, model: route-ws}}, to: elsewhere}}
"""


def _events_of(ledger: Path, request_id: str) -> list[tuple[str, dict]]:
    con = sqlite3.connect(ledger)
    try:
        return [(k, json.loads(d or "null")) for k, d in
                con.execute("SELECT kind, data FROM events WHERE request_id = ? ORDER BY id", (request_id,))]
    finally:
        con.close()


def test_a_routed_turn_fails_over_before_its_first_word_and_carries_tool_search_items(tmp_path):
    """A WebSocket cut before its first event and a 503 (over HTTPS: no WebSocket there) move the
    turn on as over HTTPS; the third endpoint's WebSocket answers. Every attempt carried the
    client's tool_search items as they were."""
    from tests.support.upstream import Reply

    with WsUpstream() as ws, WsUpstream() as cut, Upstream() as busy, WsUpstream() as other:
        ws.script(WsScript(text_events(["unused"])))
        cut.script(WsScript(text_events(["never"]), cut_after=0))
        busy.script(Reply.json({"error": {"message": "no websocket here"}}, 404),
                    Reply.json({"error": {"message": "overloaded", "type": "server_error"}}, 503))
        other.script(WsScript(text_events(["at the ", "other endpoint"]), delay=0.005))
        rules = FAILOVER_RULES.format(cut=cut.url, busy=busy.url, other=other.url)
        m = _proxy(tmp_path, ws, rules)
        asked = [user("find my calendar tool"), *TOOL_SEARCH, user("now use it")]
        try:
            async def session():
                async with Client(m) as c:
                    return await c.send(create(asked, model="route-ws"))
            got = asyncio.run(session())
            ledger_settled(m.ledger)
        finally:
            m.stop()
    assert "".join(e.get("delta", "") for e in got if e["type"] == "response.output_text.delta") == \
        "at the other endpoint", got
    assert [(r.method, r.path) for r in busy.requests] == [("GET", "/v1/responses"), ("POST", "/v1/responses")]
    assert busy.requests[1].json()["input"] == asked  # over HTTPS, the items as the client sent them
    assert len(other.turns()) == 1 and other.turns()[0]["input"] == asked  # over its WebSocket too
    assert ws.turns() == []
    turns = _turns(m.ledger)
    assert len(turns) == 1 and turns[0]["outcome"] == "retargeted" and turns[0]["endpoint"] == "elsewhere", turns
    assert json.loads(turns[0]["usage_reported"])["input_tokens"] == 5120
    failed = [d for k, d in _events_of(m.ledger, turns[0]["request_id"]) if k == "attempt_failed"]
    assert cut.turns()[0]["input"] == asked
    assert [(f["endpoint"], f["kind"]) for f in failed] == [("cut", "reset"), ("busy", "status")], failed
    assert failed[1]["status"] == 503 and failed[1]["next"] == "elsewhere"


QUEUE_RULES = """\
endpoints:
  elsewhere:
    protocol: openai-responses
    url: {other}/v1
    max_concurrency: 1
    queue_s: 30
routes:
  - {{name: retarget-model, when: {{client: openai-responses, model: route-ws}}, to: elsewhere}}
"""


def test_a_turn_whose_endpoint_is_full_waits_for_its_slot_up_to_queue_s(tmp_path):
    with WsUpstream() as ws, WsUpstream() as other:
        ws.script(WsScript(text_events(["unused"])))
        other.script(WsScript(text_events(["one ", "at ", "a ", "time"]), delay=0.05))
        m = _proxy(tmp_path, ws, QUEUE_RULES.format(other=other.url))
        try:
            async def one(text: str):
                async with Client(m) as c:
                    return await c.send(create([user(text)], model="route-ws"))

            async def both():
                return await asyncio.gather(one("first"), one("second"))
            got = asyncio.run(both())
            ledger_settled(m.ledger)
        finally:
            m.stop()
    for events in got:
        assert "".join(e.get("delta", "") for e in events if e["type"] == "response.output_text.delta") == \
            "one at a time", events
    turns = _turns(m.ledger)
    assert [t["outcome"] for t in turns] == ["retargeted", "retargeted"] and len(other.turns()) == 2
    queued = [d for t in turns for k, d in _events_of(m.ledger, t["request_id"]) if k == "queued"]
    assert len(queued) == 1, queued  # the second waited for the first's slot, then took it
    assert queued[0]["endpoint"] == "elsewhere" and queued[0]["slot"] is True and queued[0]["waited_s"] > 0
