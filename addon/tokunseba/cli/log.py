"""`tokunseba log`: recent turns with their request ids, newest first (a client's retries folded
into the request they repeat), with what each cost (cli/costs.py), as an aligned table or
``--json`` (each turn with its ``cost``). ``log_row`` is one turn's row, as `sessions`'
`log --session` shows it too.
"""

from __future__ import annotations

import argparse

from ..ledger import LedgerReader
from ..pricing import Cost, PricesError, cost_text
from ..outcomes import client_label, label, route_text, seconds, was_sent
from .common import (
    common_options,
    counted_outcome,
    error,
    fmt_num,
    fmt_time,
    outcome_label,
    positive_int,
    print_json,
    read_ledger,
    table,
)
from .costs import add_prices_option, price_table, turn_costs


def add_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("log", help="recent turns with their request ids, newest first")
    p.add_argument("--limit", metavar="N", default="20", help="how many turns (default 20)")
    p.add_argument("--instance", metavar="NAME",
                   help="only the turns of this proxy (its --instance; default of a proxy: user@host)")
    add_prices_option(p)
    common_options(p)
    p.set_defaults(func=cmd_log)


def cmd_log(args: argparse.Namespace) -> int:
    try:
        limit = positive_int("--limit", args.limit)
        prices = price_table(args)
    except (ValueError, PricesError) as e:
        return error(str(e), 2)

    def body(ledger: LedgerReader) -> int:
        turns = ledger.turns(limit=limit, instance=args.instance)
        costs = turn_costs(ledger, turns, prices)
        if args.json:
            print_json([{**t, "cost": costs[t["request_id"]].record()} for t in turns])
        elif not turns:
            print(f"no turns recorded yet in {ledger.path}" if args.instance is None
                  else f"no turns of instance {args.instance!r} in {ledger.path}")
        else:
            head = ["TIME", "REQUEST ID", "CLIENT", "MODEL", "ROUTE", "OUTCOME", "STATUS", "LATENCY", "COST", "ERROR"]
            turns, folded = fold_retries(turns)
            rows = [log_row(t, costs[t["request_id"]]) for t in turns]
            if args.instance is None and len({t.get("instance") for t in turns}) > 1:  # a shared ledger
                head.insert(2, "INSTANCE")
                for r, t in zip(rows, turns):
                    r.insert(2, t.get("instance") or "-")
            print(table(head, rows))
            if folded:
                print(f"{folded} retr{'y' if folded == 1 else 'ies'} folded into the request they repeat "
                      "(+N retries in its row; log --json lists every turn)")
            total = ledger.count_turns(instance=args.instance)
            shown = len(turns) + folded
            if total > shown:
                print(f"{shown} of {total} shown, newest first (--limit N shows more)")
        return 0

    return read_ledger(args, [], body)


def fold_retries(turns: list[dict]) -> tuple[list[dict], int]:
    """``log``: the retries of a request (turns.retry_of) that is in ``turns`` folded into its
    row (``retries``: how many, and the outcome of the last one), and how many were folded."""
    by_id = {t["request_id"]: t for t in turns}
    out, folded = [], 0
    for t in reversed(turns):  # oldest first: the last retry's outcome is the latest word
        first = by_id.get(t.get("retry_of") or "")
        if first is not None:
            first["retries"] = first.get("retries", 0) + 1
            first["last_retry"] = t
            folded += 1
        else:
            out.append(t)
    return list(reversed(out)), folded


def _model_cell(t: dict) -> str:
    req, used = t.get("requested_model"), t.get("model_used")
    if used and used != req:
        return f"{req or '-'} → {used}"
    return req or used or "-"


def _route_cell(t: dict) -> str:
    """The route as the console says it (outcomes.route_text), then where the turn went."""
    route = route_text(t.get("rule"), t.get("trace"), t.get("attempts"))
    if t.get("rule"):
        cell = f"{route} → {t.get('endpoint') or '-'}"
    elif was_sent(t):
        cell = f"{route} → {t.get('endpoint') or t.get('host') or '-'}"
    else:
        cell = f"{route} → {t.get('host') or '-'} (not sent)"
    failed = _failed_attempts(t)[: len(t.get("attempts") or []) - 1]  # every attempt before the last one
    if failed:  # failed over (the last attempt answered, or its failure is what the client got)
        cell += f" (failed over from {', '.join(failed)})"
    return cell


def _failed_attempts(t: dict) -> list[str]:
    """``small 503`` for each attempt of the turn that failed (turns.attempts)."""
    out = []
    for a in t.get("attempts") or []:
        if isinstance(a, dict) and a.get("kind") != "answered":
            what = str(a["status"]) if a.get("kind") == "status" and a.get("status") else str(a.get("kind", "?"))
            out.append(f"{a.get('endpoint') or a.get('host') or 'original host'} {what.replace('_', ' ')}")
    return out




def log_row(t: dict, cost: Cost | None = None) -> list[str]:
    """One turn's row: TIME, REQUEST ID, CLIENT, MODEL, ROUTE, OUTCOME, STATUS, LATENCY, COST, ERROR."""
    err = (t.get("error") or "").replace("\n", " ")
    if t.get("retries"):  # folded: the request, then how its retries ended
        last = t["last_retry"]
        n = t["retries"]
        err = (f"+{n} retr{'y' if n == 1 else 'ies'}, the last {label(counted_outcome(last))} "
               f"{fmt_num(last.get('status'))}" + (f" · {err}" if err else ""))
    return [
        fmt_time(t["started_at"]),
        t["request_id"],
        client_label(t.get("client_name"), t.get("client_protocol")),  # as the console names it
        _model_cell(t),
        _route_cell(t),
        outcome_label(counted_outcome(t)),
        fmt_num(t.get("status")),
        seconds(t.get("latency_ms")),  # as the console shows it
        "-" if cost is None else cost_text(cost),
        err[:77] + "..." if len(err) > 80 else err,
    ]

