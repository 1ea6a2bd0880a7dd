"""`log` (cli/log.py): each turn's cost in the table and its exact figure in --json."""

from __future__ import annotations

from decimal import Decimal
from tests.support.prices import cc_session, cli, no_env_rules


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
