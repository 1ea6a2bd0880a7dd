"""Issue 10's fault matrix through ONE real mitmdump: every upstream fault × {Anthropic, Chat,
Responses client} × {translated, retargeted} × {stream, whole}. In every cell:

- the client's official SDK fails with its own error: an ``APIStatusError`` (the error came
  as an HTTP status), or for a stream already under way the SDK's error from the error event
  in its protocol (anthropic: ``APIStatusError`` from ``event: error``; openai Chat: the base
  ``APIError`` from a ``data: {"error": ...}`` chunk; openai Responses, whose SDK raises on
  nothing in a stream: the stream ends with ``response.failed`` / ``error``) — never a torn
  read (``APIConnectionError``), a parse error, or a clean stop (``message_stop``,
  ``response.completed``, a Chat stream that ran out at ``[DONE]``);
- the ledger holds exactly one row for the turn (found by its model name, unique per cell)
  whose outcome is ``error``, whose status is the one the client got, and whose error says
  what happened;
- the next turn on the same proxy, same client and route, works.

Translated = a client protocol routed to an endpoint of another protocol (Anthropic → Chat,
Chat → Anthropic, Responses → Chat); retargeted = same protocol, other endpoint. One scripted
upstream serves every live endpoint (the cells run one at a time); refused connects go to a
closed loopback port.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time

import anthropic
import openai
import pytest

from .conftest import Mitmdump, ledger_settled, point_clients_at
from .test_codex_e2e import responses_stream
from .test_crash_e2e import ANT_HEAD, ant_text_stream
from .test_proxy_e2e import chat_chunk, chat_reply, chat_text_stream, ant_client, oai_client
from tests.support.upstream import Reply, Upstream, closed_port

pytestmark = pytest.mark.e2e

MAX_EVENT = 2048  # tokunseba_max_event_bytes for this proxy: well above every event below but the big one

RULES = """\
endpoints:
  chat:
    protocol: openai
    url: {url}/v1
    key_env: TK_TEST_OAI_KEY
  ant:
    protocol: anthropic
    url: {url}/v1
    key_env: TK_TEST_ANT_KEY
    max_tokens: 1024
  resp:
    protocol: openai-responses
    url: {url}/v1
    key_env: TK_TEST_OAI_KEY
  down-chat:
    protocol: openai
    url: {down}/v1
  down-ant:
    protocol: anthropic
    url: {down}/v1
  down-resp:
    protocol: openai-responses
    url: {down}/v1
routes:
{routes}"""
KEYS = {"TK_TEST_OAI_KEY": "sk-endpoint-oai-0001", "TK_TEST_ANT_KEY": "sk-endpoint-ant-0002"}

CLIENTS = ("anthropic", "openai", "openai-responses")
# (client, route) -> the endpoint protocol its turns go to
TARGET = {("anthropic", "translated"): "openai", ("openai", "translated"): "anthropic",
          ("openai-responses", "translated"): "openai",
          ("anthropic", "retargeted"): "anthropic", ("openai", "retargeted"): "openai",
          ("openai-responses", "retargeted"): "openai-responses"}
ENDPOINT = {"openai": "chat", "anthropic": "ant", "openai-responses": "resp"}
PREFIX = {"translated": "t", "retargeted": "r"}  # model name prefix that picks the route; "d" + it: the down one


def _routes() -> str:
    out = []
    for (client, route), target in TARGET.items():
        p = PREFIX[route]
        out.append(f"  - name: {client}-{p}-down\n    when: {{client: {client}, model: \"d{p}.*\"}}\n"
                   f"    to: down-{ENDPOINT[target]}\n    on_unreachable: error\n")
        # on_failure: error: these cells show each fault as the client gets it (no failover, issue 19)
        out.append(f"  - name: {client}-{p}\n    when: {{client: {client}, model: \"{p}.*\"}}\n"
                   f"    to: {ENDPOINT[target]}\n    on_failure: error\n")
    return "".join(out)


# ------------------------------------------------------------------ what each endpoint protocol says

ANT_REPLY = {"id": "msg_fault", "type": "message", "role": "assistant", "model": "m",
             "content": [{"type": "text", "text": "whole"}], "stop_reason": "end_turn", "stop_sequence": None,
             "usage": {"input_tokens": 1, "output_tokens": 1}}
_RESP_DONE = json.loads(responses_stream(["whole"])[-1].split(b"data: ", 1)[1])["response"]
WHOLE = {"openai": chat_reply("chatcmpl-fault", "whole"), "anthropic": ANT_REPLY, "openai-responses": _RESP_DONE}
STREAM = {"openai": chat_text_stream("chatcmpl-fault", ("w0 ", "w1 ", "w2 ")), "anthropic": ant_text_stream(3),
          "openai-responses": responses_stream(["w0 ", "w1 ", "w2 "])}
# the upstream's own error event, after its first event
ERROR_EVENT = {
    "openai": b'data: {"error":{"message":"Overloaded","type":"server_error","code":null}}\n\n',
    "anthropic": b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n',
    "openai-responses": b'event: error\ndata: {"type":"error","code":"server_error","message":"Overloaded",'
                        b'"param":null,"sequence_number":2}\n\n',
}


def _big_event(target: str) -> bytes:
    """A text delta event larger than MAX_EVENT, in the endpoint's protocol."""
    text = "x" * (2 * MAX_EVENT)
    if target == "openai":
        return chat_chunk("chatcmpl-fault", {"content": text})
    if target == "anthropic":
        return (b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":'
                b'"text_delta","text":"%s"}}\n\n' % text.encode())
    return responses_stream([text])[4]


def _bad_json_event(target: str) -> bytes:
    """A delta event whose data is not JSON."""
    name = {"openai": b"", "anthropic": b"event: content_block_delta\n",
            "openai-responses": b"event: response.output_text.delta\n"}[target]
    return name + b'data: {"type":"content_block_delta","index":0,"delta":{"text": "w\n\n'


def _whole_body(target: str) -> bytes:
    return json.dumps(WHOLE[target]).encode()


# fault -> (the upstream's reply for a stream turn, for a whole turn; None: no such cell), keyed by the
# endpoint protocol; and what the ledger's error says (a regex)
HTML = Reply(200, {"content-type": "text/html"}, [b"<html><body>Bad Gateway</body></html>"])
FAULTS: dict[str, tuple] = {
    # nothing listens: the route's on_unreachable: error answers
    "refused": (lambda t: None, lambda t: None, r"^route \S+-down: endpoint down-\S+ is unreachable"),
    "reset-before-headers": (lambda t: Reply.reset(), lambda t: Reply.reset(), r"^upstream connection broke"),
    # whole: the connection dies after part of the body; stream: after two events
    "reset-mid-body": (lambda t: Reply.sse(STREAM[t], die_after=2),
                       lambda t: Reply(200, {"content-type": "application/json"},
                                       [_whole_body(t)[:30], _whole_body(t)[30:]], framing="chunked", die_after=1),
                       r"^upstream connection broke"),
    # whole: content-length longer than the body (then the connection closes); a stream has no
    # content-length, its truncations are the next two
    "truncated": (None, lambda t: Reply.truncated(WHOLE[t]), r"^upstream connection broke"),
    # a stream cut before its end: Anthropic without message_stop (even after message_delta),
    # Responses without response.completed, Chat before its finish chunk (its stop; [DONE] is optional)
    "no-terminal-event": (lambda t: Reply.sse(STREAM[t][:-3] if t == "openai" else STREAM[t][:-1]), None,
                          r"^upstream stream ended without its terminal event|^upstream ended the stream early"),
    # ends cleanly (chunked terminator) in the middle of an event; translated, the decoder reads
    # the torn event at the close: the Chat decoder says "not valid JSON (unexpected end of data"
    "cut-mid-event": (lambda t: Reply.sse(STREAM[t][:3] + [STREAM[t][3][:20]]), None,
                      r"^upstream stream was cut in the middle of an event|^upstream ended the stream early"
                      r"|not valid JSON \(unexpected end of data"),
    # status 200 with HTML where JSON (or a stream) was due
    "html": (lambda t: HTML, lambda t: HTML,
             r"reply is not valid JSON|upstream sent a whole reply \(text/html\) where a stream was due"),
    # whole: cut JSON, cleanly framed; stream: an event whose data is not JSON
    "invalid-json": (lambda t: Reply.sse(STREAM[t][:2] + [_bad_json_event(t)] + STREAM[t][2:]),
                     lambda t: Reply(200, {"content-type": "application/json"}, [_whole_body(t)[:25]]),
                     r"not valid JSON"),
    # the upstream's own error event mid-stream (a whole error reply is an ordinary error status)
    "error-event": (lambda t: Reply.sse(STREAM[t][:1] + [ERROR_EVENT[t]]), None,
                    r"^(upstream stream carried an error: )?Overloaded$"),
    # the other shape than asked for
    "wrong-shape": (lambda t: Reply.json(WHOLE[t]), lambda t: Reply.sse(STREAM[t]),
                    r"where a stream was due|stream where a whole reply was due"),
    # one event larger than tokunseba_max_event_bytes (a whole reply has no events)
    "event-too-large": (lambda t: Reply.sse(STREAM[t][:2] + [_big_event(t)] + STREAM[t][2:]), None,
                        rf"larger than {MAX_EVENT} bytes"),
}

CELLS = [pytest.param(fault, client, route, kind, id=f"{fault}-{client}-{route}-{kind}")
         for fault, (stream, whole, _) in FAULTS.items()
         for client in CLIENTS for route in ("translated", "retargeted")
         for kind, make in (("stream", stream), ("whole", whole)) if make is not None]

# cells that fail: (fault, client, route, kind) -> the defect (none today; a cell that regresses
# and cannot be fixed at once goes here, xfail(strict=True), never skipped)
XFAIL: dict[tuple[str, str, str, str], str] = {}


@pytest.fixture(scope="module")
def fault_upstream():
    with Upstream() as up:
        yield up


@pytest.fixture(scope="module")
def fault_proxy(fault_upstream, tmp_path_factory):
    work = tmp_path_factory.mktemp("faults")
    rules = work / "rules.yaml"
    rules.write_text(RULES.format(url=fault_upstream.url, down=f"http://127.0.0.1:{closed_port()}",
                                  routes=_routes()))
    m = Mitmdump(work, rules, env=KEYS, extra=["--set", f"tokunseba_max_event_bytes={MAX_EVENT}"])
    yield m
    m.stop()


@pytest.fixture
def fault_env(fault_proxy, monkeypatch):
    return point_clients_at(fault_proxy, monkeypatch)


# ------------------------------------------------------------------ one turn through each SDK

HI = [{"role": "user", "content": "hi"}]
SDK_ERRORS = (anthropic.APIError, openai.APIError)
TORN = (anthropic.APIConnectionError, openai.APIConnectionError)  # a torn read, not an error in the protocol


def turn(client: str, kind: str, model: str) -> tuple[Exception | None, list[str]]:
    """One turn: the SDK error it raised (None: none) and what the client saw, in order (event
    types; a Chat stream's finish reasons; a whole reply's stop)."""
    seen: list[str] = []
    try:
        if client == "anthropic":
            if kind == "stream":
                with ant_client().messages.stream(model=model, max_tokens=50, messages=HI) as s:
                    for ev in s:
                        seen.append(ev.type)
            else:
                seen.append(str(ant_client().messages.create(model=model, max_tokens=50, messages=HI).stop_reason))
        elif client == "openai":
            if kind == "stream":
                for c in oai_client().chat.completions.create(model=model, messages=HI, stream=True):
                    seen.extend(f"finish:{ch.finish_reason}" for ch in c.choices if ch.finish_reason)
                seen.append("[DONE]")  # the iterator ran out: the stream ended cleanly
            else:
                seen.append(oai_client().chat.completions.create(model=model, messages=HI).choices[0].finish_reason)
        else:
            if kind == "stream":
                for ev in oai_client().responses.create(model=model, input="hi", stream=True):
                    seen.append(ev.type)
                    if ev.type == "error":  # its SDK raises on neither: the event must say what failed
                        assert ev.message, ev
                    elif ev.type == "response.failed":
                        assert ev.response.status == "failed" and ev.response.error.message, ev
            else:
                seen.append(oai_client().responses.create(model=model, input="hi").status)
    except SDK_ERRORS as e:
        return e, seen
    return None, seen


CLEAN_END = {"anthropic": "message_stop", "openai": "[DONE]", "openai-responses": "response.completed"}


def one_row(proxy: Mitmdump, model: str, timeout: float = 20.0) -> dict:
    """The one ledger row of the turn asked for ``model``, once it has ended. The writer
    thread records a turn's start and end shortly after they happen: wait for both."""
    deadline = time.monotonic() + timeout
    while True:
        ledger_settled(proxy.ledger)
        con = sqlite3.connect(proxy.ledger)
        con.row_factory = sqlite3.Row
        try:
            rows = [dict(r) for r in con.execute("SELECT * FROM turns WHERE requested_model = ?", (model,))]
        finally:
            con.close()
        if rows and all(r["outcome"] is not None for r in rows):
            assert len(rows) == 1, rows
            return rows[0]
        assert time.monotonic() < deadline, f"no ended row for {model}: {rows}"
        time.sleep(0.05)


@pytest.mark.parametrize("fault, client, route, kind", CELLS)
def test_fault(fault, client, route, kind, fault_env, fault_upstream, request):
    defect = XFAIL.get((fault, client, route, kind))
    if defect:
        request.applymarker(pytest.mark.xfail(strict=True, reason=defect))
    make_stream, make_whole, said = FAULTS[fault]
    target = TARGET[(client, route)]
    reply = (make_stream if kind == "stream" else make_whole)(target)
    p = PREFIX[route]
    model = f"{'d' + p if reply is None else p}.{fault}.{client}.{kind}"
    fault_upstream.script(reply or Reply.json({"error": "a refused connect reached the upstream"}, 500))
    before = len(fault_upstream.requests)

    err, seen = turn(client, kind, model)
    row = one_row(fault_env, model)

    assert CLEAN_END[client] not in seen, (err, seen, row)
    if err is None:  # only a Responses stream may fail without a raise: on its failure event
        assert client == "openai-responses" and kind == "stream" and seen, seen
        assert seen[-1] in ("response.failed", "error"), seen
        status = 200
    else:
        assert not isinstance(err, TORN), f"a torn read, not an error in the client's protocol: {err!r}"
        # an error status, or (a stream under way) the openai SDK's error from a Chat error chunk
        assert isinstance(err, (anthropic.APIStatusError, openai.APIStatusError)) or (
            type(err) is openai.APIError and (client, kind) == ("openai", "stream")), repr(err)
        status = getattr(err, "status_code", 200)  # an error event mid-stream: the client had a 200
    assert (row["outcome"], row["status"]) == ("error", status), (row, err, seen)
    assert row["error"] and re.search(said, row["error"]), (row["error"], said)
    if reply is None:
        assert len(fault_upstream.requests) == before  # nothing reached a live endpoint

    # the next turn on the same proxy works
    fault_upstream.script(Reply.sse(STREAM[target]) if kind == "stream" else Reply.json(WHOLE[target]))
    after = f"{p}.after-{fault}.{client}.{kind}"
    err, seen = turn(client, kind, after)
    assert err is None, err
    assert seen[-1] in (CLEAN_END[client], "end_turn", "stop", "completed"), seen
    assert one_row(fault_env, after)["outcome"] == route
