"""The timing harness every benchmark in scripts/bench/ shares: calibrate a sample, run variants
interleaved in shuffled rounds, and summarise (median, p95, ratios) — so a noisy machine moves
every variant alike and a figure is always a ratio measured in one run.

Not a test and not the product: the benchmarks import it as a sibling module (they are run as
``.venv/bin/python scripts/bench/bench_proxy.py`` and the like, which puts this folder on ``sys.path``).

- ``calibrate(fn, sample_s, clock)``: how many calls of ``fn`` take about ``sample_s``.
- ``interleave(calls, rounds, sample_s, rng, units=None, clock)``: seconds per call (per unit) of
  each variant, one sample per round, the variants' order shuffled every round.
- ``median``, ``p95``, ``pct``: the summaries the benchmarks print.
- ``seeded(seed)``: the seed to print and the ``random.Random`` built from it.
- ``fixture_bytes(name)``: a captured request body of tests/data/fixtures, as bytes.
- ``against_addon(path)``: another checkout's ``addon`` folder, from ``--against`` (an addon
  folder, its tokunseba_addon.py, or the checkout's root), with a clear error when it is none.
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
ADDON = ROOT / "addon"
FIXTURES = ROOT / "tests" / "data" / "fixtures"

if str(ADDON) not in sys.path:  # run from a checkout without installing: this tree's tokunseba
    sys.path.insert(0, str(ADDON))

Clock = Callable[[], float]


def calibrate(fn: Callable[[], object], sample_s: float, clock: Clock = time.perf_counter) -> int:
    """How many calls of ``fn`` take about ``sample_s`` seconds (at least one)."""
    n = 1
    while True:
        t0 = clock()
        for _ in range(n):
            fn()
        took = clock() - t0
        if took >= sample_s / 4 or n >= 1 << 20:
            return max(1, round(n * sample_s / max(took, 1e-9)))
        n *= 4


def interleave(calls: Sequence[Callable[[], object]], rounds: int, sample_s: float, rng: random.Random,
               units: Sequence[float] | None = None, clock: Clock = time.perf_counter) -> list[list[float]]:
    """Seconds per call of each variant (per unit, with ``units``), one sample per round, the
    variants run in a fresh shuffled order every round."""
    loops = [calibrate(fn, sample_s, clock) for fn in calls]
    per = list(units) if units is not None else [1.0] * len(calls)
    samples: list[list[float]] = [[] for _ in calls]
    order = list(range(len(calls)))
    for _ in range(rounds):
        rng.shuffle(order)
        for i in order:
            fn, n = calls[i], loops[i]
            t0 = clock()
            for _ in range(n):
                fn()
            samples[i].append((clock() - t0) / (n * per[i]))
    return samples


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def p95(values: Sequence[float]) -> float:
    """The 95th percentile, nearest rank."""
    s = sorted(values)
    return s[max(0, -(-95 * len(s) // 100) - 1)]


def pct(values: Sequence[float], p: float) -> float:
    """The ``p``th percentile, nearest index."""
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def paired_ratio(samples: Sequence[float], base: Sequence[float]) -> float:
    """The median of per-round ratios to the baseline measured in the same rounds."""
    return statistics.median(a / b for a, b in zip(samples, base))


def seeded(seed: int | None) -> tuple[int, random.Random]:
    """The seed (a random one when none is given), to print, and the generator it makes."""
    s = seed if seed is not None else random.randrange(1 << 30)
    return s, random.Random(s)


def fixture_bytes(name: str) -> bytes:
    """The body of a captured request of tests/data/fixtures, as the client sent it (compact JSON)."""
    from tokunseba import jsonc

    path = FIXTURES / name
    if not path.exists():
        sys.exit(f"bench: fixture {path} not found")
    return jsonc.dumpb(json.loads(path.read_text())["body"])


def against_addon(path: str) -> Path:
    """Another checkout's addon folder, from ``--against`` (the addon folder, its
    tokunseba_addon.py, or the checkout's root)."""
    p = Path(path).resolve()
    if p.is_file() and p.name == "tokunseba_addon.py":
        p = p.parent
    if (p / "addon" / "tokunseba").is_dir():
        p = p / "addon"
    if not (p / "tokunseba").is_dir():
        sys.exit(f"bench: --against {path}: no tokunseba package there (give another checkout's addon folder)")
    return p


def interleave_args(ap, *, rounds: int, sample_ms: float) -> None:
    """The options every in-process interleaved benchmark takes: --rounds, --sample-ms, --seed."""
    ap.add_argument("--rounds", type=int, default=rounds, help=f"interleaved rounds (default {rounds})")
    ap.add_argument("--sample-ms", type=float, default=sample_ms,
                    help=f"time per variant per round (default {sample_ms:g})")
    ap.add_argument("--seed", type=int, default=None, help="shuffle seed (default: random)")


def parse_interleave_args(ap, argv):
    """Parse, refusing a round count below 1 or a sample time of 0 or less (argparse's error)."""
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.sample_ms <= 0:
        ap.error("--rounds must be at least 1 and --sample-ms above 0")
    return args


def print_table(variants: Sequence[tuple[str, object]], samples: Sequence[Sequence[float]], unit: str) -> None:
    """One row per variant: its median (in the samples' unit, e.g. ``µs/call``) and the median of
    its per-round ratio to the first variant (the floor) measured in the same rounds."""
    width = max(len(name) for name, _ in variants)
    print(f"{'variant':<{width}}  {unit:>9}  {'x floor':>8}")
    for (name, _), s in zip(variants, samples):
        print(f"{name:<{width}}  {median(s):9.1f}  {paired_ratio(s, samples[0]):8.2f}")
