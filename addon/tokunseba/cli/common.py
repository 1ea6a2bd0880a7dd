"""What the read commands share (`log`, `stats`, `explain`, `models`, and `sessions`, `shadow`,
`stats --prices`): the ``--ledger``/``--json`` options, one-line errors, JSON output, the cell
formats, the aligned table, ``--since``/``--timeout``/``--limit`` parsing, and opening the ledger
read-only.

Contract: bad arguments are one ``error: ...`` line on stderr (exit 2); a missing ledger is one
line (empty results, exit 0); a ledger that cannot be read is one line (exit 1). Nothing here
prints a traceback.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from .. import jsonc
from ..credentials import redact_text
from ..ledger import (
    LEDGER_ENV,
    LedgerError,
    LedgerMissing,
    LedgerReader,
    db_errors,
    default_ledger_target,
    spool_note,
)
from ..outcomes import label, outcome_class


def common_options(p: argparse.ArgumentParser, ledger_help: str | None = None) -> None:
    p.add_argument(
        "--ledger", metavar="PATH|URL",
        help=ledger_help or f"the ledger: a SQLite file or a postgresql:// URL (a read-only role is enough; default: "
        f"${LEDGER_ENV}, else $TOKUNSEBA_HOME/ledger.db)",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")



def error(msg: str, code: int) -> int:
    print(f"error: {msg}", file=sys.stderr)
    return code


def print_json(obj: Any) -> None:
    print(jsonc.pretty(obj))


def fmt_time(ts: float | None) -> str:
    if ts is None:
        return "-"
    try:
        return datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")
    except (ValueError, OverflowError, OSError):  # a ledger value no calendar date can show
        return str(ts)


def fmt_ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f} ms"


def fmt_num(v: int | None) -> str:
    return "-" if v is None else str(v)


def fmt_share(v: float | None) -> str:
    return "-" if v is None else f"{v * 100:.1f}%"


def counted_outcome(t: dict) -> str | None:
    """The outcome as `stats` counts it, the console and mitmweb say it (outcomes.outcome_class):
    a finished turn with a status >= 400 or an error is an error whatever path it took (a
    translated turn the upstream answered with a 400 included); refused, cancelled and
    interrupted stay themselves; None while open."""
    o = t.get("outcome")
    if o is None:
        return None
    return outcome_class(o, t.get("status"), t.get("error"))


def outcome_label(o: str | None) -> str:
    return label(o)


_NUMERIC = re.compile(r"^-?\d+(\.\d+)?( ms|%)?$")


def table(header: list[str], rows: list[list[str]], indent: str = "", right: set[int] | None = None) -> str:
    """An aligned plain-text table; numeric columns (or those in ``right``) right-aligned."""
    rows = [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    numeric = [
        i in right if right is not None else
        any(_NUMERIC.match(r[i]) for r in rows) and all(_NUMERIC.match(r[i]) or r[i] in ("", "-") for r in rows)
        for i in range(len(header))
    ]

    def line(cells: list[str]) -> str:
        out = [c.rjust(w) if num else c.ljust(w) for c, w, num in zip(cells, widths, numeric)]
        return (indent + "  ".join(out)).rstrip()

    return "\n".join([line(header), *(line(r) for r in rows)])


_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_since(text: str, now: float | None = None) -> float:
    """``30m`` / ``24h`` / ``7d`` (before now), or an ISO date/datetime (local time unless it
    names a zone) -> epoch seconds. ValueError with a one-line message otherwise, also for a
    start no calendar date can show (``99999999999d``)."""
    now = time.time() if now is None else now
    s = text.strip()
    dt: datetime | None = None  # a date given, or else a duration in seconds
    seconds = 0.0
    if m := _DURATION.fullmatch(s.lower()):
        seconds = float(m.group(1)) * _UNITS[m.group(2)]
        if seconds <= 0:
            raise ValueError(f"the duration must be positive, got {text!r}")
    else:
        try:
            dt = datetime.fromisoformat(s)
        except ValueError:
            raise ValueError(
                f"expected a duration (30m, 24h, 7d) or a date (2026-12-01, 2026-12-01T08:00), got {text!r}"
            ) from None
    try:
        ts = now - seconds if dt is None else (dt if dt.tzinfo else dt.astimezone()).timestamp()
        datetime.fromtimestamp(ts)  # the window start must be a date this system can show
    except (ValueError, OverflowError, OSError):
        raise ValueError(f"{text!r} is out of the range of dates this system can handle") from None
    return ts


MAX_LIMIT = 2**63 - 1  # SQLite's largest integer
MAX_TIMEOUT = 3600.0  # seconds; a probe is one GET of a models list


def positive_int(name: str, text: str, maximum: int = MAX_LIMIT) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n <= 0:
        raise ValueError(f"{name}: expected a positive integer, got {text!r}")
    if n > maximum:
        raise ValueError(f"{name}: {text.strip()} is too large (at most {maximum})")
    return n


def open_ledger(args: argparse.Namespace) -> LedgerReader:
    """The ledger named by --ledger (else the default), read-only. Raises LedgerError."""
    return LedgerReader(args.ledger or default_ledger_target(), readonly=True)


def read_ledger(args: argparse.Namespace, empty: Any, body: Callable[[LedgerReader], int]) -> int:
    """Run ``body`` on the ledger. A missing ledger prints one line (and ``empty`` as JSON)."""
    try:
        ledger = open_ledger(args)
    except LedgerMissing as e:
        if args.json:
            print(str(e), file=sys.stderr)
            print_json(empty)
        else:
            print(str(e))
        return 0
    except LedgerError as e:
        if note := spool_note(args.ledger or default_ledger_target()):
            print(note, file=sys.stderr)
        return error(str(e), 1)
    try:
        with ledger:
            return body(ledger)
    except db_errors() + (OverflowError,) as e:
        return error(f"cannot read the ledger {ledger.path}: {redact_text(str(e))}", 1)



def since_option(text: str | None) -> float | None:
    """``--since`` as epoch seconds (None: all time); ValueError with the one-line message."""
    if text is None:
        return None
    try:
        return parse_since(text)
    except ValueError as e:
        raise ValueError(f"--since: {e}") from None


def timeout_option(text: str) -> float:
    """``--timeout`` in seconds, positive and at most MAX_TIMEOUT; ValueError otherwise."""
    try:
        timeout = float(text)
    except ValueError:
        timeout = math.nan
    if not 0 < timeout <= MAX_TIMEOUT:  # also refuses nan and inf
        raise ValueError(f"--timeout: expected a positive number of seconds up to {MAX_TIMEOUT:g}, got {text!r}")
    return timeout

