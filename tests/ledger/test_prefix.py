"""Per-block prefix hashes (ledger/prefix.py) and `explain`'s cache part (cli/cache_view.py), issue 32."""

from __future__ import annotations

import copy
from tests.conftest import load_fixture
from tests.support.title_turn import claude_turn
from tokunseba import translate
from tokunseba.ledger import first_change, prefix_hashes
from tokunseba.ledger.prefix import blocks



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
