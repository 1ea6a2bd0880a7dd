"""Read commands by who is talking: `tokunseba sessions`, `log --session ID` and
`stats --by session|agent|client|route|endpoint` (with `--prices`: the cost of the usage
each turn reported). The facts come from cli/session_view.py; this module parses arguments and
renders tables (or ``--json``). Errors are one ``error: ...`` line (exit 2 for bad
arguments); a missing ledger is one line and empty results, as for the other read commands.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from .read import (
    _common,
    _error,
    _json,
    _log_row,
    _positive_int,
    _read,
    fmt_num,
    fmt_time,
    since_option,
    table,
)
from ..ledger import LedgerReader, cache_read_share, compute_stats
from ..prices import PricesError, load_prices
from ..routing import EVENT_ROUTED, routed_line
from .session_view import GROUP_BY, NONE_LABEL, agent_label, group_report, sessions_report

PRICES_HELP = "price table (YAML, as for `stats --prices`): adds the cost of the usage each turn reported"


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sessions", help="recent sessions: client, turns per agent, endpoints, usage, cost, errors",
        description="Recent sessions, the most recently active first: the client, when it started and was "
        "last active, its turns per agent (main, subagent, background), the endpoints and routes its turns "
        "went to, usage summed exactly as reported (per counting: OpenAI input includes cache reads, "
        "Anthropic input does not), the cost with --prices, errors and refusals. A session is the client's "
        "own id (Claude Code, Codex) or, for clients that send none (Gemini CLI, SDKs), a fingerprint "
        "fp-... of the conversation's start. `tokunseba log --session ID` lists one session's turns.")
    p.add_argument("--since", metavar="WHEN", help="only turns since: 30m, 24h, 7d, 2026-12-01 or an ISO datetime")
    p.add_argument("--limit", metavar="N", default="20", help="how many sessions (default 20)")
    p.add_argument("--prices", metavar="FILE", help=PRICES_HELP)
    _common(p)
    p.set_defaults(func=cmd_sessions)

    log = sub.choices["log"]
    log.add_argument("--session", metavar="ID", help="only the turns of this session (an id, or a unique prefix)")
    log.set_defaults(func=_wrap(log, "session", cmd_log_session))

    stats = sub.choices["stats"]
    stats.add_argument("--by", choices=tuple(GROUP_BY), metavar="KEY",
                       help=f"one table grouped by {'|'.join(GROUP_BY)}: turns, errors, usage as reported "
                       "(and the cost with --prices)")
    stats.set_defaults(func=_wrap(stats, "by", cmd_stats_by))


def _wrap(p: argparse.ArgumentParser, option: str, mine: Callable) -> Callable:
    """The command as it was unless ``option`` is given (stats keeps --prices, log its table)."""
    before = p.get_default("func")
    return lambda args: mine(args) if getattr(args, option, None) is not None else before(args)


def _prices(args: argparse.Namespace):
    return load_prices(args.prices) if getattr(args, "prices", None) else None


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
    cell = f"{c['total']:.6f}" if c["turns_priced"] else "-"
    missing = c["turns_without_price"]
    return cell + (f" (+{missing} unpriced)" if missing else "")


def counts_cell(counts: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


# ---------------------------------------------------------------- sessions


def cmd_sessions(args: argparse.Namespace) -> int:
    try:
        since = since_option(args.since)
        limit = _positive_int("--limit", args.limit)
        prices = _prices(args)
    except ValueError as e:
        return _error(str(e), 2)
    except PricesError as e:
        return _error(str(e), 2)

    def body(ledger: LedgerReader) -> int:
        sessions = sessions_report(ledger.turns(since), prices, limit)
        if args.json:
            _json(sessions)
        elif not sessions:
            print(f"no sessions recorded yet in {ledger.path}" + (f" since {args.since}" if since else ""))
        else:
            print(render_sessions(sessions, prices is not None))
            if moved := ledger.turns_with_event(EVENT_ROUTED, since):  # routing/quota.py
                print("\n" + routed_line(moved))
        return 0

    return _read(args, [], body)


def render_sessions(sessions: list[dict], priced: bool) -> str:
    failovers = any(s["failovers"] is not None for s in sessions)
    header = ["SESSION", "CLIENT", "FIRST", "LAST", "TURNS", "AGENTS", "ENDPOINTS", "USAGE AS REPORTED",
              *(["COST"] if priced else []), "ERRORS", "REFUSED", *(["FAILOVERS"] if failovers else [])]
    rows = []
    for s in sessions:
        rows.append([s["session"], s["client"] or "-", fmt_time(s["first"]), fmt_time(s["last"]), str(s["turns"]),
                     counts_cell(s["agents"]), counts_cell(s["endpoints"]), usage_cell(s["usage"]),
                     *([cost_cell(s)] if priced else []), str(s["errors"]), str(s["refused"]),
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
        limit = _positive_int("--limit", args.limit)
    except ValueError as e:
        return _error(str(e), 2)

    def body(ledger: LedgerReader) -> int:
        try:
            session = resolve_session(ledger, args.session)
        except LookupError as e:
            if args.json:
                _json([])
            return _error(str(e.args[0]), 1)
        turns = ledger.turns(limit=limit, session=session)
        if args.json:
            _json(turns)
            return 0
        rows = []
        for t in turns:
            row = _log_row(t)
            rows.append([*row[:3], agent_label(t) or "-", *row[3:]])
        print(f"session {session}" + (" (fingerprint of the conversation's start)"
                                      if turns and turns[0].get("session_fingerprint") else ""))
        print(table(["TIME", "REQUEST ID", "CLIENT", "AGENT", "MODEL", "ROUTE", "OUTCOME", "STATUS", "LATENCY",
                     "ERROR"], rows))
        return 0

    return _read(args, [], body)


# ---------------------------------------------------------------- stats --by


def cmd_stats_by(args: argparse.Namespace) -> int:
    try:
        since = since_option(args.since)
        prices = _prices(args)
    except ValueError as e:
        return _error(str(e), 2)
    except PricesError as e:
        return _error(str(e), 2)

    def body(ledger: LedgerReader) -> int:
        rows = ledger.turns(since)
        st = compute_stats(rows, since)
        report = {"since": since, "by": args.by, "turns": st["turns"], "served": st["served"],
                  "errors": st["errors"], "refused": st["refused"], "groups": group_report(rows, args.by, prices)}
        if args.json:
            _json(report)
        else:
            print(render_groups(report, prices is not None, args.since))
        return 0

    return _read(args, {"since": since, "by": args.by, "turns": 0, "served": 0, "errors": 0, "refused": 0,
                        "groups": []}, body)


def render_groups(report: dict, priced: bool, since_text: str | None) -> str:
    window = f"since {fmt_time(report['since'])} ({since_text})" if report["since"] else "all time"
    out = [f"window: {window}"]
    if not report["turns"]:
        return "\n".join([*out, "no turns in this window"])
    out.append(f"turns {report['turns']}  ·  served {report['served']}  ·  refused {report['refused']}  ·  "
               f"errors {report['errors']}")
    by = report["by"]
    failovers = any(g["failovers"] is not None for g in report["groups"])
    header = [by.upper(), "TURNS", "SERVED", "ERRORS", "REFUSED", "NO USAGE", "USAGE AS REPORTED",
              *(["COST"] if priced else []), *(["FAILOVERS"] if failovers else [])]
    rows = [[g[by] or NONE_LABEL[by], str(g["turns"]), str(g["served"]), str(g["errors"]), str(g["refused"]),
             str(g["turns_without_usage"]), usage_cell(g["usage"]), *([cost_cell(g)] if priced else []),
             *([fmt_num(g["failovers"])] if failovers else [])] for g in report["groups"]]
    out += ["", table(header, rows, right={1, 2, 3, 4, 5})]
    out.append("usage is summed per counting (openai input includes cache reads; anthropic input does not)")
    if by == "agent":
        out.append("background: the client said so (Claude Code); (unknown): the client does not say")
    return "\n".join(out)



