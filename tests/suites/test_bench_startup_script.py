"""scripts/bench/bench_startup.py starts bare mitmdump and `tokunseba run` (this tree and another)
until each listens, and prints a row per setup with what it adds over bare mitmdump (a smoke
test: it asserts the figures exist, never their values); bad arguments are one-line errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "bench" / "bench_startup.py"


def test_bench_startup_prints_each_setup_against_another_tree():
    p = subprocess.run([sys.executable, str(SCRIPT), "--rounds", "1", "--seed", "1",
                        "--against", str(ROOT / "addon"), "--against-label", "same"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    out = p.stdout
    assert "1 interleaved rounds" in out and "shuffle seed 1" in out and "+s over bare" in out
    rows = {r[0]: r for r in (line.split() for line in out.splitlines()[2:])}
    assert set(rows) == {"bare", "run", "run@same"}
    for name, row in rows.items():
        assert float(row[1]) > 0 and float(row[4]) > 0  # median seconds, ratio to bare
    assert float(rows["bare"][4]) == 1.0


def test_bench_startup_rejects_bad_arguments(tmp_path):
    p = subprocess.run([sys.executable, str(SCRIPT), "--rounds", "0"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "--rounds" in p.stderr and "Traceback" not in p.stderr
    p = subprocess.run([sys.executable, str(SCRIPT), "--against", str(tmp_path)], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 2 and "--against" in p.stderr and "Traceback" not in p.stderr
