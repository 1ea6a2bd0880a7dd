"""The benchmark commands of docs/dev/benchmarks.md run and print their side-by-side ratios (smoke tests:
they assert the figures exist, never their values)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_translate_prints_ratios():
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench" / "bench_translate.py"), "--rounds", "2",
                        "--sample-ms", "2", "--seed", "1"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "interleaved: 2 rounds" in out and "shuffle seed 1" in out
    assert "floor: json.loads + json.dumps" in out and "x stdlib" in out
    assert "A->Chat request path: bytes -> bytes" in out and "Chat -> Anthropic stream translation" in out


def test_bench_translate_rejects_bad_counts():
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench" / "bench_translate.py"), "--rounds", "0"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "--rounds" in p.stderr and "Traceback" not in p.stderr


def test_bench_proxy_measures_every_setup():
    """Real upstream, bare mitmdump and tokunseba, a few rounds: every setup and shape is
    measured, every reply checked good, and the processes it started are gone."""
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench" / "bench_proxy.py"), "--rounds", "2", "--warmup", "1",
                        "--events", "3", "--seed", "1", "--concurrent", "3", "--concurrent-rounds", "1"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    out = p.stdout
    for title in ("whole turns, turn (ms)", "stream turns, turn (ms)", "stream turns, first byte (ms)"):
        assert title in out
    assert "proxy CPU per turn" in out and "x bare" in out.split("proxy CPU per turn")[1]
    for setup in ("direct", "bare", "bare-buffered", "pass-through", "retarget", "translated"):  # rows: n, figures
        rows = [line.split() for line in out.splitlines() if line.split()[:1] == [setup] and line.split()[1].isdigit()]
        assert len(rows) == 3 + (setup != "direct") and all(r[1] == "2" for r in rows[:3]), out  # n = 2 per table
        if setup != "direct":
            assert rows[3][1] == "3" and rows[3][-1] == "0", out  # 3 concurrent streams, none lost
    assert "+median" in out and "x bare" in out
    buffered = out.split("x bare-buffered (")[1].splitlines()[0]  # whole turns beside mitmproxy's defaults
    assert "pass-through " in buffered and "base-url " in buffered, out
    assert "failed turns: 0" in out and "3 concurrent streams (ms)" in out
    for setup in ("bare-reverse", "base-url"):  # issue 30: a base URL beside bare reverse-mode mitmdump
        rows = [line.split() for line in out.splitlines() if line.split()[:1] == [setup] and line.split()[1].isdigit()]
        assert len(rows) == 4 and all(r[1] == "2" for r in rows[:3]) and rows[3][-1] == "0", out
    assert "base URL adds" in out and "proxy path adds" in out


def test_bench_proxy_rejects_bad_counts():
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench" / "bench_proxy.py"), "--events", "0"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "--events" in p.stderr and "Traceback" not in p.stderr


def test_bench_memory_prints_every_setup():
    """A 1 MB reply through bare mitmdump and each tokunseba setup: a row per setup, the
    processes it started gone (a smoke test: figures are printed, never judged)."""
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench" / "bench_memory.py"), "--mb", "1", "--repeat", "1"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    rows = {line.split()[0]: line.split() for line in p.stdout.splitlines()[2:] if line.strip()}
    assert set(rows) == {"bare", "pass-through", "retarget", "translated"}, p.stdout
    assert all(r[1] == "1.0" for r in rows.values()), p.stdout  # the reply's size, as received


def test_bench_memory_rejects_bad_sizes():
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench" / "bench_memory.py"), "--mb", "0"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "--mb" in p.stderr and "Traceback" not in p.stderr


def test_bench_ledger_measures_every_variant_and_pattern():
    """A few turns per sample: each pattern's table has every variant (this tree's default,
    a --variant, an --against checkout) with CPU per turn and ratios; the worker checked
    every sample's ledger (a wrong count would have failed the run)."""
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench" / "bench_ledger.py"), "--turns", "20", "--rounds", "2",
                        "--seed", "1", "--variant", 'small batches={"max_batch": 3}', "--against", str(ROOT / "addon")],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    out = p.stdout
    assert "2 rounds interleaved, shuffle seed 1" in out and "7 records per turn" in out
    for pattern in ("paced", "burst"):
        assert f"{pattern}: CPU µs per turn" in out
    rows = [line.split() for line in out.splitlines() if line.startswith("  this tree ")]
    assert len(rows) == 2 and all(r[5:7] == ["1.00", "1.00"] for r in rows), out  # the reference
    assert sum(line.startswith("  small batches ") for line in out.splitlines()) == 2
    assert sum(line.startswith("  against ") for line in out.splitlines()) == 2


def test_bench_ledger_rejects_bad_arguments():
    for bad in (["--turns", "0"], ["--variant", "x=[1]"], ["--against", "/nonexistent"]):
        p = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench" / "bench_ledger.py"), *bad],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 2 and "Traceback" not in p.stderr, (bad, p.stderr)


def test_bench_ledger_takes_a_tree_from_before_the_packages(tmp_path):
    """--against accepts an addon/ whose writer is tokunseba/ledger_writer.py (before issue 23's
    packages): it is measured, not refused (here it has no writer to import: the run stops
    with the worker's error, not with the argument check's)."""
    (tmp_path / "tokunseba").mkdir()
    (tmp_path / "tokunseba" / "ledger_writer.py").write_text("")
    (tmp_path / "tokunseba" / "__init__.py").write_text("")
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench" / "bench_ledger.py"), "--turns", "2", "--rounds", "1",
                        "--against", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert p.returncode != 2 and "no tokunseba/ledger/writer.py" not in p.stderr, p.stderr
