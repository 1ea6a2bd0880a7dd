"""`tokunseba check`: validate a rules file. Errors name the file, line and what is wrong; on a
valid file it also says the file's own prices, the routes no pinned client's turns can meet
(routing/client_requests.py), the endpoints too small for them, and the money caps that can reach
a model nobody prices. Named first on the command line, it imports only what it needs
(cli/main.py's RUN_COMMANDS): the rules, and pricing when the file has budgets or prices.
"""

from __future__ import annotations

import os
import sys


def add_check(sub) -> None:
    c = sub.add_parser("check", help="validate a rules file",
                       description="Validate a rules file; errors name the file, line and what is wrong.")
    c.add_argument("--rules", metavar="FILE", default=os.environ.get("TOKUNSEBA_RULES"),
                   help="the rules file (default $TOKUNSEBA_RULES)")
    c.add_argument("rules_file", nargs="?", metavar="FILE", help="same as --rules")
    c.set_defaults(func=cmd_check)


def budget_price_warnings(rules, path: str) -> list[str]:
    """A money cap that can reach a model nobody prices (budgets/check.py): priced as a turn is
    (the file's ``prices:`` over the price library; a local endpoint at 0)."""
    if not rules.budgets.budgets:
        return []
    import time

    from ..budgets import price_warnings
    from ..pricing import Billed, PricesError, Source, cost_of, rules_prices

    try:
        table = rules_prices(path)
    except PricesError as e:
        return [str(e)]
    probe, now = Billed(input=1_000_000, uncached=1_000_000, output=1_000_000), time.time()
    return price_warnings(rules, lambda ep, model: cost_of(model=model, endpoint=ep.name, url=ep.url, billed=probe,
                                                           at=now, table=table).kind is not Source.UNPRICED)


def cmd_check(args) -> int:
    from ..routing import check_file

    path = args.rules_file or args.rules
    if not path:
        print("error: no rules file given (tokunseba check FILE, or --rules FILE, or $TOKUNSEBA_RULES)", file=sys.stderr)
        return 2
    ok, lines = check_file(path)
    if ok:  # its prices: read by pricing/, as the proxy reads them
        from ..pricing import PricesError, rules_prices

        try:
            if own := rules_prices(path):
                lines.append(f"prices: {len(own)} of your own, over the price library's list prices "
                             f"(first match wins: {', '.join(f'{p.endpoint}:{p.model_glob}' for p in own)})")
        except PricesError as e:
            ok, lines = False, [str(e)]
    if ok:  # routes no pinned client's turns can meet, or whose endpoint cannot hold them (routing/client_requests.py)
        from ..routing import load_rules, never_matching, too_big

        loaded = load_rules(path)
        lines += never_matching(loaded) + too_big(loaded) + budget_price_warnings(loaded, path)
    for line in lines:
        print(line, file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1
