#!/usr/bin/env python3
"""Benchmark: what recording a turn's per-block prefix hashes costs (ledger/prefix.py, issue 32),
next to the work the turn does anyway, measured side by side in one run.

The turn: the Claude Code main turn (fixtures/claude-code-print-main-turn.json, 48.5 KB). Rows:
- floor: orjson loads + dumps of its bytes (the JSON work every routed turn already does);
- the request path of a translated turn (bytes -> translate.request to Chat -> bytes);
- prefix_hashes of the body as sent (a pass-through or retargeted turn: the client's body),
  and of the translated Chat body;
- the same request path followed by prefix_hashes of what it sends (the turn with hashing).
Every round runs each variant once (a sample calibrated to about --sample-ms) in a fresh
shuffled order; each row reports the median µs per call over the rounds and the median of its
per-round ratio to the floor measured in the same round. The last line says what hashing adds
to a turn (median of the per-round differences) against the 0.1 ms budget.
Not a test: it prints, it asserts nothing.
Usage: .venv/bin/python scripts/bench/bench_prefix.py [--rounds N] [--sample-ms MS] [--seed S]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import harness  # scripts/bench/harness.py: the timing harness the benchmarks share

import orjson

from tokunseba import jsonc, translate
from tokunseba.ledger.prefix import prefix_hashes
from tokunseba.translate import parse_body

ROOT = Path(__file__).resolve().parent.parent.parent
FIXTURE = "claude-code-print-main-turn.json"
BUDGET_US = 100.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    harness.interleave_args(ap, rounds=30, sample_ms=40.0)
    args = harness.parse_interleave_args(ap, argv)
    seed, rng = harness.seeded(args.seed)
    raw = harness.fixture_bytes(FIXTURE)
    body = parse_body(raw)
    chat = translate.request("anthropic", "openai", body, max_tokens=4096).body

    def path() -> bytes:
        return jsonc.dumpb(translate.request("anthropic", "openai", parse_body(raw), max_tokens=4096).body)

    def path_hashed() -> tuple:
        sent = translate.request("anthropic", "openai", parse_body(raw), max_tokens=4096).body
        return jsonc.dumpb(sent), prefix_hashes("openai", sent)

    variants = [
        ("floor: orjson.loads + orjson.dumps", lambda: orjson.dumps(orjson.loads(raw))),
        ("A->Chat request path: bytes -> bytes", path),
        ("prefix_hashes of the client's body (anthropic)", lambda: prefix_hashes("anthropic", body)),
        ("prefix_hashes of the translated body (openai)", lambda: prefix_hashes("openai", chat)),
        ("A->Chat request path + prefix_hashes", path_hashed),
    ]
    samples = [[s * 1e6 for s in col]
               for col in harness.interleave([fn for _, fn in variants], args.rounds, args.sample_ms / 1000, rng)]
    print(f"turn: {FIXTURE}, {len(raw):,} bytes; {len(json.loads(prefix_hashes('anthropic', body))['h']) // 8} blocks "
          f"hashed; json codec {jsonc.CODEC}")
    print(f"interleaved: {args.rounds} rounds, shuffle seed {seed}, ~{args.sample_ms:g} ms per variant per round")
    harness.print_table(variants, samples, "µs/call")
    added = statistics.median(h - p for h, p in zip(samples[4], samples[1]))
    own = statistics.median(samples[2])
    print(f"hashing adds {added:.1f} µs to the translated turn (its own cost on the client's body: {own:.1f} µs); "
          f"budget {BUDGET_US:.0f} µs: {'within' if max(added, own) <= BUDGET_US else 'OVER'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
