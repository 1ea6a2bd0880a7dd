"""scripts/bench/bench_websocket.py runs and prints its ratios (a smoke test: one short round of
a WebSocket session through bare mitmdump and through tokunseba; it asserts the figures are
there, never their values)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.e2e
def test_bench_websocket_prints_both_ratios():
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench" / "bench_websocket.py"), "--rounds", "1",
                        "--turns", "1", "--events", "2", "--warmup", "0", "--restart", "1"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "ratio tokunseba / bare mitmdump (median session time):" in p.stdout
    assert "failed 0" in p.stdout and "failed 1" not in p.stdout
