"""What one turn charges a budget: its reported usage priced (money) or counted (tokens).

Contract: ``CostOf`` is the one interface settlement uses — the facts of a finished turn
(``Spent``) -> integer micro-dollars, or None when the turn cannot be priced (no usage
reported, or nobody prices its model there: never guessed). ``pricing_cost`` is the pricing
every turn gets (pricing/: the user's table over the price library's list prices, a local
endpoint at 0), its ``Decimal`` dollars rounded once to the micro-dollar. ``tokens_of`` counts a
token budget's charge: input (its cache reads and writes included) plus output, as reported.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal

from ..neutral import Usage
from ..pricing import Price, billed_of, cost_of
from ..routing import MICROS


@dataclass(frozen=True)
class Spent:
    """What a turn that ended used, as reported, and where it was served."""

    endpoint: str | None
    model: str | None
    url: str | None
    usage: Usage | None
    at: float  # when the turn started


CostOf = Callable[[Spent], int | None]


def pricing_cost(table: list[Price]) -> CostOf:
    """The pricing every turn gets (pricing.cost_of over ``table``) as a ``CostOf``."""

    def cost(s: Spent) -> int | None:
        if s.usage is None:
            return None
        c = cost_of(model=s.model, endpoint=s.endpoint, url=s.url, billed=billed_of(s.usage.counting, s.usage.reported),
                    at=s.at, table=table)
        if c.usd is None or c.unpriced_tokens:  # unpriced, or a reported count with no price: not priced whole
            return None
        return int((c.usd * MICROS).quantize(Decimal(1), rounding=ROUND_HALF_EVEN))

    return cost


def tokens_of(usage: Usage | None) -> int | None:
    """Input (cache included) plus output tokens as reported; None when neither was."""
    if usage is None:
        return None
    t = usage.tokens()
    inp, out = t.get("input"), t.get("output")
    if inp is None and out is None:
        return None
    return (inp or 0) + (out or 0)
