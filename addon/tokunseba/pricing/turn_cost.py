"""The cost of one turn's reported usage, and where its price came from.

Where a price comes from, first match wins:

1. the user's table (table.py: ``prices:`` in the rules file, or ``--prices``), by endpoint
   name and model glob — ``your table: prices.yaml line 3``;
2. an endpoint on this machine (loopback, or ``localhost``) costs 0 — ``local: 0``;
3. the price library (library.py, its bundled data), by the URL the turn went to and its
   model — ``genai-prices 0.2.3``;
4. else the turn is ``unpriced: no price for MODEL at ENDPOINT``: never guessed.

Where the cost is computed: from what the ledger records (usage as reported, its counting,
the endpoint, its URL, the model, the turn's start), at read time by the CLI (``log``,
``explain``, ``stats``, ``sessions``), so the ledger stays "what happened" and a price the user
adds later prices old turns too; and at the turn's end by the proxy, from the same facts, for
the console line and the OTel span. Money is ``Decimal`` USD, summed as such; a float only
where a number leaves (JSON, span attributes), never summed. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal
from enum import StrEnum

from ..addresses import is_local_url
from .billed import Billed
from .library import library_price, source as library_source
from .table import Price, find_price, usage_cost


class Source(StrEnum):
    TABLE = "table"  # the user's table
    LOCAL = "local"  # an endpoint on this machine
    LIBRARY = "library"  # genai-prices
    UNPRICED = "unpriced"  # nobody prices this model there
    NO_USAGE = "no_usage"  # the upstream reported no usage


@dataclass(frozen=True)
class Cost:
    kind: Source
    usd: Decimal | None  # None: unpriced or no usage
    source: str  # the price's source, as `explain` names it
    parts: dict[str, Decimal] = field(default_factory=dict)  # input / cache_read / cache_write / output
    unpriced_tokens: dict[str, int] = field(default_factory=dict)  # reported counts the user's row has no price for
    rates: str | None = None  # the library's statement of the model's prices

    def record(self) -> dict:
        """As ``--json`` says it: amounts as decimal strings (exact)."""
        return {"usd": None if self.usd is None else str(self.usd), "kind": str(self.kind), "source": self.source,
                "parts": {k: str(v) for k, v in self.parts.items()}, "unpriced_tokens": self.unpriced_tokens,
                **({"rates": self.rates} if self.rates else {})}


NO_USAGE = Cost(Source.NO_USAGE, None, "no usage reported")
MICRO = Decimal("0.000001")


def usd_text(usd: Decimal) -> str:
    """``$0.001234``: to the micro-dollar (a sum is rounded once, after it is added up)."""
    return f"${usd.quantize(MICRO, rounding=ROUND_HALF_EVEN)}"


def usd_exact(usd: Decimal) -> str:
    """``$0.0000042``: every digit (``explain``: the parts add up to the total as shown)."""
    return f"${usd.normalize():f}" if usd else "$0"


def cost_text(cost: Cost) -> str:
    """A cost in one cell: ``$0.001234``, ``$0 local``, ``unpriced``, ``-`` (no usage)."""
    if cost.kind is Source.NO_USAGE:
        return "-"
    if cost.kind is Source.UNPRICED:
        return "unpriced"
    if cost.kind is Source.LOCAL:
        return "$0 local"
    assert cost.usd is not None
    return usd_text(cost.usd) + ("+" if cost.unpriced_tokens else "")  # + : some reported counts have no price


def cost_of(*, model: str | None, endpoint: str | None, url: str | None, billed: Billed | None, at: float,
            table: list[Price]) -> Cost:
    """The cost of ``billed`` tokens of ``model`` served by ``endpoint`` (its name) at ``url``,
    for a turn that started at ``at`` (see the module docstring for the order)."""
    if billed is None:
        return NO_USAGE
    if (price := find_price(table, endpoint, model)) is not None:
        usd, parts, unpriced = usage_cost(price, billed)
        return Cost(Source.TABLE, usd, price.where(), parts, unpriced)
    if is_local_url(url):
        return Cost(Source.LOCAL, Decimal(0), "local: 0")
    if url and model and (lib := library_price(model, url, billed, at)) is not None:
        return Cost(Source.LIBRARY, lib.total, f"{library_source()} ({lib.provider} {lib.model})", lib.parts,
                    rates=lib.rates)
    return Cost(Source.UNPRICED, None, f"unpriced: no price for {model or '(no model)'} at {endpoint or url or '?'}")


def total(costs: list[Cost]) -> tuple[Decimal, int, int]:
    """(the sum of the priced costs, how many turns were priced, how many reported usage but
    were unpriced)."""
    usd = sum((c.usd for c in costs if c.usd is not None), Decimal(0))
    return usd, sum(c.usd is not None for c in costs), sum(c.kind is Source.UNPRICED for c in costs)
