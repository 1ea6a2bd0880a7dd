"""`tokunseba report`: one self-contained HTML page (tokunseba/report/) of where turns went and
what they cost — spend per day and endpoint, the share of turns and tokens served locally versus
by providers, each budget's use over its window. Nothing is fetched when the page is opened.

Costs are the CLI's pricing of each turn's reported usage; locality comes from the rules file
that names the endpoints (an endpoint whose URL is loopback is local)."""

from __future__ import annotations

import argparse
import os
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

from .common import error, print_json, read_ledger, since_option


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report", help="one self-contained HTML page: spend per day and endpoint, local versus providers, budgets",
        description="Write one self-contained HTML page (its charts' JavaScript inlined: opening it fetches "
        "nothing) with the spend per day and endpoint (each turn's reported usage times its price; unpriced "
        "turns are counted apart, never as 0), the share of turns and tokens served by local endpoints (a "
        "loopback URL in the rules file) versus providers, and each budget's use over its window.",
        epilog="examples:\n  tokunseba report --since 7d --rules rules.yaml -o week.html\n"
        "  tokunseba report --json            # the figures, without the page",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ledger", metavar="PATH", help="ledger file or postgresql:// URL (default: $TOKUNSEBA_LEDGER, "
                   "else $TOKUNSEBA_HOME/ledger.db)")
    p.add_argument("--since", metavar="AGE", help="only turns newer than this (e.g. 24h, 7d; default: all)")
    p.add_argument("--rules", metavar="FILE", help="the rules file naming the endpoints (default: $TOKUNSEBA_RULES): "
                   "which endpoints are local, and its prices: table")
    p.add_argument("--prices", metavar="FILE", help="your price table, overriding the price library's and the rules file's prices: (docs/guide/costs.md)")
    p.add_argument("--tz", default="UTC", help="time zone of the days (default UTC), e.g. Europe/Berlin")
    p.add_argument("-o", "--output", metavar="FILE", default="tokunseba-report.html",
                   help="where to write the page (default tokunseba-report.html; - for standard output)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON instead of writing the page")
    p.set_defaults(func=cmd_report)


def _locality(rules_path: str | None):
    """endpoint name -> whether its URL is loopback (None: not named by the rules)."""
    from urllib.parse import urlsplit

    from ..addresses import is_loopback
    from ..routing import load_rules

    rules = load_rules(rules_path)

    def is_local(name: str | None) -> bool | None:
        ep = rules.endpoints.get(name or "")
        if ep is None:
            return None
        host = urlsplit(ep.url).hostname or ""
        return host == "localhost" or is_loopback(host)

    return rules, is_local


def _cost_function(args: argparse.Namespace, rules: Any, rules_path: str | None) -> Any:
    """A turn's cost (Decimal) from its reported usage, as the other read commands price it
    (pricing/: --prices, else the rules file's prices:, over the price library; an endpoint on
    this machine 0), or None when nobody prices it all. A routed turn's URL is its endpoint's in
    the rules."""
    from ..pricing import load_prices, row_cost, rules_prices

    prices = load_prices(args.prices) if args.prices else rules_prices(rules_path)

    def cost_of(row: dict) -> Decimal | None:
        ep = rules.endpoints.get(row.get("endpoint") or "") if row.get("rule") else None
        cost = row_cost(row, prices, ep.url if ep is not None else None)
        return None if cost.unpriced_tokens else cost.usd

    return cost_of


def cmd_report(args: argparse.Namespace) -> int:
    from ..report import ReportInputs, budget_series, figures
    from ..report import PlotlyMissing, render
    from ..routing import RulesError

    try:
        since = since_option(args.since)
    except ValueError as e:
        return error(str(e), 2)
    try:
        from zoneinfo import ZoneInfo

        ZoneInfo(args.tz)
    except Exception:  # ZoneInfoNotFoundError, ValueError for a malformed key
        return error(f"--tz: unknown time zone {args.tz!r} (e.g. UTC, Europe/Berlin)", 2)
    try:
        rules_path = args.rules or os.environ.get("TOKUNSEBA_RULES") or None
        rules, is_local = _locality(rules_path)
        cost_of = _cost_function(args, rules, rules_path)
    except RulesError as e:
        return error("\n".join(e.args[0]) if e.args and isinstance(e.args[0], list) else str(e), 2)
    except Exception as e:  # a price table that does not load
        return error(str(e), 2)
    inputs = ReportInputs(cost_of=cost_of, is_local=is_local, tz=args.tz)

    def body(ledger) -> int:
        figs = figures(ledger.turns(since), inputs, budget_series(ledger.budget_use(since)))
        if args.json:
            print_json(figs.as_json())
            return 0
        try:
            page = render(figs)
        except PlotlyMissing as e:
            return error(str(e), 1)
        if args.output == "-":
            sys.stdout.write(page)
        else:
            Path(args.output).write_text(page, encoding="utf-8")
            print(f"wrote {args.output} ({len(page) // 1024} KiB): {figs.turns} turns, {figs.served} served, "
                  f"total ${figs.total:,.4f} over {len(figs.days)} day(s); open it in a browser (nothing is fetched)")
        return 0

    return read_ledger(args, figures([], inputs).as_json(), body)
