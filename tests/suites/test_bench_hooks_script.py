"""scripts/bench/bench_hooks.py runs the real addon's hooks in child processes and prints a row
per (tree, turn, hook) with ratios against another checkout (a smoke test: it asserts the
figures exist, never their values)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "bench" / "bench_hooks.py"


def test_bench_hooks_prints_every_turn_and_hook_against_another_tree():
    p = subprocess.run([sys.executable, str(SCRIPT), "--rounds", "2", "--batch", "3", "--seed", "1",
                        "--against", str(ROOT), "--against-label", "same"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    out = p.stdout
    assert "2 rounds (+1 warm-up) of 3 turns" in out and "seed 1" in out and "x same" in out
    rows = [line.split() for line in out.splitlines()[2:]]
    for tree in ("this", "same"):
        for turn in ("pass-through", "retarget", "translated"):
            for hook in ("request", "reply"):
                (row,) = [r for r in rows if r[:3] == [tree, turn, hook]]
                assert row[3] == "6" and float(row[4]) > 0 and float(row[6]) > 0  # n, median, ratio


def test_bench_hooks_logs_as_mitmdump_with_termlog(tmp_path):
    log = tmp_path / "console.log"
    p = subprocess.run([sys.executable, str(SCRIPT), "--rounds", "1", "--batch", "1", "--warmup", "0", "--termlog"],
                       capture_output=True, text=True, timeout=300, env={**os.environ, "BENCH_HOOKS_LOG": str(log)})
    assert p.returncode == 0, p.stdout + p.stderr
    assert "logging as mitmdump (--termlog)" in p.stdout
    lines = log.read_text().splitlines()  # one console line per turn, as mitmdump prints it
    assert len(lines) == 3 and all(" → " in line and " · " in line for line in lines)


def test_bench_hooks_rejects_bad_arguments():
    p = subprocess.run([sys.executable, str(SCRIPT), "--rounds", "0"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "--rounds" in p.stderr and "Traceback" not in p.stderr
    p = subprocess.run([sys.executable, str(SCRIPT), "--against", "/nonexistent"], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 2 and "--against" in p.stderr and "Traceback" not in p.stderr


def test_bench_hooks_takes_a_tree_from_before_the_packages(tmp_path):
    """--against accepts a root whose adapter is addon/tokunseba/mitm.py (before issue 23's
    packages): it is run, not refused (here there is nothing to import: its child dies)."""
    (tmp_path / "addon" / "tokunseba").mkdir(parents=True)
    (tmp_path / "addon" / "tokunseba" / "mitm.py").write_text("")
    (tmp_path / "addon" / "tokunseba" / "__init__.py").write_text("")
    p = subprocess.run([sys.executable, str(SCRIPT), "--rounds", "1", "--batch", "1", "--against", str(tmp_path)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 1 and "child died" in p.stderr and "no addon/tokunseba" not in p.stderr, p.stderr
