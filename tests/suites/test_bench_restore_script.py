"""scripts/bench/bench_restore.py runs and prints its interleaved figures (a smoke test: it asserts the
figures exist and the restore happened, never their values)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_restore_prints_interleaved_ratios():
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench" / "bench_restore.py"), "--rounds", "2", "--sample-ms", "2",
                        "--seed", "1"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "interleaved: 2 rounds" in out and "shuffle seed 1" in out and "40 messages" in out
    for row in ("no store (baseline)", "restore, memory", "restore, SQLite (cache emptied)", "restore, none stored",
                "restore, other origin (withheld)", "stream + capture, kept at its stop"):
        assert row in out
    assert "restore adds at most" in out and "x baseline" in out


def test_bench_restore_rejects_bad_counts():
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench" / "bench_restore.py"), "--rounds", "0"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "--rounds" in p.stderr and "Traceback" not in p.stderr
