#!/usr/bin/env python3
"""Benchmark: the ledger writer's CPU cost per turn, its variants interleaved in one run.

A turn here is what ``proxy/mitm.py`` records for a translated streamed turn: at the request
(``_ledger_start``) ``start_turn``, ``update_turn`` (rule, endpoint, model, routing trace)
and the turn's events (``routed``, ``left_behind``, ``protocol_translated``); at the end
(``_complete``) ``update_turn`` (status, timings, usage as reported, outcome) and the
``completed`` event: 7 records, realistic payloads.

Each variant runs in its own worker process (this tree with a writer configuration, or
``--against`` another checkout's addon/ with its defaults), on a fresh ledger per sample.
Two arrival patterns:

  paced  turns one after another as a proxy sees them: the request's records, a pause
         (``--gap-ms``, the turn in flight), the end's records, a pause; the pauses sleep,
         so the writer thread runs between them as it does beside mitmproxy's event loop
  burst  every record of every turn queued at once, then one flush

and per sample it measures, in CPU time per turn: the writer thread (its own thread clock:
SQL building, scrubbing, JSON, SQLite, commits, wake-ups) and the producer (the
``start_turn`` / ``update_turn`` / ``event`` calls, what the event loop pays), plus the
transactions per turn and (paced) the lag: how late the producer comes back from its
pauses (mean and 99th percentile), as the event loop is late when the writer holds the GIL
(or when the machine's other work holds the CPU: compare variants, not runs). Every round runs each (pattern, variant) once in a fresh shuffled
order; the tables give each variant's median over the rounds and, as ratios, the median of
the per-round ratios to the first variant (measured in the same round), so a machine that
gets busier during the run moves all variants together. Every sample's ledger is checked
(every turn complete, every event there); a wrong count fails the run.
Not a test: it prints, it asserts nothing beyond that check.

Usage: .venv/bin/python scripts/bench/bench_ledger.py [--turns N] [--rounds N] [--gap-ms MS] [--seed S]
           [--variant NAME=JSON ...] [--against ADDON_DIR]
e.g. --variant 'no linger={"linger_s": 0}' (LedgerWriter keyword arguments as JSON);
     git archive main | tar -x -C /tmp/main && ... --against /tmp/main/addon
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
HERE = ROOT / "addon"
PATTERNS = ("paced", "burst")
RECORDS_PER_TURN = 7
EVENTS_PER_TURN = 4

# ---------------------------------------------------------------- one realistic turn

TRACE = [
    {"route": "tools-stay", "matched": False, "reasons": ["has tools: no (wanted yes)"], "refused": None,
     "unreachable": False},
    {"route": "easy-turns-local", "matched": True,
     "reasons": ["client anthropic: yes", "model claude-haiku-*: yes (claude-haiku-4-5)", "max_tokens <= 1024: yes"],
     "refused": None, "unreachable": False},
]
ROUTED = {"decision": "route", "rule": "easy-turns-local", "endpoint": "local", "url": "http://127.0.0.1:28431/v1",
          "model": "gemma-3-270m", "reason": "easy-turns-local → local"}
LEFT_BEHIND = {"headers": ["anthropic-beta", "x-api-key", "x-stainless-retry-count", "cookie"], "query": [],
               "why": "local is another host: only what it needs goes"}
TRANSLATED = {"from": "anthropic", "to": "openai", "dropped": ["$.metadata.user_id", "$.system[0].cache_control",
                                                               "$.thinking"],
              "plumbing": ["stream_options.include_usage", "max_tokens default 1024"],
              "converted": ["$.system -> messages[0] (role system)", "$.stop_sequences -> stop"], "warnings": []}
REPORTED = {"prompt_tokens": 2610, "completion_tokens": 58, "total_tokens": 2668,
            "prompt_tokens_details": {"cached_tokens": 2048}}
CLIENT_USAGE = {"input_tokens": 562, "output_tokens": 58, "cache_read_input_tokens": 2048}


def turn_start(w, rid: str, now: float) -> None:
    """``Tokunseba._ledger_start`` for a translated streamed turn."""
    w.start_turn(rid, started_at=now, client_protocol="anthropic", host="api.anthropic.com", path="/v1/messages",
                 requested_model="claude-haiku-4-5", stream=True)
    w.update_turn(rid, rule="easy-turns-local", endpoint="local", target_protocol="openai", model_used="gemma-3-270m",
                  trace=TRACE, error=None)
    for kind, data in (("routed", ROUTED), ("left_behind", LEFT_BEHIND), ("protocol_translated", TRANSLATED)):
        w.event(rid, kind, data, ts=now)


def turn_end(w, rid: str, started: float, i: int) -> None:
    """``Tokunseba._complete``'s record for the same turn (the ``i``-th), ended cleanly:
    timings and usage differ from turn to turn, as they do."""
    latency = round((time.time() - started) * 1000, 3)
    reported = REPORTED | {"completion_tokens": 58 + i, "total_tokens": 2668 + i}
    client = CLIENT_USAGE | {"output_tokens": 58 + i}
    w.update_turn(rid, status=200, latency_ms=latency, ttfb_ms=round(latency / 3, 3), usage_reported=reported,
                  usage_protocol="openai", usage_client=client, outcome="translated")
    w.event(rid, "completed", {"status": 200, "latency_ms": latency, "ttfb_ms": round(latency / 3, 3),
                               "usage": reported, "usage_client": client})


# ---------------------------------------------------------------- the worker (one per variant)


def thread_cpu(name: str) -> float:
    """CPU seconds of the live thread called ``name`` (its own clock)."""
    for t in threading.enumerate():
        if t.name == name and t.ident is not None:
            return time.clock_gettime(time.pthread_getcpuclockid(t.ident))
    raise RuntimeError(f"no thread {name!r}")


def sample(pattern: str, turns: int, gap_s: float, writer_kw: dict) -> dict:
    try:
        from tokunseba.ledger.store import Ledger
        from tokunseba.ledger.writer import LedgerWriter
    except ModuleNotFoundError:  # a tree from before the packages (issue 23)
        from tokunseba.ledger import Ledger  # type: ignore[no-redef]
        from tokunseba.ledger_writer import LedgerWriter  # type: ignore[no-redef]

    with tempfile.TemporaryDirectory(prefix="bench-ledger-") as d:
        path = Path(d) / "ledger.db"
        w = LedgerWriter(Ledger(path), **writer_kw)
        wname = "tokunseba-ledger-writer"
        w.flush(10)
        w0, b0 = thread_cpu(wname), getattr(w, "batches", 0)
        produce = 0.0
        lags: list[float] = []

        def pause() -> None:  # the loop waiting for I/O; back late if the writer holds the GIL (or the CPU)
            t = time.perf_counter()
            time.sleep(gap_s)
            lags.append(time.perf_counter() - t - gap_s)

        ids = [f"tk-{i:024x}" for i in range(turns)]
        if pattern == "paced":
            for i, rid in enumerate(ids):
                now = time.time()
                c = time.thread_time()
                turn_start(w, rid, now)
                produce += time.thread_time() - c
                pause()
                c = time.thread_time()
                turn_end(w, rid, now, i)
                produce += time.thread_time() - c
                pause()
        else:
            c = time.thread_time()
            for i, rid in enumerate(ids):
                now = time.time()
                turn_start(w, rid, now)
                turn_end(w, rid, now, i)
            produce = time.thread_time() - c
        if not w.flush(120):
            raise RuntimeError("the writer did not settle in 120 s")
        writer_cpu = thread_cpu(wname) - w0
        batches = getattr(w, "batches", 0) - b0
        dropped = w.dropped
        w.close()
        con = sqlite3.connect(path)
        done = con.execute("SELECT count(*) FROM turns WHERE outcome='translated' AND usage_input IS NOT NULL").fetchone()[0]
        events = con.execute("SELECT count(*) FROM events").fetchone()[0]
        con.close()
    if dropped or done != turns or events != turns * EVENTS_PER_TURN:
        raise RuntimeError(f"ledger incomplete: {done}/{turns} turns, {events} events, {dropped} dropped")
    lags.sort()
    lag99 = lags[int(len(lags) * 0.99)] * 1e6 if lags else 0.0
    lag_mean = statistics.fmean(lags) * 1e6 if lags else 0.0
    return {"writer_us": writer_cpu / turns * 1e6, "producer_us": produce / turns * 1e6, "tx": batches / turns,
            "lag99_us": lag99, "lag_mean_us": lag_mean}


def worker(addon: str) -> None:
    sys.path.insert(0, addon)
    for line in sys.stdin:
        cmd = json.loads(line)
        try:
            out = sample(cmd["pattern"], cmd["turns"], cmd["gap_s"], cmd["writer"])
        except Exception as e:  # reported to the parent, which stops with it
            out = {"error": f"{type(e).__name__}: {e}"}
        print(json.dumps(out), flush=True)


# ---------------------------------------------------------------- the parent


class Worker:
    def __init__(self, addon: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, __file__, "--worker", str(addon)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)

    def run(self, **cmd) -> dict:
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            sys.exit("bench_ledger: a worker died")
        out = json.loads(line)
        if "error" in out:
            sys.exit(f"bench_ledger: {out['error']}")
        return out

    def stop(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(30)


def parse_variant(text: str) -> tuple[str, dict]:
    name, sep, kw = text.partition("=")
    try:
        value = json.loads(kw) if sep else None
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"--variant {text!r}: not JSON after '=': {e}") from None
    if not name or not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"--variant {text!r}: expected NAME={{\"keyword\": value, ...}}")
    return name, value


def positive(kind):
    def parse(text: str):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if v <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
        return v
    return parse


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        worker(sys.argv[2])
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 epilog="Variants: this tree's default writer first (the reference of the ratios), "
                                        "then each --variant, then --against.")
    ap.add_argument("--turns", type=positive(int), default=1000, help="turns per sample (default 1000)")
    ap.add_argument("--rounds", type=positive(int), default=7, help="interleaved rounds (default 7)")
    ap.add_argument("--gap-ms", type=positive(float), default=0.3,
                    help="paced: pause after a turn's request and after its end (default 0.3)")
    ap.add_argument("--seed", type=int, default=None, help="shuffle seed (default: random)")
    ap.add_argument("--variant", type=parse_variant, action="append", default=[], metavar="NAME=JSON",
                    help="this tree's writer with these LedgerWriter keyword arguments, e.g. 'no linger={\"linger_s\": 0}'")
    ap.add_argument("--against", type=Path, default=None, metavar="ADDON_DIR",
                    help="also another checkout's addon/ directory, its writer with its defaults")
    args = ap.parse_args()
    if args.against is not None and not any((args.against / "tokunseba" / p).exists()
                                            for p in ("ledger/writer.py", "ledger_writer.py")):
        ap.error(f"--against {args.against}: no tokunseba/ledger/writer.py (or ledger_writer.py, a tree from "
                 "before the packages) there")
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    variants: list[tuple[str, Path, dict]] = [("this tree", HERE, {})]
    variants += [(name, HERE, kw) for name, kw in args.variant]
    if args.against is not None:
        variants.append((f"against {args.against}", args.against.resolve(), {}))
    workers = {name: Worker(addon) for name, addon, _ in variants}
    got: dict[tuple[str, str], list[dict]] = {(p, v[0]): [] for p in PATTERNS for v in variants}
    print(f"bench_ledger: {args.rounds} rounds interleaved, shuffle seed {seed}; {args.turns} turns per sample, "
          f"{RECORDS_PER_TURN} records per turn (a translated streamed turn); paced gap {args.gap_ms} ms; "
          f"cpus={os.cpu_count()}", flush=True)
    try:
        for _ in range(args.rounds):
            runs = [(p, v) for p in PATTERNS for v in variants]
            rng.shuffle(runs)
            for pattern, (name, _, kw) in runs:
                got[(pattern, name)].append(workers[name].run(pattern=pattern, turns=args.turns,
                                                              gap_s=args.gap_ms / 1000, writer=kw))
    finally:
        for w in workers.values():
            w.stop()
    ref = variants[0][0]
    width = max(len(v[0]) for v in variants)
    for pattern in PATTERNS:
        print(f"\n{pattern}: CPU µs per turn (median of {args.rounds}), transactions per turn; "
              f"ratios = median of per-round ratios to {ref!r}")
        print(f"  {'variant':<{width}} {'writer µs':>10} {'producer µs':>12} {'tx/turn':>8} {'writer x':>9} "
              f"{'producer x':>11}" + (f" {'lag mean µs':>12} {'lag p99 µs':>11}" if pattern == "paced" else ""))
        for name, _, _ in variants:
            rows, base = got[(pattern, name)], got[(pattern, ref)]
            med = {k: statistics.median(r[k] for r in rows)
                   for k in ("writer_us", "producer_us", "tx", "lag_mean_us", "lag99_us")}
            rw = statistics.median(r["writer_us"] / b["writer_us"] for r, b in zip(rows, base))
            rp = statistics.median(r["producer_us"] / b["producer_us"] for r, b in zip(rows, base))
            print(f"  {name:<{width}} {med['writer_us']:>10.1f} {med['producer_us']:>12.1f} {med['tx']:>8.3f} "
                  f"{rw:>9.2f} {rp:>11.2f}"
                  + (f" {med['lag_mean_us']:>12.0f} {med['lag99_us']:>11.0f}" if pattern == "paced" else ""))


if __name__ == "__main__":
    main()
