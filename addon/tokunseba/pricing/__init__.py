"""What a turn costs (issue 40): the price library's list prices (``library``: genai-prices,
its bundled data only), the user's own table overriding it (``table``), endpoints on this
machine at 0, a model nobody prices ``unpriced`` — never guessed. ``billed`` reads a turn's
usage as reported into the tokens it is billed for, whatever its counting; ``turn_cost`` prices
them and names the price's source; ``rows`` prices ledger rows; ``report`` sums a window for
``stats``. Money is ``Decimal`` USD.

Other packages import only the names of ``__all__``, from here.
"""

from .billed import Billed, billed_of, billed_of_row
from .library import source as library_source, version as library_version, warm as warm_library
from .report import group_costs, price_report
from .rows import endpoint_of, routed_url, row_cost, shadow_cost
from .table import Price, PricesError, find_price, load_prices, parse_prices, read_prices, rules_prices, usage_cost
from .turn_cost import Cost, Source, cost_of, cost_text, total, usd_exact, usd_text

__all__ = [
    "Billed", "billed_of", "billed_of_row",
    "library_source", "library_version", "warm_library",
    "group_costs", "price_report",
    "endpoint_of", "routed_url", "row_cost", "shadow_cost",
    "Price", "PricesError", "find_price", "load_prices", "parse_prices", "read_prices", "rules_prices", "usage_cost",
    "Cost", "Source", "cost_of", "cost_text", "total", "usd_exact", "usd_text",
]
