"""Spending caps over Codex's Responses WebSocket, through a real mitmdump with the addon and the
scripted WebSocket Responses server (tests/support/ws_upstream.py, reached as api.openai.com): a
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
from tests.support.ws_upstream import WsScript, WsUpstream, text_events

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


async def _three_turns(m) -> tuple[list[dict], list[dict], list[dict]]:
    """A warm-up (no turn), then three turns on one WebSocket, each continuing the last: their events."""
    async with Client(m) as c:
        warm = await c.send(create([], generate=False))
        first = await c.send(create([user("one")], prev=_rid(warm)))
        second = await c.send(create([user("two")], prev=_rid(first)))
        third = await c.send(create([user("three")], prev=_rid(second)))
        return first, second, third


def test_three_turns_under_a_cap_that_admits_two_the_third_gets_codexs_stop_now(tmp_path):
    with WsUpstream() as ws:
        ws.script(WsScript(text_events(["under ", "the cap"], usage=USAGE), delay=0.005))
        m = _proxy(tmp_path, ws, RULES)
        try:
            first, second, third = asyncio.run(_three_turns(m))
            ledger_settled(m.ledger)
        finally:
            m.stop()
    assert first[-1]["type"] == second[-1]["type"] == "response.completed"
    # exactly two turns reached the endpoint (beside the warm-up, which is no turn and holds nothing)
    turns_sent = [msg for msg in ws.messages
                  if msg.get("type") == "response.create" and msg.get("generate") is not False]
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


SPENT = """\
budgets:
  - {name: codex-team, scope: {client: openai-responses}, shared: true, tokens: 1000, hold: 100, window: day}
"""


@pytest.mark.claudecode
def test_the_real_codex_over_websocket_stops_at_once_on_a_reached_cap(tmp_path):
    """Codex's own retries (none of ours): its one turn message gets the error event, it shows its
    used-up-plan text with the reset read from ``resets_at``, and sends nothing more."""
    from tokunseba.budgets import BudgetStore
    from tokunseba.routing import load_rules_text

    from .test_codex_e2e import codex_exec, need_codex
    from .test_codex_websocket_e2e import PROVIDER, _log, _run
    need_codex()
    work = tmp_path / "proxy"
    work.mkdir()
    (b,) = load_rules_text(SPENT).budgets.budgets
    store = BudgetStore(work / "ledger.db", owner="test")  # the cap was spent before the proxy started
    now = time.time()
    (a,) = store.admit([(b, "team", True)], request_id="earlier", now=now)
    store.settle([a], {"codex-team": b.limit}, request_id="earlier", now=now)
    store.close()
    own_retries = tuple(x for i, x in enumerate(PROVIDER) if "max_retries" not in x
                        and not (x == "-c" and i + 1 < len(PROVIDER) and "max_retries" in PROVIDER[i + 1]))
    with WsUpstream() as ws:
        ws.script(WsScript(text_events(["never sent"])))
        run = _run(work, ws, SPENT)
        try:
            from types import SimpleNamespace
            proxy = SimpleNamespace(url=run.url, ca=run.conf / "mitmproxy-ca-cert.pem")
            t0 = time.monotonic()
            p, _ = codex_exec(proxy, tmp_path, "say hi", *own_retries, "-c", "model=gpt-5.5")  # type: ignore[arg-type]
            took = time.monotonic() - t0
            ledger_settled(run.ledger)
        finally:
            run.stop()
    out = p.stdout + p.stderr
    assert p.returncode != 0, out[-2000:]
    assert "hit your usage limit. Try again at" in out, out[-3000:]  # Codex's own words for usage_limit_reached
    assert took < 30, took
    assert ws.turns() == [], ws.messages  # nothing reached the endpoint
    assert all(method == "GET" for method, _ in ws.requests)  # no fallback POST
    turns = [t for t in _log(run) if t["client_protocol"] == "openai-responses"]
    assert [(t["outcome"], t["status"]) for t in turns] == [("refused", 429)], turns  # one message, not retried
    assert ws.upgrades and _rows(run.ledger, "SELECT request_id FROM events WHERE kind = 'websocket'") == [
        (turns[0]["request_id"],)]  # it came as a WebSocket message, not as an HTTPS fallback


def test_under_caps_counted_in_postgresql_the_same_three_turns_two_admitted_off_the_event_loop(tmp_path, pg_server):
    """The same cap, its ledger a team's shared PostgreSQL (a real server): each WebSocket turn's
    admission is a round trip, taken off the event loop (its message held, then sent on:
    proxy/ws_routed.py ``take``); exactly two messages reach the endpoint, the third gets Codex's
    stop-now, and `tokunseba budgets` on that ledger says 80 of 100 spent, nothing held."""
    from .test_quota_e2e import pg_turn_settled

    url = pg_server.url(db=pg_server.fresh_db())
    with WsUpstream() as ws:
        ws.script(WsScript(text_events(["under ", "the cap"], usage=USAGE), delay=0.005))
        m = _proxy(tmp_path, ws, RULES, ledger=url)
        try:
            first, second, third = asyncio.run(_three_turns(m))
            r = subprocess.run([str(BIN / "tokunseba"), "log", "--ledger", url, "--json", "--limit", "10"],
                               capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stderr
            for t in json.loads(r.stdout):
                pg_turn_settled(url, t["request_id"])
        finally:
            m.stop()
    assert first[-1]["type"] == second[-1]["type"] == "response.completed"
    assert "".join(e.get("delta", "") for e in first if e["type"] == "response.output_text.delta") == "under the cap"
    turns_sent = [msg for msg in ws.messages
                  if msg.get("type") == "response.create" and msg.get("generate") is not False]
    assert [msg["input"] for msg in turns_sent] == [[user("one")], [user("two")]]
    (ev,) = third
    assert ev["type"] == "error" and ev["status"] == 429 and ev["error"]["type"] == "usage_limit_reached", ev
    assert "budget 'codex-tokens' reached: 80 tokens spent of 100" in ev["error"]["message"]
    r = subprocess.run([str(BIN / "tokunseba"), "log", "--ledger", url, "--json", "--limit", "10"],
                       capture_output=True, text=True, timeout=60)
    turns = sorted(json.loads(r.stdout), key=lambda t: t["started_at"])
    assert [(t["outcome"], t["status"]) for t in turns] == [("pass_through", 200), ("pass_through", 200),
                                                            ("refused", 429)], turns
    r = subprocess.run([str(BIN / "tokunseba"), "budgets", "--ledger", url, "--rules", str(tmp_path / "rules.yaml"),
                        "--json"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    (cap,) = json.loads(r.stdout)["budgets"]
    assert (cap["name"], cap["spent"], cap["held"], cap["limit"]) == ("codex-tokens", 80, 0, 100), cap
