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

from .read import _error, _json, _read, since_option  # TODO public names after the cli split


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
    p.add_argument("--prices", metavar="FILE", help="a price table overriding the built-in prices")
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


def _cost_function(args: argparse.Namespace, is_local) -> Any:
    """A turn's cost (Decimal) from its reported usage, or None when nobody prices it."""
    from ..prices import endpoint_of, find_price, load_prices, usage_cost

    prices = load_prices(args.prices) if args.prices else []

    def cost_of(row: dict) -> Decimal | None:
        ep, model = endpoint_of(row), row.get("model_used") or row.get("requested_model")
        price = find_price(prices, ep, model)
        if price is None:
            return Decimal(0) if is_local(row.get("endpoint")) else None
        fields = {k[len("usage_"):]: row[k] for k in ("usage_input", "usage_output", "usage_cache_read",
                                                     "usage_cache_write") if row.get(k) is not None}
        cost, unpriced = usage_cost(price, fields, row.get("usage_protocol"))
        return None if unpriced else Decimal(str(cost))

    return cost_of


def cmd_report(args: argparse.Namespace) -> int:
    from ..report import ReportInputs, figures
    from ..report.page import PlotlyMissing, render
    from ..routing import RulesError

    try:
        since = since_option(args.since)
    except ValueError as e:
        return _error(str(e), 2)
    try:
        from zoneinfo import ZoneInfo

        ZoneInfo(args.tz)
    except Exception:  # ZoneInfoNotFoundError, ValueError for a malformed key
        return _error(f"--tz: unknown time zone {args.tz!r} (e.g. UTC, Europe/Berlin)", 2)
    try:
        _, is_local = _locality(args.rules or os.environ.get("TOKUNSEBA_RULES") or None)
        cost_of = _cost_function(args, is_local)
    except RulesError as e:
        return _error("\n".join(e.args[0]) if e.args and isinstance(e.args[0], list) else str(e), 2)
    except Exception as e:  # a price table that does not load
        return _error(str(e), 2)
    inputs = ReportInputs(cost_of=cost_of, is_local=is_local, tz=args.tz)

    def body(ledger) -> int:
        figs = figures(ledger.turns(since), inputs)
        if args.json:
            _json(figs.as_json())
            return 0
        try:
            page = render(figs)
        except PlotlyMissing as e:
            return _error(str(e), 1)
        if args.output == "-":
            sys.stdout.write(page)
        else:
            Path(args.output).write_text(page, encoding="utf-8")
            print(f"wrote {args.output} ({len(page) // 1024} KiB): {figs.turns} turns, {figs.served} served, "
                  f"total ${figs.total:,.4f} over {len(figs.days)} day(s); open it in a browser (nothing is fetched)")
        return 0

    return _read(args, figures([], inputs).as_json(), body)
