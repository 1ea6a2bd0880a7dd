"""scripts/bench/bench_budgets.py runs and prints its side-by-side figures (a smoke test: it asserts
the figures exist, never their values)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_budgets_prints_admission_and_settlement_per_turn():
    env = {**os.environ, "PYTHONPATH": str(ROOT / "addon")}
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench" / "bench_budgets.py"), "--rounds", "2",
                        "--sample-ms", "2", "--seed", "1"], capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stderr
    assert "interleaved: 2 rounds, shuffle seed 1" in p.stdout and "x floor" in p.stdout
    assert "admission + settlement, one cap" in p.stdout and "admission + settlement per turn under one cap" in p.stdout
