"""scripts/bench/bench_against.py runs both trees and prints per-round and median ratios (a smoke
test: it asserts the figures exist, never their values); bad arguments are one-line errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = str(ROOT / "scripts" / "bench" / "bench_against.py")


def test_bench_against_prints_rounds_and_medians():
    p = subprocess.run([sys.executable, SCRIPT, str(ROOT / "addon"), "--rounds", "1", "--samples", "1"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert "request x orjson" in lines[0] and "stream x orjson" in lines[0]
    rounds = [ln.split()[1] for ln in lines[1:] if ln.startswith("1 ")]
    assert sorted(rounds) == ["other", "this"]  # round 1: one row per tree
    medians = [ln.split() for ln in lines if ln.startswith("median")]
    assert len(medians) == 2 and all(float(x) > 0 for m in medians for x in m[-2:])


def test_bench_against_rejects_bad_arguments(tmp_path):
    for args in (["--rounds", "0"], ["--samples", "0"]):
        p = subprocess.run([sys.executable, SCRIPT, str(ROOT / "addon"), *args], capture_output=True, text=True,
                           timeout=60)
        assert p.returncode == 2 and args[0] in p.stderr and "Traceback" not in p.stderr
    p = subprocess.run([sys.executable, SCRIPT, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "no addon/ directory" in p.stderr and "Traceback" not in p.stderr
