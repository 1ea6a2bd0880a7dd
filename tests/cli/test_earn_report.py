"""`earn --report` (cli/earn_report.py): a route's comparisons paired, the tokens an earned routing
would have saved at each bar against its shuffled control, and the same through the CLI."""

from __future__ import annotations

import pytest

from tokunseba.routing import Earn


# ---------------------------------------------------------------- earn --report


def _seed(led, *, strata_mix, seed=7):
    """A ledger whose shadow rows interleave turns of two strata: titles the candidate always gets
    right, tool turns it gets right half the time; every reference reports 1000 input + 100 output."""
    import random

    from tokunseba.routing.strata import Stratum

    rng = random.Random(seed)
    titles = Stratum("cc", "anthropic", "background", "none", False, "≤4KB").record()
    tools = Stratum("cc", "anthropic", "main", "2:abcdef12", False, "≤128KB").record()
    kinds = [k for k, n in strata_mix for _ in range(n)]
    rng.shuffle(kinds)
    tool_turns = 0
    for i, kind in enumerate(kinds):
        rid = f"tk-{i:04d}"
        led.start_turn(rid, started_at=100.0 + i, client_protocol="anthropic", host="h", path="/v1/messages",
                       requested_model="m", stream=False)
        led.update_turn(rid, usage_protocol="anthropic", usage_reported={"input_tokens": 1000, "output_tokens": 100})
        if kind == "title":
            v = {"kind": "structured", "agree": True, "failed": [],
                 "facts": {"reference_valid": True, "candidate_valid": True, "same_keys": True}}
        else:
            tool_turns += 1
            ok = tool_turns % 2 == 0
            v = {"kind": "tool", "agree": ok, "failed": [] if ok else ["Bash: arguments differ"],
                 "facts": {"same_tool_names": True, "same_stop_reason": True}}
        led.add_shadow(rid, "shadow", started_at=100.0 + i, route="cc", endpoint="cand", status=200,
                       comparison={"compared": True, "stratum": titles if kind == "title" else tools, "verdict": v,
                                   "earn": {"role": "learning", "candidate": "cand", "bar": 0.9, "min_turns": 20,
                                            "canary": 0.05}})


def test_report_pairs_and_beats_its_shuffled_control(tmp_path):
    from tokunseba.cli.earn_report import route_report
    from tokunseba.ledger import Ledger

    with Ledger(tmp_path / "l.db") as led:
        _seed(led, strata_mix=[("title", 150), ("tool", 150)])
        rows = led.shadows()
    rep = route_report(rows, "cc", Earn("cand", 0.9, 20, 0.05), bars=(0.9, 0.95))
    assert rep["comparisons"] == rep["counted"] == 300 and rep["counted_without_usage"] == 0
    assert rep["paired"] == {"structured: both valid, same keys": 150, "tool: the same calls and stop reason": 75,
                             "tool: same names, other arguments or paths": 75}
    for b in rep["bars"]:
        assert b["moved"] > 0 and b["disagreed"] == 0  # only titles were earned
        assert b["saved_tokens"] == 1100 * b["moved"]  # the reference's reported input + output, nothing estimated
        c = b["control"]
        # at equal agreement (no more disagreements than the earned routing), chance saves far less
        assert b["saved_tokens"] > 2 * c["saved_tokens_at_equal_agreement"]
        assert c["disagreed"] > 5 and c["luck"] == 0.0
        assert c["saved_tokens"] == pytest.approx(b["saved_tokens"], rel=0.01)  # the same share: cost-matched
    assert rep["bars"][0]["moved"] >= rep["bars"][1]["moved"]  # a higher bar earns later


def test_report_through_the_cli(tmp_path):
    import json
    import subprocess
    import sys

    from tokunseba.ledger import Ledger

    with Ledger(tmp_path / "l.db") as led:
        _seed(led, strata_mix=[("title", 60), ("tool", 60)])
    p = subprocess.run([sys.executable, "-m", "tokunseba.cli", "earn", "--report", "--ledger", str(tmp_path / "l.db")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "cc → cand: 120 comparisons, 120 counted" in p.stdout and "CONTROL SAVED AT EQUAL" in p.stdout
    j = subprocess.run([sys.executable, "-m", "tokunseba.cli", "earn", "--report", "--json", "--ledger",
                        str(tmp_path / "l.db")], capture_output=True, text=True, timeout=60)
    (route,) = json.loads(j.stdout)["routes"]
    assert [b["bar"] for b in route["bars"]] == [0.8, 0.9, 0.95, 0.99]
