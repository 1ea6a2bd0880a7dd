"""The shadow benchmark runs and prints its side-by-side figures (a smoke test: it asserts
the figures exist, never their values)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_shadow_prints_added_median():
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench" / "bench_shadow.py"), "--rounds", "3", "--warmup", "1"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("shadow: added median") == 2 and "failures 0" in p.stdout
    assert "ledger: shadow rows" in p.stdout
