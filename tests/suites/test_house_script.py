"""scripts/house.py prints the house's figures (issue 38) for this checkout (a smoke test: it
asserts the figures are there, never their values)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_house_prints_every_figure():
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "house.py")], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    for start in ("files over 700 lines:", "largest class:", "functions over 60 lines:",
                  "private names imported across modules:", "names proxy/ takes from turn/:", "README lines:",
                  ".py files at the top of tests/:", "outcome and policy words compared as strings:"):
        assert any(line.startswith(start) for line in p.stdout.splitlines()), start
