"""The figures the ledger's turns add up to: counts by class, groupings by route, endpoint,
model and instance, usage sums as reported, timing percentiles and failover counts.

Contract: pure functions over turn rows (``reads.LedgerReader.stats`` reads them); usage is
summed exactly as reported: a field no turn reported stays None, never 0, and a share is
given only where its parts were reported.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, overload

from .. import jsonc, protocols
from ..neutral import includes_cached
from ..outcomes import NOT_SENT_OR_FAILED, TurnOutcome, outcome_class, route_group, was_sent
from .schema import INTERRUPTED, USAGE_FIELDS


@overload
def usage_counting(name: str | None, default: str) -> str: ...
@overload
def usage_counting(name: str | None, default: str | None = None) -> str | None: ...
def usage_counting(name: str | None, default: str | None = None) -> str | None:
    """The counting convention of a ``usage_protocol`` value (protocols.counting), else ``default``."""
    return protocols.counting(name) or default


def whole_input(counting: str | None, fields: Mapping[str, Any]) -> int | None:
    """A usage's whole input, the cached tokens counted once (OpenAI and Gemini input includes
    them; Anthropic's does not: input + cache read + cache write); None without an input."""
    inp = fields.get("input")
    if inp is None:
        return None
    if includes_cached(counting):
        return inp
    return inp + (fields.get("cache_read") or 0) + (fields.get("cache_write") or 0)


def cache_read_share(counting: str | None, fields: Mapping[str, Any]) -> float | None:
    """The share of a usage's whole input read from cache, as reported; None when no cache read
    (or no input) was reported: never a 0 that was not said."""
    read, total = fields.get("cache_read"), whole_input(counting, fields)
    return round(read / total, 4) if read is not None and total else None


def percentile(values: list[float], p: float) -> float | None:
    """Nearest-rank percentile (a value that was actually measured); None when empty."""
    if not values:
        return None
    s = sorted(values)
    return s[max(math.ceil(p / 100 * len(s)) - 1, 0)]


# classes that are not a served turn, each counted on its own (outcomes.CLASSES: errors are not served)
NOT_SERVED = NOT_SENT_OR_FAILED


def turn_class(row: dict) -> str:
    """The turn's one class (outcomes.outcome_class): refused / cancelled / interrupted /
    error / unfinished, or the way it was served. An open turn (outcome NULL) is unfinished:
    in flight, or left by a proxy that has not restarted since it stopped."""
    return outcome_class(row["outcome"], row["status"], row["error"])


# stats group -> a turn's group key (None = no route / model unknown). A turn passed
# through without an endpoint counts as served by the host it went to.
GROUPS: dict[str, Any] = {
    "route": lambda r: route_group(r["rule"], r.get("trace"), r.get("attempts")),  # matched, skipped: not "no route"
    "endpoint": lambda r: (r["endpoint"] or r["host"]) if was_sent(r) else None,  # only where something was sent
    "model": lambda r: r["model_used"],
    "instance": lambda r: r.get("instance"),
}


def compute_stats(rows: list[dict], since: float | None) -> dict:
    kinds = [turn_class(r) for r in rows]
    served_total = sum(1 for k in kinds if k not in NOT_SERVED)
    totals = _totals(rows, kinds)
    groups = {gname: _group(rows, kinds, gname, key, served_total) for gname, key in GROUPS.items()}
    usage, none_reported = _usage_by_counting(rows)
    timings = {}
    for name in ("latency_ms", "ttfb_ms"):
        times = [r[name] for r in rows if r[name] is not None]
        timings[name] = {"n": len(times), "p50": percentile(times, 50), "p95": percentile(times, 95)}
    return {
        "since": since,
        **totals,
        "served": served_total,
        "by_route": groups["route"],
        "by_endpoint": groups["endpoint"],
        "by_model": groups["model"],
        "by_instance": groups["instance"],
        "usage": {"by_counting": usage, "turns_reported": len(rows) - none_reported, "turns_none": none_reported},
        "timings": timings,
        **failover_stats(rows),
    }


def _totals(rows: list[dict], kinds: list[str]) -> dict[str, int]:
    """The headline classes; they partition the turns (outcomes.CLASSES): they add up to "turns"."""
    totals = {
        "turns": len(rows),
        "translated": kinds.count("translated"),
        "retargeted": kinds.count("retargeted"),
        "pass_through": kinds.count("pass_through"),
        "capped": kinds.count("capped"),  # served, but cut by the endpoint's own cap (outcomes.CAPPED)
        "errors": kinds.count("error"),
        "refused": kinds.count("refused"),
        "cancelled": kinds.count("cancelled"),
        "interrupted": kinds.count(INTERRUPTED),
        "unfinished": kinds.count("unfinished"),
        # a client's retries of a request (turns.retry_of) are turns of their own, counted apart
        "retries": sum(1 for r in rows if r.get("retry_of")),
    }
    totals["requests"] = totals["turns"] - totals["retries"]
    return totals


def _group(rows: list[dict], kinds: list[str], gname: str, key: Any, served_total: int) -> list[dict]:
    """One grouping (``GROUPS``): per group its classes, cache use as reported and share of the served."""
    acc: dict[str | None, dict] = {}
    for r, k in zip(rows, kinds):
        g = acc.setdefault(key(r), {"turns": 0, "translated": 0, "capped": 0, "refused": 0, "errors": 0,
                                    "cancelled": 0, "served": 0, "cache_read": None, "cache_write": None, "_whole": 0})
        g["turns"] += 1
        g["translated"] += k == TurnOutcome.TRANSLATED
        g["capped"] += k == TurnOutcome.CAPPED
        g["refused"] += k == TurnOutcome.REFUSED
        g["errors"] += k == "error"
        g["cancelled"] += k == TurnOutcome.CANCELLED
        g["served"] += k not in NOT_SERVED
        if (read := r.get("usage_cache_read")) is not None and r.get("usage_input") is not None:  # as reported
            u = {f: r.get(f"usage_{f}") for f in USAGE_FIELDS}
            g["cache_read"] = (g["cache_read"] or 0) + read
            g["_whole"] += whole_input(usage_counting(r.get("usage_protocol")), u) or 0
        if r.get("usage_cache_write") is not None:
            g["cache_write"] = (g["cache_write"] or 0) + r["usage_cache_write"]
    for g in acc.values():  # the share of the input read from cache, over the turns that reported a cache read
        whole = g.pop("_whole")
        g["cache_read_share"] = round(g["cache_read"] / whole, 4) if g["cache_read"] is not None and whole else None
    return [
        {gname: name, **g, "share": round(g["served"] / served_total, 4) if served_total else None}
        for name, g in sorted(acc.items(), key=lambda kv: (-kv[1]["turns"], kv[0] is None, str(kv[0])))
    ]


def _usage_by_counting(rows: list[dict]) -> tuple[dict[str, dict], int]:
    """Usage summed per counting convention, as reported; and how many turns reported none."""
    usage: dict[str, dict] = {}
    none_reported = 0
    for r in rows:
        vals = {f: r[f"usage_{f}"] for f in USAGE_FIELDS}
        if r["usage_reported"] is None or all(v is None for v in vals.values()):
            none_reported += 1
            continue
        counted = usage_counting(r["usage_protocol"], r["usage_protocol"] or "-")
        u = usage.setdefault(counted, {"turns": 0, **{f: None for f in USAGE_FIELDS}})
        u["turns"] += 1
        for f, v in vals.items():
            if v is not None:
                u[f] = (u[f] or 0) + v  # a field no turn reported stays None, never 0
    for counted, u in usage.items():
        u["cache_read_share"] = cache_read_share(counted, u)
    return usage, none_reported


def failover_stats(rows: list[dict]) -> dict:
    """Failover (turns.attempts): how many turns failed over, and per endpoint its failed
    attempts, how many of them moved on to another attempt, and how many cooled it down."""
    per: dict[str, dict] = {}
    turns = 0
    for r in rows:
        raw = r.get("attempts")
        try:
            attempts = jsonc.loads(raw) if isinstance(raw, str) else raw
        except ValueError:
            attempts = None
        if not isinstance(attempts, list) or not attempts:
            continue
        turns += len(attempts) > 1
        for i, a in enumerate(attempts):
            if not isinstance(a, dict) or a.get("kind") == "answered":
                continue
            g = per.setdefault(a.get("endpoint") or "(original host)", {"failed": 0, "moved_on": 0, "cooled": 0})
            g["failed"] += 1
            g["moved_on"] += i < len(attempts) - 1
            g["cooled"] += bool(a.get("cooled_s"))
    return {"failed_over": turns,
            "failover_by_endpoint": [{"endpoint": k, **v} for k, v in sorted(per.items(), key=lambda kv: -kv[1]["failed"])]}
