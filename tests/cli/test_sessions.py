"""Who is talking in the ledger and the CLI: the 0005 migration (older ledgers stay readable,
their rows have no session), `sessions`, `log --session`, `stats --by ...` (usage as reported,
`--prices` cost), the session part of `explain`, `--json` for each, and one-line errors."""

from __future__ import annotations

import re
import sqlite3
from decimal import Decimal
from pathlib import Path

import pytest

from tokunseba import jsonc
from tokunseba.cli.main import main
from tokunseba.ledger import Ledger
from tokunseba.ledger.schema import MIGRATIONS, SESSION_COLUMNS
from tokunseba.routing.session_facts import Speaker

CC = "8ab4b227-2d59-4cfb-ae7b-07b54465d764"
FP = "fp-0123456789abcdef"
ANT = {"input_tokens": 100, "output_tokens": 10, "cache_read_input_tokens": 1000}
OAI = {"prompt_tokens": 500, "completion_tokens": 20, "total_tokens": 520}


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def turn(led: Ledger, rid: str, at: float, who: Speaker, *, rule=None, endpoint=None, usage=None, protocol=None,
         outcome="translated", status=200, client_protocol="anthropic", host="api.anthropic.com", model="m"):
    led.start_turn(rid, started_at=at, client_protocol=client_protocol, host=host, path="/v1/messages",
                   requested_model=model, stream=True)
    led.update_turn(rid, rule=rule, endpoint=endpoint, model_used=model, outcome=outcome, status=status,
                    **who.ledger_fields())
    if usage is not None:
        led.update_turn(rid, usage_reported=usage, usage_protocol=protocol)


def write_sessions(path: Path) -> None:
    """A Claude Code session (main, subagent, background title; one upstream error), a Gemini
    CLI fingerprint session, and one turn with no session known."""
    main_ = Speaker("claude-code", "2.1.197", CC, False, "header", "main", None, False)
    sub = Speaker("claude-code", "2.1.197", CC, False, "header", "subagent", "a52cbb60ec2510ca8", False)
    bg = Speaker("claude-code", "2.1.197", CC, False, "header", "main", None, True, "declares no tools")
    gem = Speaker("gemini-cli", "0.61.0", FP, True, "fingerprint")
    with Ledger(path) as led:
        turn(led, "tk-1", 1000.0, bg, rule="background-local", endpoint="local", usage=OAI, protocol="openai")
        turn(led, "tk-2", 1001.0, main_, rule="main-cloud", endpoint="cloud", usage=ANT, protocol="anthropic",
             outcome="retargeted")
        turn(led, "tk-3", 1002.0, sub, rule="subagents-local", endpoint="local", usage=OAI, protocol="openai")
        turn(led, "tk-4", 1003.0, main_, rule="main-cloud", endpoint="cloud", status=529, outcome="retargeted")
        turn(led, "tk-5", 1004.0, main_, rule="main-cloud", endpoint="cloud", usage=ANT, protocol="anthropic",
             outcome="retargeted")
        for i in range(3):
            turn(led, f"tk-g{i}", 1010.0 + i, gem, client_protocol="gemini", host="generativelanguage.googleapis.com",
                 outcome="pass_through", usage={"promptTokenCount": 7, "candidatesTokenCount": 3}, protocol="gemini")
        turn(led, "tk-none", 1020.0, Speaker(), outcome="pass_through")


@pytest.fixture
def ledger(tmp_path) -> Path:
    p = tmp_path / "ledger.db"
    write_sessions(p)
    return p


PRICES = """\
prices:
  cloud:*: {input: 3.0, output: 15.0, cache_read: 0.3}
  local:*: {input: 0, output: 0}
"""


def test_sessions_lists_each_session_with_its_agents_endpoints_usage_and_errors(capsys, ledger):
    rc, out, err = run(capsys, "sessions", "--ledger", str(ledger))
    assert rc == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["SESSION", "CLIENT", "FIRST", "LAST"]
    gem, cc = lines[1], lines[2]  # most recently active first
    assert gem.startswith(FP) and "gemini-cli 0.61.0" in gem and "gemini in 21 · out 9" in gem and "unknown 3" in gem
    assert cc.startswith(CC) and "claude-code 2.1.197" in cc
    assert "main 3, background 1, subagent 1" in cc and "cloud 3, local 2" in cc
    assert "anthropic in 200 · out 20 · cache read 2000 · 91% of input from cache; openai in 1000 · out 40" in cc
    assert lines[0].split()[-3:] == ["ERRORS", "REFUSED", "FAILOVERS"]  # this ledger records failover attempts
    assert re.search(r"\b5\b.*\b1\s+0\s+0$", cc)  # 5 turns … 1 error, 0 refused, 0 failovers
    assert lines[-1].startswith("fp-...: no session id sent by the client")
    assert "tk-none" not in out


def test_sessions_json_and_prices(capsys, ledger, tmp_path):
    prices = tmp_path / "prices.yaml"
    prices.write_text(PRICES)
    rc, out, _ = run(capsys, "sessions", "--ledger", str(ledger), "--json", "--prices", str(prices))
    assert rc == 0
    by = {s["session"]: s for s in jsonc.loads(out)}
    cc = by[CC]
    assert cc["agents"] == {"background": 1, "main": 3, "subagent": 1} and cc["subagents"] == ["a52cbb60ec2510ca8"]
    assert cc["routes"] == {"background-local": 1, "main-cloud": 3, "subagents-local": 1}
    assert (cc["turns"], cc["errors"], cc["fingerprint"], cc["client"]) == (5, 1, False, "claude-code 2.1.197")
    # 2 cloud turns: 100 in × 3 + 10 out × 15 + 1000 cache × 0.3 per million each; local free; the 529 reported none
    assert cc["cost"] == {"total": "0.00150", "turns_priced": 4, "turns_without_price": 0}  # exact, as a decimal string
    assert Decimal(cc["cost"]["total"]) == Decimal(2 * (100 * 3 + 10 * 15)) / 10**6 + 2 * 1000 * Decimal("0.3") / 10**6
    assert cc["turns_without_usage"] == 1
    assert by[FP]["fingerprint"] is True and by[FP]["cost"]["turns_without_price"] == 3
    rc, out, _ = run(capsys, "sessions", "--ledger", str(ledger), "--limit", "1", "--json")
    assert [s["session"] for s in jsonc.loads(out)] == [FP]


def test_stats_by_agent_session_client_route_endpoint(capsys, ledger, tmp_path):
    rc, out, _ = run(capsys, "stats", "--by", "agent", "--ledger", str(ledger), "--json")
    assert rc == 0
    rep = jsonc.loads(out)
    groups = {g["agent"]: g for g in rep["groups"]}
    assert {k: g["turns"] for k, g in groups.items()} == {"main": 3, "background": 1, "subagent": 1, None: 4}
    assert groups["main"]["errors"] == 1
    assert groups["main"]["usage"] == {"anthropic": {"turns": 2, "input": 200, "output": 20, "cache_read": 2000,
                                                     "cache_write": None, "reasoning": None}}
    rc, text, _ = run(capsys, "stats", "--by", "agent", "--ledger", str(ledger))
    assert rc == 0 and "AGENT" in text and "(unknown)" in text and "background" in text
    for key, want in (("session", {CC: 5, FP: 3, None: 1}), ("client", {"claude-code 2.1.197": 5,
                                                                        "gemini-cli 0.61.0": 3, None: 1}),
                      ("route", {"main-cloud": 3, "background-local": 1, "subagents-local": 1, None: 4}),
                      ("endpoint", {"cloud": 3, "local": 2, "generativelanguage.googleapis.com": 3,
                                    "api.anthropic.com": 1})):
        rc, out, _ = run(capsys, "stats", "--by", key, "--ledger", str(ledger), "--json")
        assert rc == 0 and {g[key]: g["turns"] for g in jsonc.loads(out)["groups"]} == want, key
    prices = tmp_path / "prices.yaml"
    prices.write_text(PRICES)
    rc, out, _ = run(capsys, "stats", "--by", "endpoint", "--prices", str(prices), "--ledger", str(ledger))
    assert rc == 0 and "COST" in out and "0.001500" in out
    # without --by, stats (and stats --prices) are what they were
    rc, out, _ = run(capsys, "stats", "--ledger", str(ledger))
    assert rc == 0 and "ROUTE" in out and "AGENT" not in out


def test_log_session_by_id_or_prefix(capsys, ledger):
    rc, out, _ = run(capsys, "log", "--session", CC, "--ledger", str(ledger))
    assert rc == 0
    lines = out.splitlines()
    assert lines[0] == f"session {CC}" and "AGENT" in lines[1]
    assert [ln.split()[2] for ln in lines[2:]] == ["tk-5", "tk-4", "tk-3", "tk-2", "tk-1"]
    assert "subagent" in lines[4] and "background" in lines[6]
    rc, out, _ = run(capsys, "log", "--session", "fp-0123", "--ledger", str(ledger), "--json")
    assert rc == 0 and [t["request_id"] for t in jsonc.loads(out)] == ["tk-g2", "tk-g1", "tk-g0"]
    assert jsonc.loads(out)[0]["session_fingerprint"] == 1
    rc, out, err = run(capsys, "log", "--session", "nope", "--ledger", str(ledger))
    assert rc == 1 and err.strip() == "error: no turn of session 'nope' recorded (tokunseba sessions lists them)"
    rc, _, err = run(capsys, "log", "--session", "", "--ledger", str(ledger))
    assert rc == 1 and err.strip() == "error: --session: empty session id"


def test_explain_lists_the_sessions_other_turns_around_it(capsys, ledger):
    rc, out, _ = run(capsys, "explain", "tk-3", "--ledger", str(ledger))
    assert rc == 0
    tail = out[out.index("\nwho"):].splitlines()[1:]
    assert tail[0] == (f"who          session {CC} · agent subagent a52cbb60ec2510ca8 · client claude-code 2.1.197")
    assert tail[1] == f"session      5 turns; around this one: tokunseba log --session {CC}"
    ids = [ln.split()[3] if ln.startswith("  ▶") else ln.split()[2] for ln in tail[2:]]
    assert ids == ["tk-1", "tk-2", "tk-3", "tk-4", "tk-5"]
    assert tail[4].startswith("  ▶ ") and "subagents-local → local" in tail[4]
    rc, out, _ = run(capsys, "explain", "tk-3", "--ledger", str(ledger), "--json")
    s = jsonc.loads(out)["session"]
    assert s["id"] == CC and s["turns"] == 5 and [t["request_id"] for t in s["around"]] == ["tk-1", "tk-2", "tk-3",
                                                                                          "tk-4", "tk-5"]
    rc, out, _ = run(capsys, "explain", "tk-none", "--ledger", str(ledger))
    assert rc == 0 and "\nwho" not in out


def test_an_older_ledger_stays_readable_and_its_rows_have_no_session(capsys, tmp_path, monkeypatch):
    path = tmp_path / "old.db"
    import tokunseba.ledger.schema as ledger_mod

    monkeypatch.setattr(ledger_mod, "MIGRATIONS", MIGRATIONS[:4])
    Ledger(path).close()  # the schema of 4 migrations; its row as that tokunseba wrote it (no newer column)
    with sqlite3.connect(path) as con:
        con.execute("INSERT INTO turns (request_id, started_at, client_protocol, host, path, requested_model, stream)"
                    " VALUES ('tk-old', 5.0, 'openai', 'api.openai.com', '/v1/x', 'gpt', 0)")
    monkeypatch.undo()
    # read-only (the CLI): nothing migrated, every command works
    for argv, want in ((["sessions"], "no sessions recorded yet"), (["stats", "--by", "agent"], "(unknown)"),
                       (["explain", "tk-old"], "tk-old"), (["log"], "tk-old")):
        rc, out, err = run(capsys, *argv, "--ledger", str(path))
        assert rc == 0 and want in out, (argv, out, err)
    rc, _, err = run(capsys, "log", "--session", "x", "--ledger", str(path))
    assert rc == 1 and "no turn of session 'x'" in err
    # a writer migrates; the old row has no session
    with Ledger(path) as led:
        assert "0005_turn_session" in led.schema()
        row = led.get_turn("tk-old")
    assert all(row[c] is None for c in SESSION_COLUMNS)
    cols = {r[1] for r in sqlite3.connect(path).execute("PRAGMA table_info(turns)")}
    assert set(SESSION_COLUMNS) <= cols


def test_bad_arguments_are_one_line_errors(capsys, ledger, tmp_path):
    for argv, msg in ((["sessions", "--limit", "0"], "error: --limit: expected a positive integer, got '0'"),
                      (["sessions", "--since", "soon"], "error: --since: expected a duration"),
                      (["sessions", "--prices", str(tmp_path / "none.yaml")], "no such price file")):
        rc, out, err = run(capsys, *argv, "--ledger", str(ledger))
        assert rc == 2 and err.startswith("error: ") and msg in err and err.count("\n") == 1, (argv, err)
    with pytest.raises(SystemExit) as e:
        main(["stats", "--by", "color"])
    assert e.value.code == 2
    assert "invalid choice: 'color'" in capsys.readouterr().err
    rc, out, err = run(capsys, "sessions", "--ledger", str(tmp_path / "missing.db"))
    assert rc == 0 and "no ledger at" in out


def test_junk_who_values_are_stored_escaped_and_bounded(capsys, tmp_path):
    from tokunseba.routing.session_facts import speaker

    who = speaker("anthropic", {"user-agent": "claude-cli/2.1.197", "x-claude-code-session-id": "\x1b[2J" + "z" * 10_000,
                                "x-claude-code-agent-id": "sk-ant-api03-" + "A" * 40}, {"tools": [{}]})
    path = tmp_path / "l.db"
    with Ledger(path) as led:
        turn(led, "tk-j", 1.0, who)
        row = led.get_turn("tk-j")
    assert row["session_id"].startswith("\\x1b[2Jzzz") and len(row["session_id"]) <= 128
    assert "AAAAAAAAAAAAAAAAAAAA" not in row["agent_id"]  # a key-like value is scrubbed like any other text
    rc, out, _ = run(capsys, "sessions", "--ledger", str(path))
    assert rc == 0 and "\x1b" not in out
