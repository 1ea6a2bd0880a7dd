"""Read commands by who is talking: `tokunseba sessions`, `log --session ID` and
`stats --by session|agent|client|route|endpoint`, each with the cost of the usage each turn
reported (cli/costs.py; `--prices` overrides the library's prices). The facts come from
cli/session_view.py; this module parses arguments and renders tables (or ``--json``). Errors are one ``error: ...`` line (exit 2 for bad
arguments); a missing ledger is one line and empty results, as for the other read commands.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from .common import (
    common_options,
    error,
    fmt_num,
    fmt_time,
    positive_int,
    print_json,
    read_ledger,
    since_option,
    table,
)
from .log import log_row
from ..ledger import LedgerReader, cache_read_share, compute_stats
from ..pricing import PricesError, usd_text
from .costs import PRICES_HELP, price_table, turn_costs
from ..routing import EVENT_ROUTED, routed_line
from .session_view import GROUP_BY, NONE_LABEL, agent_label, group_report, sessions_report

def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sessions", help="recent sessions: client, turns per agent, endpoints, usage, cost, errors",
        description="Recent sessions, the most recently active first: the client, when it started and was "
        "last active, its turns per agent (main, subagent, background), the endpoints and routes its turns "
        "went to, usage summed exactly as reported (per counting: OpenAI input includes cache reads, "
        "Anthropic input does not), the cost (the price library's, or your table: --prices), errors and refusals. A session is the client's "
        "own id (Claude Code, Codex) or, for clients that send none (Gemini CLI, SDKs), a fingerprint "
        "fp-... of the conversation's start. `tokunseba log --session ID` lists one session's turns.")
    p.add_argument("--since", metavar="WHEN", help="only turns since: 30m, 24h, 7d, 2026-12-01 or an ISO datetime")
    p.add_argument("--limit", metavar="N", default="20", help="how many sessions (default 20)")
    p.add_argument("--prices", metavar="FILE", help=PRICES_HELP)
    common_options(p)
    p.set_defaults(func=cmd_sessions)

    log = sub.choices["log"]
    log.add_argument("--session", metavar="ID", help="only the turns of this session (an id, or a unique prefix)")
    log.set_defaults(func=_wrap(log, "session", cmd_log_session))

    stats = sub.choices["stats"]
    stats.add_argument("--by", choices=tuple(GROUP_BY), metavar="KEY",
                       help=f"one table grouped by {'|'.join(GROUP_BY)}: turns, errors, usage as reported "
                       "and cost")
    stats.set_defaults(func=_wrap(stats, "by", cmd_stats_by))


def _wrap(p: argparse.ArgumentParser, option: str, mine: Callable) -> Callable:
    """The command as it was unless ``option`` is given (stats keeps --prices, log its table)."""
    before = p.get_default("func")
    return lambda args: mine(args) if getattr(args, option, None) is not None else before(args)


# ---------------------------------------------------------------- rendering helpers


def usage_cell(usage: dict) -> str:
    """Usage as reported, per counting: ``anthropic in 12 · out 5 · cache read 100``."""
    if not usage:
        return "-"
    parts = []
    for counting, u in sorted(usage.items()):
        fields = [f"{label} {u[f]}" for f, label in (("input", "in"), ("output", "out"), ("cache_read", "cache read"),
                                                       ("cache_write", "cache write")) if u.get(f) is not None]
        if (share := cache_read_share(counting, u)) is not None:  # of the whole input, as reported
            fields.append(f"{share:.0%} of input from cache")
        parts.append(f"{counting} " + " · ".join(fields) if fields else f"{counting} (no counts)")
    return "; ".join(parts)


def cost_cell(d: dict) -> str:
    c = d.get("cost")
    if c is None:
        return "-"
    cell = usd_text(c["total"]) if c["turns_priced"] else "-"
    missing = c["turns_without_price"]
    return cell + (f" (+{missing} unpriced)" if missing else "")


def counts_cell(counts: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


# ---------------------------------------------------------------- sessions


def cmd_sessions(args: argparse.Namespace) -> int:
    try:
        since = since_option(args.since)
        limit = positive_int("--limit", args.limit)
        prices = price_table(args)
    except (ValueError, PricesError) as e:
        return error(str(e), 2)

    def body(ledger: LedgerReader) -> int:
        turns = ledger.turns(since)
        sessions = sessions_report(turns, turn_costs(ledger, [t for t in turns if t.get("session_id")], prices), limit)
        if args.json:
            print_json(sessions)
        elif not sessions:
            print(f"no sessions recorded yet in {ledger.path}" + (f" since {args.since}" if since else ""))
        else:
            print(render_sessions(sessions))
            if moved := ledger.turns_with_event(EVENT_ROUTED, since):  # routing/quota.py
                print("\n" + routed_line(moved))
        return 0

    return read_ledger(args, [], body)


def render_sessions(sessions: list[dict]) -> str:
    failovers = any(s["failovers"] is not None for s in sessions)
    header = ["SESSION", "CLIENT", "FIRST", "LAST", "TURNS", "AGENTS", "ENDPOINTS", "USAGE AS REPORTED",
              "COST", "ERRORS", "REFUSED", *(["FAILOVERS"] if failovers else [])]
    rows = []
    for s in sessions:
        rows.append([s["session"], s["client"] or "-", fmt_time(s["first"]), fmt_time(s["last"]), str(s["turns"]),
                     counts_cell(s["agents"]), counts_cell(s["endpoints"]), usage_cell(s["usage"]),
                     cost_cell(s), str(s["errors"]), str(s["refused"]),
                     *([fmt_num(s["failovers"])] if failovers else [])])
    out = [table(header, rows)]
    if any(s["fingerprint"] for s in sessions):
        out.append("fp-...: no session id sent by the client; a fingerprint of the conversation's start")
    return "\n".join(out)


# ---------------------------------------------------------------- log --session


def resolve_session(ledger: LedgerReader, given: str) -> str:
    """The session id ``given`` names: itself, or the one session id it is a prefix of.
    LookupError (one line) when none or several match."""
    given = given.strip()
    if not given:
        raise LookupError("--session: empty session id")
    if ledger.turns(limit=1, session=given):
        return given
    ids = sorted({t["session_id"] for t in ledger.turns() if (t.get("session_id") or "").startswith(given)})
    if len(ids) == 1:
        return ids[0]
    if not ids:
        raise LookupError(f"no turn of session {given!r} recorded (tokunseba sessions lists them)")
    raise LookupError(f"session prefix {given!r} is ambiguous: {', '.join(ids[:5])}{', ...' if len(ids) > 5 else ''}")


def cmd_log_session(args: argparse.Namespace) -> int:
    try:
        limit = positive_int("--limit", args.limit)
        prices = price_table(args)
    except (ValueError, PricesError) as e:
        return error(str(e), 2)

    def body(ledger: LedgerReader) -> int:
        try:
            session = resolve_session(ledger, args.session)
        except LookupError as e:
            if args.json:
                print_json([])
            return error(str(e.args[0]), 1)
        turns = ledger.turns(limit=limit, session=session)
        costs = turn_costs(ledger, turns, prices)
        if args.json:
            print_json([{**t, "cost": costs[t["request_id"]].record()} for t in turns])
            return 0
        rows = []
        for t in turns:
            row = log_row(t, costs[t["request_id"]])
            rows.append([*row[:3], agent_label(t) or "-", *row[3:]])
        print(f"session {session}" + (" (fingerprint of the conversation's start)"
                                      if turns and turns[0].get("session_fingerprint") else ""))
        print(table(["TIME", "REQUEST ID", "CLIENT", "AGENT", "MODEL", "ROUTE", "OUTCOME", "STATUS", "LATENCY",
                     "COST", "ERROR"], rows))
        return 0

    return read_ledger(args, [], body)


# ---------------------------------------------------------------- stats --by


def cmd_stats_by(args: argparse.Namespace) -> int:
    try:
        since = since_option(args.since)
        prices = price_table(args)
    except (ValueError, PricesError) as e:
        return error(str(e), 2)

    def body(ledger: LedgerReader) -> int:
        rows = ledger.turns(since)
        st = compute_stats(rows, since)
        report = {"since": since, "by": args.by, "turns": st["turns"], "served": st["served"],
                  "errors": st["errors"], "refused": st["refused"],
                  "groups": group_report(rows, args.by, turn_costs(ledger, rows, prices))}
        if args.json:
            print_json(report)
        else:
            print(render_groups(report, args.since))
        return 0

    return read_ledger(args, {"since": since, "by": args.by, "turns": 0, "served": 0, "errors": 0, "refused": 0,
                               "groups": []}, body)


def render_groups(report: dict, since_text: str | None) -> str:
    window = f"since {fmt_time(report['since'])} ({since_text})" if report["since"] else "all time"
    out = [f"window: {window}"]
    if not report["turns"]:
        return "\n".join([*out, "no turns in this window"])
    out.append(f"turns {report['turns']}  ·  served {report['served']}  ·  refused {report['refused']}  ·  "
               f"errors {report['errors']}")
    by = report["by"]
    failovers = any(g["failovers"] is not None for g in report["groups"])
    header = [by.upper(), "TURNS", "SERVED", "ERRORS", "REFUSED", "NO USAGE", "USAGE AS REPORTED",
              "COST", *(["FAILOVERS"] if failovers else [])]
    rows = [[g[by] or NONE_LABEL[by], str(g["turns"]), str(g["served"]), str(g["errors"]), str(g["refused"]),
             str(g["turns_without_usage"]), usage_cell(g["usage"]), cost_cell(g),
             *([fmt_num(g["failovers"])] if failovers else [])] for g in report["groups"]]
    out += ["", table(header, rows, right={1, 2, 3, 4, 5})]
    out.append("usage is summed per counting (openai input includes cache reads; anthropic input does not)")
    if by == "agent":
        out.append("background: the client said so (Claude Code); (unknown): the client does not say")
    return "\n".join(out)



