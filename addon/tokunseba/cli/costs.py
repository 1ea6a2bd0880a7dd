"""What the read commands need to show cost (pricing/): the user's price table — ``--prices
FILE`` (a price file, or a rules file), else the ``prices:`` of the rules file in
``$TOKUNSEBA_RULES`` — and each turn's cost from the ledger, with the URL each routed turn was
sent to (its ``routed`` event: a routed endpoint on this machine costs 0, the library finds a
provider by it). Computed at read time: the ledger holds what happened, not a price.
"""

from __future__ import annotations

import argparse
import os

from ..ledger import LedgerReader
from ..pricing import Cost, Price, load_prices, routed_url, row_cost, rules_prices

PRICES_HELP = ("your price table, overriding the price library's (YAML, USD per million tokens: `prices: "
               "{ENDPOINT:MODEL_GLOB: {input: 1.0, output: 5.0, cache_read: 0.1, cache_write: 1.25}}`; a rules "
               "file with `prices:` works too); default: the `prices:` of $TOKUNSEBA_RULES, if any")


def add_prices_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--prices", metavar="FILE", help=PRICES_HELP)


def price_table(args: argparse.Namespace) -> list[Price]:
    """The user's table (PricesError, one line, when it cannot be used)."""
    if getattr(args, "prices", None):
        return load_prices(args.prices)
    return rules_prices(os.environ.get("TOKUNSEBA_RULES") or None)


def routed_urls(ledger: LedgerReader, turns: list[dict]) -> dict[str, str]:
    """request id -> the URL each routed turn (with usage to price) was sent to."""
    out = {}
    for t in turns:
        if t.get("rule") and t.get("endpoint") and t.get("usage_reported") is not None:
            if url := routed_url(ledger.events(t["request_id"]), t["endpoint"]):
                out[t["request_id"]] = url
    return out


def turn_costs(ledger: LedgerReader, turns: list[dict], table: list[Price]) -> dict[str, Cost]:
    """request id -> the cost of each turn."""
    urls = routed_urls(ledger, turns)
    return {t["request_id"]: row_cost(t, table, urls.get(t["request_id"])) for t in turns}
