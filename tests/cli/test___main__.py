"""``python -m tokunseba.cli`` (cli/__main__.py): the same command as the ``tokunseba`` script, its
exit code passed on."""

from __future__ import annotations

import subprocess
import sys


def test_the_module_runs_the_cli_and_exits_with_its_code(tmp_path):
    ok = subprocess.run([sys.executable, "-m", "tokunseba.cli", "--help"], capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and "usage: tokunseba" in ok.stdout
    bad = subprocess.run([sys.executable, "-m", "tokunseba.cli", "check", str(tmp_path / "nope.yaml")],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "nope.yaml" in bad.stdout + bad.stderr and "Traceback" not in bad.stderr
