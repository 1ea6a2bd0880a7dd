"""What `sessions` and `stats --by` count per session and group (cli/session_view.py): failovers
where the ledger records attempts, none where an older row has no attempts."""

from __future__ import annotations



def test_failovers_are_counted_where_the_ledger_records_attempts():
    from tokunseba.cli.sessions import render_sessions
    from tokunseba.cli.session_view import group_report, sessions_report
    from tokunseba.pricing import row_cost

    base = {"session_id": "s1", "session_fingerprint": 0, "client_name": "codex", "client_version": "0.171.0",
            "agent": "main", "outcome": "translated", "status": 200, "error": None, "usage_reported": None}
    rows = [{**base, "request_id": "a", "started_at": 1.0, "attempts": None},
            {**base, "request_id": "b", "started_at": 2.0, "attempts": [{"route": "r1"}, {"route": "r2"}]},
            {**base, "request_id": "c", "started_at": 3.0, "attempts": '[{"route": "r1"}, {"route": "r2"}, {"r": 3}]'}]
    costs = {r["request_id"]: row_cost(r, []) for r in rows}  # no usage reported: no cost
    (s,) = sessions_report(rows, costs)
    assert s["failovers"] == 3
    assert "FAILOVERS" in render_sessions([s])
    assert group_report(rows, "agent", costs)[0]["failovers"] == 3
    # a ledger without the column: no failover figure, and no column shown
    (s,) = sessions_report([{k: v for k, v in r.items() if k != "attempts"} for r in rows], costs)
    assert s["failovers"] is None and "FAILOVERS" not in render_sessions([s])
