"""`check` (cli/check.py), and `budgets` and `models` beside it, say the rules file's caps."""

from __future__ import annotations

import json
import time

from tokunseba.budgets import BudgetStore
from tokunseba.routing import load_rules_text

from tests.support.budgets import BASE


def test_check_budgets_and_models_say_the_caps(tmp_path, capsys, monkeypatch):
    from tokunseba.cli.main import main

    monkeypatch.delenv("TOKUNSEBA_RULES", raising=False)
    rules = tmp_path / "rules.yaml"
    rules.write_text('prices:\n  "oai:gpt-paid": {input: 1, output: 2}\n' + BASE +
                     "  - {name: five, scope: {endpoint: oai}, usd: 5.00, hold: 0.10, window: day, tz: Europe/Berlin,"
                     " warn_at: 0.8}\n")
    assert main(["check", str(rules)]) == 0
    out = capsys.readouterr().out
    assert "budgets: 1 cap; when the ledger cannot be reached, turns under a cap are served without a hold" in out
    assert "  five: $5.00 per day (Europe/Berlin) window, counted per proxy; endpoint oai; holds $0.10 per turn " \
           "in flight; on_limit: refuse, warns at 80%" in out
    assert "warning: budget" not in out  # gpt-paid at oai is priced by the file's own table
    ledger = tmp_path / "ledger.db"
    (b,) = load_rules_text(rules.read_text(), str(rules)).budgets.budgets
    store = BudgetStore(ledger, owner="t")
    now = time.time()
    (a,) = store.admit([(b, "proxy:me", True)], request_id="r", now=now)
    store.settle([a], {"five": 1_234_567}, request_id="r", now=now)
    store.admit([(b, "proxy:me", True)], request_id="s", now=now)  # one in flight
    store.close()
    assert main(["budgets", "--rules", str(rules), "--ledger", str(ledger)]) == 0
    out = capsys.readouterr().out
    assert "BUDGET" in out and "five" in out and "proxy:me" in out and "$1.234567" in out and "$0.10" in out
    assert "day (Europe/Berlin)" in out and "Europe/Berlin (in " in out
    assert main(["budgets", "--rules", str(rules), "--ledger", str(ledger), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["budgets"]
    assert (row["spent"], row["held"], row["limit"], row["spent_micros"], row["counted_for"]) == (
        "1.234567", "0.10", "5.00", 1_234_567, "proxy:me")
    assert main(["models", "--rules", str(rules), "--json"]) == 0
    eps = {e["name"]: e["budgets"] for e in json.loads(capsys.readouterr().out)["endpoints"]}
    assert eps["oai"] == ["five"] and eps["anthropic"] == []
