"""`log` (cli/log.py): turns newest first, --limit and --json, one-line errors for a bad limit,
and each turn's cost in the table with its exact figure in --json."""

from __future__ import annotations

from decimal import Decimal

import pytest

from tokunseba import jsonc

from tests.support.prices import cc_session, cli, no_env_rules
from tests.support.read_story import expected, run, scrub, story


def test_log_shows_each_turns_cost_and_its_json_the_exact_figure(capsys, tmp_path, no_env_rules):
    from tokunseba import jsonc

    want = cc_session(tmp_path / "l.db")
    lines = cli(capsys, "log", "--ledger", str(tmp_path / "l.db")).splitlines()
    head = lines[0].split("  ")
    assert "COST" in [h.strip() for h in head if h.strip()]
    row = {ln.split()[2]: ln for ln in lines[1:]}
    assert f"  {want}" in row["tk-main"] and "  $0 local" in row["tk-bg"] and "  -  " in row["tk-529"]
    doc = {t["request_id"]: t["cost"] for t in jsonc.loads(cli(capsys, "log", "--json", "--ledger",
                                                                  str(tmp_path / "l.db")))}
    assert doc["tk-main"]["kind"] == "library" and f"${Decimal(doc['tk-main']['usd']).quantize(Decimal('0.000001'))}" == want
    assert doc["tk-bg"] == {"usd": "0", "kind": "local", "source": "local: 0", "parts": {}, "unpriced_tokens": {}}
    assert doc["tk-529"]["kind"] == "no_usage" and doc["tk-529"]["usd"] is None


# ---------------------------------------------------------------- log


def test_log_lists_turns_newest_first(capsys, story):
    rc, out, err = run(capsys, "log", "--ledger", str(story))
    assert (rc, err) == (0, "")
    assert scrub(out) == expected("""
        TIME                 REQUEST ID   CLIENT            MODEL                            ROUTE                         OUTCOME       STATUS  LATENCY  COST       ERROR
        YYYY-MM-DD hh:mm:ss  tk-8d9e0f1a  anthropic client  claude-opus-4-1                  no route → api.anthropic.com  error            529  0.30 s   -          upstream 529: Overloaded
        YYYY-MM-DD hh:mm:ss  tk-7c6d5e4f  anthropic client  claude-sonnet-4-5                to-gemini → gemini            refused          400  0.00 s   -          route to-gemini refused: no translator from anthropic to gemini
        YYYY-MM-DD hh:mm:ss  tk-0a9f8e7d  openai client     gpt-4o-mini                      no route → api.openai.com     pass-through     200  0.10 s   $0.000004
        YYYY-MM-DD hh:mm:ss  tk-0a1b2c3d  anthropic client  claude-haiku-4-5 → gemma-3-270m  easy-turns → local            translated       200  0.25 s   $0 local
        YYYY-MM-DD hh:mm:ss  tk-01dd01dd  anthropic client  claude-haiku-4-5                 no route → api.anthropic.com  pass-through     200  0.90 s   $0.000010
    """)


def test_log_limit_and_json(capsys, story):
    rc, out, _ = run(capsys, "log", "--ledger", str(story), "--limit", "2", "--json")
    assert rc == 0
    turns = jsonc.loads(out)
    assert [t["request_id"] for t in turns] == ["tk-8d9e0f1a", "tk-7c6d5e4f"]
    assert set(turns[0]) >= {"request_id", "started_at", "client_protocol", "host", "path", "requested_model",
                             "rule", "endpoint", "model_used", "outcome", "status", "latency_ms", "ttfb_ms",
                             "usage_reported", "usage_input", "error"}
    assert turns[0]["status"] == 529 and isinstance(turns[0]["started_at"], float)
    rc, out, _ = run(capsys, "log", "--ledger", str(story), "--limit", "1")
    assert len(out.splitlines()) == 3 and "tk-8d9e0f1a" in out
    assert out.splitlines()[-1] == "1 of 5 shown, newest first (--limit N shows more)"


@pytest.mark.parametrize("bad", ["0", "-3", "ten", "1.5"])
def test_log_bad_limit_is_one_line(capsys, story, bad):
    rc, out, err = run(capsys, "log", "--ledger", str(story), "--limit", bad)
    assert (rc, out) == (2, "")
    assert err == f"error: --limit: expected a positive integer, got {bad!r}\n"


def test_log_limit_up_to_the_largest_sqlite_integer(capsys, story):
    rc, out, err = run(capsys, "log", "--ledger", str(story), "--limit", str(2**63 - 1), "--json")
    assert (rc, err, len(jsonc.loads(out))) == (0, "", 5)
    for big in (str(2**63), "100000000000000000000000"):
        rc, out, err = run(capsys, "log", "--ledger", str(story), "--limit", big)
        assert (rc, out, err) == (2, "", f"error: --limit: {big} is too large (at most {2**63 - 1})\n")
