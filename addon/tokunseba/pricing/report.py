"""What the turns of a window cost, per endpoint and model (``stats``): the turns served, the
shadow and replay calls apart (paid calls too), and — only where the original provider itself
reported usage for a turn served elsewhere (a shadow or a replay to it) — what that turn would
have cost there. Token counts of different models are not comparable, so "would have cost" is
never estimated from another model's counts. Money is ``Decimal`` USD throughout.
"""

from __future__ import annotations

from decimal import Decimal

from .table import Price
from .turn_cost import Cost, Source
from .rows import endpoint_of, model_of, row_cost, shadow_cost


def group_costs(rows: list[tuple[str | None, str | None, Cost]]) -> tuple[list[dict], Decimal]:
    """Per (endpoint, model): turns, priced (local ones included), their cost, turns with no
    usage, turns unpriced, and the reported counts a table's row had no price for."""
    acc: dict[tuple, dict] = {}
    total = Decimal(0)
    for endpoint, model, cost in rows:
        g = acc.setdefault((endpoint, model), {"endpoint": endpoint, "model": model, "turns": 0, "priced": 0,
                                                "cost": Decimal(0), "no_usage": 0, "no_price": 0,
                                                "unpriced_tokens": {}, "sources": []})
        g["turns"] += 1
        if cost.kind is Source.NO_USAGE:
            g["no_usage"] += 1
            continue
        if cost.usd is None:
            g["no_price"] += 1
            continue
        g["priced"] += 1
        g["cost"] += cost.usd
        total += cost.usd
        if cost.source not in g["sources"]:
            g["sources"].append(cost.source)
        for f, n in cost.unpriced_tokens.items():
            g["unpriced_tokens"][f] = g["unpriced_tokens"].get(f, 0) + n
    groups = sorted(acc.values(), key=lambda g: (-g["cost"], str(g["endpoint"]), str(g["model"])))
    return groups, total


def price_report(turns: list[dict], shadows: list[dict], prices: list[Price],
                 routed: dict[str, str] | None = None) -> dict:
    """The cost report of ``turns`` and their ``shadows`` (``routed``: request id -> the URL
    the turn was routed to, when the ledger says it)."""
    routed = routed or {}
    costs = {t["request_id"]: row_cost(t, prices, routed.get(t["request_id"])) for t in turns}
    served, served_total = group_costs([(endpoint_of(t), model_of(t), costs[t["request_id"]]) for t in turns])
    calls = [s for s in shadows if s["kind"] in ("shadow", "replay")]
    extra, extra_total = group_costs([(s["endpoint"], s["model"] or s.get("primary_requested_model"),
                                       shadow_cost(s, prices)) for s in calls])
    elsewhere = [t for t in turns if t.get("outcome") in ("translated", "retargeted", "capped")]
    at_original = {s["request_id"]: s for s in calls  # the latest figure from the original provider, per turn
                   if s.get("at_original") and s.get("usage_reported") is not None}
    n, cost_served, cost_original = 0, Decimal(0), Decimal(0)
    for t in elsewhere:
        orig = at_original.get(t["request_id"])
        if orig is None:
            continue
        mine = costs[t["request_id"]].usd
        theirs = shadow_cost({**orig, "model": orig["model"] or t.get("requested_model")}, prices).usd
        if mine is None or theirs is None:
            continue
        n += 1
        cost_served += mine
        cost_original += theirs
    return {
        "served": served, "served_total": served_total,
        "shadow_and_replay_calls": extra, "shadow_and_replay_total": extra_total,
        "original_provider": {
            "turns_served_elsewhere": len(elsewhere), "turns_with_original_usage": n,
            "cost_served": cost_served, "would_have_cost": cost_original,
            "difference": cost_original - cost_served},
    }
