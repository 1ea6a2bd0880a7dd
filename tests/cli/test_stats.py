"""`stats` (cli/stats.py), and `sessions` beside it: cost per group and in total, priced by the
library or by the rules file's own prices."""

from __future__ import annotations

from tokunseba.pricing import library_version
from tests.support.prices import written
from tests.support.prices import cc_session, cli


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
