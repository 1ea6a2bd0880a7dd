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
    import importlib.metadata  # ~40 ms: only when a price is said (the proxy's start-up never pays it)

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
    it); None when the library has no such provider or model, or the counts do not fit it
    (cache counts above the input)."""
    found = _model_at(model.lower(), api_url)
    if found is None:
        return None
    provider, info = found
    when = datetime.fromtimestamp(at, UTC)
    price = info.get_prices(when)
    parts = _parts(price, billed)
    if parts is None:
        return None
    if _sums_as_the_library(price):
        total = sum(parts.values(), Decimal(0))
    else:  # a price the four counts do not say all of (per request, by modality): the library's own sum
        calc = _library_calc(info, provider, billed, when)
        if calc is None:
            return None
        total, parts = calc.total_price, {"input": calc.input_price, "output": calc.output_price}
    return LibraryPrice(total, parts, provider.id, info.id, _rates(price))


@functools.lru_cache(maxsize=1024)
def _model_at(model: str, api_url: str) -> tuple | None:
    """(provider, model) the library finds for ``model`` at ``api_url``, or None. Cached, misses
    too: the bundled data does not change while the process runs."""
    try:
        from genai_prices.data_snapshot import get_snapshot
    except ImportError:  # pragma: no cover - a dependency of the package
        return None
    try:
        return get_snapshot().find_provider_model(model, None, None, api_url)
    except LookupError:
        return None


def _parts(price, billed: Billed) -> dict[str, Decimal] | None:
    """Each of the four counts at the library's rate, as the library splits them: a cache count
    priced apart leaves the input; a tier by the whole input (its ``calc_unit_price``). None
    when the cache counts exceed the input (the library refuses such usage too)."""
    from genai_prices.types import calc_unit_price

    uncached = (billed.input or 0) - sum((getattr(billed, f) or 0) for f in ("cache_read", "cache_write")
                                         if getattr(price, f"{f}_mtok") is not None)
    if uncached < 0:
        return None
    leaf = {"input": uncached, "cache_read": billed.cache_read, "cache_write": billed.cache_write,
            "output": billed.output}
    return {f: calc_unit_price(getattr(price, key), leaf[f], billed.input or 0, PER) for f, key in PART_KEYS
            if getattr(price, key) is not None and leaf[f]}


# probes: every count non-zero, below and above the usual long-context tiers (200K, 272K)
PROBES = (Billed(input=10_000, uncached=6_000, output=700, cache_read=3_000, cache_write=1_000),
          Billed(input=1_500_000, uncached=900_000, output=20_000, cache_read=500_000, cache_write=100_000))
_SUMS: dict[int, tuple[object, bool]] = {}  # id(ModelPrice) -> (it, whether _parts adds up to the library's total)


def _sums_as_the_library(price) -> bool:
    """Whether the four counts' parts add up to what the library itself computes for this price
    (checked once per price, on PROBES, against its own ``ModelPrice.calc_price``): then its
    ~0.3 ms calculation is not run at every turn's end. A per-request price or one by modality
    is not: the library's own sum is used for it."""
    known = _SUMS.get(id(price))
    if known is not None and known[0] is price:
        return known[1]
    agree = True
    for b in PROBES:
        try:
            want = price.calc_price(_usage(b))["total_price"]
        except ValueError:
            agree = False
            break
        parts = _parts(price, b)
        agree = agree and parts is not None and sum(parts.values(), Decimal(0)) == want
    _SUMS[id(price)] = (price, agree)
    return agree


_RATES: dict[int, tuple[object, str]] = {}  # id(ModelPrice) -> (it, its statement): made once (~0.4 ms)


def _rates(price) -> str:
    known = _RATES.get(id(price))
    if known is None or known[0] is not price:
        known = _RATES[id(price)] = (price, str(price))
    return known[1]


def _usage(billed: Billed):
    import genai_prices

    counts = {"input_tokens": billed.input, "output_tokens": billed.output,
              "cache_read_tokens": billed.cache_read, "cache_write_tokens": billed.cache_write}
    return genai_prices.Usage(**{k: v for k, v in counts.items() if v is not None})


def _library_calc(info, provider, billed: Billed, when: datetime):
    try:
        return info.calc_price(_usage(billed), provider, genai_request_timestamp=when)
    except ValueError:  # counts it cannot take
        return None
