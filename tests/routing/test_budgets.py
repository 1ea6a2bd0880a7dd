"""Issue 40's caps as the rules file says them (routing/budgets.py): ``budgets:`` read in fixed
point and checked with file and line, calendar windows in their time zone. The store, the caps,
a turn's charge and check's price warning are tested beside their modules in tests/budgets/."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from tokunseba.routing import load_rules_text, RulesError

from tests.support.budgets import BASE, budgets


def errors(text: str) -> list[str]:
    with pytest.raises(RulesError) as e:
        load_rules_text(BASE + text, "r.yaml")
    return e.value.errors


def test_a_budget_is_read_in_fixed_point_with_its_window_and_policy():
    (b,) = budgets("  - {name: b, scope: {endpoint: oai, model: 'gpt-*'}, shared: true, usd: 5.10, hold: 0.10,"
                   " window: week, tz: Europe/Berlin, warn_at: 0.8, on_limit: reroute}\n")
    assert (b.limit, b.hold, b.shared, b.warn_at, str(b.on_limit)) == (5_100_000, 100_000, True, 0.8, "reroute")
    assert b.scope == {"endpoint": ("oai",), "model": ("gpt-*",)}
    assert b.matches({"endpoint": "oai", "model": "gpt-paid"}) and not b.matches({"endpoint": "oai", "model": "x"})
    assert b.amount(b.limit) == "$5.10" and b.window.text() == "week (Europe/Berlin)"
    (t,) = budgets("  - {name: t, tokens: 1000, hold: 10, window: 5h}\n")
    assert (t.limit, t.window.kind, t.window.seconds, t.amount(7)) == (1000, "rolling", 18000, "7 tokens")


def test_every_mistake_is_said_with_its_line():
    got = errors("  - {name: a, scope: {endpint: oai}, usd: 1, hold: 0.1, window: day}\n"
                 "  - {name: b, usd: 1.0000001, hold: 0.1, window: 3x}\n"
                 "  - {name: c, usd: 1, window: day, tz: Mars/Olympus}\n"
                 "  - {name: d, usd: 1, hold: 2, window: day, on_limit: maybe}\n"
                 "  - {name: e, scope: {endpoint: nowhere}, tokens: 10, hold: 1, window: day}\n")
    text = "\n".join(got)
    assert "r.yaml:6: budget 'a': scope: unknown key 'endpint' (expected one of: endpoint, route, client, model, " \
           "session, agent)" in text
    assert "r.yaml:7: budget 'b': usd: 1.0000001 has more digits than a micro-dollar" in text
    assert "r.yaml:7: budget 'b': window must be day, week, month or a rolling length like 5h, 30m, 2d; got '3x'" in text
    assert "r.yaml:8: budget 'c' has no 'hold'" in text and "r.yaml:8: budget 'c': tz 'Mars/Olympus' is not a time zone" in text
    assert "r.yaml:9: budget 'd': hold 2000000 is more than the limit 1000000" in text
    assert "r.yaml:9: budget 'd': on_limit must be one of: refuse, reroute, warn; got 'maybe'" in text
    assert "r.yaml:10: budget 'e': scope.endpoint: unknown endpoint 'nowhere'" in text


def test_calendar_windows_in_their_time_zone():
    (day,) = budgets("  - {name: d, usd: 1, hold: 0.1, window: day, tz: Europe/Berlin}\n")
    berlin = ZoneInfo("Europe/Berlin")
    now = datetime(2026, 3, 29, 12, 0, tzinfo=berlin).timestamp()  # a DST day: 23 hours
    start, end = day.window.bounds(now)
    assert datetime.fromtimestamp(start, berlin).isoformat() == "2026-03-29T00:00:00+01:00"
    assert datetime.fromtimestamp(end, berlin).isoformat() == "2026-03-30T00:00:00+02:00" and end - start == 23 * 3600
    (week,) = budgets("  - {name: w, usd: 1, hold: 0.1, window: week, tz: UTC}\n")
    start, end = week.window.bounds(datetime(2026, 12, 10, 5, tzinfo=ZoneInfo("UTC")).timestamp())  # a Thursday
    assert datetime.fromtimestamp(start, ZoneInfo("UTC")).date().isoformat() == "2026-12-07" and end - start == 7 * 86400
    (month,) = budgets("  - {name: m, usd: 1, hold: 0.1, window: month}\n")
    start, end = month.window.bounds(datetime(2026, 12, 31, 23, tzinfo=ZoneInfo("UTC")).timestamp())
    assert datetime.fromtimestamp(end, ZoneInfo("UTC")).isoformat() == "2027-01-01T00:00:00+00:00"
