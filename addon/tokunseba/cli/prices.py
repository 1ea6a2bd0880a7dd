"""`tokunseba stats`' cost view: after the counts, what the usage each endpoint reported cost
(pricing/: the price library's list prices, your table over them with `--prices FILE`, local
endpoints at 0, unpriced models said as such), per endpoint and model with the source of each
price; the shadow and replay calls apart; and "would have cost at the original provider" only
where that provider's own usage for the turn was recorded."""

from __future__ import annotations

import argparse
import sys

from .common import error, print_json, read_ledger, since_option, table
from .costs import PRICES_HELP, price_table, routed_urls
from .stats import render_stats, with_quota
from ..ledger import LedgerReader, compute_stats, spool_note
from ..pricing import PricesError, price_report, usd_text


def extend_stats(sub: argparse._SubParsersAction) -> None:
    p = sub.choices["stats"]
    p.add_argument("--prices", metavar="FILE", help=PRICES_HELP)
    p.set_defaults(func=cmd_stats_costs)


def cmd_stats_costs(args: argparse.Namespace) -> int:
    try:
        since = since_option(args.since)
        prices = price_table(args)
    except (ValueError, PricesError) as e:
        return error(str(e), 2)

    def body(ledger: LedgerReader) -> int:
        st = with_quota(ledger.stats(since), ledger, since)
        turns = ledger.turns(since)
        st["prices"] = price_report(turns, ledger.shadows(since=since), prices, routed_urls(ledger, turns))
        if args.json:
            print_json(st)
        else:
            print(render_stats(st, args.since))
            if st["turns"]:
                print("\n" + render_prices(st["prices"]))
        if note := spool_note(ledger.path):
            print(note, file=sys.stderr)
        return 0

    empty = compute_stats([], since)
    empty["prices"] = price_report([], [], prices)
    return read_ledger(args, empty, body)


def _cost_rows(groups: list[dict]) -> list[list[str]]:
    rows = []
    for g in groups:
        unpriced = ", ".join(f"{f} {n}" for f, n in g["unpriced_tokens"].items()) or "-"
        rows.append([g["endpoint"] or "-", g["model"] or "-", str(g["turns"]), str(g["priced"]),
                     usd_text(g["cost"]) if g["priced"] else "-", str(g["no_usage"]), str(g["no_price"]), unpriced,
                     "; ".join(g["sources"]) or "-"])
    return rows


HEADER = ["ENDPOINT", "MODEL", "TURNS", "PRICED", "COST", "NO USAGE", "NO PRICE", "UNPRICED TOKENS", "PRICE"]


def render_prices(rep: dict) -> str:
    out = ["cost of the usage each endpoint reported (USD; a model nobody prices is counted under NO PRICE, never "
           "estimated):"]
    if rep["served"]:
        out.append(table(HEADER, _cost_rows(rep["served"]), indent="  ", right={2, 3, 4, 5, 6}))
    out.append(f"  turns served: {usd_text(rep['served_total'])}")
    if rep["shadow_and_replay_calls"]:
        out += ["", "shadow and replay calls (paid calls too):",
                table(HEADER, _cost_rows(rep["shadow_and_replay_calls"]), indent="  ", right={2, 3, 4, 5, 6}),
                f"  shadow and replay calls: {usd_text(rep['shadow_and_replay_total'])}"]
    o = rep["original_provider"]
    out += ["", f"turns served away from the provider the client addressed: {o['turns_served_elsewhere']}; "
                f"with that provider's own usage (a shadow or replay to it): {o['turns_with_original_usage']}"]
    if o["turns_with_original_usage"]:
        out.append(f"  for those: served {usd_text(o['cost_served'])} · would have cost {usd_text(o['would_have_cost'])}"
                   f" at the original provider · difference {usd_text(o['difference'])}")
    return "\n".join(out)
