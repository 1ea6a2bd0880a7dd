"""A request passed on as the client sent it has its turn's start records and mitmweb's record
made once it has left (proxy/route.py ``apply``: ``FlowState.pending``): in the event loop's
next step, or by the flow's first later hook when that comes first; what is recorded and shown
is what it was when they were made in the request hook."""

from __future__ import annotations

import asyncio
import json

from mitmproxy import flow as mflow
from mitmproxy import http
from mitmproxy.test import tutils

from tokunseba.ledger import Ledger
from tokunseba.webview.view import RECORD_KEY

from tests.proxy.test_mitm import (ANT_BODY, CLIENT_KEY, addon, endpoint_port, make_flow,  # noqa: F401
                                   rules_file)

ANT_REPLY = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
             "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn", "stop_sequence": None,
             "usage": {"input_tokens": 3, "output_tokens": 2}}


def _rows(addon, tmp_path) -> tuple[list[dict], list[str]]:
    """The ledger's turns, and the kinds of the first one's events in order."""
    addon.ledger.flush(10)
    with Ledger(tmp_path / "ledger.db", readonly=True) as led:
        turns = led.turns()
        return turns, [e["kind"] for e in led.events(turns[0]["request_id"])] if turns else []


async def test_the_record_and_the_start_are_made_in_the_next_step(addon):
    f = make_flow({**ANT_BODY, "model": "opus-unrouted"})
    await addon.request(f)
    rid = f.metadata["tokunseba.request_id"]
    assert RECORD_KEY not in f.metadata and rid not in addon.unstarted  # the request goes on first
    assert f.request.headers["x-api-key"] == CLIENT_KEY  # untouched
    await asyncio.sleep(0)
    rec = f.metadata[RECORD_KEY]
    assert rec["rewritten"] is False and rec["url"] == "https://api.anthropic.com/v1/messages"
    assert CLIENT_KEY not in json.dumps(rec)  # redacted, as before
    assert rid in addon.unstarted  # its start waits for its end, as any turn's


async def test_a_reply_hook_before_the_next_step_makes_them_first(addon, tmp_path):
    f = make_flow({**ANT_BODY, "model": "opus-unrouted"})
    await addon.request(f)
    f.response = tutils.tresp(status_code=200, headers=http.Headers(content_type="application/json"), content=None)
    addon.responseheaders(f)  # no loop step in between
    assert f.metadata[RECORD_KEY]["rewritten"] is False
    f.response.content = json.dumps(ANT_REPLY).encode()
    addon.response(f)
    f.live = False
    for _ in range(3):
        await asyncio.sleep(0)
    [row], kinds = _rows(addon, tmp_path)
    assert row["request_id"] == f.metadata["tokunseba.request_id"]
    assert row["outcome"] == "pass_through" and row["status"] == 200 and row["requested_model"] == "opus-unrouted"
    assert kinds[-1] == "completed"


async def test_an_error_before_the_next_step_records_the_turn_in_order(addon, tmp_path):
    f = make_flow({**ANT_BODY, "model": "opus-unrouted"})
    await addon.request(f)
    f.error = mflow.Error("connection refused")
    addon.error(f)  # as mitmproxy would when the connect fails at once
    assert f.metadata[RECORD_KEY]["rewritten"] is False
    for _ in range(3):
        await asyncio.sleep(0)
    [row], kinds = _rows(addon, tmp_path)
    assert row["request_id"] == f.metadata["tokunseba.request_id"] and row["outcome"] == "error"
    assert row["requested_model"] == "opus-unrouted" and kinds[-1] == "completed"  # the start records came first
