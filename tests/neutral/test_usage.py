"""Usage as reported and its conversions (neutral/usage.py, docs/dev/protocols.md E.4): the upstream's
object kept untouched; conversions through one common base, re-basing only where definitions
differ; a field not reported stays absent, never zero-filled; Anthropic's cumulative usage merged,
never added."""

from __future__ import annotations

import pytest

import tokunseba.protocols  # noqa: F401 - registers the built-in countings
from tokunseba.neutral.usage import COUNTINGS, Counting, Usage, add_counting, count, counting_of, includes_cached

ANTHROPIC_CACHED = {"input_tokens": 4, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 20,
                    "output_tokens": 7}


def test_a_count_is_an_integer_never_a_bool():
    assert count(3) == 3 and count(0) == 0
    assert count(True) is None and count(2.0) is None and count("3") is None and count(None) is None


def test_the_builtin_countings_and_which_include_the_cache():
    assert {"anthropic", "openai", "gemini"} <= set(COUNTINGS)
    assert not includes_cached("anthropic") and includes_cached("openai") and includes_cached("gemini")
    assert not includes_cached(None) and not includes_cached("smoke-signals")
    with pytest.raises(KeyError, match="unknown usage counting 'smoke-signals' \\(known: anthropic"):
        counting_of("smoke-signals")


def test_the_fields_are_in_the_upstreams_own_counting_and_tokens_on_the_common_base():
    u = Usage("anthropic", ANTHROPIC_CACHED)
    assert u.fields() == {"input": 4, "output": 7, "cache_read": 100, "cache_write": 20, "reasoning": None}
    t = u.tokens()
    assert (t["input"], t["uncached"], t["output"], t["total"]) == (124, 4, 7, 131)
    assert u.common_fields() == {"input": 124, "output": 7, "cache_read": 100, "cache_write": 20, "reasoning": None}
    assert u.reported is ANTHROPIC_CACHED  # kept untouched


def test_a_conversion_rebases_the_cache_and_writes_only_what_was_reported():
    to_chat = Usage("anthropic", ANTHROPIC_CACHED).to("openai")
    assert to_chat["prompt_tokens"] == 124 and to_chat["completion_tokens"] == 7
    assert to_chat["prompt_tokens_details"]["cached_tokens"] == 100
    assert Usage("openai", {"prompt_tokens": 10}).to("anthropic") == {"input_tokens": 10}  # no output invented


def test_a_plain_report_converts_on_the_short_path_to_the_same_numbers():
    u = Usage("openai", {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12})
    assert u.plain() == (10, 2)
    assert u.to("anthropic") == {"input_tokens": 10, "output_tokens": 2}
    assert u.to("gemini") == {"promptTokenCount": 10, "candidatesTokenCount": 2, "totalTokenCount": 12}
    assert Usage("anthropic", ANTHROPIC_CACHED).plain() is None


def test_an_unknown_counting_reads_as_nothing():
    u = Usage("smoke-signals", {"puffs": 3})
    assert u.fields() == dict.fromkeys(("input", "output", "cache_read", "cache_write", "reasoning"))
    assert u.plain() is None and u.plain_counts() is None


def test_cumulative_usage_is_merged_never_added():
    start = Usage("anthropic", {"input_tokens": 50, "output_tokens": 1})
    merged = start.merged({"output_tokens": 40, "input_tokens": None})
    assert merged.reported == {"input_tokens": 50, "output_tokens": 40}
    assert start.reported == {"input_tokens": 50, "output_tokens": 1}  # the running value untouched


def test_a_counting_name_is_taken_once():
    mine = counting_of("anthropic")
    assert add_counting(mine) is mine  # the same counting again: fine
    other = Counting("anthropic", False, mine.fields, mine.tokens, mine.write)
    with pytest.raises(ValueError, match="usage counting 'anthropic' is already registered"):
        add_counting(other)
    assert COUNTINGS["anthropic"] is mine
