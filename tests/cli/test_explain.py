"""`explain` (cli/explain.py): a turn's cost by part and the source of its price."""

from __future__ import annotations

from tokunseba.pricing import library_version
from tests.support.prices import written
from tests.support.prices import cc_session, cli, no_env_rules


def test_explain_names_the_price_source(capsys, tmp_path, no_env_rules):
    cc_session(tmp_path / "l.db")
    out = cli(capsys, "explain", "tk-main", "--ledger", str(tmp_path / "l.db"))
    (cost,) = [ln for ln in out.splitlines() if ln.startswith("cost ")]
    assert " = input $" in cost and " + cache read $" in cost and " + cache write $" in cost and " + output $" in cost
    assert f"price        genai-prices {library_version()} (anthropic claude-sonnet-4-5): $3/input MTok" in out
    prices = written(tmp_path / "prices.yaml", "prices:\n  anthropic:claude-sonnet-*: {input: 1, output: 1}\n")
    out = cli(capsys, "explain", "tk-main", "--ledger", str(tmp_path / "l.db"), "--prices", str(prices))
    assert f"price        your table: {prices} line 2" in out
    assert "not priced (no price in your row): cache read 23890, cache write 1536" in out
    out = cli(capsys, "explain", "tk-bg", "--ledger", str(tmp_path / "l.db"))
    assert "cost         $0\nprice        local: 0\n" in out
