"""`tokunseba stats --prices FILE`: the stats, plus the cost of the usage each endpoint
reported (prices.py). Without --prices, `stats` is exactly cli/read.py's; with it, a cost view
follows: per endpoint and model, the shadow and replay calls apart, and "would have cost
at the original provider" only where that provider's own usage for the turn was recorded."""

from __future__ import annotations

import argparse

from .read import _error, _json, _read, cmd_stats, render_stats, since_option, table
from ..ledger import LedgerReader, compute_stats
from ..prices import PricesError, load_prices, price_report


def extend_stats(sub: argparse._SubParsersAction) -> None:
    p = sub.choices["stats"]
    p.add_argument("--prices", metavar="FILE",
                   help="price table (YAML, per million tokens: `prices: {ENDPOINT:MODEL_GLOB: {input: 1.0, "
                   "output: 5.0, cache_read: 0.1, cache_write: 1.25}}`): adds the cost of the usage each endpoint "
                   "reported")
    p.set_defaults(func=cmd_stats_prices)


def cmd_stats_prices(args: argparse.Namespace) -> int:
    if not getattr(args, "prices", None):
        return cmd_stats(args)
    try:
        since = since_option(args.since)
    except ValueError as e:
        return _error(str(e), 2)
    try:
        prices = load_prices(args.prices)
    except PricesError as e:
        return _error(str(e), 2)

    def body(ledger: LedgerReader) -> int:
        st = ledger.stats(since)
        st["prices"] = price_report(ledger.turns(since), ledger.shadows(since=since), prices)
        if args.json:
            _json(st)
        else:
            print(render_stats(st, args.since))
            print("\n" + render_prices(st["prices"]))
        return 0

    empty = compute_stats([], since)
    empty["prices"] = price_report([], [], prices)
    return _read(args, empty, body)


def _money(v: float) -> str:
    return f"{v:.6f}"


def _cost_rows(groups: list[dict]) -> list[list[str]]:
    rows = []
    for g in groups:
        unpriced = ", ".join(f"{f} {n}" for f, n in g["unpriced_tokens"].items()) or "-"
        rows.append([g["endpoint"] or "-", g["model"] or "-", str(g["turns"]), str(g["priced"]),
                     _money(g["cost"]) if g["priced"] else "-", str(g["no_usage"]), str(g["no_price"]), unpriced])
    return rows


HEADER = ["ENDPOINT", "MODEL", "TURNS", "PRICED", "COST", "NO USAGE", "NO PRICE", "UNPRICED TOKENS"]


def render_prices(rep: dict) -> str:
    out = ["cost of the usage each endpoint reported (never estimated):"]
    if rep["served"]:
        out.append(table(HEADER, _cost_rows(rep["served"]), indent="  ", right={2, 3, 4, 5, 6}))
    out.append(f"  turns served: {_money(rep['served_total'])}")
    if rep["shadow_and_replay_calls"]:
        out += ["", "shadow and replay calls (paid calls too):",
                table(HEADER, _cost_rows(rep["shadow_and_replay_calls"]), indent="  ", right={2, 3, 4, 5, 6}),
                f"  shadow and replay calls: {_money(rep['shadow_and_replay_total'])}"]
    o = rep["original_provider"]
    out += ["", f"turns served away from the provider the client addressed: {o['turns_served_elsewhere']}; "
                f"with that provider's own usage (a shadow or replay to it): {o['turns_with_original_usage']}"]
    if o["turns_with_original_usage"]:
        out.append(f"  for those: served {_money(o['cost_served'])} · would have cost {_money(o['would_have_cost'])}"
                   f" at the original provider · difference {_money(o['difference'])}")
    return "\n".join(out)
