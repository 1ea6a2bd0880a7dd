"""The cache part of `tokunseba explain` (pure: ledger rows in, facts and lines out).

Contract: ``cache_facts(turn, session_turns)`` says what the ledger knows of one turn's prompt
cache: its cache reads and writes as reported and the share of its whole input read from cache
(``ledger.cache_read_share``: never a number that was not reported); the previous turn of
its session sent to the same endpoint; and, when this turn read less from the cache than that
turn left there (its reads plus its writes), where its prompt's prefix first parted from that
turn's, from the per-block hashes the ledger keeps (``ledger/prefix.py``: hashes, never the text).
``explain_lines`` says the same in lines.
"""

from __future__ import annotations

from typing import Any

from ..ledger import cache_read_share, first_change, usage_counting


def _usage(row: dict) -> dict[str, Any]:
    return {f: row.get(f"usage_{f}") for f in ("input", "cache_read", "cache_write")}


def _previous(turn: dict, session_turns: list[dict]) -> dict | None:
    """The latest earlier turn of the session sent to the same endpoint (its cache), with usage."""
    where = turn.get("endpoint") or turn.get("host")
    earlier = [t for t in session_turns if (t["started_at"], t["request_id"]) < (turn["started_at"], turn["request_id"])
               and (t.get("endpoint") or t.get("host")) == where and t.get("usage_reported") is not None]
    return max(earlier, key=lambda t: (t["started_at"], t["request_id"])) if earlier else None


def cache_facts(turn: dict, session_turns: list[dict]) -> dict[str, Any] | None:
    """What is known of the turn's cache (None: it reported no cache read or write)."""
    u = _usage(turn)
    if u["cache_read"] is None and u["cache_write"] is None:
        return None
    out: dict[str, Any] = {"read": u["cache_read"], "write": u["cache_write"],
                           "share": cache_read_share(usage_counting(turn.get("usage_protocol")), u)}
    prev = _previous(turn, session_turns)
    if prev is None:
        return out
    p = _usage(prev)
    left = (p["cache_read"] or 0) + (p["cache_write"] or 0)  # what the previous turn left in the cache
    out["previous"] = {"request_id": prev["request_id"], "read": p["cache_read"], "write": p["cache_write"]}
    if (u["cache_read"] or 0) >= left:
        return out
    out["fell"] = True
    if not turn.get("prefix_hashes") or not prev.get("prefix_hashes"):
        out["changed"] = None  # not recorded (a turn of a ledger older than prefix hashes)
        return out
    change = first_change(prev["prefix_hashes"], turn["prefix_hashes"])
    out["changed"] = None if change is None else {"block": change[0], "was": change[1], "now": change[2]}
    out["prefix_same"] = change is None
    return out


def explain_lines(turn: dict, session_turns: list[dict]) -> list[str]:
    facts = cache_facts(turn, session_turns)
    if facts is None:
        return []
    said = [f"{what} {facts[k]}" for k, what in (("read", "read"), ("write", "write")) if facts[k] is not None]
    if facts["share"] is not None:
        said.append(f"{facts['share']:.1%} of the input read from cache")
    out = ["", f"{'cache':<13}{' · '.join(said)} (as reported)"]
    prev = facts.get("previous")
    if prev is None or not facts.get("fell"):
        return out
    left = (prev["read"] or 0) + (prev["write"] or 0)
    why = f"{'':<13}read less than the previous turn of the session left cached ({prev['request_id']}: {left})"
    if facts.get("prefix_same"):
        return out + [why + "; the prefix is the same block for block: the cache had expired or was evicted"]
    change = facts.get("changed")
    if change is None:
        return out + [why + "; no prefix hashes recorded for one of them"]
    where = change["now"] if change["now"] == change["was"] else f"{change['now']} (was {change['was']})"
    return out + [why + f": the prefix first changed at {where}, block {change['block'] + 1} of the prompt"]
