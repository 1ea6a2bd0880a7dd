"""The user's own price table (pricing/table.py): a rules file's ``prices:`` read with their lines,
and a mistake in it said by `check` and `run` with FILE:LINE."""

from __future__ import annotations

from decimal import Decimal

import pytest

from tokunseba.pricing import PricesError, rules_prices

from tests.support.prices import written


def test_a_rules_files_prices_are_read_with_their_lines(tmp_path):
    rules = tmp_path / "rules.yaml"
    rules.write_text("endpoints:\n  local: {protocol: openai, url: 'http://127.0.0.1:9/v1'}\nroutes: []\n"
                     "prices:\n  local:*: {input: 0.1}\n")
    (price,) = rules_prices(rules)
    assert price.where() == f"your table: {rules} line 5" and price.per_million == {"input": Decimal("0.1")}
    assert rules_prices(None) == [] and rules_prices(written(tmp_path / "none.yaml", "routes: []\n")) == []
    with pytest.raises(PricesError) as ei:
        rules_prices(written(tmp_path / "bad.yaml", "routes: []\nprices:\n  local: {input: 1}\n"))
    assert str(ei.value) == (f"{tmp_path / 'bad.yaml'}:3: prices: key 'local' must be ENDPOINT:MODEL_GLOB "
                             "(e.g. anthropic:claude-haiku-*)")


def test_check_says_a_price_mistake_in_the_rules_file(tmp_path):
    from tokunseba.cli.main import main

    bad = written(tmp_path / "bad.yaml", "routes: []\nprices:\n  local:*: {input: cheap}\n")
    assert main(["check", str(bad)]) == 1


def test_check_and_run_read_the_rules_files_prices(tmp_path, capsys):
    from tokunseba.cli.main import main

    ok = written(tmp_path / "ok.yaml", "routes: []\nprices:\n  local:*: {input: 0.05, output: 0.1}\n")
    assert main(["check", str(ok)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == ("prices: 1 of your own, over the price library's list prices "
                                                       "(first match wins: local:*)")
    bad = written(tmp_path / "bad.yaml", "routes: []\nprices:\n  local: {input: 1}\n")
    with pytest.raises(SystemExit) as ei:  # run stops before starting mitmdump, with the line
        main(["run", "--dry-run", "--rules", str(bad)])
    assert str(ei.value) == f"error: {bad}:3: prices: key 'local' must be ENDPOINT:MODEL_GLOB (e.g. anthropic:claude-haiku-*)"
