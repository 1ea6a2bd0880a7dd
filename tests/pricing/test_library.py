"""The price library (pricing/library.py): it never reaches the network, and its sum of a turn's
parts is the library's own calc_price for every model of three providers."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest
from genai_prices.data import providers

from tokunseba.pricing import billed_of

from tests.support.prices import ANTHROPIC, OPENAI


def test_pricing_never_reaches_the_network():
    """Importing the library and pricing turns with it, in a process where any connection or
    name lookup raises: the bundled data only (no UpdatePrices, no custom snapshot)."""
    code = textwrap.dedent("""
        import socket, time
        def refuse(*a, **k):
            raise AssertionError("network used")
        socket.socket.connect = socket.socket.connect_ex = refuse
        socket.getaddrinfo = socket.create_connection = refuse
        from tokunseba.pricing import billed_of, cost_of, warm_library
        warm_library()
        c = cost_of(model="claude-haiku-4-5", endpoint="anthropic", url="https://api.anthropic.com/v1",
                    billed=billed_of("anthropic", {"input_tokens": 10, "output_tokens": 2}), at=time.time(), table=[])
        import genai_prices.data_snapshot as snap
        assert snap._custom_snapshot is None and not snap.get_snapshot().from_auto_update
        print(c.kind, c.usd)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.split() == ["library", "0.00002"], out.stderr


@pytest.mark.parametrize("provider,url", [("anthropic", ANTHROPIC), ("openai", OPENAI),
                                          ("google", "https://generativelanguage.googleapis.com/v1beta")])
def test_every_models_price_is_the_librarys_own_calc_price(provider, url):
    """pricing/library.py adds the four counts' parts itself where they say all of a price (the
    library's calc takes ~0.3 ms at every turn's end); for every model of these providers, at
    three sizes (below and above the long-context tiers), its total is the library's own."""
    import genai_prices

    from tokunseba.pricing.library import library_price

    models = next(p for p in providers if p.id == provider).models
    assert len(models) > 20
    for m in models:
        for billed in (billed_of("anthropic", {"input_tokens": 900, "output_tokens": 80, "cache_read_input_tokens": 4000,
                                               "cache_creation_input_tokens": 300}),
                       billed_of("openai", {"prompt_tokens": 250_000, "completion_tokens": 3_000,
                                            "prompt_tokens_details": {"cached_tokens": 200_000}}),
                       billed_of("gemini", {"promptTokenCount": 12, "candidatesTokenCount": 3})):
            counts = {"input_tokens": billed.input, "output_tokens": billed.output,
                      "cache_read_tokens": billed.cache_read, "cache_write_tokens": billed.cache_write}
            try:
                want = genai_prices.calc_price(genai_prices.Usage(**{k: v for k, v in counts.items() if v is not None}),
                                               m.id, provider_api_url=url).total_price
            except (LookupError, ValueError):
                want = None
            got = library_price(m.id, url, billed, time.time())
            assert (got and got.total) == want, (m.id, billed)
