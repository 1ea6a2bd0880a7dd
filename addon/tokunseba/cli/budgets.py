"""`tokunseba budgets`: each spending cap of the rules file, as its ledger counts it now —
spent, held by turns in flight, limit, window and when it resets (per proxy for a cap that is
not shared). ``--json`` gives the same, amounts exact (dollars as decimal strings and integer
micro-dollars; tokens as integers). Reads the rules (``--rules``, ``$TOKUNSEBA_RULES``) and the
ledger (``--ledger``; a read-only role is enough)."""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from .common import common_options, error, print_json, table


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "budgets", help="each spending cap: spent, held, limit, window and reset",
        description="Each budget of the rules file (budgets:) as the ledger counts it now: spent (reported "
        "cost, or the declared hold of a turn that reported none), held (turns in flight), limit, the window "
        "and when it resets. A cap not shared is counted per proxy (one row each); shared: true is one count "
        "for every proxy on the ledger. Example: tokunseba budgets --rules rules.yaml --ledger postgresql://…")
    p.add_argument("--rules", metavar="FILE", help="rules YAML (default: $TOKUNSEBA_RULES)")
    common_options(p)
    p.set_defaults(func=cmd_budgets)


def _amount(b: Any, n: int, *, exact: bool) -> Any:
    from ..routing import Unit, money

    if b.unit != Unit.USD:
        return n
    return money(n)[1:] if exact else money(n)


def cmd_budgets(args: argparse.Namespace) -> int:
    from ..budgets import BudgetStore, LedgerAway
    from ..ledger import default_ledger_target
    from ..routing import RulesError, budget_scope_text, load_rules

    path = args.rules or os.environ.get("TOKUNSEBA_RULES") or None
    if not path:
        return error("no rules file given (--rules FILE, or $TOKUNSEBA_RULES): the budgets are stated there", 2)
    try:
        rules = load_rules(path)
    except RulesError as e:
        return error(str(e), 1)
    now = time.time()
    target = args.ledger or str(default_ledger_target())
    rows: list = []
    if rules.budgets.budgets and (str(target).startswith(("postgresql:", "postgres:")) or os.path.exists(target)):
        store = BudgetStore(target, owner="cli", readonly=True)
        try:
            rows = store.windows(now) if store.has_tables() else []
        except LedgerAway as away:
            return error(str(away), 1)
        finally:
            store.close()
    out = budget_rows(rules.budgets.budgets, rows, now)
    if args.json:
        print_json({"rules": path, "ledger": str(target), "budgets": out})
        return 0
    if not out:
        print(f"no budgets in {path} (budgets: in the rules file; see docs/guide/budgets.md)")
        return 0
    head = ["BUDGET", "FOR", "SPENT", "HELD", "LIMIT", "USED", "WINDOW", "RESETS", "ON LIMIT", "SCOPE"]
    body = []
    for row in out:
        b = next(x for x in rules.budgets.budgets if x.name == row["name"])
        spent, held = row.get("spent_micros", row["spent"]), row.get("held_micros", row["held"])
        body.append([row["name"], row["counted_for"], _amount(b, spent, exact=False), _amount(b, held, exact=False),
                     _amount(b, b.limit, exact=False), f"{row['used']:.0%}" if row["used"] is not None else "-",
                     row["window"], row["resets"], row["on_limit"], budget_scope_text(b.scope)])
    print(table(head, [[str(c) for c in r] for r in body], right={2, 3, 4, 5}))
    return 0


def budget_rows(budgets: list, rows: list, now: float) -> list[dict[str, Any]]:
    """One row per budget and scope key (its newest window; a budget with none yet: its window
    as it would open now), as `budgets --json` prints them."""
    from ..budgets import reset_text

    out: list[dict[str, Any]] = []
    for b in budgets:
        mine = [w for w in rows if w.budget == b.name]
        latest: dict[str, Any] = {}
        for w in mine:  # newest window per scope key
            if w.scope_key not in latest or w.window_start > latest[w.scope_key].window_start:
                latest[w.scope_key] = w
        tz = b.window.tz if b.window.kind != "rolling" else "UTC"
        if not latest:
            start, end = b.window.bounds(now) if b.window.kind != "rolling" else (None, None)
            entries = [("team" if b.shared else "(each proxy)", 0, 0, start, end)]
        else:
            entries = [(k, w.spent, w.held, w.window_start, w.window_end) for k, w in sorted(latest.items())]
        for key, spent, held, start, end in entries:
            out.append({
                "name": b.name, "scope": {k: list(v) for k, v in b.scope.items()}, "shared": b.shared,
                "counted_for": key, "unit": str(b.unit),
                "spent": _amount(b, spent, exact=True), "held": _amount(b, held, exact=True),
                "limit": _amount(b, b.limit, exact=True), "hold": _amount(b, b.hold, exact=True),
                **({"spent_micros": spent, "held_micros": held, "limit_micros": b.limit} if b.unit == "usd" else {}),
                "used": round((spent + held) / b.limit, 4) if b.limit else None,
                "window": b.window.text(), "window_start": start, "window_end": end,
                "resets": reset_text(end, now, tz) if end is not None else "a window opens at the first turn",
                "on_limit": str(b.on_limit), "warn_at": b.warn_at, "line": b.line})
    return out
