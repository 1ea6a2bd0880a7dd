#!/usr/bin/env python3
"""Benchmark: how much longer ``tokunseba run`` takes to listen than bare mitmdump, interleaved.

Setups, each a fresh process group started from this environment, timed from the start of the
process until the line ``proxy listening at`` appears (wall clock; then it is stopped):

  bare        mitmdump -p 0 (no addon), the floor
  run         tokunseba run --port 0 --rules RULES (this tree: its CLI, then mitmdump with the addon)
  run@LABEL   the same with another tree's CLI and addon (``--against OTHER_ADDON``, e.g. a
              ``git worktree add --detach`` of an older commit's ``addon/``), on this environment

All share one throw-away confdir (its CA is made in a warm-up start, not timed) and each run
its own throw-away ledger. Every round starts each setup once in a fresh shuffled order, so the
machine's other tenants weigh on all alike. It prints each setup's median and p95, the median
of the per-round differences to bare (seconds added) and of the per-round ratios to bare.

Not a test: it prints, it asserts nothing.
Usage: .venv/bin/python scripts/bench/bench_startup.py [--rounds N] [--rules FILE] [--seed S]
                                                [--against OTHER_ADDON [--against-label LABEL]]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
BIN = Path(sys.executable).parent
LISTENING = re.compile(rb"proxy listening at \S*:[0-9]+")
CLI = "import sys; sys.path.insert(0, sys.argv.pop(1)); exec('try: from tokunseba.cli.main import main\\nexcept ModuleNotFoundError: from tokunseba.cli import main'); sys.exit(main())"


def time_to_listen(cmd: list[str], env: dict[str, str], timeout: float = 60.0) -> float:
    """Seconds from starting ``cmd`` until it prints that it listens (then stopped)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        assert p.stdout is not None
        seen = []
        while True:
            line = p.stdout.readline()
            if not line:
                raise RuntimeError(f"{cmd[0]} ended before listening: {b''.join(seen).decode(errors='replace')[-2000:]}")
            seen.append(line)
            if LISTENING.search(line):  # mitmdump's own line, not run's hint about it
                took = time.perf_counter() - t0
                break
            if time.perf_counter() - t0 > timeout:
                raise RuntimeError(f"{cmd[0]} did not listen within {timeout}s")
    finally:
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        if p.stdout:
            p.stdout.close()
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15, help="interleaved rounds (default 15)")
    ap.add_argument("--rules", default=str(ROOT / "rules" / "examples" / "easy-turns-local.yaml"),
                    help="rules file for tokunseba run (default rules/examples/easy-turns-local.yaml)")
    ap.add_argument("--seed", type=int, default=None, help="shuffle seed (default: random, printed)")
    ap.add_argument("--against", type=Path, default=None, help="another tree's addon/ directory")
    ap.add_argument("--against-label", default="other")
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    tmp = Path(tempfile.mkdtemp(prefix="tk-bench-startup-"))
    conf = tmp / "conf"
    env = dict(os.environ, TOKUNSEBA_HOME=str(tmp / "home"), PYTHONDONTWRITEBYTECODE="")
    env.pop("TOKUNSEBA_RULES", None)
    env.pop("TOKUNSEBA_LEDGER", None)
    trees = {"run": ROOT / "addon"}
    if args.against:
        if not any((args.against / "tokunseba" / p).exists() for p in ("cli/main.py", "cli.py")):
            ap.error(f"--against {args.against}: no addon/ directory (no tokunseba/cli/main.py inside)")
        trees[f"run@{args.against_label}"] = args.against.resolve()
    counter = iter(range(1 << 30))

    def setup_cmd(name: str) -> list[str]:
        if name == "bare":
            return [str(BIN / "mitmdump"), "--listen-host", "127.0.0.1", "-p", "0", "--set", f"confdir={conf}",
                    "--set", "connection_strategy=lazy"]
        return [sys.executable, "-c", CLI, str(trees[name]), "run", "--port", "0", "--rules", args.rules,
                "--confdir", str(conf), "--ledger", str(tmp / f"ledger-{next(counter)}.db")]

    setups = ["bare", *trees]
    got: dict[str, list[float]] = {s: [] for s in setups}
    try:
        for name in setups:  # warm-up: the CA, the bytecode caches, the page cache
            time_to_listen(setup_cmd(name), env)
        print(f"bench_startup: {args.rounds} interleaved rounds, rules {args.rules}, shuffle seed {seed}")
        for _ in range(args.rounds):
            order = setups[:]
            rng.shuffle(order)
            for name in order:
                got[name].append(time_to_listen(setup_cmd(name), env))
    except RuntimeError as e:
        sys.exit(f"bench_startup: {e}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    bare = got["bare"]
    print(f"  {'setup':<14} {'s med':>7} {'s p95':>7} {'+s over bare':>13} {'x bare':>7}")
    for name in setups:
        xs = got[name]
        p95 = sorted(xs)[max(0, -(-95 * len(xs) // 100) - 1)]
        added = statistics.median(a - b for a, b in zip(xs, bare))
        ratio = statistics.median(a / b for a, b in zip(xs, bare))
        print(f"  {name:<14} {statistics.median(xs):>7.3f} {p95:>7.3f} {added:>+13.3f} {ratio:>7.2f}")


if __name__ == "__main__":
    main()
