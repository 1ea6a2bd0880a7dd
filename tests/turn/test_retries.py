"""A client's retries are recognised (turn/retries.py): the same request of the same session
within the window is a retry of the first; the ledger keeps it (turns.retry_of), `log` folds
the retries into their request's row, `stats` counts requests and retries apart."""

from __future__ import annotations

import contextlib
import io
import json
import time

from tokunseba.cli.main import main
from tokunseba.ledger import Ledger
from tokunseba.turn.retries import RetryWatch, retry_key

BODY = b'{"model":"claude-x","messages":[{"role":"user","content":"hi"}]}'


def key(body=BODY, session="s-1", client="claude-code"):
    return retry_key(session=session, client=client, host="api.anthropic.com", path="/v1/messages", body=body)


def test_the_same_request_again_is_a_retry_of_the_first():
    w = RetryWatch(window_s=60)
    assert w.seen(key(), "tk-1", 1000.0) is None
    assert w.seen(key(), "tk-2", 1010.0) == "tk-1"
    assert w.seen(key(), "tk-3", 1065.0) == "tk-1"  # 55 s after the last one: the series goes on
    assert w.seen(key(), "tk-4", 1200.0) is None  # past the window: a new request
    assert w.seen(key(), "tk-5", 1201.0) == "tk-4"


def test_another_body_session_or_client_is_another_request():
    w = RetryWatch()
    assert w.seen(key(), "tk-1", 0.0) is None
    assert w.seen(key(body=BODY + b" "), "tk-2", 1.0) is None
    assert w.seen(key(session="s-2"), "tk-3", 2.0) is None
    assert w.seen(key(session=None, client="codex"), "tk-4", 3.0) is None
    assert w.seen(key(session=None, client="gemini-cli"), "tk-5", 4.0) is None
    assert w.seen(key(session=None, client="codex"), "tk-6", 5.0) == "tk-4"


def test_the_watch_is_bounded():
    w = RetryWatch(max_keys=3)
    for i in range(10):
        w.seen(key(body=bytes([i])), f"tk-{i}", float(i))
    assert len(w.series) == 3 and w.seen(key(body=bytes([0])), "tk-x", 11.0) is None


def run(*argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(argv)) == 0
    return out.getvalue()


def test_log_folds_retries_and_stats_counts_them_apart(tmp_path):
    path = tmp_path / "l.db"
    led = Ledger(path)
    t0 = time.time() - 100
    rows = [("tk-first", None, 502), ("tk-r1", "tk-first", 502), ("tk-r2", "tk-first", 200), ("tk-other", None, 200)]
    for i, (rid, of, status) in enumerate(rows):
        led.start_turn(rid, started_at=t0 + i, client_protocol="anthropic", host="api.anthropic.com",
                       path="/v1/messages", requested_model="claude-x", stream=False)
        led.update_turn(rid, outcome="pass_through", status=status, latency_ms=10.0,
                        error="cannot reach api.anthropic.com" if status == 502 else None,
                        **({"retry_of": of} if of else {}))
    led.close()
    out = run("log", "--ledger", str(path))
    lines = out.splitlines()
    assert [ln.split()[2] for ln in lines[1:3]] == ["tk-other", "tk-first"]
    assert "+2 retries, the last pass-through 200 · cannot reach api.anthropic.com" in lines[2]
    assert "tk-r1" not in out and "tk-r2" not in out
    assert lines[-1] == "2 retries folded into the request they repeat (+N retries in its row; log --json lists every turn)"
    assert len(json.loads(run("log", "--ledger", str(path), "--json"))) == 4
    st = json.loads(run("stats", "--ledger", str(path), "--json"))
    assert (st["turns"], st["requests"], st["retries"]) == (4, 2, 2)
    assert "requests 2 + retries 2" in run("stats", "--ledger", str(path))
    assert "retry of     tk-first (the same request, sent again by the client)" in run("explain", "tk-r2",
                                                                                        "--ledger", str(path))
