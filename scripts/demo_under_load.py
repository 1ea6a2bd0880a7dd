#!/usr/bin/env python3
"""The README's four local-model demos, as written, N runs each with a CPU hog beside them
(issue 41: "the four README demos, as written, 10 runs each under the CPU hog").

Each demo is its test in tests/e2e/test_readme_demo_e2e.py (which runs the README's block as
written: the real llama-server, `tokunseba run` with the example rules, the pinned client),
run with TOKUNSEBA_DEMO_RUNS=N. Every run of a demo is tried (a failed run does not stop the
others) and the test prints `README <demo> demo: k/N runs passed`; this script collects those
lines. The hog is the tests' own (tests/support/cpu_hog.py: one busy loop per core, started and
ended by the test, for the whole test; CI runs the same tests with 10 runs and the hog);
`--hog-procs N` sets its size (TOKUNSEBA_DEMO_HOG), `--no-hog` measures without it.

    .venv/bin/python scripts/demo_under_load.py                 # 10 runs of each demo, hog on
    .venv/bin/python scripts/demo_under_load.py --runs 2 --demo codex --demo gemini

It prints one line per demo as it ends (its runs' pass count, whether its test's other checks
passed too, its wall time, the load average, each run's time), then a summary table. Exit status 0 when every
demo passed all its runs. Heavy: it needs the local model and the clients installed
(scripts/ci-extras.sh) and took 20 minutes for 10 runs each on a 2-core machine under the hog
(2026-12-07, load 10-14). Run from a clone elsewhere (a world-writable folder, as /tmp), it runs
that clone's tests, and so its blocks."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = "tests/e2e/test_readme_demo_e2e.py"
# demo name -> its test in TESTS
DEMOS = {
    "claude-p": "test_readme_claude_p_demo_every_run_every_turn_local_no_main_turn_cut_by_the_cap",
    "claude-interactive": "test_readme_interactive_claude_code_every_session_title_local_exit_0",
    "codex": "test_readme_codex_demo_every_run_every_turn_local",
    "gemini": "test_readme_gemini_cli_demo_every_run_every_turn_local",
}
TALLY = re.compile(r"README (.+?) demo: (\d+)/(\d+) runs passed(?:; ([\d. /]+) s)?")


def run_demo(name: str, runs: int, hog: int, python: str) -> dict:
    """One demo's test with ``runs`` runs: its pass count (None when the test never got to its
    runs: skipped, or failed before them), the test's own verdict, wall time, its output's tail."""
    env = {**os.environ, "TOKUNSEBA_DEMO_RUNS": str(runs), "TOKUNSEBA_DEMO_HOG": str(hog)}
    t0 = time.monotonic()
    p = subprocess.run([python, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", f"{TESTS}::{DEMOS[name]}"],
                       cwd=ROOT, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    took = time.monotonic() - t0
    out = p.stdout + p.stderr
    tally = TALLY.findall(out)
    passed = int(tally[-1][1]) if tally else None
    verdict = ("passed" if p.returncode == 0 and re.search(r"\b1 passed\b", out)
               else "skipped" if re.search(r"\b1 skipped\b", out) else "failed")
    return {"demo": name, "passed": passed, "runs": runs, "test": verdict, "seconds": took,
            "each": tally[-1][3] if tally else "",
            "load": os.getloadavg()[0], "tail": out[-3000:]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10, help="runs of each demo (default 10)")
    ap.add_argument("--demo", action="append", choices=list(DEMOS), help="only this demo (repeatable; default: all four)")
    ap.add_argument("--no-hog", action="store_true", help="no CPU hog beside the demos")
    ap.add_argument("--hog-procs", type=int, default=os.cpu_count() or 2, help="busy loops (default: one per core)")
    ap.add_argument("--python", default=str(ROOT / ".venv" / "bin" / "python"), help="the venv's python (scripts/setup.sh)")
    a = ap.parse_args(argv)
    if a.runs < 1:
        ap.error("--runs must be at least 1")
    demos = a.demo or list(DEMOS)
    hog = 0 if a.no_hog else a.hog_procs
    print(f"demo_under_load: {a.runs} runs of each of {', '.join(demos)}; "
          f"{'no hog' if not hog else f'{hog} busy loops beside each'}; "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    results = []
    for name in demos:
        r = run_demo(name, a.runs, hog, a.python)
        results.append(r)
        count = "never ran its runs" if r["passed"] is None else f"{r['passed']}/{r['runs']} runs passed"
        print(f"{name}: {count}; its test {r['test']}; {r['seconds']:.0f} s; load {r['load']:.1f}"
              + (f"; each run {r['each']} s" if r["each"] else ""), flush=True)
        if r["test"] != "passed":
            print("  " + "\n  ".join(r["tail"].splitlines()[-25:]), flush=True)
    print("\nDEMO                 PASSED  TEST     SECONDS")
    for r in results:
        passed = "-" if r["passed"] is None else f"{r['passed']}/{r['runs']}"
        print(f"{r['demo']:<20} {passed:>6}  {r['test']:<7}  {r['seconds']:7.0f}")
    return 0 if results and all(r["passed"] == r["runs"] and r["test"] == "passed" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
