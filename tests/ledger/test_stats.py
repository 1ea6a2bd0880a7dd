"""The figures the ledger's turns add up to (ledger/stats.py): nearest-rank percentiles, counts,
groupings and usage sums, an empty window."""

from __future__ import annotations

import time

from tokunseba.ledger import percentile

from tests.support.ledgers import make, start


def test_percentile_is_nearest_rank():
    vals = [float(v) for v in range(1, 21)]
    assert (percentile(vals, 50), percentile(vals, 95), percentile(vals, 100)) == (10.0, 19.0, 20.0)
    assert percentile([7.0], 95) == 7.0
    assert percentile([], 50) is None


def test_stats(make):
    with make() as led:
        # 1 old turn outside the window, 5 inside
        start(led, "old", at=10.0)
        led.update_turn("old", outcome="pass_through", status=200, latency_ms=999.0)
        start(led, "t1", at=100.0)
        led.update_turn("t1", rule="easy", endpoint="local", model_used="gemma", outcome="translated", status=200,
                        latency_ms=100.0, ttfb_ms=10.0, usage_protocol="openai",
                        usage_reported={"prompt_tokens": 120, "completion_tokens": 30,
                                        "prompt_tokens_details": {"cached_tokens": 100}})
        start(led, "t2", at=101.0)
        led.update_turn("t2", rule="easy", endpoint="local", model_used="gemma", outcome="translated", status=200,
                        latency_ms=300.0, ttfb_ms=30.0, usage_protocol="openai",
                        usage_reported={"completion_tokens": 5})
        start(led, "t3", at=102.0)
        led.update_turn("t3", outcome="pass_through", model_used="claude-haiku-4-5", status=200, latency_ms=200.0,
                        ttfb_ms=20.0, usage_protocol="anthropic",
                        usage_reported={"input_tokens": 7, "output_tokens": 2})
        start(led, "t4", at=103.0)
        led.update_turn("t4", rule="to-gemini", endpoint="gemini", outcome="refused", status=400,
                        error="no translator from anthropic to gemini")
        start(led, "t5", at=104.0)
        led.update_turn("t5", outcome="pass_through", model_used="claude-haiku-4-5", status=529, latency_ms=50.0)
        st = led.stats(since=100.0)
    assert {k: st[k] for k in ("turns", "translated", "refused", "errors", "pass_through", "retargeted",
                               "unfinished", "served")} == {
        "turns": 5, "translated": 2, "refused": 1, "errors": 1, "pass_through": 1, "retargeted": 0,
        "unfinished": 0, "served": 3}  # the classes add up to the turns; an error (a 529) is not served
    assert sum(st[k] for k in ("translated", "retargeted", "pass_through", "errors", "refused", "cancelled",
                               "interrupted", "unfinished")) == st["turns"]
    # most turns first; on a tie by name, "no route" last
    assert st["by_route"] == [
        {"route": "easy", "turns": 2, "translated": 2, "capped": 0, "refused": 0, "errors": 0, "cancelled": 0, "served": 2,
         "share": 0.6667, "cache_read": 100, "cache_write": None, "cache_read_share": 0.8333},  # as reported (issue 32)
        {"route": None, "turns": 2, "translated": 0, "capped": 0, "refused": 0, "errors": 1, "cancelled": 0, "served": 1,
         "share": 0.3333, "cache_read": None, "cache_write": None, "cache_read_share": None},
        {"route": "to-gemini", "turns": 1, "translated": 0, "capped": 0, "refused": 1, "errors": 0, "cancelled": 0, "served": 0,
         "share": 0.0, "cache_read": None, "cache_write": None, "cache_read_share": None},
    ]
    # a refused turn sent nothing to its endpoint: not counted there
    assert [(g["endpoint"], g["turns"], g["share"]) for g in st["by_endpoint"]] == [
        ("api.anthropic.com", 2, 0.3333), ("local", 2, 0.6667), (None, 1, 0.0)]
    assert [(g["model"], g["turns"]) for g in st["by_model"]] == [("claude-haiku-4-5", 2), ("gemma", 2), (None, 1)]
    assert st["usage"] == {
        "by_counting": {
            "openai": {"turns": 2, "input": 120, "output": 35, "cache_read": 100, "cache_write": None, "reasoning": None,
                       "cache_read_share": 0.8333},  # of the whole input (openai's includes the cache reads)
            "anthropic": {"turns": 1, "input": 7, "output": 2, "cache_read": None, "cache_write": None,
                          "reasoning": None, "cache_read_share": None},
        },
        "turns_reported": 3,
        "turns_none": 2,
    }
    assert st["timings"] == {"latency_ms": {"n": 4, "p50": 100.0, "p95": 300.0},
                             "ttfb_ms": {"n": 3, "p50": 20.0, "p95": 30.0}}


def test_stats_of_an_empty_window(make):
    with make() as led:
        st = led.stats(since=time.time())
    assert st["turns"] == 0 and st["by_route"] == [] and st["usage"]["by_counting"] == {}
    assert st["timings"]["latency_ms"] == {"n": 0, "p50": None, "p95": None}
