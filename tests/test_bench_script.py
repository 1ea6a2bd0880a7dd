"""The README's benchmark command runs and prints its side-by-side ratios (a smoke test:
it asserts the figures exist, never their values)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_bench_translate_prints_ratios():
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_translate.py"), "--repeat", "1"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "floor: json.loads + json.dumps" in out and "x stdlib" in out
    assert "A->Chat request path: bytes -> bytes" in out and "Chat -> Anthropic stream translation" in out
