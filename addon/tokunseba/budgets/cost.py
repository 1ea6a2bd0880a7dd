"""What one turn charges a budget: its reported usage priced (money) or counted (tokens).

Contract: ``CostOf`` is the one interface settlement uses — the facts of a finished turn
(``Spent``) -> integer micro-dollars, or None when the turn cannot be priced (no usage
reported, or nobody prices its model there: never guessed). ``table_cost`` prices with the
user's price table (``prices:`` in the rules file, or ``--prices``): a row's price per million
tokens times the tokens the endpoint reported, in that endpoint's counting, rounded once to
the micro-dollar. ``tokens_of`` counts a token budget's charge: input (its cache reads and
writes included) plus output, as reported. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

from ..neutral.usage import Usage
from ..prices import Price, find_price, usage_cost
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


def table_cost(table: list[Price]) -> CostOf:
    """The user's price table as a ``CostOf``."""

    def cost(s: Spent) -> int | None:
        if s.usage is None:
            return None
        fields = s.usage.fields()
        if all(v is None for v in fields.values()):
            return None
        price = find_price(table, s.endpoint, s.model)
        if price is None:
            return None
        usd, unpriced = usage_cost(price, fields, s.usage.counting)
        if unpriced:  # a reported count with no price: the turn is not priced whole
            return None
        return int((Decimal(repr(usd)) * MICROS).quantize(Decimal(1), rounding=ROUND_HALF_EVEN))

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


def rules_file_prices(path: str | None) -> list[Price]:
    """The ``prices:`` table of a rules file ([] when it has none): what the proxy prices a
    turn's charge with. Raises PricesError for a table that cannot be used."""
    if not path:
        return []
    import yaml
    from yaml.nodes import MappingNode

    from ..prices import parse_prices

    root = yaml.compose(Path(path).read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
    if not isinstance(root, MappingNode):
        return []
    only = [(k, v) for k, v in root.value if getattr(k, "value", None) == "prices"]
    if not only:
        return []
    return parse_prices(yaml.serialize(MappingNode("tag:yaml.org,2002:map", only)), str(path))
