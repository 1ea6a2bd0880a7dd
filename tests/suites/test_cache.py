"""Cache intent across protocols (issue 32): ``cache: auto`` places Anthropic breakpoints on the
stable prefix of a translated turn (plumbing, never content); two turns of one session keep
byte-identical prefixes, so an Anthropic cache reads from the second turn."""

from __future__ import annotations

import copy
import json

import pytest

from tests.support.cache_billing import AnthropicCache
from tests.conftest import load_fixture
from tokunseba import translate
from tokunseba.routing import RulesError, load_rules_text
from tokunseba.translate.anthropic.cache import MAX_BREAKPOINTS, place_cache_breakpoints


def codex_turns() -> tuple[dict, dict]:
    """Two turns of one Codex session: the first before its tool call, the second answering it."""
    second = load_fixture("codex-responses-gpt55-tool-followup.json")["body"]
    first = copy.deepcopy(second)
    first["input"] = [i for i in first["input"] if i.get("type", "message") == "message"]
    return first, second


def to_anthropic(body: dict, cache: str = "auto"):
    return translate.request("openai-responses", "anthropic", body, max_tokens=4096, model="claude-sonnet-4-6",
                             cache=cache)


def strip(body: dict) -> dict:
    """The body without cache_control, each one-text-block content back as its string."""
    def block(b):
        return {k: v for k, v in b.items() if k != "cache_control"} if isinstance(b, dict) else b

    def content(c):
        if isinstance(c, list):
            c = [block(b) for b in c]
            if len(c) == 1 and c[0].get("type") == "text" and c[0].keys() == {"type", "text"}:
                return c[0]["text"]
        return c
    out = {**body, "messages": [{**m, "content": content(m["content"])} for m in body["messages"]]}
    if "system" in out:
        out["system"] = content(out["system"])
    if "tools" in out:
        out["tools"] = [block(t) for t in out["tools"]]
    return out


def marks(body: dict) -> list[str]:
    found = [f"tools[{i}]" for i, t in enumerate(body.get("tools") or ()) if "cache_control" in t]
    if isinstance(body.get("system"), list):
        found += [f"system[{i}]" for i, b in enumerate(body["system"]) if "cache_control" in b]
    for i, m in enumerate(body["messages"]):
        if isinstance(m["content"], list):
            found += [f"messages[{i}].content[{j}]" for j, b in enumerate(m["content"]) if "cache_control" in b]
    return found


def test_codex_turns_to_anthropic_with_cache_auto_get_breakpoints_on_the_stable_prefix():
    _, second = codex_turns()
    rt = to_anthropic(second)
    n = len(rt.body["messages"])
    assert marks(rt.body) == ["tools[7]", "system[0]", f"messages[{n - 3}].content[0]", f"messages[{n - 1}].content[0]"]
    assert [p for p in rt.plumbing if "cache" in p] == [
        f"messages[{n - 1}].content[0].cache_control (cache: auto)", f"messages[{n - 3}].content[0].cache_control (cache: auto)",
        "system[0].cache_control (cache: auto)", "tools[7].cache_control (cache: auto)"]
    assert all(b["cache_control"] == {"type": "ephemeral"} for b in
               [rt.body["tools"][7], rt.body["system"][0], rt.body["messages"][-1]["content"][0]])


def test_the_model_sees_nothing_new():
    for body in codex_turns():
        assert strip(to_anthropic(body).body) == to_anthropic(body, cache="off").body


def test_without_the_option_nothing_is_placed():
    rt = to_anthropic(codex_turns()[1], cache="off")
    assert marks(rt.body) == [] and not [p for p in rt.plumbing if "cache" in p]


def test_the_input_is_never_changed():
    _, second = codex_turns()
    before = copy.deepcopy(second)
    to_anthropic(second)
    assert second == before


def test_two_turns_of_one_session_keep_byte_identical_prefixes():
    first, second = (strip(to_anthropic(b).body) for b in codex_turns())
    for key in ("tools", "system"):
        assert json.dumps(first[key]).encode() == json.dumps(second[key]).encode()
    k = len(first["messages"])
    assert json.dumps(first["messages"]).encode() == json.dumps(second["messages"][:k]).encode()
    # and the keys keep the client's order, turn after turn
    assert list(first) == list(second)
    assert [list(t) for t in first["tools"]] == [list(t) for t in second["tools"]]


def test_an_anthropic_cache_reads_from_the_second_turn_only_with_cache_auto():
    cached, plain = AnthropicCache(), AnthropicCache()
    first, second = codex_turns()
    u1, u2 = cached.bill(to_anthropic(first).body), cached.bill(to_anthropic(second).body)
    assert u1["cache_read_input_tokens"] == 0 and u1["cache_creation_input_tokens"] > 0
    assert u2["cache_read_input_tokens"] > 0.8 * (sum(u2.values()))  # most of the second turn is read
    p1, p2 = plain.bill(to_anthropic(first, "off").body), plain.bill(to_anthropic(second, "off").body)
    assert p1["cache_read_input_tokens"] == p2["cache_read_input_tokens"] == 0
    assert p2["input_tokens"] == sum(u2.values())  # the same prompt, all of it billed at the full rate


def test_breakpoints_are_at_most_four_with_the_clients_own():
    body = {"model": "m", "max_tokens": 1, "system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}],
            "tools": [{"name": "t", "input_schema": {}, "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                         {"role": "user", "content": [{"type": "text", "text": "c", "cache_control": {"type": "ephemeral"}}]}]}
    added = place_cache_breakpoints(body)
    assert added == ["messages[0].content[0].cache_control"]  # the last message has one already
    assert len(marks(body)) == MAX_BREAKPOINTS


def test_thinking_and_empty_blocks_never_carry_a_breakpoint():
    body = {"messages": [{"role": "user", "content": "q"},
                         {"role": "assistant", "content": [{"type": "text", "text": "x"},
                                                           {"type": "thinking", "thinking": "t", "signature": "s"}]}]}
    assert place_cache_breakpoints(body) == ["messages[1].content[0].cache_control", "messages[0].content[0].cache_control"]


def test_a_target_without_breakpoints_says_none_were_placed():
    rt = translate.request("openai-responses", "gemini", codex_turns()[0], cache="auto")
    assert "cache: auto: gemini takes no cache breakpoints; none placed" in rt.warnings


def claude_code_turn() -> dict:
    return load_fixture("claude-code-print-main-turn.json")["body"]


def test_claude_codes_breakpoints_are_carried_to_a_chat_endpoint_that_takes_explicit_ones():
    body = claude_code_turn()
    rt = translate.request("anthropic", "openai", body, cache="breakpoints")
    msgs = rt.body["messages"]
    # Claude Code marks system blocks 2 and 3 and its newest user block: the system message and the user message
    assert [i for i, m in enumerate(msgs) if isinstance(m["content"], list)
            and "prompt_cache_breakpoint" in m["content"][-1]] == [0, 1]
    assert msgs[0]["content"][-1]["prompt_cache_breakpoint"] == {"mode": "explicit"}
    assert [p for p in rt.plumbing if "prompt_cache_breakpoint" in p] == [
        "messages[0].content[0].prompt_cache_breakpoint (the client's cache_control)",
        "messages[1].content[0].prompt_cache_breakpoint (the client's cache_control)"]
    assert "system[2].cache_control" in rt.dropped  # Anthropic's own field does not travel as such
    # the text is the same: only the markers were added
    plain = translate.request("anthropic", "openai", body).body
    assert msgs[0]["content"][0]["text"] == plain["messages"][0]["content"]


def test_without_the_option_a_chat_endpoint_gets_no_breakpoints_and_the_drops_are_recorded():
    rt = translate.request("anthropic", "openai", claude_code_turn())
    assert not [p for p in rt.plumbing if "breakpoint" in p]
    assert {"system[2].cache_control", "system[3].cache_control", "messages[0].content[1].cache_control"} <= set(rt.dropped)


def test_gemini_and_local_servers_take_none_the_clients_are_dropped_and_recorded():
    rt = translate.request("anthropic", "gemini", claude_code_turn(), cache="breakpoints")
    assert "messages[0].content[1].cache_control" in rt.dropped and "breakpoint" not in json.dumps(rt.body)


def test_the_cache_key_is_checked_at_load():
    r = load_rules_text("endpoints:\n  c: {protocol: anthropic, url: 'http://127.0.0.1:1/v1', cache: auto}\n", "c.yaml")
    assert r.endpoints["c"].cache == "auto" and r.endpoints["anthropic"].cache == "off"
    with pytest.raises(RulesError) as e:
        load_rules_text("endpoints:\n  c: {protocol: anthropic, url: 'http://127.0.0.1:1/v1', cache: on}\n", "c.yaml")
    assert str(e.value) == "c.yaml:2: endpoint 'c': cache must be one of: off, breakpoints, auto; got 'on'"
    off = load_rules_text("endpoints:\n  c: {protocol: anthropic, url: 'http://127.0.0.1:1/v1', cache: off}\n", "c.yaml")
    assert off.endpoints["c"].cache == "off"  # YAML's boolean "off" is the word


def test_codex_turns_to_a_chat_endpoint_with_cache_auto_get_explicit_breakpoints_on_the_stable_prefix():
    rt = translate.request("openai-responses", "openai", codex_turns()[1], cache="auto")
    msgs = rt.body["messages"]
    marked = [i for i, m in enumerate(msgs) if isinstance(m["content"], list)
              and any("prompt_cache_breakpoint" in p for p in m["content"])]
    roles = [msgs[i]["role"] for i in marked]
    assert marked and "assistant" not in roles and len(marked) <= 4
    assert marked[-1] == len(msgs) - 1 and roles[0] in ("system", "developer")


def test_check_warns_when_an_endpoint_asks_for_breakpoints_its_protocol_cannot_take():
    r = load_rules_text("endpoints:\n  g: {protocol: gemini, url: 'https://g.example/v1beta', cache: auto}\n"
                        "  c: {protocol: anthropic, url: 'https://a.example/v1', cache: auto}\n", "c.yaml")
    assert r.warnings == ["c.yaml: warning: endpoint g (gemini): cache: auto, but gemini requests take no cache "
                          "breakpoints: none are placed or carried there"]


# ---- a Chat client's own breakpoints (OpenAI's explicit prompt_cache_breakpoint) to Anthropic

def chat_session(turns: int, marked: set[int]) -> dict:
    """A Chat client's conversation of ``turns`` user turns, its own breakpoint on the user
    turns numbered in ``marked``."""
    msgs: list = [{"role": "system", "content": "You are terse. " * 40}]
    for i in range(turns):
        part: dict = {"type": "text", "text": f"question {i}: " + "context " * 60}
        if i in marked:
            part["prompt_cache_breakpoint"] = {"mode": "explicit"}
        msgs += [{"role": "user", "content": [part]}, {"role": "assistant", "content": f"answer {i}"}]
    msgs.pop()  # the conversation ends on the user's turn
    return {"model": "gpt-5.6", "messages": msgs}


def test_a_chat_clients_own_breakpoints_reach_anthropic_as_cache_control():
    rt = translate.request("openai", "anthropic", chat_session(3, {1}), max_tokens=64)
    assert marks(rt.body) == ["messages[2].content[0]"]
    assert "messages[3].content[0].prompt_cache_breakpoint -> cache_control (the client's own cache breakpoint)" \
        in rt.converted
    assert not any("prompt_cache_breakpoint" in d for d in rt.dropped)
    assert strip(rt.body) == strip(translate.request("openai", "anthropic", chat_session(3, set()), max_tokens=64).body)


def test_a_chat_clients_breakpoints_bill_as_cache_reads_on_the_next_turn():
    cache = AnthropicCache()
    first = translate.request("openai", "anthropic", chat_session(2, {1}), max_tokens=64).body
    second = translate.request("openai", "anthropic", chat_session(3, {1, 2}), max_tokens=64).body
    assert cache.bill(first)["cache_read_input_tokens"] == 0
    assert cache.bill(second)["cache_read_input_tokens"] > 0  # the prefix the client marked was read back


def test_more_than_four_of_the_clients_breakpoints_keep_the_last_four():
    rt = translate.request("openai", "anthropic", chat_session(7, set(range(7))), max_tokens=64)
    assert marks(rt.body) == [f"messages[{2 * i}].content[0]" for i in range(3, 7)]
    assert any("3 earliest cache breakpoint(s) not carried: Anthropic takes at most 4" in w for w in rt.warnings)


def test_a_chat_clients_breakpoints_at_the_end_of_its_system_prompt_and_tool_results_are_carried():
    mark = {"prompt_cache_breakpoint": {"mode": "explicit"}}
    body = {"model": "gpt-5.6", "messages": [
        {"role": "system", "content": "Rules one."},
        {"role": "system", "content": [{"type": "text", "text": "Rules two."}, {"type": "text", "text": "End.", **mark}]},
        {"role": "user", "content": "run it"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "run", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "a"},
                                                               {"type": "text", "text": "b", **mark}]},
        {"role": "user", "content": "and?"}]}
    rt = translate.request("openai", "anthropic", body, max_tokens=64)
    # the system text is exactly what it was without the breakpoint, as one block carrying it
    plain = translate.request("openai", "anthropic", json.loads(json.dumps(body).replace(
        ', "prompt_cache_breakpoint": {"mode": "explicit"}', "")), max_tokens=64).body
    assert rt.body["system"] == [{"type": "text", "text": plain["system"], "cache_control": {"type": "ephemeral"}}]
    result = rt.body["messages"][2]["content"][0]
    assert result["type"] == "tool_result" and result["cache_control"] == {"type": "ephemeral"}
    assert strip(rt.body) == strip({**plain, "system": [{"type": "text", "text": plain["system"]}]})
    assert {c.split(" ")[0] for c in rt.converted if "cache_control" in c} == {
        "messages[1].content[1].prompt_cache_breakpoint", "messages[4].content[1].prompt_cache_breakpoint"}


def test_a_breakpoint_inside_the_system_text_has_no_block_to_end_and_is_dropped_recorded():
    mark = {"prompt_cache_breakpoint": {"mode": "explicit"}}
    body = {"model": "gpt-5.6", "messages": [
        {"role": "system", "content": [{"type": "text", "text": "Rules.", **mark}]},
        {"role": "system", "content": "More rules."}, {"role": "user", "content": "hi"}]}
    rt = translate.request("openai", "anthropic", body, max_tokens=64)
    assert rt.body["system"] == "Rules.\n\nMore rules."
    assert "messages[0].content[0].prompt_cache_breakpoint" in rt.dropped
