"""The tokens a turn is billed for (pricing/billed.py): on one base whatever the counting — input
with the cache reads and writes, uncached, output — from the report or, when it cannot be read,
from the ledger's per-field columns; a count not reported stays None, never zero-filled."""

from __future__ import annotations

from tokunseba.pricing import Billed, billed_of, billed_of_row


def test_anthropic_adds_the_cache_to_its_input():
    b = billed_of("anthropic", {"input_tokens": 4, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 20,
                                "output_tokens": 7})
    assert b == Billed(input=124, uncached=4, output=7, cache_read=100, cache_write=20)


def test_chat_prompt_tokens_already_include_the_cached_ones():
    b = billed_of("openai", {"prompt_tokens": 2000, "completion_tokens": 100,
                             "prompt_tokens_details": {"cached_tokens": 1500}})
    assert (b.input, b.uncached, b.output, b.cache_read) == (2000, 500, 100, 1500)


def test_gemini_thoughts_are_billed_as_output():
    b = billed_of("gemini", {"promptTokenCount": 12, "candidatesTokenCount": 3, "thoughtsTokenCount": 40})
    assert (b.input, b.output) == (12, 43)


def test_nothing_reported_is_none_never_zero():
    assert billed_of("openai", {}) is None
    assert billed_of("anthropic", None) is None and billed_of(None, None) is None
    b = billed_of("openai", {"completion_tokens": 5})
    assert b.output == 5 and b.input is None and b.uncached is None  # not reported: not zero


def test_the_ledgers_columns_when_the_report_cannot_be_read():
    # Anthropic's counting: input excludes the cache; the total adds it
    b = billed_of("anthropic", "unreadable", {"input": 4, "output": 7, "cache_read": 100, "cache_write": None})
    assert b == Billed(input=104, uncached=4, output=7, cache_read=100, cache_write=None)
    # Chat's counting: input includes the cache; uncached subtracts it
    b = billed_of("openai", "unreadable", {"input": 2000, "output": 1, "cache_read": 1500})
    assert (b.input, b.uncached) == (2000, 500)
    assert billed_of("openai", "unreadable", {"input": None, "output": None}) is None
    assert billed_of("openai", "unreadable", None) is None


def test_a_ledger_rows_billed_tokens():
    row = {"usage_protocol": "openai", "usage_reported": {"prompt_tokens": 10, "completion_tokens": 2},
           "usage_input": 10, "usage_output": 2}
    assert billed_of_row(row) == billed_of("openai", row["usage_reported"])
    assert billed_of_row({"usage_protocol": "openai", "usage_reported": None, "usage_input": 10}) is None
