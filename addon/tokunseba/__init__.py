"""tokunseba: route LLM API turns by rules and translate between provider protocols.

Everything in this package but the adapter in ``tokunseba.proxy`` (``mitm``, ``core`` and its
parts) is importable without mitmproxy (see tests/suites/test_layering.py).
"""

__version__ = "0.1.0"
