"""`tokunseba report` (cli/report.py, tokunseba/report/): the figures from a ledger the test
writes through the proxy's own interface — spend per day and endpoint from reported usage and a
price table, unpriced turns apart, local versus providers from the rules' loopback URLs — and the
page itself, self-contained (no URL it would fetch) and drawn, checked in headless Chromium."""

from __future__ import annotations

import json
import re
import time
from decimal import Decimal
from pathlib import Path

import pytest

from tokunseba.cli.main import main
from tokunseba.ledger import Ledger

DAY = 86400.0
RULES = """\
endpoints:
  local:
    protocol: openai
    url: http://127.0.0.1:28431/v1
  cloud:
    protocol: anthropic
    url: https://api.anthropic.com/v1
routes:
  - name: easy
    when: {model: "*haiku*"}
    to: local
"""
PRICES = """\
prices:
  cloud:claude-*: {input: 3.0, output: 15.0}
  anthropic:claude-*: {input: 3.0, output: 15.0}
"""


def _turn(led: Ledger, rid: str, t: float, *, endpoint: str | None, model: str, usage: dict | None,
          protocol: str, outcome: str = "translated", status: int = 200) -> None:
    led.start_turn(rid, started_at=t, client_protocol="anthropic", host="api.anthropic.com", path="/v1/messages",
                   requested_model=model, stream=True)
    led.update_turn(rid, rule="easy" if endpoint == "local" else None, endpoint=endpoint,
                    target_protocol="openai" if endpoint == "local" else None, model_used=model, outcome=outcome,
                    trace=[])
    led.update_turn(rid, status=status, latency_ms=100.0, ttfb_ms=10.0, usage_protocol=protocol, usage_reported=usage)


@pytest.fixture()
def ledger(tmp_path) -> Path:
    path = tmp_path / "ledger.db"
    led = Ledger(path)
    day0 = (time.time() // DAY - 2) * DAY + 3600  # 01:00 UTC two days ago
    # day 0: one provider turn, 1M input + 100k output at $3 / $15 = $4.50; one local turn (free)
    _turn(led, "tk-p1", day0, endpoint=None, model="claude-opus-4-8", protocol="anthropic",
          usage={"input_tokens": 1_000_000, "output_tokens": 100_000}, outcome="pass_through")
    _turn(led, "tk-l1", day0 + 60, endpoint="local", model="gemma-3-270m", protocol="openai",
          usage={"prompt_tokens": 500, "completion_tokens": 20, "total_tokens": 520})
    # day 1: a provider turn of 10k in / 1k out = $0.045; a turn of a model nobody prices; one with no usage
    _turn(led, "tk-p2", day0 + DAY, endpoint=None, model="claude-sonnet-5", protocol="anthropic",
          usage={"input_tokens": 10_000, "output_tokens": 1_000}, outcome="pass_through")
    _turn(led, "tk-u1", day0 + DAY + 60, endpoint=None, model="mystery-1", protocol="anthropic",
          usage={"input_tokens": 10, "output_tokens": 1}, outcome="pass_through")
    _turn(led, "tk-n1", day0 + DAY + 120, endpoint="local", model="gemma-3-270m", protocol="openai", usage=None)
    # an error is not served: never counted
    _turn(led, "tk-e1", day0 + DAY + 180, endpoint=None, model="claude-opus-4-8", protocol="anthropic",
          usage=None, outcome="pass_through", status=529)
    led.close()
    return path


def _files(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "rules.yaml").write_text(RULES)
    (tmp_path / "prices.yaml").write_text(PRICES)
    return tmp_path / "rules.yaml", tmp_path / "prices.yaml"


def test_report_figures_spend_per_day_unpriced_apart_and_local_share(ledger, tmp_path, capsys):
    rules, prices = _files(tmp_path)
    assert main(["report", "--ledger", str(ledger), "--rules", str(rules), "--prices", str(prices), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["turns"] == 6 and got["served"] == 5
    assert (got["priced"], got["unpriced"], got["no_usage"]) == (3, 1, 1)
    assert Decimal(got["total"]) == Decimal("4.545")
    spend = {w: {d: Decimal(v) for d, v in by.items()} for w, by in got["spend"].items()}
    d0, d1 = got["days"]
    assert spend["api.anthropic.com"] == {d0: Decimal("4.5"), d1: Decimal("0.045")}
    assert spend["local"] == {d0: Decimal(0)}
    assert got["turns_by_side"] == {"local": 2, "providers": 3} and got["local_places"] == ["local"]
    assert got["tokens_by_side"] == {"local": 520, "providers": 1_000_000 + 100_000 + 11_000 + 11}


def test_report_without_rules_says_locality_unknown_not_local(ledger, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("TOKUNSEBA_RULES", raising=False)
    assert main(["report", "--ledger", str(ledger), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["turns_by_side"] == {"providers": 3, "unknown": 2}


def test_report_bad_input_is_one_line_not_a_traceback(ledger, tmp_path, capsys):
    assert main(["report", "--ledger", str(ledger), "--tz", "Mars/Olympus"]) == 2
    assert capsys.readouterr().err.strip() == "error: --tz: unknown time zone 'Mars/Olympus' (e.g. UTC, Europe/Berlin)"
    assert main(["report", "--ledger", str(ledger), "--since", "yesterday-ish"]) == 2
    assert capsys.readouterr().err.startswith("error: --since:")


def test_report_page_is_self_contained(ledger, tmp_path, capsys):
    rules, prices = _files(tmp_path)
    out = tmp_path / "r.html"
    assert main(["report", "--ledger", str(ledger), "--rules", str(rules), "--prices", str(prices), "-o", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    page = out.read_text()
    # nothing to fetch: no script, stylesheet, image or font from anywhere
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=", page, re.I)
    assert "@import" not in page
    assert page.count("Plotly.newPlot") == 2  # spend, local share (no budgets in this ledger)


@pytest.mark.e2e
def test_report_page_draws_its_charts_in_headless_chromium(ledger, tmp_path):
    from tests.support.browser import Browser, need_chromium

    need_chromium()
    rules, prices = _files(tmp_path)
    out = tmp_path / "r.html"
    assert main(["report", "--ledger", str(ledger), "--rules", str(rules), "--prices", str(prices), "-o", str(out)]) == 0
    b = Browser(tmp_path / "profile", width=1200, height=1600)
    try:
        b.navigate(out.as_uri())
        b.wait_for("document.querySelectorAll('.main-svg').length >= 2", "the charts drawn")
        bars = b.js("document.querySelectorAll('.bars .point').length")
        slices = b.js("document.querySelectorAll('.slice').length")
        assert bars >= 3 and slices >= 4, (bars, slices)
        # what the page fetched once opened (the Resource Timing API lists every script, style,
        # image, font and XHR/fetch): nothing (plotly's geo maps would load topojson: none here)
        assert b.js("performance.getEntriesByType('resource').map(e => e.name)") == []
        shot = b.screenshot(tmp_path / "report.png")
        assert len(shot) > 10_000
    finally:
        b.close()


def test_report_draws_each_budget_window_from_the_charges_the_budget_store_wrote(tmp_path, capsys):
    """Holds admitted and settled by the budgets' own store (budgets/store.py) on the ledger
    file: the report's budget lines are each window's cumulative spend, in dollars."""
    from tokunseba.budgets import BudgetStore
    from tokunseba.routing import load_rules_text

    rules = load_rules_text("endpoints:\n  oai: {protocol: openai, url: 'http://127.0.0.1:9/v1'}\nbudgets:\n"
                            "  - {name: five, usd: 5.00, hold: 0.10, window: day}\n", "r.yaml")
    (five,) = rules.budgets.budgets
    path = tmp_path / "ledger.db"
    Ledger(path).close()  # the ledger's schema, budgets' tables included
    store = BudgetStore(path, owner="me")
    now = time.time()
    for i, cents in enumerate((7, 12)):
        held = store.admit([(five, "all", False)], request_id=f"r{i}", now=now + i)
        store.settle(held, {"five": cents * 10_000}, request_id=f"r{i}", now=now + i + 0.5)
    store.close()
    assert main(["report", "--ledger", str(path), "--json"]) == 0
    (line,) = json.loads(capsys.readouterr().out)["budgets"]
    assert line["name"] == "five" and line["unit"] == "usd" and Decimal(line["limit"]) == Decimal(5)
    assert [Decimal(v) for _, v in line["points"]] == [Decimal("0.07"), Decimal("0.19")]
    out = tmp_path / "r.html"
    assert main(["report", "--ledger", str(path), "-o", str(out)]) == 0
    assert out.read_text().count("Plotly.newPlot") == 3  # spend, local share, budgets
