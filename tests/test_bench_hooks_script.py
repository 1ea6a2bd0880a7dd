"""scripts/bench_hooks.py runs the real addon's hooks in child processes and prints a row
per (tree, turn, hook) with ratios against another checkout (a smoke test: it asserts the
figures exist, never their values)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "bench_hooks.py"


def test_bench_hooks_prints_every_turn_and_hook_against_another_tree():
    p = subprocess.run([sys.executable, str(SCRIPT), "--rounds", "2", "--batch", "3", "--seed", "1",
                        "--against", str(ROOT), "--against-label", "same"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    out = p.stdout
    assert "2 rounds (+1 warm-up) of 3 turns" in out and "seed 1" in out and "x same" in out
    rows = [line.split() for line in out.splitlines()[2:]]
    for tree in ("this", "same"):
        for turn in ("pass-through", "retarget", "translated"):
            for hook in ("request", "reply"):
                (row,) = [r for r in rows if r[:3] == [tree, turn, hook]]
                assert row[3] == "6" and float(row[4]) > 0 and float(row[6]) > 0  # n, median, ratio


def test_bench_hooks_rejects_bad_arguments():
    p = subprocess.run([sys.executable, str(SCRIPT), "--rounds", "0"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "--rounds" in p.stderr and "Traceback" not in p.stderr
    p = subprocess.run([sys.executable, str(SCRIPT), "--against", "/nonexistent"], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 2 and "--against" in p.stderr and "Traceback" not in p.stderr
