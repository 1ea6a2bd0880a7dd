"""Per-block prefix hashes (ledger/prefix.py) and `explain`'s cache part (cli/cache_view.py), issue 32."""

from __future__ import annotations

import copy
import json

from tests.conftest import load_fixture
from tokunseba import translate
from tokunseba.cli.cache_view import cache_facts, explain_lines
from tokunseba.ledger import first_change, prefix_hashes
from tokunseba.ledger.prefix import blocks


def claude_turn() -> dict:
    return load_fixture("claude-code-print-main-turn.json")["body"]


def test_blocks_are_labelled_in_the_providers_prompt_order_and_never_hold_text():
    body = claude_turn()
    stored = prefix_hashes("anthropic", body)
    labels = [label for label, _ in blocks(stored)]
    n_tools, n_system = len(body["tools"]), len(body["system"])
    assert labels[:n_tools] == [f"tools[{i}]" for i in range(n_tools)]
    assert labels[n_tools:n_tools + n_system] == [f"system[{i}]" for i in range(n_system)]
    assert labels[n_tools + n_system:] == ["messages[0].content[0]", "messages[0].content[1]", "messages[1]"]
    assert len(stored) < 300 and "You are" not in stored  # hashes, never the text


def test_the_first_changed_block_is_named():
    a = claude_turn()
    b = copy.deepcopy(a)
    b["system"][2]["text"] += " (edited)"
    assert first_change(prefix_hashes("anthropic", a), prefix_hashes("anthropic", b))[1:] == ("system[2]", "system[2]")
    c = copy.deepcopy(a)
    c["messages"].append({"role": "user", "content": "more"})
    assert first_change(prefix_hashes("anthropic", a), prefix_hashes("anthropic", c)) is None  # only added


def test_a_moved_cache_breakpoint_is_no_change():
    a = claude_turn()
    b = copy.deepcopy(a)
    for blk in b["system"]:
        blk.pop("cache_control", None)
    b["messages"][0]["content"][0]["cache_control"] = {"type": "ephemeral"}
    assert prefix_hashes("anthropic", a) == prefix_hashes("anthropic", b)


def test_every_protocol_has_its_prefix_order():
    codex = load_fixture("codex-responses-gpt55-tool-followup.json")["body"]
    labels = [label for label, _ in blocks(prefix_hashes("openai-responses", codex))]
    assert labels[0] == "tools[0]" and "instructions" not in labels and labels[-1].startswith("input[")
    chat = translate.request("anthropic", "openai", claude_turn()).body
    assert [label for label, _ in blocks(prefix_hashes("openai", chat))][-1].startswith("messages[")
    gem = load_fixture("gemini-cli-main-turn-yolo.json")["body"]
    assert [label for label, _ in blocks(prefix_hashes("gemini", gem))][0] == "systemInstruction"
    assert prefix_hashes("openai", {"model": "m"}) is None and prefix_hashes("nope", {}) is None


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
