"""The price library: pydantic's ``genai-prices``, its bundled data only (providers' list prices,
in USD, with their cache and long-context tiers).

Contract: nothing here reaches the network. The library fetches newer data only through its
``UpdatePrices`` (a thread that GETs a JSON file), which tokunseba never starts, and
``calc_price`` reads ``data_snapshot.get_snapshot()``: the bundled snapshot unless
``set_custom_snapshot`` was called, which tokunseba never calls. The provider is found by the
URL the turn went to (``provider_api_url``), never guessed from the model's name; a model the
library does not know at that provider is None (unpriced). Importing the library takes
~0.5 s (its data module): it is imported on first use (the proxy warms it at start, in a
thread), so commands that price nothing never pay it.
"""

from __future__ import annotations

import functools
import importlib.metadata
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal

from .billed import Billed

NAME = "genai-prices"
PER = 1_000_000  # the library's token prices are per million tokens
# the library's price keys for the four counts tokunseba prices, in the order parts are said
PART_KEYS = (("input", "input_mtok"), ("cache_read", "cache_read_mtok"), ("cache_write", "cache_write_mtok"),
             ("output", "output_mtok"))


@functools.cache
def version() -> str | None:
    """The installed library's version (None: not installed), without importing it."""
    try:
        return importlib.metadata.version(NAME)
    except importlib.metadata.PackageNotFoundError:
        return None


def source() -> str:
    return f"{NAME} {version()}"


@dataclass(frozen=True)
class LibraryPrice:
    total: Decimal  # USD, as the library computed it
    parts: dict[str, Decimal]  # input / cache_read / cache_write / output (or input / output): they add up to total
    provider: str  # the library's provider id (anthropic, openai, google, ...)
    model: str  # the library's model id
    rates: str  # the library's own statement of the model's prices (its ModelPrice)


def warm() -> None:
    """Import the library and price one turn (its lookups are cached after the first)."""
    library_price("gpt-4o", "https://api.openai.com/v1", Billed(input=1, uncached=1, output=1), 0.0)


def library_price(model: str, api_url: str, billed: Billed, at: float) -> LibraryPrice | None:
    """The library's price of ``billed`` tokens of ``model`` at the provider serving
    ``api_url``, at the time ``at`` (epoch seconds: a price that changed on a date applies from
    it); None when the library has no such provider or model, or the counts do not fit it."""
    try:
        import genai_prices
        from genai_prices.types import calc_unit_price
    except ImportError:  # pragma: no cover - a dependency of the package
        return None
    counts = {"input_tokens": billed.input, "output_tokens": billed.output,
              "cache_read_tokens": billed.cache_read, "cache_write_tokens": billed.cache_write}
    usage = genai_prices.Usage(**{k: v for k, v in counts.items() if v is not None})
    try:
        calc = genai_prices.calc_price(usage, model, provider_api_url=api_url,
                                       genai_request_timestamp=datetime.fromtimestamp(at, UTC))
    except (LookupError, ValueError):  # no provider or model there; counts it cannot take (cache > input)
        return None
    price = calc.model_price
    # the parts as the library charges them: a cache count priced apart leaves the input; tiers
    # by the whole input (its calc_unit_price); where they do not add up to its total (a price
    # per request), the library's own input / output split
    leaf = {"input": (billed.input or 0) - sum((getattr(billed, f) or 0) for f in ("cache_read", "cache_write")
                                                if getattr(price, f"{f}_mtok") is not None),
            "cache_read": billed.cache_read, "cache_write": billed.cache_write, "output": billed.output}
    parts = {f: calc_unit_price(getattr(price, key), leaf[f], billed.input or 0, PER) for f, key in PART_KEYS
             if getattr(price, key) is not None and leaf[f]}
    if sum(parts.values(), Decimal(0)) != calc.total_price:
        parts = {"input": calc.input_price, "output": calc.output_price}
    return LibraryPrice(calc.total_price, parts, calc.provider.id, calc.model.id, str(price))
