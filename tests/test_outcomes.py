"""One outcome vocabulary (outcomes.py), read the same way by the console line, `log`,
`stats`, `sessions` and `explain`: a mixed ledger of every outcome class, whose classes add
up to the turns, where the views agree turn by turn."""

from __future__ import annotations

import io
import contextlib
import json
import time

import pytest

from tokunseba import outcomes
from tokunseba.cli.main import main
from tokunseba.cli.session_view import sessions_report
from tokunseba.pricing import row_cost
from tokunseba.ledger import Ledger
from tokunseba.turn.console_line import turn_line


@pytest.mark.parametrize("outcome,status,error,cls", [
    ("translated", 200, None, "translated"),
    ("translated", 400, "bad temperature", "error"),  # a translated turn answered 400 is an error
    ("pass_through", 502, None, "error"),
    ("pass_through", 200, None, "pass_through"),
    ("retargeted", 200, None, "retargeted"),
    ("refused", 400, "no route takes this turn", "refused"),
    ("cancelled", 200, "client went away", "cancelled"),
    ("interrupted", None, None, "interrupted"),
    (None, None, None, "unfinished"),
    ("error", None, "upstream broke", "error"),
    ("something-new", 200, None, "error"),
    ("capped", 200, None, "capped"),  # served: the endpoint's own cap ended its reply (issue 41)
    ("capped", 502, "upstream broke", "error"),
])
def test_every_turn_has_one_class(outcome, status, error, cls):
    assert outcomes.outcome_class(outcome, status, error) == cls
    assert cls in outcomes.CLASSES
    assert outcomes.served(cls) == (cls in ("translated", "retargeted", "pass_through", "capped"))


def test_a_matched_route_is_never_no_route():
    trace = [{"route": "big-turns", "matched": False},
             {"route": "small-toolless", "matched": True, "unreachable": True, "endpoint": "local"},
             {"route": "spill", "matched": True, "unreachable": True, "endpoint": "big",
              "unavailable": "cooling down (HTTP 429, retry-after; 6.8 s left)"}]
    assert outcomes.route_text(None, trace) == (
        "route small-toolless matched; endpoint local unreachable; "
        "route spill matched; endpoint big cooling down (HTTP 429, retry-after; 6.8 s left)")
    assert outcomes.route_text(None, [{"route": "a", "matched": False}]) == "no route"
    assert outcomes.route_text("easy", trace) == "easy"
    assert outcomes.route_text(None, [], [{"route": "small", "endpoint": "local", "kind": "status"},
                                         {"route": None, "endpoint": None, "kind": "unreachable"}]) == \
        "route small matched"


def test_console_line_says_the_class_and_the_route():
    line = turn_line(request_id="tk-1", client="claude-code", model="claude-opus-4-8", route=None,
                     to="api.anthropic.com", outcome="pass_through", status=502, usage=None, seconds=0.5,
                     error="cannot connect", trace=[{"route": "small-toolless", "matched": True, "unreachable": True,
                                                     "endpoint": "local"}])
    assert line.startswith("tk-1 claude-code claude-opus-4-8 → route small-toolless matched; endpoint local "
                           "unreachable → api.anthropic.com · error 502 ·")
    assert "no route" not in line and line.endswith("cannot connect")
    line = turn_line(request_id="tk-2", client="x", model="m", route="easy", to="local", outcome="translated",
                     status=400, usage=None, seconds=0.1, error="bad temperature")
    assert " · error 400 · " in line


# ---------------------------------------------------------------- a mixed ledger

def _turn(led: Ledger, rid: str, at: float, *, outcome, status, error=None, rule=None, endpoint=None,
          host="api.anthropic.com", trace=None, attempts=None, latency=120.0, client="claude-code", session="s-1"):
    led.start_turn(rid, started_at=at, client_protocol="anthropic", host=host, path="/v1/messages",
                   requested_model="claude-x", stream=True)
    fields = dict(rule=rule, endpoint=endpoint, outcome=outcome, status=status, latency_ms=latency,
                  error=error, trace=trace or [], client_name=client, session_id=session)
    if attempts is not None:
        fields["attempts"] = attempts
    led.update_turn(rid, **{k: v for k, v in fields.items() if v is not None or k == "attempts"})


SKIPPED = [{"route": "small", "matched": True, "unreachable": True, "endpoint": "local"}]

MIXED = [  # request id, fields, the class every view must say
    ("tk-a1", dict(outcome="translated", status=200, rule="small", endpoint="local"), "translated"),
    ("tk-a2", dict(outcome="translated", status=400, error="temperature: bad", rule="small", endpoint="local"), "error"),
    ("tk-a3", dict(outcome="retargeted", status=200, rule="big", endpoint="big"), "retargeted"),
    ("tk-a4", dict(outcome="pass_through", status=200, trace=SKIPPED), "pass_through"),
    ("tk-a5", dict(outcome="error", status=502, error="cannot reach api.anthropic.com:443", trace=SKIPPED,
                   attempts=[]), "error"),
    ("tk-a6", dict(outcome="refused", status=400, error="no route takes this turn", attempts=[], client=None),
     "refused"),
    ("tk-a7", dict(outcome="cancelled", status=200, error="client went away", rule="small", endpoint="local"),
     "cancelled"),
    ("tk-a8", dict(outcome="interrupted", status=None, error="the proxy stopped", rule="small", endpoint="local"),
     "interrupted"),
    ("tk-a9", dict(outcome="pass_through", status=429, error="local answered 429 (retry after 7 s)",
                   attempts=[{"route": "small", "endpoint": "local", "kind": "status", "status": 429},
                             {"route": None, "endpoint": None, "host": "api.anthropic.com", "kind": "unreachable"}]),
     "error"),
    ("tk-b1", dict(outcome="capped", status=200, rule="small", endpoint="local"), "capped"),
]


@pytest.fixture
def mixed(tmp_path):
    path = tmp_path / "mixed.db"
    led = Ledger(path)
    now = time.time() - 100
    for i, (rid, fields, _) in enumerate(MIXED):
        _turn(led, rid, now + i, **fields)
    led.close()
    return path


def run(*argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(argv)) == 0
    return out.getvalue()


def test_stats_classes_add_up_and_served_excludes_errors(mixed):
    st = json.loads(run("stats", "--ledger", str(mixed), "--json"))
    classes = ("translated", "retargeted", "pass_through", "capped", "errors", "refused", "cancelled", "interrupted",
               "unfinished")
    assert sum(st[k] for k in classes) == st["turns"] == len(MIXED)
    want = {c: sum(1 for *_, k in MIXED if k == c) for c in outcomes.CLASSES}
    assert (st["translated"], st["retargeted"], st["pass_through"], st["errors"], st["refused"], st["cancelled"],
            st["interrupted"]) == (want["translated"], want["retargeted"], want["pass_through"], want["error"],
                                   want["refused"], want["cancelled"], want["interrupted"])
    assert st["served"] == want["translated"] + want["retargeted"] + want["pass_through"] + want["capped"]
    assert st["capped"] == want["capped"] == 1  # apart from the clean translations (issue 41)
    assert next(g for g in st["by_route"] if g["route"] == "small")["capped"] == 1
    for g in st["by_route"]:
        assert g["served"] <= g["turns"] - g["errors"] - g["refused"] - g["cancelled"]
    text = run("stats", "--ledger", str(mixed))
    assert f"turns {len(MIXED)} = served {st['served']} (translated 1  ·  retargeted 1  ·  pass-through 1  ·  capped 1: cut by the endpoint's cap) + " \
           "errors 3 " \
           f"+ refused 1 + cancelled 1 + interrupted 1" in text


def test_log_explain_and_console_say_the_same_class(mixed):
    rows = {line.split()[2]: line for line in run("log", "--ledger", str(mixed)).splitlines()[1:]}
    for rid, fields, cls in MIXED:
        line = rows[rid]
        assert f" {outcomes.label(cls)} " in line, (rid, line)
        explain = run("explain", rid, "--ledger", str(mixed))
        decision = next(x for x in explain.splitlines() if x.startswith("decision"))
        if cls != "pass_through":
            assert outcomes.label(cls) in decision, (rid, decision)
        console = turn_line(request_id=rid, client=outcomes.client_label(fields.get("client", "claude-code"), "anthropic"),
                            model="claude-x", route=fields.get("rule"), to="x", outcome=fields["outcome"],
                            status=fields["status"], usage=None, seconds=0.12, error=fields.get("error"),
                            trace=fields.get("trace"), attempts=fields.get("attempts"))
        assert outcomes.head(cls, fields["status"]) in console
        # the client named as the console names it, latency in the console's unit
        assert outcomes.client_label(fields.get("client", "claude-code"), "anthropic") in line
        assert "0.12 s" in line
        route = outcomes.route_text(fields.get("rule"), fields.get("trace"), fields.get("attempts"))
        assert route in line and route in console
        if fields.get("trace") == SKIPPED:
            assert "no route" not in line and "no route" not in console and "no route" not in decision


def test_log_says_how_many_it_shows(mixed):
    out = run("log", "--ledger", str(mixed), "--limit", "3")
    assert out.splitlines()[-1] == f"3 of {len(MIXED)} shown, newest first (--limit N shows more)"
    assert "shown" not in run("log", "--ledger", str(mixed))


def test_sessions_count_an_endpoint_only_when_something_was_sent(mixed):
    led = Ledger(mixed)
    try:
        turns = led.turns()
        (s,) = sessions_report(turns, {t["request_id"]: row_cost(t, []) for t in turns})
    finally:
        led.close()
    # tk-a5 (answered here: its host unreachable) and tk-a6 (refused) sent nothing
    assert s["endpoints"] == {"local": 5, "big": 1, "api.anthropic.com": 2}


def test_explain_says_which_failure_the_client_got(tmp_path):
    path = tmp_path / "l.db"
    led = Ledger(path)
    _turn(led, "tk-told", time.time(), outcome="error", status=429, error="tokunseba: local answered 429 …",
          attempts=[{"route": "small", "endpoint": "local", "kind": "status", "status": 429, "why": "HTTP 429: slow",
                     "ms": 3.0, "told": True},
                    {"route": None, "endpoint": None, "host": "api.anthropic.com", "kind": "unreachable",
                     "status": None, "why": "cannot connect", "ms": 1.0}])
    led.close()
    out = run("explain", "tk-told", "--ledger", str(path))
    assert "1. small → local: failed (status) after 3.0 ms; moved on; the client got this failure, which says most" in out
    assert "2. unmatched → api.anthropic.com: failed (unreachable) after 1.0 ms; no next route" in out
    assert "decision     route small matched → api.anthropic.com · error" in out


def test_stats_and_sessions_count_a_matched_route_under_its_name(mixed):
    st = json.loads(run("stats", "--ledger", str(mixed), "--json"))
    routes = {g["route"]: g["turns"] for g in st["by_route"]}
    # tk-a4, tk-a5: small matched, its endpoint skipped; tk-a9: small failed over to the host
    assert routes["small (matched, skipped)"] == 2 and routes["small (failed over)"] == 1
    assert routes[None] == 1  # tk-a6: no route matched
    endpoints = {g["endpoint"]: g["turns"] for g in st["by_endpoint"]}
    assert endpoints[None] == 2  # tk-a5 and tk-a6 sent nothing
    led = Ledger(mixed)
    try:
        turns = led.turns()
        (s,) = sessions_report(turns, {t["request_id"]: row_cost(t, []) for t in turns})
    finally:
        led.close()
    assert s["routes"]["small (matched, skipped)"] == 2 and s["routes"]["(no route)"] == 1
