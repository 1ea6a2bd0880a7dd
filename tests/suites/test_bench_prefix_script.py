"""scripts/bench/bench_prefix.py runs and prints its side-by-side figures (a smoke test: it asserts
the figures exist, never their values)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_prefix_prints_what_hashing_adds():
    env = {**os.environ, "PYTHONPATH": str(ROOT / "addon")}
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench" / "bench_prefix.py"), "--rounds", "2", "--sample-ms", "2",
                        "--seed", "1"], capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stderr
    assert "interleaved: 2 rounds, shuffle seed 1" in p.stdout and "x floor" in p.stdout
    assert "prefix_hashes of the client's body (anthropic)" in p.stdout and "hashing adds" in p.stdout


def test_bench_prefix_rejects_bad_counts():
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench" / "bench_prefix.py"), "--rounds", "0"],
                       capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT / "addon")})
    assert p.returncode == 2 and "--rounds" in p.stderr and "Traceback" not in p.stderr
