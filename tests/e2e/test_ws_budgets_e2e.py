"""Spending caps over Codex's Responses WebSocket, through a real mitmdump with the addon and the
scripted WebSocket Responses server (tests/e2e/ws_upstream.py, reached as api.openai.com): a
session's turns are admitted as HTTPS turns are — under a cap that admits two, exactly two
messages reach the endpoint, the third gets the ``error`` event Codex reads as
``usage_limit_reached`` (status 429, ``resets_at``), and the ledger's charges, the turns and
``tokunseba budgets`` agree; a connection cut mid-turn keeps its hold as its charge."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
import websockets

from .conftest import BIN, ledger_settled
from .test_websocket_e2e import Client, _proxy, _rid, _turns, create, user
from .ws_upstream import WsScript, WsUpstream, text_events

pytestmark = [pytest.mark.e2e]

# each reported turn counts 40 tokens (30 in, 10 out); a turn in flight holds 50: after two
# turns 80 are spent and the third's hold would pass 100
USAGE = {"input_tokens": 30, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 10,
         "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 40}
RULES = """\
budgets:
  - {name: codex-tokens, scope: {client: openai-responses}, tokens: 100, hold: 50, window: day, tz: Europe/Berlin}
"""


def _rows(ledger: Path, sql: str) -> list[tuple]:
    con = sqlite3.connect(ledger)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_three_turns_under_a_cap_that_admits_two_the_third_gets_codexs_stop_now(tmp_path):
    with WsUpstream() as ws:
        ws.script(WsScript(text_events(["under ", "the cap"], usage=USAGE), delay=0.005))
        m = _proxy(tmp_path, ws, RULES)
        try:
            async def session():
                async with Client(m) as c:
                    warm = await c.send(create([], generate=False))
                    first = await c.send(create([user("one")], prev=_rid(warm)))
                    second = await c.send(create([user("two")], prev=_rid(first)))
                    third = await c.send(create([user("three")], prev=_rid(second)))
                    return first, second, third
            first, second, third = asyncio.run(session())
            ledger_settled(m.ledger)
        finally:
            m.stop()
    assert first[-1]["type"] == second[-1]["type"] == "response.completed"
    # exactly two turns reached the endpoint (beside the warm-up, which is no turn and holds nothing)
    turns_sent = [msg for msg in ws.messages if msg.get("type") == "response.create" and msg.get("generate") is not False]
    assert [msg["input"] for msg in turns_sent] == [[user("one")], [user("two")]]
    # the third: one error event, in the shape codex-api reads as its used-up plan
    (ev,) = third
    assert ev["type"] == "error" and ev["status"] == 429, ev
    err = ev["error"]
    assert err["type"] == "usage_limit_reached" and err["code"] == "usage_limit_reached"
    assert isinstance(err["resets_at"], int) and err["resets_at"] > time.time()
    assert "budget 'codex-tokens' reached: 80 tokens spent of 100" in err["message"], err["message"]
    assert "Europe/Berlin" in err["message"]
    assert ev["headers"]["x-should-retry"] == "false" and int(ev["headers"]["retry-after"]) >= 61
    turns = _turns(m.ledger)
    assert [(t["outcome"], t["status"]) for t in turns] == [("pass_through", 200), ("pass_through", 200),
                                                            ("refused", 429)], turns
    assert turns[2]["request_id"] in err["message"]
    # the ledger: two charges of the reported usage, nothing held, the refusal marked
    assert _rows(m.ledger, "SELECT spent, held FROM budget_windows") == [(80, 0)]
    charges = _rows(m.ledger, "SELECT request_id, kind, amount FROM budget_charges ORDER BY rowid")
    assert charges == [(turns[0]["request_id"], "reported", 40), (turns[1]["request_id"], "reported", 40)]
    settled = _rows(m.ledger, "SELECT request_id, data FROM events WHERE kind = 'budget_settled' ORDER BY rowid")
    assert [(r, json.loads(d)["charged"]) for r, d in settled] == [(turns[0]["request_id"], {"codex-tokens": 40}),
                                                                  (turns[1]["request_id"], {"codex-tokens": 40})]
    assert _rows(m.ledger, "SELECT request_id FROM events WHERE kind = 'budget_reached'") == [(turns[2]["request_id"],)]
    # and `tokunseba budgets` says the same
    r = subprocess.run([str(BIN / "tokunseba"), "budgets", "--ledger", str(m.ledger), "--rules",
                        str(tmp_path / "rules.yaml"), "--json"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    (cap,) = json.loads(r.stdout)["budgets"]
    assert (cap["name"], cap["spent"], cap["held"], cap["limit"], cap["used"]) == ("codex-tokens", 80, 0, 100, 0.8), cap


def test_a_connection_cut_mid_turn_keeps_its_hold_as_its_charge(tmp_path):
    with WsUpstream() as ws:
        ws.script(WsScript(text_events(["cut ", "before ", "its usage"], usage=USAGE), delay=0.01, cut_after=5))
        m = _proxy(tmp_path, ws, RULES)
        try:
            async def session():
                async with Client(m) as c:
                    with pytest.raises((websockets.ConnectionClosed, TimeoutError)):
                        await c.send(create([user("one")]))
            asyncio.run(session())
            ledger_settled(m.ledger)
        finally:
            m.stop()
    (turn,) = _turns(m.ledger)
    assert turn["outcome"] in ("interrupted", "error"), turn
    assert _rows(m.ledger, "SELECT request_id, kind, amount FROM budget_charges") == [
        (turn["request_id"], "kept_hold", 50)]
    assert _rows(m.ledger, "SELECT spent, held FROM budget_windows") == [(50, 0)]
