"""Issue 40's spending caps, end to end: real mitmdump proxies, scripted upstreams, the caps
counted in the proxies' own ledger (SQLite; a real PostgreSQL for two proxies sharing a cap).

- 100 concurrent turns, each reporting usage that costs $0.10 (the rules' own ``prices:``),
  under a $5.00 cap holding $0.10: exactly 50 served and 50 answered with the client's own
  "stop now" (Chat: 429 ``insufficient_quota``, ``x-should-retry: false``) — on one proxy over
  SQLite, and across two proxies on one PostgreSQL ledger;
- a stream cut before its usage keeps its hold as its charge; a proxy killed with ``kill -9``
  mid-turn: its hold is swept by the next proxy on the ledger, charged at its declared amount;
- ``on_limit: reroute`` hands the turn to the next route (a scripted local endpoint), recorded
  and shown by ``explain``; ``on_limit: warn`` serves it with a console line and a ledger mark;
  the soft line (``warn_at``) says so too.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sqlite3
import ssl
import subprocess
import threading
import time
from pathlib import Path

import httpx
import psycopg
import pytest

from .conftest import BIN, Mitmdump, ledger_settled
from tests.support.upstream import Reply, Upstream

pytestmark = pytest.mark.e2e

KEYS = {"TK_TEST_OAI_KEY": "sk-endpoint-oai-0001"}
# $100 per million output tokens: 1,000 output tokens = $0.10
CHAT = {"id": "chatcmpl-b", "object": "chat.completion", "created": 1, "model": "gpt-paid",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 1000, "total_tokens": 1010}}
LOCAL = {**CHAT, "id": "chatcmpl-local", "model": "local-model"}

RULES = """\
prices:
  "oai:gpt-*": {{input: 0, output: 100}}
endpoints:
  oai: {{protocol: openai, url: "{oai}/v1", key_env: TK_TEST_OAI_KEY}}
  local: {{protocol: openai, url: "{local}/v1"}}
routes:
  - name: paid
    when: {{client: openai}}
    to: oai
  - name: local
    when: {{client: openai}}
    to: local
budgets:
{budgets}
"""

FIVE = """\
  - name: five-dollars
    scope: {endpoint: oai}
    shared: true
    usd: 5.00
    hold: 0.10
    window: day
    tz: Europe/Berlin
"""


@pytest.fixture(scope="module")
def ups():
    with Upstream() as oai, Upstream() as local:
        for u in (oai, local):
            u.server.socket.listen(512)
        yield {"oai": oai, "local": local}


def proxy(ups: dict, work: Path, budgets: str, *extra: str, ledger: str | None = None) -> Mitmdump:
    work.mkdir(exist_ok=True)
    rules = work / "rules.yaml"
    rules.write_text(RULES.format(oai=ups["oai"].url, local=ups["local"].url, budgets=budgets))
    return Mitmdump(work, rules, env=KEYS, ledger=ledger,
                    extra=["--set", "tokunseba_probe_timeout_ms=60000", *extra])


async def turns(p: Mitmdump, n: int, *, stream: bool = False) -> list[httpx.Response]:
    tls = ssl.create_default_context(cafile=str(p.ca))
    limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
    async with httpx.AsyncClient(proxy=p.url, verify=tls, limits=limits, timeout=120) as client:
        async def one(i: int) -> httpx.Response:
            r = await client.post("https://api.openai.com/v1/chat/completions",
                                  headers={"authorization": "Bearer sk-client"},
                                  json={"model": "gpt-paid", "stream": stream,
                                        "messages": [{"role": "user", "content": f"turn {i}"}]})
            await r.aread()
            return r
        return list(await asyncio.gather(*(one(i) for i in range(n))))


def sqlite_rows(path: Path, sql: str) -> list[tuple]:
    con = sqlite3.connect(path)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def cap_state(path: Path) -> tuple[int, int]:
    return sqlite_rows(path, "SELECT spent, held FROM budget_windows")[0]


def assert_stop_now(r: httpx.Response) -> None:
    assert r.status_code == 429, r.text
    assert r.headers["x-should-retry"] == "false"
    err = r.json()["error"]
    assert err["type"] == "insufficient_quota" and err["code"] == "insufficient_quota"
    # spent of limit (the turns still in flight hold the rest), and when it resets
    assert re.search(r"budget 'five-dollars' reached: \$\d\.\d\d spent of \$5\.00", err["message"]), err["message"]
    assert "Europe/Berlin" in err["message"] and "resets at" in err["message"]


def test_100_concurrent_turns_under_a_5_dollar_cap_exactly_50_served_on_sqlite(ups, tmp_path):
    ups["oai"].script(Reply.json(CHAT))
    p = proxy(ups, tmp_path / "p", FIVE)
    try:
        got = asyncio.run(turns(p, 100))
        ledger_settled(p.ledger, 30)
    finally:
        p.stop()
    served = [r for r in got if r.status_code == 200]
    refused = [r for r in got if r.status_code != 200]
    assert (len(served), len(refused)) == (50, 50), [r.status_code for r in got]
    for r in refused:
        assert_stop_now(r)
    assert len(ups["oai"].requests) == 50  # the refused ones never left
    assert cap_state(p.ledger) == (5_000_000, 0)  # $5.00 spent exactly, nothing held
    charges = sqlite_rows(p.ledger, "SELECT kind, amount, count(*) FROM budget_charges GROUP BY kind, amount")
    assert charges == [("reported", 100_000, 50)]
    outcomes = dict(sqlite_rows(p.ledger, "SELECT outcome, count(*) FROM turns GROUP BY outcome"))
    assert outcomes == {"retargeted": 50, "refused": 50}
    reached = sqlite_rows(p.ledger, "SELECT count(*) FROM events WHERE kind = 'budget_reached'")[0][0]
    assert reached == 50
    assert "budgets: 1 cap (five-dollars (shared))" in p.log()
    r = subprocess.run([str(BIN / "tokunseba"), "budgets", "--ledger", str(p.ledger), "--rules",
                        str(tmp_path / "p" / "rules.yaml"), "--json"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    caps = json.loads(r.stdout)["budgets"]
    assert [(c["name"], c["spent"], c["held"], c["limit"]) for c in caps] == [("five-dollars", "5.00", "0.00", "5.00")]


def test_two_proxies_on_one_postgresql_ledger_share_the_cap(pg_server, ups, tmp_path):
    ups["oai"].script(Reply.json(CHAT))
    url = pg_server.url(db=pg_server.fresh_db())
    a = proxy(ups, tmp_path / "a", FIVE, "--set", "tokunseba_instance=a", ledger=url)
    b = proxy(ups, tmp_path / "b", FIVE, "--set", "tokunseba_instance=b", ledger=url)
    try:
        async def both():
            return await asyncio.gather(turns(a, 50), turns(b, 50))
        got_a, got_b = asyncio.run(both())
    finally:
        a.stop()
        b.stop()
    got = got_a + got_b
    served = [r for r in got if r.status_code == 200]
    assert len(served) == 50, sorted(r.status_code for r in got)
    for r in got:
        if r.status_code != 200:
            assert_stop_now(r)
    assert len(ups["oai"].requests) == 50
    with psycopg.connect(url) as c:
        assert c.execute("SELECT scope_key, spent, held FROM budget_windows").fetchall() == [("team", 5_000_000, 0)]
        assert c.execute("SELECT count(*), sum(amount) FROM budget_charges").fetchone() == (50, 5_000_000)
        assert c.execute("SELECT count(*) FROM budget_holds").fetchone() == (0,)


ONE = """\
  - name: one-turn
    scope: {{endpoint: oai}}
    usd: 0.10
    hold: 0.10
    window: 5h
    on_limit: {on_limit}
    warn_at: 0.5
"""


def test_a_stream_cut_before_its_usage_keeps_its_hold(ups, tmp_path):
    head = b'data: {"id":"c","object":"chat.completion.chunk","model":"gpt-paid","choices":[{"index":0,"delta":{"content":"ok"}}]}\n\n'
    ups["oai"].script(Reply.sse([head, head, head], delay=0.05, die_after=2))
    p = proxy(ups, tmp_path / "p", FIVE)
    try:
        (r,) = asyncio.run(turns(p, 1, stream=True))
        ledger_settled(p.ledger, 30)
    finally:
        p.stop()
    assert r.status_code == 200
    assert cap_state(p.ledger) == (100_000, 0)  # the declared hold, kept as the charge
    assert sqlite_rows(p.ledger, "SELECT kind, amount FROM budget_charges") == [("kept_hold", 100_000)]


def test_a_proxy_killed_mid_turn_has_its_hold_swept_by_the_next(ups, tmp_path):
    chunk = b'data: {"id":"c","object":"chat.completion.chunk","model":"gpt-paid","choices":[{"index":0,"delta":{"content":"."}}]}\n\n'
    ups["oai"].script(Reply.sse([chunk] * 40, delay=0.25))
    ledger = tmp_path / "shared.db"
    p = proxy(ups, tmp_path / "p", FIVE, "--set", "tokunseba_budget_lease_s=1", ledger=str(ledger))
    done = threading.Event()

    def client() -> None:
        try:
            asyncio.run(turns(p, 1, stream=True))
        except Exception:
            pass
        done.set()

    threading.Thread(target=client, daemon=True).start()
    deadline = time.monotonic() + 20
    while not ups["oai"].requests or not ups["oai"].requests[-1].piece_times:
        assert time.monotonic() < deadline, "the turn never reached the upstream"
        time.sleep(0.05)
    assert cap_state(ledger) == (0, 100_000)  # held while in flight
    os.kill(p.proc.pid, signal.SIGKILL)
    p.proc.wait(10)
    done.wait(20)
    q = proxy(ups, tmp_path / "q", FIVE, "--set", "tokunseba_budget_lease_s=1", ledger=str(ledger))
    try:
        deadline = time.monotonic() + 20
        while cap_state(ledger) != (100_000, 0):
            assert time.monotonic() < deadline, cap_state(ledger)
            time.sleep(0.1)
    finally:
        q.stop()
    assert sqlite_rows(ledger, "SELECT kind, amount FROM budget_charges") == [("swept", 100_000)]
    assert sqlite_rows(ledger, "SELECT count(*) FROM budget_holds") == [(0,)]


def test_reroute_hands_the_turn_to_the_local_endpoint_recorded(ups, tmp_path):
    ups["oai"].script(Reply.json(CHAT))
    ups["local"].script(Reply.json(LOCAL))
    p = proxy(ups, tmp_path / "p", ONE.format(on_limit="reroute"))
    try:
        first = asyncio.run(turns(p, 1))[0]
        second = asyncio.run(turns(p, 1))[0]
        ledger_settled(p.ledger, 30)
    finally:
        p.stop()
    assert first.status_code == 200 and first.json()["id"] == "chatcmpl-b"
    assert second.status_code == 200 and second.json()["id"] == "chatcmpl-local"
    assert len(ups["oai"].requests) == 1 and len(ups["local"].requests) == 1
    rid = second.headers["x-tokunseba-request-id"]
    (rule, endpoint), = sqlite_rows(p.ledger, f"SELECT rule, endpoint FROM turns WHERE request_id = '{rid}'")
    assert (rule, endpoint) == ("local", "local")
    ev = sqlite_rows(p.ledger, f"SELECT data FROM events WHERE request_id = '{rid}' AND kind = 'budget_rerouted'")
    assert json.loads(ev[0][0])["from_route"] == "paid" and json.loads(ev[0][0])["to_route"] == "local"
    r = subprocess.run([str(BIN / "tokunseba"), "explain", rid, "--ledger", str(p.ledger)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "rerouted by budget one-turn" in r.stdout, r.stdout
    assert "rerouted by budget one-turn ($0.10 spent of $0.10)" in p.log()


def test_warn_serves_past_the_cap_with_a_line_and_a_mark_and_the_soft_line(ups, tmp_path):
    ups["oai"].script(Reply.json(CHAT))
    p = proxy(ups, tmp_path / "p", ONE.format(on_limit="warn"))
    try:
        first = asyncio.run(turns(p, 1))[0]
        second = asyncio.run(turns(p, 1))[0]
        ledger_settled(p.ledger, 30)
    finally:
        p.stop()
    assert first.status_code == 200 and second.status_code == 200
    log = p.log()
    assert "budget 'one-turn' at 100%: $0.10 spent and held of $0.10" in log  # the soft line (warn_at 0.5)
    assert "budget 'one-turn' passed: $0.20 spent and held of $0.10" in log and "on_limit: warn: served" in log
    marks = [k for (k,) in sqlite_rows(p.ledger, "SELECT kind FROM events WHERE kind LIKE 'budget_%' ORDER BY id")]
    assert marks.count("budget_warning") == 1 and marks.count("budget_passed") == 1
    assert cap_state(p.ledger) == (200_000, 0)


def test_an_error_reply_that_reported_no_usage_gives_its_hold_back(ups, tmp_path):
    ups["oai"].script(Reply.json({"error": {"message": "bad request", "type": "invalid_request_error"}}, 400))
    p = proxy(ups, tmp_path / "p", FIVE)
    try:
        (r,) = asyncio.run(turns(p, 1))
        ledger_settled(p.ledger, 30)
    finally:
        p.stop()
    assert r.status_code == 400
    assert cap_state(p.ledger) == (0, 0)  # nothing generated, nothing charged
    (data,) = sqlite_rows(p.ledger, "SELECT data FROM events WHERE kind = 'budget_settled'")
    assert json.loads(data[0]) == {"released": ["five-dollars"], "why": "an error reply (400) that reported no usage"}
