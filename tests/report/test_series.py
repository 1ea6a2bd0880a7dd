"""The report's figures from ledger rows (report/series.py): spend per calendar day and endpoint in
fixed point, a turn nobody prices counted apart (never as 0), a turn without usage likewise; local
versus providers by turns and tokens, unknown locality never guessed; each budget window's
cumulative use."""

from __future__ import annotations

from decimal import Decimal

from tokunseba.report.series import ReportInputs, budget_series, figures, where

DAY1 = 1_765_065_600.0  # 2025-12-07 00:00 UTC
PRICES = {"anthropic": Decimal("0.10"), "local": Decimal(0)}


def row(at, endpoint=None, host="api.anthropic.com", outcome="translated", status=200, inp=10, out=5, **kw):
    return {"started_at": at, "endpoint": endpoint, "host": host, "outcome": outcome, "status": status,
            "usage_input": inp, "usage_output": out, **kw}


def inputs(tz="UTC", local=("local",), known=("local", "gpu")):
    return ReportInputs(cost_of=lambda r: PRICES.get(where(r)) if where(r) != "api.openai.com" else None,
                        is_local=lambda name: (name in local) if name in known else None, tz=tz)


def test_where_a_turn_was_served():
    assert where({"endpoint": "local", "host": "h"}) == "local"
    assert where({"endpoint": None, "host": "api.anthropic.com"}) == "api.anthropic.com" and where({}) == "-"


def test_spend_per_day_and_endpoint_in_fixed_point():
    rows = [row(DAY1 + 3600, endpoint="anthropic"), row(DAY1 + 7200, endpoint="anthropic"),
            row(DAY1 + 86400 + 60, endpoint="anthropic"), row(DAY1 + 100, endpoint="local")]
    f = figures(rows, inputs())
    assert f.days == ["2025-12-07", "2025-12-08"]
    assert f.spend == {"anthropic": {"2025-12-07": Decimal("0.20"), "2025-12-08": Decimal("0.10")},
                       "local": {"2025-12-07": Decimal(0)}}
    assert f.total == Decimal("0.30") and isinstance(f.total, Decimal)
    assert (f.turns, f.served, f.priced) == (4, 4, 4) and f.local_places == {"local"}
    assert (f.first, f.last) == (DAY1 + 100, DAY1 + 86400 + 60)
    assert f.as_json()["spend"]["anthropic"]["2025-12-07"] == "0.20" and f.as_json()["total"] == "0.30"


def test_the_day_is_the_calendar_day_of_the_zone_given():
    f = figures([row(DAY1 + 3600, endpoint="anthropic")], inputs(tz="America/New_York"))
    assert f.days == ["2025-12-06"]  # 01:00 UTC is the evening before in New York


def test_unpriced_and_no_usage_turns_are_counted_apart_never_as_zero():
    rows = [row(DAY1, host="api.openai.com"),  # passed through to a provider nobody prices here
            row(DAY1, endpoint="anthropic", inp=None, out=None),  # no usage reported
            row(DAY1, endpoint="anthropic", outcome="refused", status=400),  # not served
            row(DAY1, endpoint="anthropic")]
    f = figures(rows, inputs())
    assert (f.turns, f.served, f.priced, f.unpriced, f.no_usage) == (4, 3, 1, 1, 1)
    assert f.total == Decimal("0.10") and "api.openai.com" not in f.spend


def test_local_versus_providers_with_unknown_locality_never_guessed():
    rows = [row(DAY1, endpoint="local", inp=100, out=20), row(DAY1, endpoint=None, inp=7, out=3),
            row(DAY1, endpoint="mystery", inp=1, out=1), row(DAY1, endpoint="gpu", inp=None, out=None)]
    f = figures(rows, inputs())
    assert f.turns_by_side == {"local": 1, "providers": 2, "unknown": 1}  # gpu: known, not loopback
    assert f.tokens_by_side == {"local": 120, "providers": 10, "unknown": 2}


def test_each_budget_windows_cumulative_use():
    charges = [{"budget": "five", "window_start": DAY1, "unit": "usd", "limit_amount": 5_000_000, "amount": 250_000,
                "ts": DAY1 + 10},
               {"budget": "five", "window_start": DAY1, "unit": "usd", "limit_amount": 5_000_000, "amount": 1_000_000,
                "ts": DAY1 + 20},
               {"budget": "toks", "window_start": DAY1, "unit": "tokens", "limit_amount": 1000, "amount": 300,
                "ts": DAY1 + 30}]
    five, toks = budget_series(charges)
    assert (five["name"], five["unit"], five["limit"]) == ("five", "usd", "5")
    assert five["points"] == [(DAY1 + 10, Decimal("0.25")), (DAY1 + 20, Decimal("1.25"))]
    assert (toks["limit"], toks["points"]) == ("1000", [(DAY1 + 30, Decimal(300))])
