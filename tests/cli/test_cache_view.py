"""`explain`'s cache part (cli/cache_view.py, issue 32): the block where the prompt's prefix changed
when cache reads fell, that it did not change, and no lines when no cache was reported."""

from __future__ import annotations

import copy
import json

from tokunseba.cli.cache_view import cache_facts, explain_lines
from tokunseba.ledger.prefix import prefix_hashes

from tests.support.title_turn import claude_turn


def row(rid: str, at: float, body: dict, read: int | None, write: int | None, inp: int = 10, **kw) -> dict:
    return {"request_id": rid, "started_at": at, "endpoint": "claude", "usage_protocol": "anthropic",
            "usage_reported": {"input_tokens": inp}, "usage_input": inp, "usage_cache_read": read,
            "usage_cache_write": write, "prefix_hashes": prefix_hashes("anthropic", body), **kw}


def test_explain_names_the_block_where_the_prefix_changed_when_cache_reads_fell():
    a = claude_turn()
    b = copy.deepcopy(a)
    b["messages"].append({"role": "user", "content": "next"})
    c = copy.deepcopy(b)
    c["system"][3]["text"] = c["system"][3]["text"].replace("a", "A", 1)
    session = [row("tk-1", 1.0, a, 0, 9000), row("tk-2", 2.0, b, 9000, 50), row("tk-3", 3.0, c, 1500, 7600)]
    assert cache_facts(session[1], session) == {
        "read": 9000, "write": 50, "share": round(9000 / 9060, 4),
        "previous": {"request_id": "tk-1", "read": 0, "write": 9000}}  # read all the previous left: fine
    facts = cache_facts(session[2], session)
    assert facts["fell"] and facts["changed"] == {"block": len(a["tools"]) + 3, "was": "system[3]", "now": "system[3]"}
    lines = explain_lines(session[2], session)
    assert lines[1] == "cache        read 1500 · write 7600 · 16.5% of the input read from cache (as reported)"
    assert lines[2] == (f"             read less than the previous turn of the session left cached (tk-2: 9050): the "
                        f"prefix first changed at system[3], block {len(a['tools']) + 4} of the prompt")


def test_explain_says_when_the_prefix_did_not_change():
    a = claude_turn()
    session = [row("tk-1", 1.0, a, 0, 9000), row("tk-2", 2.0, a, 0, 9000)]
    assert explain_lines(session[1], session)[2].endswith("the prefix is the same block for block: the cache had "
                                                          "expired or was evicted")


def test_no_cache_reported_no_cache_lines():
    r = row("tk-1", 1.0, claude_turn(), None, None)
    assert cache_facts(r, [r]) is None and explain_lines(r, [r]) == []
    assert json.dumps(cache_facts(row("tk-2", 2.0, {}, 5, None), []))  # json-ready, no previous turn
