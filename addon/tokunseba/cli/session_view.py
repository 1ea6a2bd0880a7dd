"""Turns grouped by who is talking: the facts behind `tokunseba sessions`, `stats --by` and
the session part of `explain` (pure: ledger rows in, dicts and lines out; no ledger access).

Rows are ``Ledger.turns()`` dicts. A ledger older than sessions has no session columns:
every ``.get`` here reads them as unknown. Usage is summed exactly as reported, per
counting (OpenAI input includes cache reads, Anthropic input does not: never added across
countings); cost only from reported usage and a price (pricing/), never estimated.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from typing import Any

from .. import jsonc
from ..ledger import NOT_SERVED, USAGE_FIELDS, turn_class, usage_counting
from ..outcomes import TurnOutcome, label, outcome_class, route_group, was_sent
from ..pricing import Cost, Source

NONE_LABEL = {"session": "(no session)", "agent": "(unknown)", "client": "(unknown)", "route": "(no route)",
              "endpoint": "(unknown)"}


def agent_label(row: dict) -> str | None:
    """``background`` when the client said so, else ``main`` / ``subagent``; None: not said."""
    if row.get("background"):
        return "background"
    return row.get("agent")


def client_label(row: dict) -> str | None:
    name, version = row.get("client_name"), row.get("client_version")
    if not name:
        return None
    return f"{name} {version}" if version else name


# stats --by KEY -> a turn's group (None: not known)
GROUP_BY: dict[str, Callable[[dict], str | None]] = {
    "session": lambda r: r.get("session_id"),
    "agent": agent_label,
    "client": client_label,
    "route": lambda r: route_group(r.get("rule"), r.get("trace"), r.get("attempts")),
    "endpoint": lambda r: r.get("endpoint") or r.get("host"),
    "instance": lambda r: r.get("instance"),  # which proxy wrote the turn (a ledger shared by several)
}


def failovers_of(row: dict) -> int | None:
    """How often the turn failed over (issue 19's ``attempts``: every attempt in order, the last
    the one that answered; NULL when the first answered). None: the ledger has no such column."""
    if "attempts" not in row:
        return None
    attempts = row["attempts"]
    if isinstance(attempts, str):  # not decoded by this ledger version
        try:
            attempts = jsonc.loads(attempts)
        except ValueError:
            return 0
    return max(len(attempts) - 1, 0) if isinstance(attempts, list) else 0


class _Acc:
    """Counts, usage as reported per counting, and cost of a set of turns."""

    def __init__(self) -> None:
        self.turns = self.served = self.errors = self.refused = 0
        self.usage: dict[str, dict] = {}
        self.cost, self.priced, self.no_price, self.no_usage = Decimal(0), 0, 0, 0
        self.failovers: int | None = None

    def add(self, row: dict, cost: Cost) -> None:
        kind = turn_class(row)
        self.turns += 1
        self.served += kind not in NOT_SERVED
        self.errors += kind == "error"
        self.refused += kind == TurnOutcome.REFUSED
        if (n := failovers_of(row)) is not None:
            self.failovers = (self.failovers or 0) + n
        if cost.kind is Source.NO_USAGE:
            self.no_usage += 1
        else:
            counting = usage_counting(row.get("usage_protocol"), row.get("usage_protocol") or "-")
            u = self.usage.setdefault(counting, {"turns": 0, **dict.fromkeys(USAGE_FIELDS)})
            u["turns"] += 1
            for f in USAGE_FIELDS:
                if (v := row.get(f"usage_{f}")) is not None:
                    u[f] = (u[f] or 0) + v  # a field no turn reported stays None, never 0
        if cost.usd is not None:
            self.priced += 1
            self.cost += cost.usd
        elif cost.kind is Source.UNPRICED:
            self.no_price += 1

    def facts(self) -> dict[str, Any]:
        out: dict[str, Any] = {"turns": self.turns, "served": self.served, "errors": self.errors,
                               "refused": self.refused, "usage": self.usage, "turns_without_usage": self.no_usage,
                               "failovers": self.failovers}
        out["cost"] = {"total": self.cost, "turns_priced": self.priced, "turns_without_price": self.no_price}
        return out


def group_report(rows: list[dict], by: str, costs: dict[str, Cost]) -> list[dict]:
    """Turns grouped by ``by`` (GROUP_BY), most turns first; usage and cost (``costs``: request
    id -> its turn's cost)."""
    key = GROUP_BY[by]
    acc: dict[str | None, _Acc] = {}
    extra: dict[str | None, dict] = {}
    for r in rows:
        g = key(r)
        acc.setdefault(g, _Acc()).add(r, costs[r["request_id"]])
        if by == "session" and g is not None:
            e = extra.setdefault(g, {"fingerprint": bool(r.get("session_fingerprint")), "client": client_label(r)})
            e["client"] = e["client"] or client_label(r)
    out = [{by: g, **extra.get(g, {}), **a.facts()} for g, a in acc.items()]
    out.sort(key=lambda d: (-d["turns"], d[by] is None, str(d[by])))
    return out


def sessions_report(rows: list[dict], costs: dict[str, Cost], limit: int | None = None) -> list[dict]:
    """Sessions, the most recently active first: client, first and last turn, turns per agent,
    subagent ids, endpoints and routes used (turn counts), usage as reported, cost, errors,
    failovers (when the ledger records them). Turns with no session are left out."""
    by: dict[str, dict] = {}
    accs: dict[str, _Acc] = {}
    for r in sorted(rows, key=lambda r: r["started_at"]):
        sid = r.get("session_id")
        if sid is None:
            continue
        s = by.get(sid)
        if s is None:
            s = by[sid] = {"session": sid, "fingerprint": bool(r.get("session_fingerprint")), "client": None,
                           "first": r["started_at"], "last": r["started_at"], "agents": {}, "subagents": [],
                           "endpoints": {}, "routes": {}}
            accs[sid] = _Acc()
        s["client"] = client_label(r) or s["client"]
        s["last"] = r["started_at"]
        label = agent_label(r) or "unknown"
        s["agents"][label] = s["agents"].get(label, 0) + 1
        if r.get("agent_id") and r["agent_id"] not in s["subagents"]:
            s["subagents"].append(r["agent_id"])
        if was_sent(r):  # an endpoint counts only when something was sent there
            ep = r.get("endpoint") or r.get("host") or "-"
            s["endpoints"][ep] = s["endpoints"].get(ep, 0) + 1
        route = route_group(r.get("rule"), r.get("trace"), r.get("attempts")) or "(no route)"
        s["routes"][route] = s["routes"].get(route, 0) + 1
        accs[sid].add(r, costs[r["request_id"]])
    out = [{**s, **accs[sid].facts()} for sid, s in by.items()]
    out.sort(key=lambda s: -s["last"])
    return out[:limit] if limit is not None else out


# ---------------------------------------------------------------- explain


def who_line(turn: dict) -> str | None:
    """``session … · agent … · client …`` for one turn; None when nothing is known."""
    parts = []
    if turn.get("session_id"):
        fp = " (fingerprint of the conversation's start)" if turn.get("session_fingerprint") else ""
        parts.append(f"session {turn['session_id']}{fp}")
    if turn.get("agent") or turn.get("background") is not None:
        agent = turn.get("agent") or "agent unknown"
        if turn.get("agent_id"):
            agent += f" {turn['agent_id']}"
        if turn.get("background"):
            agent += ", background"
        parts.append(f"agent {agent}")
    if client_label(turn):
        parts.append(f"client {client_label(turn)}")
    return " · ".join(parts) or None


def around(session_turns: list[dict], request_id: str, n: int = 5) -> tuple[list[dict], int, int]:
    """Up to ``n`` turns of the session before and after ``request_id``, oldest first; with how
    many earlier and later turns were left out."""
    ordered = sorted(session_turns, key=lambda t: (t["started_at"], t["request_id"]))
    i = next((k for k, t in enumerate(ordered) if t["request_id"] == request_id), 0)
    lo, hi = max(i - n, 0), min(i + n + 1, len(ordered))
    return ordered[lo:hi], lo, len(ordered) - hi


def _time(ts: float) -> str:
    try:
        return datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")
    except (ValueError, OverflowError, OSError):
        return str(ts)


def explain_lines(turn: dict, session_turns: list[dict], n: int = 5) -> list[str]:
    """The session part of `explain`: who is talking, and the session's other turns around
    this one (oldest first, this one marked ▶)."""
    who = who_line(turn)
    if who is None:
        return []
    out = ["", f"{'who':<13}{who}"]
    if not turn.get("session_id") or len(session_turns) < 2:
        return out + [f"{'session':<13}no other turn of this session recorded"]
    shown, before, after = around(session_turns, turn["request_id"], n)
    out.append(f"{'session':<13}{len(session_turns)} turns; around this one"
               + (f" ({before} earlier and {after} later not shown)" if before or after else "")
               + f": tokunseba log --session {turn['session_id']}")
    cells = [[("▶ " if t["request_id"] == turn["request_id"] else "  ") + _time(t["started_at"]), t["request_id"],
              agent_label(t) or "-", (f"{t['rule']} → {t.get('endpoint') or '-'}" if t.get("rule")
                                      else t.get("endpoint") or t.get("host") or "-"),
              label(outcome_class(t.get("outcome"), t.get("status"), t.get("error"))) if t.get("outcome")
              else "open"] for t in shown]
    widths = [max(len(r[i]) for r in cells) for i in range(len(cells[0]))]
    out += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    return out
