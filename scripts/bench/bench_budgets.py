#!/usr/bin/env python3
"""Benchmark: what a spending cap costs a turn (issue 40): admission (the check and the hold, one
``BEGIN IMMEDIATE`` transaction) plus settlement (the hold become the reported cost, another),
on a SQLite ledger file, measured side by side with the floor in one run.

Rows, each a whole turn's worth of cap work:
- floor: one empty write transaction on the same file (``BEGIN IMMEDIATE; COMMIT``);
- a turn no budget's scope takes (the scope check alone: what every turn pays once caps exist);
- admission + settlement under one cap;
- admission + settlement under two caps (both held in one transaction, both settled in one).
Every round runs each variant once (a sample calibrated to about --sample-ms) in a fresh
shuffled order; each row reports the median µs per turn over the rounds and the median of its
per-round ratio to the floor. The last line says admission + settlement per turn under one cap
against the 0.3 ms target. Not a test: it prints, it asserts nothing.
Usage: .venv/bin/python scripts/bench/bench_budgets.py [--rounds N] [--sample-ms MS] [--seed S]
"""

from __future__ import annotations

import argparse
import itertools
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

import harness  # scripts/bench/harness.py: the timing harness the benchmarks share

from tokunseba.budgets import BudgetStore, Caps, Spent
from tokunseba.neutral.usage import Usage
from tokunseba.routing import load_rules_text

TARGET_MS = 0.3
RULES = """\
endpoints:
  oai: {protocol: openai, url: "https://oai.example/v1"}
budgets:
  - {name: day, scope: {endpoint: oai}, usd: 1000000, hold: 0.10, window: day, tz: Europe/Berlin}
  - {name: roll, scope: {endpoint: oai, model: "gpt-*"}, tokens: 1000000000000, hold: 4000, window: 5h}
  - {name: other, scope: {endpoint: elsewhere-*}, usd: 5, hold: 0.10, window: day}
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    harness.interleave_args(ap, rounds=30, sample_ms=40.0)
    args = harness.parse_interleave_args(ap, argv)
    seed, rng = harness.seeded(args.seed)
    rules = load_rules_text(RULES, "bench.yaml")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ledger.db"
        store = BudgetStore(path, owner="bench")
        caps = Caps(rules.budgets, store, instance="bench", cost=lambda s: 1)
        ids = (f"tk-{i:024x}" for i in itertools.count())
        usage = Usage("openai", {"prompt_tokens": 1000, "completion_tokens": 200})
        one = {"endpoint": "oai", "model": "claude-x"}  # under "day" only
        two = {"endpoint": "oai", "model": "gpt-5"}  # under "day" and "roll"
        none = {"endpoint": "local", "model": "gemma"}  # under no cap

        def turn(facts: dict) -> None:
            rid, now = next(ids), time.time()
            v = caps.admit(facts, request_id=rid, now=now)
            caps.settle(v, Spent("oai", facts["model"], None, usage, now), request_id=rid, now=now)

        floor_db = sqlite3.connect(path, isolation_level=None)
        floor_db.execute("PRAGMA busy_timeout=10000")

        def floor() -> None:
            floor_db.execute("BEGIN IMMEDIATE")
            floor_db.execute("COMMIT")

        variants = [
            ("floor: BEGIN IMMEDIATE; COMMIT on the ledger file", floor),
            ("a turn under no cap (scope check only)", lambda: turn(none)),
            ("admission + settlement, one cap", lambda: turn(one)),
            ("admission + settlement, two caps", lambda: turn(two)),
        ]
        samples = [[s * 1e6 for s in col]
                   for col in harness.interleave([fn for _, fn in variants], args.rounds, args.sample_ms / 1000, rng)]
        charges = len(store.charges())
        store.close()
        floor_db.close()
    print(f"SQLite {sqlite3.sqlite_version} (WAL, synchronous=NORMAL), one file; {charges:,} charges settled")
    print(f"interleaved: {args.rounds} rounds, shuffle seed {seed}, ~{args.sample_ms:g} ms per variant per round")
    harness.print_table(variants, samples, "µs/turn")
    per_turn = statistics.median(samples[2]) / 1000
    print(f"admission + settlement per turn under one cap: {per_turn:.3f} ms (p95 {harness.p95(samples[2]) / 1000:.3f} "
          f"ms); target {TARGET_MS} ms: {'within' if per_turn <= TARGET_MS else 'OVER'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
