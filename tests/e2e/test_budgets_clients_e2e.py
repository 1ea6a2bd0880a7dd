"""Issue 40: the real clients against a reached spending cap. Claude Code, Codex and Gemini CLI,
each through a real mitmdump whose cap is already spent, with no retry setting of ours (their
own defaults): the proxy answers in each client's own "stop now" shape, so exactly one request
reaches the proxy (no retries), nothing reaches the endpoint, and the client exits within
seconds showing the budget's message (Codex shows its own used-up-plan text with the reset it
read from ``resets_at``)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from tokunseba.budgets import BudgetStore
from tokunseba.routing import load_rules

from .conftest import Mitmdump, ledger_settled, need_npm_tool
from .test_claude_code_e2e import run_claude
from .test_codex_e2e import codex_exec
from .test_gemini_e2e import run_gemini_cli
from tests.support.upstream import Reply, Upstream

pytestmark = [pytest.mark.e2e, pytest.mark.claudecode]

RULES = """\
endpoints:
  scripted: {{protocol: openai, url: "{oai}/v1", key_env: TK_TEST_OAI_KEY, max_tokens: 1024}}
routes:
  - name: all-scripted
    to: scripted
budgets:
  - name: team-cap
    scope: {{endpoint: scripted}}
    shared: true
    usd: 1.00
    hold: 0.10
    window: day
    tz: Europe/Berlin
"""
MESSAGE = "budget 'team-cap' reached: $1.00 spent of $1.00"


def spent_proxy(tmp_path: Path, up: Upstream) -> Mitmdump:
    """A proxy whose cap was spent before it started (the charges are in its ledger)."""
    work = tmp_path / "proxy"
    work.mkdir()
    rules = work / "rules.yaml"
    rules.write_text(RULES.format(oai=up.url))
    ledger = work / "ledger.db"
    (b,) = load_rules(rules).budgets.budgets
    store = BudgetStore(ledger, owner="test")
    now = time.time()
    (a,) = store.admit([(b, "team", True)], request_id="earlier", now=now)
    store.settle([a], {"team-cap": b.limit}, request_id="earlier", now=now)
    store.close()
    return Mitmdump(work, rules, env={"TK_TEST_OAI_KEY": "sk-endpoint"}, ledger=str(ledger))


def refused_turns(m: Mitmdump) -> list[tuple]:
    ledger_settled(Path(m.ledger), 30)
    con = sqlite3.connect(m.ledger)
    try:
        return con.execute("SELECT client_protocol, outcome, status FROM turns").fetchall()
    finally:
        con.close()


def test_claude_code_stops_at_once_on_a_reached_cap(tmp_path):
    need_npm_tool("claude", "Claude Code")
    with Upstream() as up:
        up.script(Reply.json({"error": "nothing should reach the endpoint"}, 500))
        m = spent_proxy(tmp_path, up)
        try:
            t0 = time.monotonic()
            home = tmp_path / "cc"
            home.mkdir()
            p = run_claude(m, home, "say hi", env_extra={"CLAUDE_CODE_MAX_RETRIES": "10"})  # its default-like retries
            took = time.monotonic() - t0
        finally:
            m.stop()
        assert up.requests == []
    turns = refused_turns(m)
    assert turns == [("anthropic", "refused", 429)], (turns, p.stdout[-1500:], p.stderr[-1500:])
    assert took < 30, took
    assert p.returncode != 0
    assert MESSAGE in p.stdout + p.stderr, (p.stdout[-2000:], p.stderr[-2000:])


def test_codex_stops_at_once_on_a_reached_cap(tmp_path):
    need_npm_tool("codex", "Codex")
    with Upstream() as up:
        m = spent_proxy(tmp_path, up)
        try:
            t0 = time.monotonic()
            p, _ = codex_exec(m, tmp_path, "say hi", "-c", "model=gpt-5.5")
            took = time.monotonic() - t0
        finally:
            m.stop()
        assert up.requests == []
    turns = refused_turns(m)
    assert turns == [("openai-responses", "refused", 429)], (turns, p.stdout[-1500:], p.stderr[-1500:])
    assert took < 30, took
    assert p.returncode != 0
    out = p.stdout + p.stderr
    # Codex's own words for usage_limit_reached, with the reset read from resets_at (its text, not ours)
    assert "hit your usage limit. Try again at" in out, out[-2000:]


def test_gemini_cli_stops_at_once_on_a_reached_cap(tmp_path):
    need_npm_tool("gemini", "Gemini CLI")
    with Upstream() as up:
        m = spent_proxy(tmp_path, up)
        try:
            t0 = time.monotonic()
            p = run_gemini_cli(m, tmp_path, "say hi", extra_settings={
                "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False}})  # its own retries
            took = time.monotonic() - t0
        finally:
            m.stop()
        assert up.requests == []
    turns = refused_turns(m)
    assert turns == [("gemini", "refused", 429)], (turns, p.stdout[-1500:], p.stderr[-1500:])
    assert took < 30, took
    assert p.returncode != 0
    assert MESSAGE in p.stdout + p.stderr, (p.stdout[-2000:], p.stderr[-2000:])
