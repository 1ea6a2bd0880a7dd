"""A CPU hog: one busy loop per core (or ``n``), each its own process, started and ended by their
ids. Used by the README demo tests (issue 41: "10 runs each under the CPU hog, in CI's e2e suite")
and by scripts/demo_under_load.py through them. ``TOKUNSEBA_DEMO_HOG`` sets how many loops (0 for
none; default one per core)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator


def hog_size() -> int:
    """Busy loops the demos run beside: ``TOKUNSEBA_DEMO_HOG`` if set, else one per core."""
    raw = os.environ.get("TOKUNSEBA_DEMO_HOG", "").strip()
    if not raw:
        return os.cpu_count() or 2
    try:
        n = int(raw)
    except ValueError:
        raise ValueError(f"TOKUNSEBA_DEMO_HOG must be a whole number of busy loops, not {raw!r}") from None
    if n < 0:
        raise ValueError(f"TOKUNSEBA_DEMO_HOG must be 0 or more, not {n}")
    return n


@contextlib.contextmanager
def cpu_hog(n: int) -> Iterator[list[int]]:
    """``n`` busy loops running for the block; yields their process ids; ends exactly those."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for _ in range(n)]
    try:
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()
