#!/usr/bin/env python3
"""Benchmark: the shared ledger (PostgreSQL) and OpenTelemetry spans, against SQLite alone,
interleaved in one run.

Two parts (each skippable):

  writer  the ledger writer's throughput: ``--turns`` realistic translated turns (7 records
          each, as scripts/bench/bench_ledger.py's: start, decision, 3 events, end, completed)
          queued at once into a ``LedgerWriter`` and flushed, on a fresh SQLite file and on
          a fresh PostgreSQL database, alternately (``--rounds``, shuffled); it prints
          turns/s per back end (median over rounds) and the per-round ratio PostgreSQL/SQLite.
          Every sample's turns are counted back (a wrong count fails the run).
  proxy   what a translated turn costs through a real proxy: scripts/bench/bench_proxy.py's
          scripted upstream and client, and three tokunseba mitmdumps: ``sqlite`` (the
          default ledger), ``postgresql`` (a shared ledger) and ``postgresql+otlp`` (a shared
          ledger and one span per turn to a local OTLP/HTTP receiver); translated turns,
          whole and streamed, each round every (setup, shape) once in a fresh shuffled order;
          it prints each setup's median and p95 turn time and the median added over ``sqlite``.

The PostgreSQL server is a throw-away one started like the tests' (tests/support/pg_server.py:
initdb + postgres in a temp dir on a free loopback port, as the ``postgres`` user when run as
root; with fsync on, unlike the tests'), or ``--pg URL`` (a database the bench may create tables in).
Not a test: it prints, it asserts nothing beyond the counts.

Usage: .venv/bin/python scripts/bench/bench_shared_ledger.py [--part writer|proxy|both] [--turns N]
           [--rounds N] [--proxy-rounds N] [--events N] [--seed S] [--pg URL]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path[:0] = [str(ROOT / "addon"), str(ROOT / "scripts" / "bench"), str(ROOT)]

import bench_ledger  # noqa: E402  (this directory)
import bench_proxy  # noqa: E402


# ---------------------------------------------------------------- the database


def database(args) -> tuple[object | None, callable]:
    """(the server to stop, or None; a function giving the URL of a new empty database)."""
    if args.pg:
        import psycopg

        base = args.pg
        n = [0]

        def fresh() -> str:
            n[0] += 1
            with psycopg.connect(base, autocommit=True) as c:
                for t in ("events", "bodies", "shadows", "turns", "_migrations", "_ledger_batches"):
                    c.execute(f"DROP TABLE IF EXISTS {t}")
            return base
        return None, fresh
    from tests.support.pg_server import PgServer, find_bin

    bindir = find_bin()
    if bindir is None:
        sys.exit("bench_shared_ledger: no PostgreSQL server here (apt-get install postgresql), or give --pg URL")
    server = PgServer(bindir, durable=True)  # fsync on, as a real server
    server.start()
    server.setup_roles()
    return server, lambda: server.url(db=server.fresh_db())


# ---------------------------------------------------------------- writer throughput


def writer_sample(target: str, turns: int) -> tuple[float, int]:
    try:
        from tokunseba.ledger.store import Ledger
        from tokunseba.ledger.writer import LedgerWriter
    except ModuleNotFoundError:  # a tree from before the packages (issue 23)
        from tokunseba.ledger import Ledger  # type: ignore[no-redef]
        from tokunseba.ledger_writer import LedgerWriter  # type: ignore[no-redef]

    w = LedgerWriter(Ledger(target))
    w.flush(30)
    ids = [f"tk-{i:024x}" for i in range(turns)]
    now = time.time()
    t0 = time.perf_counter()
    for i, rid in enumerate(ids):
        bench_ledger.turn_start(w, rid, now)
        bench_ledger.turn_end(w, rid, now, i)
    ok = w.flush(600)
    dt = time.perf_counter() - t0
    w.close()
    if not ok:
        sys.exit("bench_shared_ledger: the writer did not finish in 600 s")
    with Ledger(target, readonly=True) as r:
        got = r.stats()["turns"]
        done = sum(1 for t in r.turns() if t["outcome"] == "translated")
    if got != turns or done != turns:
        sys.exit(f"bench_shared_ledger: {got} turns ({done} complete) written, expected {turns}")
    return turns / dt, w.batches


def run_writer(args, fresh_pg, rng: random.Random) -> None:
    setups = ["sqlite", "postgresql"]
    rates: dict[str, list[float]] = {s: [] for s in setups}
    ratios: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-shared-") as d:
        for r in range(args.rounds):
            rng.shuffle(setups)
            got = {}
            for s in setups:
                target = str(Path(d) / f"l{r}.db") if s == "sqlite" else fresh_pg()
                got[s], _ = writer_sample(target, args.turns)
                rates[s].append(got[s])
            ratios.append(got["postgresql"] / got["sqlite"])
    print(f"writer: {args.turns} turns (7 records each) queued at once, then flushed; {args.rounds} rounds, "
          "back ends alternated in shuffled order")
    print(f"  {'back end':<12} {'median turns/s':>15} {'min':>9} {'max':>9}")
    for s in ("sqlite", "postgresql"):
        xs = rates[s]
        print(f"  {s:<12} {statistics.median(xs):>15.0f} {min(xs):>9.0f} {max(xs):>9.0f}")
    print(f"  postgresql / sqlite, median of the per-round ratios: {statistics.median(ratios):.2f}")
    print()


# ---------------------------------------------------------------- through the proxy


class _Sink(BaseHTTPRequestHandler):
    """An OTLP/HTTP receiver that takes every export (200, empty ExportTraceServiceResponse)."""

    def log_message(self, *a):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()


def serve_sink() -> None:
    """The OTLP receiver, in its own process (so that it does not share the client's GIL)."""
    sink = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    print(f"sink listening at 127.0.0.1:{sink.server_address[1]}", flush=True)
    sink.serve_forever()


def run_proxy(args, fresh_pg, rng: random.Random) -> None:
    children = []
    setups = ["sqlite", "postgresql", "postgresql+otlp"]
    shapes = ("whole", "stream")
    samples: dict[tuple[str, str], list[float]] = {}
    fails = 0
    with tempfile.TemporaryDirectory(prefix="bench-shared-proxy-") as tmp:
        work = Path(tmp)
        try:
            up = bench_proxy.Child([sys.executable, str(ROOT / "scripts" / "bench" / "bench_proxy.py"), "--serve-upstream",
                                    "--events", str(args.events)], r"upstream listening at 127\.0\.0\.1:(\d+)")
            children.append(up)
            sink = bench_proxy.Child([sys.executable, __file__, "--serve-sink"], r"sink listening at 127\.0\.0\.1:(\d+)")
            children.append(sink)
            rules = work / "rules.yaml"
            rules.write_text(bench_proxy.RULES.format(port=up.port))
            ledgers = {"sqlite": str(work / "ledger.db"), "postgresql": fresh_pg(), "postgresql+otlp": fresh_pg()}
            clients = {}
            for s in setups:
                extra = ["--set", f"tokunseba_otlp_endpoint=http://127.0.0.1:{sink.port}"] \
                    if "otlp" in s else []
                tk = bench_proxy.mitmdump(work / s, "-s", str(bench_proxy.ADDON), "--set", f"tokunseba_rules={rules}",
                                          "--set", f"tokunseba_ledger={ledgers[s]}",
                                          "--set", f"tokunseba_provider_hosts=127.0.0.1:{up.port}=anthropic", *extra)
                children.append(tk)
                clients[s] = bench_proxy.Client(up.port, tk.port)
            cases = [(s, shape) for s in setups for shape in shapes]
            bodies = {c: bench_proxy.request_body("translate-bench", c[1] == "stream", 2000) for c in cases}
            for r in range(args.warmup + args.proxy_rounds):
                rng.shuffle(cases)
                for case in cases:
                    try:
                        sample, data, status = clients[case[0]].turn(bodies[case], case[1] == "stream")
                        why = bench_proxy.check(data, status, case[1] == "stream")
                    except OSError as e:
                        why = str(e)
                    if r < args.warmup:
                        continue
                    if why is None:
                        samples.setdefault(case, []).append(sample.total)
                    else:
                        fails += 1
        finally:
            for c in reversed(children):
                c.stop()
    print(f"proxy: translated turns (Anthropic -> Chat -> Anthropic), {args.proxy_rounds} rounds "
          f"(+{args.warmup} warm-up), every (setup, shape) once per round in shuffled order; {args.events} "
          "events per stream")
    for shape in shapes:
        base = samples.get(("sqlite", shape), [])
        print(f"  {shape} (ms): {'setup':<16} {'n':>5} {'median':>8} {'p95':>8} {'+median vs sqlite':>18} {'x sqlite':>9}")
        for s in setups:
            xs = samples.get((s, shape), [])
            if not xs:
                print(f"  {'':<{len(shape) + 6}}{s:<16} {0:>5}")
                continue
            med, hi = statistics.median(xs) * 1e3, bench_proxy.p95(xs) * 1e3
            bmed = statistics.median(base) * 1e3 if base else float("nan")
            print(f"  {'':<{len(shape) + 6}}{s:<16} {len(xs):>5} {med:>8.2f} {hi:>8.2f} {med - bmed:>+18.3f} "
                  f"{med / bmed:>9.3f}")
    print(f"  failed turns: {fails}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("writer", "proxy", "both"), default="both")
    ap.add_argument("--turns", type=int, default=2000, help="turns per writer sample (default 2000; 7 records each must fit the writer's queue of 20,000)")
    ap.add_argument("--rounds", type=int, default=5, help="writer rounds (default 5)")
    ap.add_argument("--proxy-rounds", type=int, default=200, help="proxy rounds (default 200)")
    ap.add_argument("--warmup", type=int, default=10, help="proxy rounds run first, not counted (default 10)")
    ap.add_argument("--events", type=int, default=60, help="text events per streamed reply (default 60)")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--pg", metavar="URL", default=None, help="use this database instead of a throw-away server")
    ap.add_argument("--serve-sink", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve_sink:
        serve_sink()
        return
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    print(f"bench_shared_ledger: seed {seed}; cpus={os.cpu_count()}")
    server, fresh = database(args)
    try:
        if args.part in ("writer", "both"):
            run_writer(args, fresh, rng)
        if args.part in ("proxy", "both"):
            run_proxy(args, fresh, rng)
    finally:
        if server is not None:
            server.close()


if __name__ == "__main__":
    main()
