"""The report as one self-contained HTML page (report/page.py): plotly's JavaScript inlined once, so
opening the file fetches nothing; the title escaped; the facts line saying unpriced turns apart;
a budget chart only when there are budgets."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest

from tokunseba.report.page import render
from tokunseba.report.series import Figures

pytest.importorskip("plotly")


def figures(**kw) -> Figures:
    base = dict(days=["2025-12-07"], spend={"anthropic": {"2025-12-07": Decimal("0.25")}}, turns=3, served=3,
                priced=2, unpriced=1, total=Decimal("0.25"), turns_by_side={"providers": 3},
                tokens_by_side={"providers": 40})
    return Figures(**{**base, **kw})


def test_the_page_fetches_nothing_and_says_its_facts():
    page = render(figures(), "spend <this week>")
    assert page.startswith("<!doctype html>") and page.endswith("</body></html>")
    assert "<title>spend &lt;this week&gt;</title>" in page and "<h1>spend &lt;this week&gt;</h1>" in page
    assert "3 turns, 3 served; priced 2, unpriced 1 (no price known: not counted as 0)" in page
    assert "total $0.2500" in page
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=", page, re.I) and "@import" not in page
    assert page.count("Plotly.newPlot") == 2  # spend, local share: no budgets


def test_a_budget_chart_when_there_are_budgets():
    b = {"name": "five", "unit": "usd", "window_start": 1_765_065_600.0, "limit": "5",
         "points": [(1_765_065_610.0, Decimal("0.25"))]}
    page = render(figures(budgets=[b]))
    assert page.count("Plotly.newPlot") == 3 and "five from 2025-12-07 00:00 UTC (limit $5)" in page
