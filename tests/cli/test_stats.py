"""`stats` (cli/stats.py): whole output, --since windows, --json structure, a bad --since in one
line; and with `sessions` beside it, cost per group and in total, priced by the library or by the
rules file's own prices."""

from __future__ import annotations

import time

import pytest

from tokunseba import jsonc
from tokunseba.pricing import library_version

from tests.support.prices import cc_session, cli, written
from tests.support.read_story import expected, run, scrub, story


def test_stats_and_sessions_show_cost_per_group_and_in_total(capsys, tmp_path, monkeypatch):
    want = cc_session(tmp_path / "l.db")
    monkeypatch.setenv("TOKUNSEBA_RULES", str(written(tmp_path / "r.yaml", "routes: []\n")))  # no prices: the library's
    out = cli(capsys, "stats", "--ledger", str(tmp_path / "l.db"))
    assert f"  turns served: {want}" in out
    (row,) = [ln for ln in out.splitlines() if ln.startswith("  anthropic  claude-sonnet-4-5-20250929")]
    assert want in row and f"genai-prices {library_version()}" in row
    (local,) = [ln for ln in out.splitlines() if ln.startswith("  local ")]
    assert "local: 0" in local
    out = cli(capsys, "sessions", "--ledger", str(tmp_path / "l.db"))
    head, row = out.splitlines()[:2]
    assert head.split()[-4:] == ["COST", "ERRORS", "REFUSED", "FAILOVERS"] and row.split()[-4] == want
    out = cli(capsys, "stats", "--by", "agent", "--ledger", str(tmp_path / "l.db"))
    (head, main_row) = [ln for ln in out.splitlines() if ln.startswith(("AGENT ", "main "))]
    assert head.split()[-2:] == ["COST", "FAILOVERS"] and main_row.split()[-2] == want
    # the rules file's own prices: override the library for every read command
    monkeypatch.setenv("TOKUNSEBA_RULES", str(written(tmp_path / "r.yaml", "prices:\n  anthropic:*: {input: 0}\n")))
    out = cli(capsys, "sessions", "--ledger", str(tmp_path / "l.db"))
    assert want not in out and "$0.000000" in out


# ---------------------------------------------------------------- stats


def test_stats_whole_output(capsys, story):
    rc, out, err = run(capsys, "stats", "--ledger", str(story))
    assert (rc, err) == (0, "")
    assert out == expected("""
        window: all time
        turns 5 = served 3 (translated 1  ·  retargeted 0  ·  pass-through 2) + errors 1 + refused 1

        ROUTE       TURNS  TRANSLATED  REFUSED  ERRORS  CANCELLED  SHARE SERVED  CACHE READ  CACHE WRITE  INPUT FROM CACHE
        (no route)      3           0        0       1          0         66.7%           -            -                 -
        easy-turns      1           1        0       0          0         33.3%         100            -             83.3%
        to-gemini       1           0        1       0          0          0.0%           -            -                 -

        ENDPOINT           TURNS  TRANSLATED  REFUSED  ERRORS  CANCELLED  SHARE SERVED  CACHE READ  CACHE WRITE  INPUT FROM CACHE
        api.anthropic.com      2           0        0       1          0         33.3%           -            -                 -
        api.openai.com         1           0        0       0          0         33.3%           -            -                 -
        local                  1           1        0       0          0         33.3%         100            -             83.3%
        (nothing sent)         1           0        1       0          0          0.0%           -            -                 -

        MODEL             TURNS  TRANSLATED  REFUSED  ERRORS  CANCELLED  SHARE SERVED  CACHE READ  CACHE WRITE  INPUT FROM CACHE
        claude-haiku-4-5      1           0        0       0          0         33.3%           -            -                 -
        claude-opus-4-1       1           0        0       1          0          0.0%           -            -                 -
        gemma-3-270m          1           1        0       0          0         33.3%         100            -             83.3%
        gpt-4o-mini           1           0        0       0          0         33.3%           -            -                 -
        (unknown)             1           0        1       0          0          0.0%           -            -                 -

        usage as reported (openai input includes cache reads; anthropic input does not):
          COUNTING   TURNS  INPUT  OUTPUT  CACHE READ  CACHE WRITE  REASONING  INPUT FROM CACHE
          openai         2    132      34         100            -          -             75.8%
          anthropic      1      5       1           -            -          -                 -
          turns that reported usage: 3; reported none: 2

        TIMING      N       P50       P95
        latency     5  250.0 ms  900.0 ms
        first byte  4  100.0 ms  900.0 ms

        cost of the usage each endpoint reported (USD; a model nobody prices is counted under NO PRICE, never estimated):
          ENDPOINT   MODEL              TURNS  PRICED       COST  NO USAGE  NO PRICE  UNPRICED TOKENS  PRICE
          anthropic  claude-haiku-4-5       1       1  $0.000010         0         0  -                genai-prices 0.2.3 (anthropic claude-haiku-4-5)
          openai     gpt-4o-mini            1       1  $0.000004         0         0  -                genai-prices 0.2.3 (openai gpt-4o-mini)
          anthropic  claude-opus-4-1        1       0          -         1         0  -                -
          gemini     claude-sonnet-4-5      1       0          -         1         0  -                -
          local      gemma-3-270m           1       1  $0.000000         0         0  -                local: 0
          turns served: $0.000014

        turns served away from the provider the client addressed: 1; with that provider's own usage (a shadow or replay to it): 0
    """.replace("genai-prices 0.2.3", f"genai-prices {library_version()}"))


def test_stats_since_a_window(capsys, story):
    rc, out, _ = run(capsys, "stats", "--ledger", str(story), "--since", "24h")
    assert rc == 0
    lines = scrub(out).splitlines()
    assert lines[:2] == ["window: since YYYY-MM-DD hh:mm:ss (24h)",
                         "turns 4 = served 2 (translated 1  ·  retargeted 0  ·  pass-through 1) + errors 1 + refused 1"]
    usage = lines[lines.index("usage as reported (openai input includes cache reads; anthropic input does not):"):]
    assert not any(u.startswith("  anthropic") for u in usage[:usage.index("  turns that reported usage: 2; reported none: 2")])  # the only anthropic-counted usage is ten days old
    assert "  turns that reported usage: 2; reported none: 2" in lines
    rc, out, _ = run(capsys, "stats", "--ledger", str(story), "--since", "2m")
    assert out.splitlines()[1] == "no turns in this window"


def test_stats_json_structure(capsys, story):
    rc, out, _ = run(capsys, "stats", "--ledger", str(story), "--since", "7d", "--json")
    assert rc == 0
    st = jsonc.loads(out)
    assert abs(st["since"] - (time.time() - 7 * 86400)) < 60
    assert {k: st[k] for k in ("turns", "translated", "refused", "errors", "pass_through", "served")} == {
        "turns": 4, "translated": 1, "refused": 1, "errors": 1, "pass_through": 1, "served": 2}  # errors are not served
    assert st["by_route"][0] == {"route": None, "turns": 2, "translated": 0, "capped": 0, "refused": 0, "errors": 1,
                                  "cancelled": 0,
                                  "served": 1, "share": 0.5, "cache_read": None, "cache_write": None,
                                  "cache_read_share": None}  # no cache read reported: absent, never 0
    assert st["usage"] == {"by_counting": {"openai": {"turns": 2, "input": 132, "output": 34, "cache_read": 100,
                                                      "cache_write": None, "reasoning": None,
                                                      "cache_read_share": 0.7576}},
                           "turns_reported": 2, "turns_none": 2}
    assert st["timings"]["ttfb_ms"] == {"n": 3, "p50": 100.0, "p95": 300.0}


@pytest.mark.parametrize("bad,why", [
    ("yesterday", "expected a duration (30m, 24h, 7d) or a date (2026-12-01, 2026-12-01T08:00), got 'yesterday'"),
    ("0h", "the duration must be positive, got '0h'"),
    ("24x", "expected a duration (30m, 24h, 7d) or a date (2026-12-01, 2026-12-01T08:00), got '24x'"),
    ("2026-13-01", "expected a duration (30m, 24h, 7d) or a date (2026-12-01, 2026-12-01T08:00), got '2026-13-01'"),
    ("99999999999d", "'99999999999d' is out of the range of dates this system can handle"),
    ("9" * 400 + "w", f"'{'9' * 400}w' is out of the range of dates this system can handle"),
])
def test_stats_bad_since_is_one_line(capsys, story, bad, why):
    rc, out, err = run(capsys, "stats", "--ledger", str(story), "--since", bad)
    assert (rc, out, err) == (2, "", f"error: --since: {why}\n")
