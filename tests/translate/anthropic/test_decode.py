"""Request translation Anthropic Messages <-> OpenAI Chat Completions: the real Claude Code
fixtures, then one table-driven test per mapping of docs/dev/protocols.md E.1/E.2, both directions."""

from __future__ import annotations

import json

import pytest

from tokunseba import jsonc
from tokunseba.errors import TranslationError
from tokunseba.translate import parse_body
from tokunseba.translate.anthropic.decode import DECODE_FIELDS as A2C_FIELDS
from tokunseba.translate.anthropic.encode import ENCODE_FIELDS as C2A_FIELDS

from tests.conftest import load_fixture
from tests.support.anthropic_chat import (
    A, a2c, ASSISTANT_TOOL_USE, C, c2a, CHAT_TOOL_CALLS, FN, IMG64, IMGURL, PDF64, TOOL,
)
from tests.support.pairs import anthropic_to_chat, chat_to_anthropic

BILLING = "x-anthropic-billing-header: cc_version=2.1.197.123; cc_entrypoint=sdk-cli; cch=abcde;"


def texts_of_anthropic(body: dict) -> list[str]:
    """Every text an Anthropic request carries: system, messages (tool results too), tool descriptions."""
    out: list[str] = []

    def blocks(content):
        if isinstance(content, str):
            out.append(content)
            return
        for b in content:
            if b["type"] == "text":
                out.append(b["text"])
            elif b["type"] == "tool_result":
                blocks(b.get("content") or [])

    sys_ = body.get("system") or []
    blocks(sys_)
    for m in body["messages"]:
        blocks(m["content"])
    out.extend(t["description"] for t in body.get("tools", []) if "description" in t)
    return out


# ---------------------------------------------------------------------------------------
# the real Claude Code requests
# ---------------------------------------------------------------------------------------


def test_claude_code_main_turn_keeps_tools_ids_and_every_text():
    body = load_fixture("claude-code-print-main-turn.json")["body"]
    rt = a2c(body, max_tokens_cap=4096)
    out = rt.body
    # all 9 tools, names, descriptions and schemas exactly
    assert [t["function"]["name"] for t in out["tools"]] == [t["name"] for t in body["tools"]]
    assert len(out["tools"]) == 9
    for src, dst in zip(body["tools"], out["tools"], strict=True):
        assert dst == {"type": "function", "function": {"name": src["name"], "description": src["description"], "parameters": src["input_schema"]}}
    # every text byte of system, messages and tool descriptions is in the output, except the billing block
    wire = jsonc.dumps(out)
    billing = body["system"][0]["text"]
    assert billing.startswith("x-anthropic-billing-header:")
    assert "x-anthropic-billing-header" not in wire
    for text in texts_of_anthropic(body):
        if text != billing:
            assert jsonc.dumps(text)[1:-1] in wire
    # one leading system message, the mid-list system message kept in place
    msgs = out["messages"]
    assert msgs[0] == {"role": "system", "content": "\n\n".join(b["text"] for b in body["system"][1:])}
    assert [m["role"] for m in msgs] == ["system", "user", "system"]
    assert msgs[1]["content"] == "\n\n".join(b["text"] for b in body["messages"][0]["content"])
    assert msgs[2] == body["messages"][1]
    # drops, by path
    for path in ("thinking", "metadata.user_id", "context_management", "system[0]",
                 "system[2].cache_control", "system[3].cache_control", "messages[0].content[1].cache_control"):
        assert path in rt.dropped
    assert "cache_control" not in wire
    # adaptive thinking at effort high: the effort travels (neutral/effort.py), converted
    assert set(out) == {"model", "messages", "tools", "max_completion_tokens", "stream", "stream_options",
                        "reasoning_effort"}
    assert out["reasoning_effort"] == "high" and "output_config" not in rt.dropped
    assert out["max_completion_tokens"] == 4096
    assert rt.converted == ["output_config.effort 'high' -> reasoning_effort 'high'",
                            "max_tokens -> max_completion_tokens (capped at 4096)"]
    assert out["stream_options"] == {"include_usage": True}
    assert rt.plumbing == ["stream_options.include_usage"]


def test_claude_code_main_turn_through_bytes_and_back():
    raw = jsonc.dumpb(load_fixture("claude-code-print-main-turn.json")["body"])
    rt = a2c(parse_body(raw))
    back = c2a(rt.body)
    assert back.body["tools"] == [
        {"name": t["name"], "description": t["description"], "input_schema": t["input_schema"]}
        for t in load_fixture("claude-code-print-main-turn.json")["body"]["tools"]
    ]
    assert back.body["max_tokens"] == 64000 and back.body["stream"] is True
    assert back.client_wants_usage is True


def test_claude_code_title_request():
    body = load_fixture("claude-code-title-haiku.json")["body"]
    rt = a2c(body)
    out = rt.body
    assert out["model"] == "claude-haiku-4-5-20251001"
    assert out["temperature"] == 1
    assert "tools" not in out  # tools: [] would be a 400 at OpenAI; recorded
    assert {"tools", "metadata.user_id", "system[0]", "thinking"} <= set(rt.dropped)
    # its structured output crosses (issue 41): the schema as it came, named as Chat requires (plumbing)
    assert out["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "response", "schema": body["output_config"]["format"]["schema"]}}
    assert "response_format.json_schema.name" in rt.plumbing
    assert "output_config.format" not in rt.dropped
    assert "reasoning_effort" not in out  # thinking disabled: never turned on, not said as 'none' (servers disagree)
    assert out["messages"][0]["content"] == "\n\n".join(b["text"] for b in body["system"][1:])
    assert out["messages"][1] == {"role": "user", "content": body["messages"][0]["content"][0]["text"]}


def test_count_tokens_body_does_not_crash_and_sends_no_max_tokens():
    body = load_fixture("claude-code-count-tokens.json")["body"]
    rt = a2c(body)
    assert "max_completion_tokens" not in rt.body and "max_tokens" not in rt.body
    assert rt.body["messages"] == [{"role": "user", "content": "foo"}]
    assert rt.dropped == [] and rt.plumbing == []


# ---------------------------------------------------------------------------------------
# parse_body and the tables
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("raw", [b"", b"{", b"[1,2]", b'"x"', b"null", b"\xff\xfe"])
def test_parse_body_rejects_non_objects(raw):
    with pytest.raises(TranslationError) as e:
        parse_body(raw)
    assert e.value.status == 400


def test_parse_body_object():
    assert parse_body(b'{"a":[1]}') == {"a": [1]}


def test_field_tables_are_complete_and_well_formed():
    for table in (A2C_FIELDS, C2A_FIELDS):
        for key, (action, how, note) in table.items():
            assert action in {"mapped", "converted", "dropped"}, key
            assert note
            if action == "mapped":
                assert isinstance(how, str)
            elif action == "converted":
                assert callable(how)
    for key in ("top_k", "metadata", "service_tier", "context_management", "container", "cache_control"):
        assert A2C_FIELDS[key][0] == "dropped"
    for key in ("user", "safety_identifier", "seed", "logprobs", "logit_bias",
                "presence_penalty", "frequency_penalty"):
        assert C2A_FIELDS[key][0] == "dropped"
    # effort crosses (neutral/effort.py)
    assert A2C_FIELDS["thinking"][0] == A2C_FIELDS["output_config"][0] == C2A_FIELDS["reasoning_effort"][0] == "converted"
    # structured output crosses (neutral/output_format.py, issue 41)
    assert C2A_FIELDS["response_format"][0] == A2C_FIELDS["output_format"][0] == "converted"

A2C_CASES = [
    ("system string -> leading system message",
     A(system="Be brief."), {},
     {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]}, [], []),
    ("system blocks joined, cache_control dropped by path",
     A(system=[{"type": "text", "text": "One."}, {"type": "text", "text": "Two.", "cache_control": {"type": "ephemeral"}}]), {},
     {"messages": [{"role": "system", "content": "One.\n\nTwo."}, {"role": "user", "content": "hi"}]}, ["system[1].cache_control"], []),
    ("developer role when the endpoint says so, mid-list too",
     A(system="S", messages=[{"role": "user", "content": "hi"}, {"role": "system", "content": "Mid."}]), {"system_role": "developer"},
     {"messages": [{"role": "developer", "content": "S"}, {"role": "user", "content": "hi"}, {"role": "developer", "content": "Mid."}]}, [], []),
    ("billing header block dropped and recorded",
     A(system=[{"type": "text", "text": BILLING}, {"type": "text", "text": "You are Claude Code."}]), {},
     {"messages": [{"role": "system", "content": "You are Claude Code."}, {"role": "user", "content": "hi"}]}, ["system[0]"], []),
    ("mid-list system message (blocks) in place",
     A(messages=[{"role": "user", "content": "a"}, {"role": "system", "content": [{"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}]},
                 {"role": "user", "content": "b"}]), {},
     {"messages": [{"role": "user", "content": "a"}, {"role": "system", "content": "x"}, {"role": "user", "content": "b"}]},
     ["messages[1].content[0].cache_control"], []),
    ("all-text blocks -> one string",
     A(messages=[{"role": "user", "content": [{"type": "text", "text": "<reminder>"}, {"type": "text", "text": "say hi", "cache_control": {"type": "ephemeral"}}]}]), {},
     {"messages": [{"role": "user", "content": "<reminder>\n\nsay hi"}]}, ["messages[0].content[1].cache_control"], []),
    ("images -> image_url parts (data: URL for base64)",
     A(messages=[{"role": "user", "content": [{"type": "text", "text": "look"}, IMG64, IMGURL]}]), {},
     {"messages": [{"role": "user", "content": [
         {"type": "text", "text": "look"},
         {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
         {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}}]}]}, [], []),
    ("file_id image dropped",
     A(messages=[{"role": "user", "content": [{"type": "text", "text": "t"}, {"type": "image", "source": {"type": "file", "file_id": "file_1"}}]}]), {},
     {"messages": [{"role": "user", "content": "t"}]}, ["messages[0].content[1]"], []),
    ("PDF base64 -> file part with filename from title",
     A(messages=[{"role": "user", "content": [PDF64 | {"title": "report.pdf"}, {"type": "text", "text": "sum up"}]}]), {},
     {"messages": [{"role": "user", "content": [
         {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERi0xLjQ=", "filename": "report.pdf"}},
         {"type": "text", "text": "sum up"}]}]}, [], []),
    ("PDF without title: no made-up filename",
     A(messages=[{"role": "user", "content": [PDF64 | {"context": "ctx", "citations": {"enabled": True}}]}]), {},
     {"messages": [{"role": "user", "content": [{"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERi0xLjQ="}}]}]},
     ["messages[0].content[0].context", "messages[0].content[0].citations"], []),
    ("text document -> text part",
     A(messages=[{"role": "user", "content": [{"type": "document", "title": "notes", "source": {"type": "text", "media_type": "text/plain", "data": "the notes"}},
                                              {"type": "text", "text": "q"}]}]), {},
     {"messages": [{"role": "user", "content": "the notes\n\nq"}]}, ["messages[0].content[0].title"], []),
    ("content-source documents: text blocks -> text part, with images dropped whole",
     A(messages=[{"role": "user", "content": [
         {"type": "document", "source": {"type": "content", "content": [{"type": "text", "text": "p1"}, {"type": "text", "text": "p2"}]}},
         {"type": "document", "source": {"type": "content", "content": [{"type": "text", "text": "x"}, IMG64]}},
         {"type": "document", "source": {"type": "content", "content": "plain"}}]}]), {},
     {"messages": [{"role": "user", "content": "p1\n\np2\n\nplain"}]}, ["messages[0].content[1]"], []),
    ("PDF URL and file_id documents dropped",
     A(messages=[{"role": "user", "content": [{"type": "document", "source": {"type": "url", "url": "https://x.test/a.pdf"}},
                                              {"type": "document", "source": {"type": "file", "file_id": "file_2"}},
                                              {"type": "text", "text": "q"}]}]), {},
     {"messages": [{"role": "user", "content": "q"}]}, ["messages[0].content[0]", "messages[0].content[1]"], []),
    ("tools: input_schema -> parameters; server tool and extras dropped",
     A(tools=[TOOL | {"cache_control": {"type": "ephemeral"}}, {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}]), {},
     {"tools": [FN]}, ["tools[0].cache_control", "tools[1]"], []),
    ("tool_choice any + disable_parallel_tool_use",
     A(tools=[TOOL], tool_choice={"type": "any", "disable_parallel_tool_use": True}), {},
     {"tools": [FN], "tool_choice": "required", "parallel_tool_calls": False}, [], []),
    ("tool_choice auto", A(tools=[TOOL], tool_choice={"type": "auto"}), {}, {"tool_choice": "auto"}, [], []),
    ("tool_choice none", A(tools=[TOOL], tool_choice={"type": "none"}), {}, {"tool_choice": "none"}, [], []),
    ("tool_choice tool",
     A(tools=[TOOL], tool_choice={"type": "tool", "name": "get_weather", "disable_parallel_tool_use": False}), {},
     {"tool_choice": {"type": "function", "function": {"name": "get_weather"}}, "parallel_tool_calls": True}, [], []),
    ("tool_choice without any tool left is dropped",
     A(tools=[{"type": "web_search_20250305", "name": "web_search"}], tool_choice={"type": "auto"}), {},
     {}, ["tools[0]", "tool_choice"], []),
    ("assistant tool_use -> tool_calls, compact arguments, ids untouched",
     A(messages=[{"role": "user", "content": "w?"}, ASSISTANT_TOOL_USE]), {},
     {"messages": [{"role": "user", "content": "w?"}, CHAT_TOOL_CALLS]}, [], []),
    ("assistant with only tool_use: content is the empty string, never null",
     A(messages=[{"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]}]), {},
     {"messages": [{"role": "assistant", "content": "", "tool_calls": [
         {"id": "t1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}]}, [], []),
    ("tool_result -> one tool message per result, then the rest as user",
     A(messages=[{"role": "user", "content": [
         {"type": "tool_result", "tool_use_id": "toolu_01A", "content": "18C", "is_error": False},
         {"type": "tool_result", "tool_use_id": "toolu_01B", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "is_error": True},
         {"type": "text", "text": "thanks"}]}]), {},
     {"messages": [{"role": "tool", "tool_call_id": "toolu_01A", "content": "18C"},
                   {"role": "tool", "tool_call_id": "toolu_01B", "content": "a\n\nb"},
                   {"role": "user", "content": "thanks"}]},
     ["messages[0].content[0].is_error", "messages[0].content[1].is_error"], []),
    ("tool_result without content -> empty tool message",
     A(messages=[{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1"}]}]), {},
     {"messages": [{"role": "tool", "tool_call_id": "t1", "content": ""}]}, [], []),
    ("thinking blocks and the thinking param dropped",
     A(thinking={"type": "adaptive"}, messages=[{"role": "assistant", "content": [
         {"type": "thinking", "thinking": "hmm", "signature": "sig"}, {"type": "redacted_thinking", "data": "xx"},
         {"type": "text", "text": "Hello"}]}]), {},
     {"messages": [{"role": "assistant", "content": "Hello"}]},
     ["messages[0].content[0]", "messages[0].content[1]", "thinking"], []),
    ("server-tool blocks in history dropped",
     A(messages=[{"role": "assistant", "content": [
         {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"q": "x"}},
         {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
         {"type": "future_thing_tool_result", "tool_use_id": "srvtoolu_1"},
         {"type": "text", "text": "Found."}]}]), {},
     {"messages": [{"role": "assistant", "content": "Found."}]},
     ["messages[0].content[0]", "messages[0].content[1]", "messages[0].content[2]"], []),
    ("stop_sequences: first 4 -> stop, the rest dropped by path",
     A(stop_sequences=["a", "b", "c", "d", "e", "f"]), {},
     {"stop": ["a", "b", "c", "d"]}, ["stop_sequences[4]", "stop_sequences[5]"], []),
    ("temperature/top_p passed, top_k dropped",
     A(temperature=0.2, top_p=0.9, top_k=40), {}, {"temperature": 0.2, "top_p": 0.9}, ["top_k"], []),
    ("stream true -> stream_options.include_usage (plumbing)",
     A(stream=True), {}, {"stream": True, "stream_options": {"include_usage": True}}, [], ["stream_options.include_usage"]),
    ("stream false: no plumbing", A(stream=False), {}, {"stream": False}, [], []),
    ("max_tokens to the local-server field, under the cap",
     A(max_tokens=100), {"max_tokens_field": "max_tokens", "max_tokens_cap": 4096}, {"max_tokens": 100}, [], []),
    ("null optional fields are absent", A(temperature=None, metadata=None), {}, {}, [], []),
]


@pytest.mark.parametrize(("case", "body", "kw", "expect", "dropped", "plumbing"), A2C_CASES, ids=[c[0] for c in A2C_CASES])
def test_anthropic_to_chat_mapping(case, body, kw, expect, dropped, plumbing):
    rt = a2c(body, **kw)
    for key, value in expect.items():
        assert rt.body[key] == value, key
    assert rt.dropped == dropped
    assert rt.plumbing == plumbing
    assert rt.body["model"] == "claude-x"


def test_a2c_max_tokens_capped_is_recorded_as_converted():
    rt = a2c(A(max_tokens=64000), max_tokens_field="max_tokens", max_tokens_cap=512)
    assert rt.body["max_tokens"] == 512 and "max_completion_tokens" not in rt.body
    assert rt.converted == ["max_tokens -> max_tokens (capped at 512)"]


def test_a2c_model_override_recorded():
    rt = a2c(A(), model="gemma-3-270m")
    assert rt.body["model"] == "gemma-3-270m"
    assert rt.converted and "gemma-3-270m" in rt.converted[0] and "claude-x" in rt.converted[0]
    assert list(rt.body)[0] == "model"


def test_a2c_unknown_top_level_field_dropped_not_forwarded():
    rt = a2c(A(foo={"x": 1}, betas=["y"]))
    assert "foo" not in rt.body and "betas" not in rt.body
    assert rt.dropped == ["foo", "betas"]


def test_a2c_system_role_validated():
    with pytest.raises(ValueError):
        anthropic_to_chat(A(), system_role="assistant")


# ---------------------------------------------------------------------------------------
# pitfalls (named after the behaviour)
# ---------------------------------------------------------------------------------------


def test_tool_result_without_tool_use_id_is_rejected_with_400():  # docs/dev/pitfalls.md 10
    body = A(messages=[{"role": "user", "content": [{"type": "tool_result", "content": "x"}]}])
    with pytest.raises(TranslationError) as e:
        anthropic_to_chat(body)
    assert e.value.status == 400 and e.value.message == "messages[0].content[0].tool_use_id: required"
    with pytest.raises(TranslationError) as e:
        chat_to_anthropic(C(messages=[{"role": "tool", "content": "x"}]))
    assert e.value.status == 400 and e.value.message == "messages[0].tool_call_id: required"


def test_tool_names_over_64_chars_refuse_the_turn_instead_of_renaming():  # docs/dev/pitfalls.md 20
    long_name = "mcp__some_server__" + "x" * 47
    assert len(long_name) == 65
    with pytest.raises(TranslationError) as e:
        anthropic_to_chat(A(tools=[TOOL | {"name": long_name}]))
    assert e.value.status == 400 and e.value.kind == "refused" and "tools[0].name" in e.value.message
    ok = a2c(A(tools=[TOOL | {"name": long_name[:64]}]))
    assert ok.body["tools"][0]["function"]["name"] == long_name[:64]


def test_images_inside_tool_result_are_dropped_and_recorded():  # docs/dev/pitfalls.md 23
    body = A(messages=[{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [
        {"type": "text", "text": "screenshot:"}, IMG64, {"type": "text", "text": "done"}]}]}])
    rt = a2c(body)
    assert rt.body["messages"] == [{"role": "tool", "tool_call_id": "t1", "content": "screenshot:\n\ndone"}]
    assert rt.dropped == ["messages[0].content[0].content[1]"]


def test_billing_header_block_never_reaches_a_chat_endpoint():  # docs/dev/pitfalls.md 25
    rt = a2c(A(system=[{"type": "text", "text": BILLING}]))
    assert rt.dropped == ["system[0]"]
    assert rt.body["messages"] == [{"role": "user", "content": "hi"}]


def test_thinking_is_dropped_never_demoted_to_text():  # docs/dev/pitfalls.md 17, 18
    body = A(messages=[{"role": "assistant", "content": [{"type": "thinking", "thinking": "secret plan", "signature": "s"}]}])
    rt = a2c(body)
    assert "secret plan" not in jsonc.dumps(rt.body)
    assert rt.dropped == ["messages[0].content[0]"]


ANTHROPIC_EVERYTHING_DROPPABLE = A(
    system=[{"type": "text", "text": BILLING}, {"type": "text", "text": "S", "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
    messages=[
        {"role": "user", "content": [
            {"type": "text", "text": "q", "cache_control": {"type": "ephemeral"}, "citations": []},
            {"type": "image", "source": {"type": "file", "file_id": "f1"}},
            {"type": "document", "source": {"type": "url", "url": "https://x.test/a.pdf"}},
            {"type": "search_result", "source": "s", "title": "t", "content": []}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "t", "signature": "s"}, {"type": "redacted_thinking", "data": "d"},
            {"type": "tool_use", "id": "t1", "name": "f", "input": {}, "cache_control": {"type": "ephemeral"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "is_error": True, "cache_control": {"type": "ephemeral"},
             "content": [{"type": "text", "text": "r"}, IMG64]}]},
    ],
    tools=[TOOL | {"cache_control": {"type": "ephemeral"}, "strict": True, "defer_loading": False}, {"type": "web_search_20250305", "name": "web_search"}],
    tool_choice={"type": "auto"},
    stop_sequences=["1", "2", "3", "4", "5"],
    top_k=5, thinking={"type": "enabled", "budget_tokens": 2048}, metadata={"user_id": "u"}, service_tier="auto",
    context_management={"edits": []}, output_config={"effort": "high"}, container="c", cache_control={"type": "ephemeral"},
    inference_geo="us", speed="fast", diagnostics={}, mcp_servers=[], mystery_field=1,
)


def test_every_dropped_anthropic_field_is_recorded():  # docs/dev/pitfalls.md 24
    rt = a2c(ANTHROPIC_EVERYTHING_DROPPABLE)
    assert sorted(rt.dropped) == sorted([
        "system[0]", "system[1].cache_control",
        "messages[0].content[0].cache_control", "messages[0].content[0].citations",
        "messages[0].content[1]", "messages[0].content[2]", "messages[0].content[3]",
        "messages[1].content[0]", "messages[1].content[1]", "messages[1].content[2].cache_control",
        "messages[2].content[0].content[1]", "messages[2].content[0].is_error", "messages[2].content[0].cache_control",
        "tools[0].cache_control", "tools[0].strict", "tools[0].defer_loading", "tools[1]",
        "stop_sequences[4]", "top_k", "metadata.user_id", "service_tier", "context_management",
        "output_config.effort", "container", "cache_control", "inference_geo", "speed", "diagnostics", "mcp_servers",
        "mystery_field",
    ])
    wire = jsonc.dumps(rt.body)
    for gone in ("cache_control", "citations", "is_error", "thinking", "web_search", "budget_tokens", "strict", "defer_loading"):
        assert gone not in wire
    assert rt.body["reasoning_effort"] == "minimal"  # budget_tokens 2048: the largest level it covers


# ---------------------------------------------------------------------------------------
# bad input: a 400 naming the JSON path, never a traceback, never a half-translated body
# ---------------------------------------------------------------------------------------

A2C_BAD = [
    ([1], "Anthropic request body must be a JSON object"),
    ({"model": "m"}, "messages: required"),
    ({"messages": [{"role": "user", "content": "x"}]}, "model: required"),
    (A(messages="hi"), "messages: expected an array"),
    (A(messages=[{"role": "robot", "content": "x"}]), "messages[0].role: unknown role 'robot'"),
    (A(messages=[{"role": "user"}]), "messages[0].content: required"),
    (A(messages=[{"role": "user", "content": [{"type": "video"}]}]), "messages[0].content[0].type: unknown content block type 'video'"),
    (A(messages=[{"role": "user", "content": [{"type": "tool_use", "id": "x", "name": "f", "input": {}}]}]), "messages[0].content[0].type: unknown content block type"),
    (A(messages=[{"role": "user", "content": [{"type": "text", "text": 5}]}]), "messages[0].content[0].text: expected a string, got number"),
    (A(messages=[{"role": "assistant", "content": [{"type": "tool_use", "id": "x", "name": "f", "input": "{}"}]}]), "messages[0].content[0].input: expected an object"),
    (A(system=[{"type": "image"}]), "system[0].type: unknown block type 'image'"),
    (A(max_tokens="100"), "max_tokens: expected an integer, got string"),
    (A(max_tokens=True), "max_tokens: expected an integer, got boolean"),
    (A(temperature="hot"), "temperature: expected a number"),
    (A(stream="yes"), "stream: expected a boolean"),
    (A(stop_sequences=["a", 1]), "stop_sequences[1]: expected a string"),
    (A(tools=[{"name": "f"}]), "tools[0].input_schema: required"),
    (A(tools=[TOOL], tool_choice={"type": "maybe"}), "tool_choice.type: unknown tool_choice type 'maybe'"),
    (A(tools=[TOOL], tool_choice={"type": "tool"}), "tool_choice.name: required"),
    (A(messages=[{"role": "user", "content": [{"type": "image", "source": {"type": "base64", "data": "x"}}]}]), "messages[0].content[0].source.media_type: required"),
]


@pytest.mark.parametrize(("body", "message"), A2C_BAD, ids=[m for _, m in A2C_BAD])
def test_a2c_bad_input_is_a_400_naming_the_path(body, message):
    with pytest.raises(TranslationError) as e:
        anthropic_to_chat(body)
    assert e.value.status == 400
    assert e.value.message.startswith(message), e.value.message


def test_translated_request_serialises_compactly():
    rt = a2c(A(messages=[{"role": "user", "content": "héllo ☃"}]))
    assert json.loads(jsonc.dumpb(rt.body)) == rt.body
    assert "héllo ☃".encode() in jsonc.dumpb(rt.body)
