"""tokunseba: route LLM API turns by rules and translate between provider protocols.

Everything in this package except ``tokunseba.proxy.mitm`` is pure Python and importable
without mitmproxy (see tests/test_layering.py).
"""

__version__ = "0.1.0"
