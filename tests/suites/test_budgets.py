"""Issue 40's caps below the proxy: the rules file's ``budgets:`` read and checked with file and
line, windows, the store's atomic admission and exact settlement (SQLite, and a real
PostgreSQL), leases and the sweep, a window that resets during a turn, each protocol's
"stop now" answer, and check's price warning."""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from tokunseba import protocols
from tokunseba.budgets import BudgetStore, Caps, Spent, limit_message, price_warnings
from tokunseba.neutral.usage import Usage
from tokunseba.routing import RulesError, load_rules_text

BASE = """\
endpoints:
  oai: {protocol: openai, url: "https://oai.example/v1", model: gpt-paid}
routes:
  - {name: paid, when: {client: openai}, to: oai}
budgets:
"""


def budgets(text: str):
    return load_rules_text(BASE + text, "r.yaml").budgets.budgets


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


FIVE = "  - {name: five, usd: 5.00, hold: 0.10, window: day, shared: true}\n"


def _race(stores: list[BudgetStore], b, n: int = 100) -> int:
    """``n`` threads admit at once, spread over ``stores``: how many got a hold."""
    barrier, got = threading.Barrier(n), []

    def one(i: int) -> None:
        s = stores[i % len(stores)]
        barrier.wait()
        got.append(s.admit([(b, "team", True)], request_id=f"r{i}", now=time.time())[0].ok)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(got)


def test_100_concurrent_admissions_on_sqlite_connections_exactly_50_held(tmp_path):
    (b,) = budgets(FIVE)
    stores = [BudgetStore(tmp_path / "l.db", owner=f"p{i}") for i in range(4)]  # four connections, one file
    assert _race(stores, b) == 50
    (w,) = stores[0].windows()
    assert (w.spent, w.held, len(stores[0].holds())) == (0, 5_000_000, 50)


def test_100_concurrent_admissions_on_postgresql_exactly_50_held(pg_server):
    (b,) = budgets(FIVE)
    url = pg_server.url(db=pg_server.fresh_db())
    stores = [BudgetStore(url, owner=f"p{i}") for i in range(2)]
    assert _race(stores, b) == 50
    (w,) = stores[0].windows()
    assert (w.spent, w.held) == (0, 5_000_000)
    assert len(stores[0].holds()) == 50
    stores[1].sweep(time.time() + 10_000)  # every lease out: charged at the hold
    (w,) = stores[0].windows()
    assert (w.spent, w.held) == (5_000_000, 0)


def _caps(tmp_path, text: str, cost=lambda s: 100_000) -> Caps:
    rules = load_rules_text(BASE + text, "r.yaml")
    return Caps(rules.budgets, BudgetStore(tmp_path / "l.db", owner="me", lease_s=5), instance="me", cost=cost)


def test_settlement_is_the_reported_cost_or_the_kept_hold_and_a_swept_hold_is_not_charged_twice(tmp_path):
    caps = _caps(tmp_path, FIVE, cost=lambda s: None if s.usage is None else 42_000)
    now = time.time()
    usage = Usage("openai", {"prompt_tokens": 1, "completion_tokens": 2})
    a, b, c = (caps.admit({"endpoint": "oai"}, request_id=f"r{i}", now=now) for i in range(3))
    assert caps.settle(a, Spent("oai", "gpt-paid", None, usage, now), request_id="r0", now=now) == {"five": 42_000}
    assert caps.settle(b, Spent("oai", "gpt-paid", None, None, now), request_id="r1", now=now) == {"five": None}
    assert caps.store.sweep(now + 6) == 1  # c's lease ran out: charged its hold
    caps.settle(c, Spent("oai", "gpt-paid", None, usage, now), request_id="r2", now=now + 7)  # then it ended
    (w,) = caps.store.windows()
    assert (w.spent, w.held) == (42_000 + 100_000 + 42_000, 0)
    kinds = [(ch["request_id"], ch["kind"], ch["amount"]) for ch in caps.store.charges()]
    assert kinds == [("r0", "reported", 42_000), ("r1", "kept_hold", 100_000), ("r2", "swept", 100_000),
                     ("r2", "after_sweep", -58_000)]


def test_a_window_that_resets_during_a_long_turn_charges_the_window_it_started_in(tmp_path):
    caps = _caps(tmp_path, "  - {name: roll, usd: 1.00, hold: 0.50, window: 1h}\n")
    t0 = time.time()
    v = caps.admit({"endpoint": "oai"}, request_id="long", now=t0)
    later = t0 + 2 * 3600  # the window closed while the stream went on
    caps.settle(v, Spent("oai", "gpt-paid", None, None, t0), request_id="long", now=later)
    w2 = caps.admit({"endpoint": "oai"}, request_id="next", now=later)
    assert w2.refused is None and w2.held[0].window_start == later  # a fresh window
    rows = sorted(caps.store.windows(), key=lambda w: w.window_start)
    assert [(r.window_start, r.spent, r.held) for r in rows] == [(t0, 500_000, 0), (later, 0, 500_000)]


def test_warn_holds_past_the_cap_and_the_soft_line_says_so(tmp_path):
    caps = _caps(tmp_path, "  - {name: w, usd: 0.20, hold: 0.10, window: day, warn_at: 0.5, on_limit: warn}\n")
    now = time.time()
    v1 = caps.admit({}, request_id="a", now=now)
    v2 = caps.admit({}, request_id="b", now=now)
    v3 = caps.admit({}, request_id="c", now=now)
    assert v1.lines and "at 50%" in v1.lines[0] and [k for k, _ in v1.events] == ["budget_warning", "budget_held"]
    assert v3.refused is None and v3.held and "passed: $0.30 spent and held of $0.20" in v3.lines[0]
    assert not v2.stops and not v3.stops


def test_the_ledger_away_serves_or_refuses_as_the_rules_say(tmp_path):
    rules = load_rules_text("on_ledger_unavailable: refuse\n" + BASE + FIVE, "r.yaml")
    away = BudgetStore(f"{tmp_path}/no/such/dir/\0bad.db", owner="me")
    v = Caps(rules.budgets, away, instance="me", cost=lambda s: None).admit({}, request_id="r", now=time.time())
    assert v.refuse_away and v.stops and "on_ledger_unavailable: refuse" in v.lines[0]
    rules = load_rules_text(BASE + FIVE, "r.yaml")
    v = Caps(rules.budgets, away, instance="me", cost=lambda s: None).admit({}, request_id="r", now=time.time())
    assert v.away and not v.stops and "served without a hold" in v.lines[0]


@pytest.mark.parametrize("protocol, check", [
    ("anthropic", lambda st, h, b: int(h["retry-after"]) >= 61 and h["x-should-retry"] == "false"
     and b["type"] == "error" and b["error"]["type"] == "rate_limit_error"),
    ("openai", lambda st, h, b: h["x-should-retry"] == "false" and b["error"]["type"] == "insufficient_quota"
     and b["error"]["code"] == "insufficient_quota"),
    ("openai-responses", lambda st, h, b: b["error"]["type"] == "usage_limit_reached"
     and isinstance(b["error"]["resets_at"], int) and h["x-should-retry"] == "false"),
    ("gemini", lambda st, h, b: b["error"]["status"] == "RESOURCE_EXHAUSTED" and
     b["error"]["details"][0]["@type"] == "type.googleapis.com/google.rpc.RetryInfo"
     and int(b["error"]["details"][0]["retryDelay"].rstrip("s")) > 300),
])
def test_each_protocol_says_stop_now_in_its_own_shape(protocol, check):
    now = time.time()
    for reset_in in (5.0, 3 * 3600.0):  # a reset seconds away still says "do not retry soon"
        status, headers, body = protocols.get(protocol).stop_now("budget 'b' reached", reset_in, now + reset_in)
        doc = json.loads(body)
        assert status == 429 and check(status, headers, doc), (headers, doc)
        assert "budget 'b' reached" in json.dumps(doc)
    _, h, _ = protocols.get("anthropic").stop_now("x", 3 * 3600.0, now)
    assert h["retry-after"] == str(3 * 3600)


def test_the_message_names_the_budget_spent_of_limit_and_the_reset(tmp_path):
    caps = _caps(tmp_path, "  - {name: tiny, usd: 0.10, hold: 0.10, window: day, tz: Europe/Berlin}\n")
    now = time.time()
    caps.admit({}, request_id="a", now=now)
    v = caps.admit({}, request_id="b", now=now)
    assert v.stops and v.refused is not None
    msg = limit_message(v.refused, now, "tk-b")
    assert msg.startswith("tokunseba: budget 'tiny' reached: $0.00 spent of $0.10 and $0.10 held by turns in flight "
                          "this day (Europe/Berlin) window; it resets at ")
    assert "Europe/Berlin (in " in msg and "(request tk-b)" in msg


def test_check_warns_of_a_money_cap_reaching_a_model_nothing_prices():
    rules = load_rules_text(BASE + FIVE.replace("shared: true", "scope: {endpoint: oai}"), "r.yaml")
    got = price_warnings(rules, lambda ep, model: False)
    assert got == ["r.yaml:6: warning: budget 'five' ($5.00) can reach model gpt-paid at endpoint oai, which nothing "
                   "prices: its turns will keep their declared hold ($0.10) as their charge; give it a price (prices: "
                   "{\"oai:gpt-paid\": {input: …, output: …}})"]
    assert price_warnings(rules, lambda ep, model: True) == []


def test_a_turns_charge_is_its_reported_usage_priced_in_fixed_point():
    from tokunseba.budgets import pricing_cost
    from tokunseba.pricing import parse_prices

    table = parse_prices('prices:\n  "oai:gpt-*": {input: 1.25, output: 10, cache_read: 0.125}\n', "p.yaml")
    cost = pricing_cost(table)
    usage = Usage("openai", {"prompt_tokens": 1000, "completion_tokens": 100,
                             "prompt_tokens_details": {"cached_tokens": 400}})
    # 600 uncached x $1.25 + 400 cache reads x $0.125 + 100 output x $10, per million: $0.0018 exactly
    assert cost(Spent("oai", "gpt-paid", "https://oai.example/v1", usage, time.time())) == 1800
    assert cost(Spent("oai", "gpt-paid", "https://oai.example/v1", None, time.time())) is None  # nothing reported
    assert cost(Spent("elsewhere", "mystery-model", "https://elsewhere.example/v1", usage, time.time())) is None
    assert cost(Spent("local", "gemma", "http://127.0.0.1:8080/v1", usage, time.time())) == 0  # a local endpoint


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
