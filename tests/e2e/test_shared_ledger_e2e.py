"""Issue 21's shared ledger, end to end: real mitmdump proxies writing one PostgreSQL ledger
(a real server, tests/support/pg_server.py), read by the CLI on a read-only role.

- 4 proxies x 250 concurrent translated turns: 1,000 rows, 250 per instance, and `stats`
  totals equal to the sum of what the upstream reported;
- the database stopped for 20 s while turns go on, then started again: every turn the
  clients got is recorded exactly once (the spool drained in order), `stats` said a spool
  waited meanwhile, and the password shows nowhere.
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import subprocess
import threading
import time

import httpx
import psycopg
import pytest

from tests.support.pg_server import READER_PASSWORD, TK_PASSWORD

from .conftest import BIN, start_test_proxy
from .test_proxy_e2e import CLIENT_KEY
from tests.support.upstream import Reply, Upstream

pytestmark = pytest.mark.e2e

USAGE = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
CHAT = {"id": "chatcmpl-team", "object": "chat.completion", "created": 1, "model": "gpt-local",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": USAGE}


@pytest.fixture(scope="module")
def upstreams():
    """Scripted upstreams that take 1,000 connections at once (a listen backlog to match)."""
    with Upstream() as oai, Upstream() as ant, Upstream() as gem:
        for u in (oai, ant, gem):
            u.server.socket.listen(2048)
        yield {"oai": oai, "ant": ant, "gem": gem}


# 1,000 turns at once on a small machine: the endpoint's connect may take more than the
# default 1.5 s, which would mark it down (and send the turns elsewhere)
PATIENT = ("--set", "tokunseba_probe_timeout_ms=60000")


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "tokunseba"), *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PGPASSWORD": ""})


async def _turns(proxy, n: int, tag: str, at_once: int = 25) -> list[str]:
    """``n`` concurrent Anthropic Messages turns through the proxy (routed to the OpenAI-shaped
    upstream, translated), ``at_once`` in flight at a time; their request ids."""
    gate = asyncio.Semaphore(at_once)
    limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
    tls = ssl.create_default_context(cafile=str(proxy.ca))
    async with httpx.AsyncClient(proxy=proxy.url, verify=tls, limits=limits, timeout=120) as client:
        async def one(i: int) -> str:
            async with gate:
                r = await client.post("https://api.anthropic.com/v1/messages",
                                      headers={"x-api-key": CLIENT_KEY, "anthropic-version": "2023-06-01"},
                                      json={"model": "claude-team", "max_tokens": 5,
                                            "messages": [{"role": "user", "content": f"{tag} {i}"}]})
            assert r.status_code == 200, r.text
            return r.headers["x-tokunseba-request-id"]
        return list(await asyncio.gather(*(one(i) for i in range(n))))


def _wait_rows(url: str, expected: int, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with psycopg.connect(url) as c:
            try:
                n, open_ = c.execute("SELECT count(*), count(*) FILTER (WHERE outcome IS NULL) FROM turns").fetchone()
            except psycopg.errors.UndefinedTable:
                n, open_ = 0, 0
        if n >= expected and open_ == 0:
            return
        assert time.monotonic() < deadline, f"{n} rows, {open_} open, expected {expected}"
        time.sleep(0.2)


def test_four_proxies_250_concurrent_turns_each_into_one_database(pg_server, upstreams, tmp_path):
    db = pg_server.fresh_db()
    url = pg_server.url(db=db)
    upstreams["oai"].script(Reply.json(CHAT))
    proxies = [start_test_proxy(upstreams, tmp_path / f"p{i}", "--set", f"tokunseba_instance=proxy-{i}", *PATIENT,
                                ledger=url)
               for i in range(4) if (tmp_path / f"p{i}").mkdir() is None]
    try:
        async def all_turns() -> list[list[str]]:
            return list(await asyncio.gather(*(_turns(p, 250, f"p{i}", at_once=250) for i, p in enumerate(proxies))))

        ids = asyncio.run(all_turns())
        _wait_rows(url, 1000)
    finally:
        for p in proxies:
            p.stop()
    assert sum(len(set(x)) for x in ids) == 1000
    reader = pg_server.url("tk_reader", READER_PASSWORD, db)
    r = cli("stats", "--ledger", reader, "--json")
    assert r.returncode == 0, r.stderr
    st = json.loads(r.stdout)
    assert (st["turns"], st["translated"], st["errors"], st["unfinished"]) == (1000, 1000, 0, 0)
    assert st["usage"]["by_counting"]["openai"] == {"turns": 1000, "input": 11 * 1000, "output": 7 * 1000,
                                                    "cache_read": None, "cache_write": None, "reasoning": None,
                                                    "cache_read_share": None}  # no cache read reported (issue 32)
    assert sorted((g["instance"], g["turns"]) for g in st["by_instance"]) == [(f"proxy-{i}", 250) for i in range(4)]
    r = cli("stats", "--ledger", reader, "--by", "instance")
    assert r.returncode == 0 and "INSTANCE" in r.stdout and "proxy-3" in r.stdout and "ROUTE" not in r.stdout
    r = cli("log", "--ledger", reader, "--instance", "proxy-2", "--limit", "1000", "--json")
    logged = json.loads(r.stdout)
    assert sorted(t["request_id"] for t in logged) == sorted(ids[2])
    r = cli("explain", "--ledger", reader, ids[1][0])
    assert r.returncode == 0 and ids[1][0] in r.stdout
    for p in proxies:
        assert TK_PASSWORD not in p.log()


def test_the_database_away_for_20_s_loses_nothing_and_counts_nothing_twice(pg_server, upstreams, tmp_path):
    db = pg_server.fresh_db()
    url = pg_server.url(db=db)
    reader = pg_server.url("tk_reader", READER_PASSWORD, db)
    upstreams["oai"].script(Reply.json(CHAT))
    (tmp_path / "p").mkdir()
    proxy = start_test_proxy(upstreams, tmp_path / "p", *PATIENT, ledger=url)
    got: list[str] = []
    stop = threading.Event()

    def clients() -> None:
        while not stop.is_set():
            got.extend(asyncio.run(_turns(proxy, 5, "outage")))
            time.sleep(0.05)

    th = threading.Thread(target=clients)
    try:
        th.start()
        time.sleep(3)
        before = len(got)
        pg_server.stop()
        t_stop = time.monotonic()
        time.sleep(10)
        during = cli("stats", "--ledger", reader)  # the database is away: an error, and the spool said
        time.sleep(max(0.0, 20 - (time.monotonic() - t_stop)))
        in_outage = len(got) - before
        pg_server.start()
        time.sleep(3)
        stop.set()
        th.join(60)
        _wait_rows(url, len(got), timeout=60)
    finally:
        stop.set()
        if pg_server.proc is None:
            pg_server.start()
        proxy.stop()
    assert in_outage > 20, in_outage  # the clients were served while the database was away
    assert during.returncode == 1 and "wait in a local spool" in during.stderr, during.stderr
    with psycopg.connect(url) as c:
        rows = dict(c.execute("SELECT request_id, outcome FROM turns").fetchall())
        completed = c.execute("SELECT request_id, count(*) FROM events WHERE kind='completed' GROUP BY request_id"
                              ).fetchall()
    assert sorted(rows) == sorted(set(got)) and len(got) == len(set(got))
    assert set(rows.values()) == {"translated"}
    assert {n for _, n in completed} == {1} and len(completed) == len(got)  # each turn's end recorded once
    log = proxy.log()
    assert "is away" in log and "reachable again" in log
    assert TK_PASSWORD not in log
    r = cli("stats", "--ledger", reader, "--json")
    assert json.loads(r.stdout)["turns"] == len(got) and "spool" not in r.stderr
