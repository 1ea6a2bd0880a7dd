"""Request translation OpenAI Chat Completions -> Anthropic Messages (translate/anthropic/encode.py):
one table-driven test per mapping of docs/dev/protocols.md E.2, the refusals and the bad input it names."""

from __future__ import annotations

import pytest

from tokunseba.errors import TranslationError

from tests.support.anthropic_chat import C, c2a, CHAT_TOOL_CALLS, FN, IMG64, IMGURL, PDF64, TOOL
from tests.support.pairs import chat_to_anthropic


# ---------------------------------------------------------------------------------------
# Chat -> Anthropic
# ---------------------------------------------------------------------------------------

C2A_CASES = [
    ("leading system and developer joined into system",
     C(messages=[{"role": "system", "content": "One."}, {"role": "developer", "content": [{"type": "text", "text": "Two."}]},
                 {"role": "user", "content": "hi"}]), {},
     {"system": "One.\n\nTwo.", "messages": [{"role": "user", "content": "hi"}]}, [], []),
    ("mid-list system kept in place",
     C(messages=[{"role": "system", "content": "S"}, {"role": "user", "content": "a"}, {"role": "system", "content": "Mid."},
                 {"role": "user", "content": "b"}]), {},
     {"system": "S", "messages": [{"role": "user", "content": "a"}, {"role": "system", "content": "Mid."}, {"role": "user", "content": "b"}]}, [], []),
    ("user parts: text, data-URL image, URL image (detail dropped), PDF file",
     C(messages=[{"role": "user", "content": [
         {"type": "text", "text": "look"},
         {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=", "detail": "high"}},
         {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}},
         {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERi0xLjQ=", "filename": "r.pdf"}}]}]), {},
     {"messages": [{"role": "user", "content": [
         {"type": "text", "text": "look"}, IMG64, IMGURL, PDF64 | {"title": "r.pdf"}]}]},
     ["messages[0].content[1].image_url.detail"], []),
    ("file_id and audio parts dropped",
     C(messages=[{"role": "user", "content": [{"type": "file", "file": {"file_id": "file_1"}},
                                              {"type": "input_audio", "input_audio": {"data": "x", "format": "wav"}},
                                              {"type": "text", "text": "q"}]}]), {},
     {"messages": [{"role": "user", "content": [{"type": "text", "text": "q"}]}]},
     ["messages[0].content[0]", "messages[0].content[1]"], []),
    ("assistant content + tool_calls -> text then tool_use blocks",
     C(messages=[{"role": "user", "content": "w?"}, CHAT_TOOL_CALLS]), {},
     {"messages": [{"role": "user", "content": "w?"}, {"role": "assistant", "content": [
         {"type": "text", "text": "Checking."},
         {"type": "tool_use", "id": "toolu_01A", "name": "get_weather", "input": {"city": "Paris", "n": [1, 2]}},
         {"type": "tool_use", "id": "toolu_01B", "name": "get_weather", "input": {}}]}]}, [], []),
    ("empty arguments mean {}; null content means no text",
     C(messages=[{"role": "assistant", "content": None, "tool_calls": [
         {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": ""}}]}]), {},
     {"messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "call_1", "name": "f", "input": {}}]}]}, [], []),
    ("tool runs plus the next user message -> one user turn, results first",
     C(messages=[{"role": "assistant", "content": "", "tool_calls": CHAT_TOOL_CALLS["tool_calls"]},
                 {"role": "tool", "tool_call_id": "toolu_01A", "content": "18C"},
                 {"role": "tool", "tool_call_id": "toolu_01B", "content": [{"type": "text", "text": "a"}]},
                 {"role": "user", "content": "thanks"}]), {},
     {"messages": [
         {"role": "assistant", "content": [
             {"type": "tool_use", "id": "toolu_01A", "name": "get_weather", "input": {"city": "Paris", "n": [1, 2]}},
             {"type": "tool_use", "id": "toolu_01B", "name": "get_weather", "input": {}}]},
         {"role": "user", "content": [
             {"type": "tool_result", "tool_use_id": "toolu_01A", "content": "18C"},
             {"type": "tool_result", "tool_use_id": "toolu_01B", "content": [{"type": "text", "text": "a"}]},
             {"type": "text", "text": "thanks"}]}]}, [], []),
    ("tool run followed by an assistant turn stands alone",
     C(messages=[{"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                 {"role": "tool", "tool_call_id": "c1", "content": "ok"},
                 {"role": "assistant", "content": "done"}]), {},
     {"messages": [
         {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "f", "input": {}}]},
         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "ok"}]},
         {"role": "assistant", "content": "done"}]}, [], []),
    ("empty texts and messages dropped",
     C(messages=[{"role": "system", "content": ""}, {"role": "user", "content": "hi"}, {"role": "assistant", "content": ""},
                 {"role": "user", "content": [{"type": "text", "text": ""}, {"type": "text", "text": "x"}]},
                 {"role": "user", "content": ""}]), {},
     {"messages": [{"role": "user", "content": "hi"}, {"role": "user", "content": [{"type": "text", "text": "x"}]}]},
     ["messages[0]", "messages[2]", "messages[3].content[0]", "messages[4]"], []),
    ("empty tool result: no content key",
     C(messages=[{"role": "tool", "tool_call_id": "c1", "content": ""}]), {},
     {"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1"}]}]}, ["messages[0].content"], []),
    ("max_tokens field -> max_tokens",
     {"model": "m", "max_tokens": 77, "messages": [{"role": "user", "content": "hi"}]}, {}, {"max_tokens": 77}, [], []),
    ("both max fields: max_completion_tokens wins",
     C(max_tokens=5), {}, {"max_tokens": 100}, ["max_tokens"], []),
    ("absent max tokens: the endpoint default, as plumbing",
     {"model": "m", "messages": [{"role": "user", "content": "hi"}]}, {"default_max_tokens": 4096}, {"max_tokens": 4096}, [], ["max_tokens"]),
    ("stop string -> stop_sequences", C(stop="\n"), {}, {"stop_sequences": ["\n"]}, [], []),
    ("stop list -> stop_sequences", C(stop=["a", "b"]), {}, {"stop_sequences": ["a", "b"]}, [], []),
    ("temperature above 1 dropped, not clamped", C(temperature=1.5, top_p=0.5), {}, {"top_p": 0.5}, ["temperature"], []),
    ("temperature within 0-1 passed", C(temperature=0.7), {}, {"temperature": 0.7}, [], []),
    ("tools and tool_choice required -> any",
     C(tools=[FN], tool_choice="required"), {}, {"tools": [TOOL], "tool_choice": {"type": "any"}}, [], []),
    ("named tool_choice -> tool",
     C(tools=[FN], tool_choice={"type": "function", "function": {"name": "get_weather"}}), {},
     {"tool_choice": {"type": "tool", "name": "get_weather"}}, [], []),
    ("tool without parameters: empty object schema as plumbing; strict dropped",
     C(tools=[{"type": "function", "function": {"name": "now", "strict": True}}]), {},
     {"tools": [{"name": "now", "input_schema": {"type": "object"}}]}, ["tools[0].function.strict"], ["tools[0].input_schema"]),
    ("parallel_tool_calls false rides on tool_choice",
     C(tools=[FN], tool_choice="auto", parallel_tool_calls=False), {},
     {"tool_choice": {"type": "auto", "disable_parallel_tool_use": True}}, [], []),
    ("parallel_tool_calls false without tool_choice: auto added as plumbing",
     C(tools=[FN], parallel_tool_calls=False), {},
     {"tool_choice": {"type": "auto", "disable_parallel_tool_use": True}}, [], ["tool_choice"]),
    ("parallel_tool_calls true without tool_choice: Anthropic's default, dropped",
     C(tools=[FN], parallel_tool_calls=True), {}, {}, ["parallel_tool_calls"], []),
    ("custom tools and allowed_tools choice dropped",
     C(tools=[FN, {"type": "custom", "custom": {"name": "g"}}], tool_choice={"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": []}}), {},
     {"tools": [TOOL]}, ["tools[1]", "tool_choice"], []),
    ("n=1 is the only answer; dropped", C(n=1), {}, {}, ["n"], []),
    ("assistant refusal -> text block (converted)",
     C(messages=[{"role": "assistant", "content": None, "refusal": "I can't."}]), {},
     {"messages": [{"role": "assistant", "content": [{"type": "text", "text": "I can't."}]}]}, [], []),
    ("stream_options consumed, not forwarded",
     C(stream=True, stream_options={"include_usage": True, "include_obfuscation": False}), {},
     {"stream": True}, ["stream_options.include_obfuscation"], []),
]


@pytest.mark.parametrize(("case", "body", "kw", "expect", "dropped", "plumbing"), C2A_CASES, ids=[c[0] for c in C2A_CASES])
def test_chat_to_anthropic_mapping(case, body, kw, expect, dropped, plumbing):
    rt = c2a(body, **kw)
    for key, value in expect.items():
        assert rt.body[key] == value, key
    assert rt.dropped == dropped
    assert rt.plumbing == plumbing
    assert "stream_options" not in rt.body


@pytest.mark.parametrize(("stream", "options", "wants"), [
    (True, {"include_usage": True}, True), (True, None, False), (True, {"include_usage": False}, False), (False, None, True),
])
def test_c2a_client_wants_usage(stream, options, wants):
    body = C(stream=stream) | ({"stream_options": options} if options is not None else {})
    assert c2a(body).client_wants_usage is wants


def test_c2a_missing_max_tokens_without_default_is_a_clear_400():
    with pytest.raises(TranslationError) as e:
        chat_to_anthropic({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    assert e.value.status == 400 and "max_tokens" in e.value.message


def test_c2a_n_above_one_is_400():
    with pytest.raises(TranslationError) as e:
        chat_to_anthropic(C(n=2))
    assert e.value.status == 400 and e.value.message.startswith("n:")


@pytest.mark.parametrize(("arguments", "where"), [("{bad", "not valid JSON"), ("[1,2]", "JSON object"), ('"s"', "JSON object")])
def test_c2a_invalid_tool_arguments_are_400(arguments, where):
    body = C(messages=[{"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": arguments}}]}])
    with pytest.raises(TranslationError) as e:
        chat_to_anthropic(body)
    assert e.value.status == 400
    assert e.value.message.startswith("messages[0].tool_calls[0].function.arguments:") and where in e.value.message


@pytest.mark.parametrize("bad_id", ["functions.get_weather:0", "call 1", "call_1\n", "", "ĉall"])
def test_tool_call_ids_anthropic_would_reject_refuse_the_turn(bad_id):
    """docs/dev/architecture.md rule 2: ids are never rewritten; an id Anthropic rejects refuses the route."""
    in_assistant = C(messages=[{"role": "assistant", "content": None, "tool_calls": [
        {"id": bad_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}]}])
    in_tool = C(messages=[{"role": "tool", "tool_call_id": bad_id, "content": "x"}])
    for body in (in_assistant, in_tool):
        with pytest.raises(TranslationError) as e:
            chat_to_anthropic(body)
        assert e.value.status == 400 and e.value.kind == "refused"


def test_c2a_model_override():
    rt = c2a(C(), model="claude-haiku-4-5")
    assert rt.body["model"] == "claude-haiku-4-5" and len(rt.converted) == 1


CHAT_EVERYTHING_DROPPABLE = C(
    messages=[
        {"role": "system", "content": "S", "name": "sys"},
        {"role": "user", "name": "bob", "content": [
            {"type": "text", "text": "q", "cache_control": {"type": "ephemeral"}},
            {"type": "image_url", "image_url": {"url": "https://x.test/a.png", "detail": "low"}},
            {"type": "file", "file": {"file_id": "file_1"}},
            {"type": "input_audio", "input_audio": {"data": "x", "format": "wav"}}]},
        {"role": "assistant", "content": "a", "name": "bot", "audio": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "r", "name": "f"},
    ],
    tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}, "strict": True}},
           {"type": "custom", "custom": {"name": "g"}}],
    parallel_tool_calls=True, max_tokens=3, temperature=2, n=1,
    stream=True, stream_options={"include_usage": True, "include_obfuscation": True},
    user="u", safety_identifier="s", prompt_cache_key="k", prompt_cache_retention="24h",
    response_format={"type": "json_object"}, reasoning_effort="low", seed=1, logprobs=True, top_logprobs=2,
    logit_bias={"1": 1}, presence_penalty=0.1, frequency_penalty=0.1, metadata={"a": "b"}, store=True,
    service_tier="auto", modalities=["text"], audio={"voice": "x"}, prediction={"type": "content", "content": "x"},
    web_search_options={}, verbosity="low", functions=[], function_call="auto", mystery_field=1,
)


def test_every_dropped_chat_field_is_recorded():  # docs/dev/pitfalls.md 24
    rt = c2a(CHAT_EVERYTHING_DROPPABLE)
    assert sorted(rt.dropped) == sorted([
        "messages[0].name", "messages[1].name", "messages[1].content[0].cache_control",
        "messages[1].content[1].image_url.detail", "messages[1].content[2]", "messages[1].content[3]",
        "messages[2].name", "messages[2].audio", "messages[3].name",
        "tools[0].function.strict", "tools[1]", "parallel_tool_calls", "max_tokens", "temperature", "n",
        "stream_options.include_obfuscation",
        "user", "safety_identifier", "prompt_cache_key", "prompt_cache_retention", "response_format",
        "reasoning_effort", "seed", "logprobs", "top_logprobs", "logit_bias", "presence_penalty",
        "frequency_penalty", "metadata", "store", "service_tier", "modalities", "audio", "prediction",
        "web_search_options", "verbosity", "functions", "function_call", "mystery_field",
    ])
    assert set(rt.body) == {"model", "messages", "system", "tools", "max_tokens", "stream"}
    assert rt.warnings  # the temperature drop is explained


C2A_BAD = [
    ("x", "Chat request body must be a JSON object"),
    (C(messages=[{"role": "function", "content": "x"}]), "messages[0].role: unknown role 'function'"),
    (C(messages=[{"role": "user", "content": [{"type": "video"}]}]), "messages[0].content[0].type: unknown content part type 'video'"),
    (C(messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png,xyz"}}]}]), "messages[0].content[0].image_url.url: expected a URL or a base64 data: URL"),
    (C(messages=[{"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "custom", "custom": {}}]}]), "messages[0].tool_calls[0].type: unknown tool call type 'custom'"),
    (C(messages=[{"role": "assistant", "content": 3}]), "messages[0].content: expected an array"),
    (C(tools=[{"type": "function"}]), "tools[0].function: required"),
    (C(tools=[FN], tool_choice="sometimes"), "tool_choice: unknown tool_choice 'sometimes'"),
    (C(max_completion_tokens=1.5), "max_completion_tokens: expected an integer"),
    (C(stop=[None]), "stop[0]: expected a string, got null"),
    (C(parallel_tool_calls="no"), "parallel_tool_calls: expected a boolean"),
]


@pytest.mark.parametrize(("body", "message"), C2A_BAD, ids=[m for _, m in C2A_BAD])
def test_c2a_bad_input_is_a_400_naming_the_path(body, message):
    with pytest.raises(TranslationError) as e:
        chat_to_anthropic(body, default_max_tokens=10)
    assert e.value.status == 400
    assert e.value.message.startswith(message), e.value.message
