"""Stream translation, Chat Completions <-> Anthropic Messages, on the fixture streams in
tests/data/streams/ (docs/dev/protocols.md A.6, B.5, E.5; docs/dev/protocols.md B.7).

The helpers at the top are shared with the other stream test files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokunseba.sse import SSEDecoder
from tokunseba.neutral.report import ReplyReport
from tokunseba.translate import stream as make_stream_translator

STREAMS = Path(__file__).resolve().parents[2] / "data" / "streams"
FIXTURES = sorted(p.name for p in STREAMS.glob("*.sse"))
RESPONSES_FIXTURES = [n for n in FIXTURES if n.startswith("responses")]
ANTHROPIC_FIXTURES = [n for n in FIXTURES if n.startswith(("anthropic", "llama_server"))]
CHAT_FIXTURES = [n for n in FIXTURES if n not in ANTHROPIC_FIXTURES and n not in RESPONSES_FIXTURES]
FAILING = {"chat_error_midstream.sse", "chat_truncated.sse", "chat_kimi_bad_id.sse", "llamacpp_py_cut.sse",
           "anthropic_error_midstream.sse", "anthropic_truncated.sse", "responses_failed_context.sse",
           "responses_truncated.sse"}
CREATED = 1767225600


def upstream_of(name: str) -> str:
    if name in RESPONSES_FIXTURES:
        return "openai-responses"
    return "openai" if name in CHAT_FIXTURES else "anthropic"


def client_of(name: str) -> str:
    """The client each fixture's upstream is translated for by default."""
    return {"openai": "anthropic", "anthropic": "openai", "openai-responses": "anthropic"}[upstream_of(name)]


def raw(name: str) -> bytes:
    return (STREAMS / name).read_bytes()


def reply_json(name: str) -> bytes:
    return (STREAMS / name.replace(".sse", ".reply.json")).read_bytes()


def translate(data: bytes | str, upstream: str | None = None, client: str | None = None, *,
              cuts: list[int] | None = None, include_usage: bool = True):
    """Translate a fixture (by name) or raw bytes fed at the given cut offsets.
    Returns (output bytes, translator)."""
    if isinstance(data, str):
        upstream, client, data = upstream or upstream_of(data), client or client_of(data), raw(data)
    t = make_stream_translator(upstream, client, include_usage=include_usage, created=CREATED)
    out, last = [], 0
    for c in cuts or []:
        out.append(t.feed(data[last:c]))
        last = c
    out.append(t.feed(data[last:]))
    out.append(t.close())
    return b"".join(out), t


def anthropic_events(out: bytes) -> list[tuple[str | None, dict]]:
    """(event name, parsed data) of every event of an Anthropic stream."""
    d = SSEDecoder()
    return [(e.event, json.loads(e.data)) for e in d.feed(out) + d.close()]


def chat_chunks(out: bytes) -> list[dict | str]:
    d = SSEDecoder()
    evs = d.feed(out) + d.close()
    assert all(e.event is None for e in evs), "Chat streams carry no event: lines"
    return [e.data if e.data == "[DONE]" else json.loads(e.data) for e in evs]


def check_anthropic_grammar(events: list[tuple[str | None, dict]]) -> None:
    """The canonical Anthropic sequence (docs/dev/clients.md §4): event names, message_start first,
    blocks in ascending order each started / deltas / stopped, message_delta + message_stop
    last, usage in both; or an `event: error` as the last event."""
    assert events, "no events"
    for name, data in events:
        assert name == data["type"], (name, data)
    if events[-1][0] == "error":
        body = events[-1][1]
        assert set(body) == {"type", "error"} and set(body["error"]) == {"type", "message"}
        events = events[:-1]
        if not events:
            return
    else:
        assert [n for n, _ in events[-2:]] == ["message_delta", "message_stop"]
        assert "usage" in events[-2][1] and isinstance(events[-2][1]["usage"], dict)
        assert events[-2][1]["delta"]["stop_reason"] is not None
    assert events[0][0] == "message_start"
    assert isinstance(events[0][1]["message"]["usage"], dict)
    open_index, next_index = None, 0
    for name, data in events[1:]:
        if name == "content_block_start":
            assert open_index is None, "a block started before the previous one stopped"
            assert data["index"] == next_index
            open_index, next_index = data["index"], next_index + 1
        elif name == "content_block_delta":
            assert data["index"] < next_index
        elif name == "content_block_stop":
            assert data["index"] == open_index
            open_index = None
        elif name in ("message_delta", "message_stop"):
            assert open_index is None, "message ended with an open block"


def check_chat_grammar(chunks: list[dict | str], include_usage: bool) -> None:
    """Role chunk, deltas, one finish chunk, the usage chunk when asked for, [DONE]; or an
    error object last."""
    assert chunks
    if isinstance(chunks[-1], dict) and "error" in chunks[-1]:
        assert set(chunks[-1]["error"]) == {"message", "type", "param", "code"}
        chunks = chunks[:-1]
        if not chunks:
            return
    else:
        assert chunks[-1] == "[DONE]"
        chunks = chunks[:-1]
    first = chunks[0]
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    ids = {c["id"] for c in chunks}
    assert len(ids) == 1
    for c in chunks:
        assert c["object"] == "chat.completion.chunk" and c["created"] == CREATED
        assert ("usage" in c) == include_usage
    finishes = [c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert len(finishes) <= 1


def blocks(events: list[tuple[str | None, dict]]) -> list[dict]:
    """Rebuild the content blocks of an Anthropic stream (tool input kept as the raw string)."""
    out: list[dict] = []
    for name, d in events:
        if name == "content_block_start":
            b = dict(d["content_block"])
            if b["type"] == "tool_use":
                b["input"] = ""
            out.append(b)
        elif name == "content_block_delta":
            b, delta = out[d["index"]], d["delta"]
            if delta["type"] == "text_delta":
                b["text"] += delta["text"]
            elif delta["type"] == "input_json_delta":
                b["input"] += delta["partial_json"]
    return out


def chat_message(chunks: list[dict | str]) -> dict:
    """Rebuild the Chat message from chunks (tool calls keyed by index)."""
    content, calls, finish, usage = "", {}, None, None
    for c in chunks:
        if not isinstance(c, dict) or "error" in c:
            continue
        if c.get("usage"):
            usage = c["usage"]
        for ch in c["choices"]:
            d = ch["delta"]
            content += d.get("content") or ""
            for tc in d.get("tool_calls") or []:
                slot = calls.setdefault(tc["index"], {"id": "", "name": "", "arguments": ""})
                slot["id"] += tc.get("id") or ""
                slot["name"] += (tc.get("function") or {}).get("name") or ""
                slot["arguments"] += (tc.get("function") or {}).get("arguments") or ""
            finish = ch["finish_reason"] or finish
    return {"content": content, "tool_calls": [calls[k] for k in sorted(calls)], "finish": finish, "usage": usage}


# --------------------------------------------------------------------------------------
# every fixture


@pytest.mark.parametrize("name", CHAT_FIXTURES)
def test_chat_upstream_gives_a_canonical_anthropic_stream(name):
    out, t = translate(name)
    events = anthropic_events(out)
    check_anthropic_grammar(events)
    assert t.started
    assert t.report.completed == (name not in FAILING)
    assert (events[-1][0] == "error") == (name in FAILING)


@pytest.mark.parametrize("name", ANTHROPIC_FIXTURES)
@pytest.mark.parametrize("include_usage", [True, False])
def test_anthropic_upstream_gives_a_canonical_chat_stream(name, include_usage):
    out, t = translate(name, include_usage=include_usage)
    chunks = chat_chunks(out)
    check_chat_grammar(chunks, include_usage)
    assert t.report.completed == (name not in FAILING)


# --------------------------------------------------------------------------------------
# the validated examples, event by event


def test_validated_chat_stream_to_anthropic_event_by_event():
    out, t = translate("chat_validated_parallel_tools.sse")
    ev = anthropic_events(out)
    msg_start = ev[0][1]["message"]
    assert msg_start == {"id": "chatcmpl-C9xKq2mZ", "type": "message", "role": "assistant",
                         "model": "gpt-4.1-2025-04-14", "content": [], "stop_reason": None,
                         "stop_sequence": None, "usage": {}}
    expected = [
        ("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "Checking both"}}),
        ("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": " cities."}}),
        ("content_block_stop", {"index": 0}),
        ("content_block_start", {"index": 1, "content_block": {"type": "tool_use", "id": "call_pQ0bLh1E9vRZ",
                                                               "name": "get_weather", "input": {}}}),
        ("content_block_delta", {"index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"city\": \"Pa"}}),
        ("content_block_delta", {"index": 1, "delta": {"type": "input_json_delta", "partial_json": "ris\"}"}}),
        ("content_block_stop", {"index": 1}),
        ("content_block_start", {"index": 2, "content_block": {"type": "tool_use", "id": "call_Yz7mW4kTfN2c",
                                                               "name": "get_weather", "input": {}}}),
        ("content_block_delta", {"index": 2, "delta": {"type": "input_json_delta", "partial_json": "{\"city\": \"Oslo\"}"}}),
        ("content_block_stop", {"index": 2}),
        ("message_delta", {"delta": {"stop_reason": "tool_use", "stop_sequence": None},
                           "usage": {"input_tokens": 562, "cache_read_input_tokens": 2048, "output_tokens": 58,
                                     "output_tokens_details": {"thinking_tokens": 0}}}),
        ("message_stop", {}),
    ]
    assert [(n, {k: v for k, v in d.items() if k != "type"}) for n, d in ev[1:]] == expected
    assert t.report == ReplyReport(usage=t.report.usage, stop_reason="tool_use", completed=True,
                               model="gpt-4.1-2025-04-14")  # the model the upstream's stream named
    assert t.report.usage.reported["prompt_tokens"] == 2610
    assert t.client_usage == expected[-2][1]["usage"]


def test_validated_anthropic_stream_to_chat_chunk_by_chunk():
    out, t = translate("anthropic_validated_text_tool.sse")
    chunks = chat_chunks(out)
    base = {"id": "msg_01XFDUDYJgAACzvnptvVoYEL", "object": "chat.completion.chunk", "created": CREATED,
            "model": "claude-sonnet-4-6"}

    def ch(delta, finish=None):
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], "usage": None}

    usage = {"prompt_tokens": 2520, "completion_tokens": 71, "total_tokens": 2591,
             "prompt_tokens_details": {"cached_tokens": 2048, "cache_write_tokens": 0}}
    assert chunks == [
        ch({"role": "assistant", "content": ""}),
        ch({"content": "Let me check"}),
        ch({"content": " the weather."}),
        ch({"tool_calls": [{"index": 0, "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "type": "function",
                            "function": {"name": "get_weather", "arguments": ""}}]}),
        ch({"tool_calls": [{"index": 0, "function": {"arguments": "{\"city\": \"Pa"}}]}),
        ch({"tool_calls": [{"index": 0, "function": {"arguments": "ris\", \"unit\""}}]}),
        ch({"tool_calls": [{"index": 0, "function": {"arguments": ": \"celsius\"}"}}]}),
        ch({}, "tool_calls"),
        {**base, "choices": [], "usage": usage},
        "[DONE]",
    ]
    assert t.client_usage == usage
    assert t.report.stop_reason == "tool_use" and t.report.completed
    assert t.report.usage.reported["output_tokens"] == 71


def test_chat_round_trip_reproduces_the_validated_chat_stream():
    """Chat -> Anthropic -> Chat gives back the upstream's own chunks (the B.5 example has
    no fields the round trip cannot carry)."""
    anth, _ = translate("chat_validated_parallel_tools.sse")
    back, _ = translate(anth, "anthropic", "openai")
    assert chat_chunks(back) == chat_chunks(raw("chat_validated_parallel_tools.sse"))


# --------------------------------------------------------------------------------------
# Chat upstream -> Anthropic client


def test_llama_cpp_python_tool_stream_is_one_block_with_verbatim_pieces():
    out, t = translate("llamacpp_py_tool.sse")
    ev = anthropic_events(out)
    starts = [d for n, d in ev if n == "content_block_start"]
    assert len(starts) == 1
    assert starts[0]["content_block"]["id"] == "call__0_get_weather_cmpl-9f6e47d6-a94e-4d05-a0e0-ea413a804ace"
    pieces = [d["delta"]["partial_json"] for n, d in ev if n == "content_block_delta"]
    assert pieces == ["{", " ", "\"", "location", "\":", " \"", "Paris", "\",", " \"", "unit", "\":", " \"", "c",
                      "elsius", "\"}", " "]
    assert json.loads("".join(pieces)) == {"location": "Paris", "unit": "celsius"}
    assert ev[-2][1]["delta"]["stop_reason"] == "tool_use"
    assert ev[-2][1]["usage"] == {} and t.client_usage is None and t.report.usage is None


def test_llama_cpp_python_text_stream_ignores_ping_comments():
    out, t = translate("llamacpp_py_text.sse")
    assert blocks(anthropic_events(out)) == [{"type": "text", "text": "Say hello. mendatanguser\n"}]
    assert t.report.stop_reason == "max_tokens"


def test_ollama_whole_calls_in_one_chunk():
    out, _ = translate("ollama_whole_call.sse")
    bl = blocks(anthropic_events(out))
    assert bl == [
        {"type": "text", "text": "Checking héllo 日本 🎉"},
        {"type": "tool_use", "id": "call_ab12cd34", "name": "get_weather", "input": "{\"city\":\"Paris\"}"},
        {"type": "tool_use", "id": "call_ef56gh78", "name": "get_weather", "input": "{\"city\":\"Tōkyō 東京\"}"},
    ]


def test_reasoning_content_is_dropped_not_made_thinking():
    out, t = translate("chat_reasoning_content.sse")
    ev = anthropic_events(out)
    assert blocks(ev) == [{"type": "text", "text": "Bonjour héllo 🎉"}]
    assert all(d.get("delta", {}).get("type") != "thinking_delta" for _, d in ev)
    assert t.report.dropped == ["choices[0].delta.reasoning_content"]


def test_vllm_reasoning_dropped_and_stop_string_becomes_stop_sequence():
    out, t = translate("vllm_reasoning_stop_string.sse")
    ev = anthropic_events(out)
    assert blocks(ev) == [{"type": "text", "text": "1, 2, 3"}]
    assert ev[-2][1]["delta"] == {"stop_reason": "stop_sequence", "stop_sequence": "END"}
    assert ev[-2][1]["usage"] == {"input_tokens": 176, "cache_read_input_tokens": 1024, "output_tokens": 12}
    assert t.report.dropped == ["choices[0].delta.reasoning"]


def test_usage_on_the_finish_chunk_old_llama_cpp():
    out, t = translate("chat_usage_on_finish.sse")
    ev = anthropic_events(out)
    assert ev[-2][1]["usage"] == {"input_tokens": 12, "output_tokens": 3}
    assert t.report.usage.reported == {"completion_tokens": 3, "prompt_tokens": 12, "total_tokens": 15}


def test_interleaved_parallel_tool_arguments_reach_their_own_block():
    out, t = translate("chat_interleaved_tools.sse")
    bl = blocks(anthropic_events(out))
    assert [(b["id"], json.loads(b["input"])) for b in bl] == [("call_A1", {"city": "Paris"}),
                                                              ("call_B2", {"tz": "Europe/Paris"})]
    assert any("already closed" in w for w in t.report.warnings)


def test_crlf_framed_chat_stream():
    out, _ = translate("chat_crlf.sse")
    assert blocks(anthropic_events(out)) == [{"type": "text", "text": "héllo 日本 🎉"}]


def test_chat_error_chunk_becomes_anthropic_error_event():
    out, t = translate("chat_error_midstream.sse")
    ev = anthropic_events(out)
    assert [n for n, _ in ev] == ["message_start", "content_block_start", "content_block_delta", "error"]
    assert ev[-1][1] == {"type": "error", "error": {
        "type": "api_error", "message": "The server had an error while processing your request. Sorry about that!"}}
    assert not t.report.completed and t.report.errors == [ev[-1][1]["error"]["message"]]


def test_context_overflow_mid_stream_says_prompt_is_too_long():
    data = (b'data: {"id":"c1","model":"m","choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}]}\n\n'
            b'data: {"error":{"message":"This model\'s maximum context length is 4096 tokens.","type":"invalid_request_error",'
            b'"param":"messages","code":"context_length_exceeded"}}\n\n')
    out, _ = translate(data, "openai", "anthropic")
    err = anthropic_events(out)[-1][1]["error"]
    assert err["type"] == "invalid_request_error"
    assert err["message"] == "prompt is too long: This model's maximum context length is 4096 tokens."


def test_vllm_flat_error_object_mid_stream_keeps_its_status():
    data = b'data: {"object":"error","message":"bad stop token","type":"BadRequestError","param":null,"code":400}\n\n'
    out, t = translate(data, "openai", "anthropic")
    assert anthropic_events(out) == [("error", {"type": "error", "error": {"type": "invalid_request_error",
                                                                            "message": "bad stop token"}})]


@pytest.mark.parametrize("name", ["chat_truncated.sse", "llamacpp_py_cut.sse"])
def test_stream_without_finish_ends_in_error_never_a_fake_message_stop(name):
    out, t = translate(name)
    ev = anthropic_events(out)
    names = [n for n, _ in ev]
    assert names[-1] == "error" and "message_stop" not in names and "message_delta" not in names
    assert ev[-1][1]["error"]["type"] == "api_error"
    assert ev[-1][1]["error"]["message"].startswith("upstream ended the stream")
    assert not t.report.completed and t.report.stop_reason is None


def test_empty_upstream_body_is_an_error():
    """llama_cpp.server answers 200 with an empty body on streamed context overflow."""
    out, t = translate(b"", "openai", "anthropic")
    assert anthropic_events(out) == [("error", {"type": "error", "error": {
        "type": "api_error", "message": "upstream ended the stream early"}})]
    out, _ = translate(b"", "anthropic", "openai")
    assert chat_chunks(out)[0]["error"]["message"] == "upstream ended the stream early"


def test_invalid_tool_id_is_refused_with_an_error_event():
    out, t = translate("chat_kimi_bad_id.sse")
    ev = anthropic_events(out)
    assert ev[-1][0] == "error"
    assert "functions.get_weather:0" in ev[-1][1]["error"]["message"]
    assert not any(n == "content_block_start" and d["content_block"]["type"] == "tool_use" for n, d in ev)


def test_non_json_chunk_is_an_error():
    data = b'data: {"id":"c","model":"m","choices":[]}\n\ndata: {not json\n\n'
    out, _ = translate(data, "openai", "anthropic")
    ev = anthropic_events(out)
    assert ev[-1][0] == "error" and "not valid JSON" in ev[-1][1]["error"]["message"]


def test_choices_other_than_index_0_are_ignored_with_a_warning():
    data = (b'data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"A"},"finish_reason":null},'
            b'{"index":1,"delta":{"content":"B"},"finish_reason":null}]}\n\n'
            b'data: {"id":"c","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
            b'data: [DONE]\n\n')
    out, t = translate(data, "openai", "anthropic")
    assert blocks(anthropic_events(out)) == [{"type": "text", "text": "A"}]
    assert any("index != 0" in w for w in t.report.warnings)


@pytest.mark.parametrize("finish,stop", [("stop", "end_turn"), ("length", "max_tokens"),
                                         ("content_filter", "refusal"), ("tool_calls", "tool_use")])
def test_finish_reason_maps_to_stop_reason(finish, stop):
    data = (b'data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]}\n\n'
            b'data: {"id":"c","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"' + finish.encode()
            + b'"}]}\n\ndata: [DONE]\n\n')
    out, _ = translate(data, "openai", "anthropic")
    assert anthropic_events(out)[-2][1]["delta"] == {"stop_reason": stop, "stop_sequence": None}


def test_finish_without_done_is_completed_at_close():
    data = (b'data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]}\n\n'
            b'data: {"id":"c","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n')
    t = make_stream_translator("openai", "anthropic")
    first = t.feed(data)
    assert b"message_delta" not in first  # held for the usage chunk / [DONE]
    rest = t.close()
    assert [n for n, _ in anthropic_events(first + rest)][-2:] == ["message_delta", "message_stop"]
    assert t.report.completed


# --------------------------------------------------------------------------------------
# Anthropic upstream -> Chat client


def test_thinking_dropped_text_and_tool_index_is_a_running_counter():
    out, t = translate("anthropic_thinking_signature.sse")
    chunks = chat_chunks(out)
    m = chat_message(chunks)
    assert m["content"] == "Je vérifie 🎉"
    # the tool is Anthropic block 2 but Chat tool index 0
    assert [tc for c in chunks[:-1] for ch in c["choices"] for tc in ch["delta"].get("tool_calls", []) if "id" in tc] == [
        {"index": 0, "id": "toolu_01Abc", "type": "function", "function": {"name": "get_weather", "arguments": ""}}]
    assert m["tool_calls"] == [{"id": "toolu_01Abc", "name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}]
    assert m["usage"] == {"prompt_tokens": 6500, "completion_tokens": 95, "total_tokens": 6595,
                          "prompt_tokens_details": {"cached_tokens": 5000, "cache_write_tokens": 300},
                          "completion_tokens_details": {"reasoning_tokens": 40}}
    # the thinking is shown where Chat has an unsigned place for it; its signature stays behind
    assert "".join(ch["delta"].get("reasoning_content", "") for c in chunks if isinstance(c, dict) for ch in c["choices"])
    assert t.report.dropped == ["content[].thinking.signature"]
    assert "EqQBCkYIBRgCKkDsig==" not in out.decode()


def test_server_tool_blocks_and_citations_dropped():
    out, t = translate("anthropic_server_tool_use.sse")
    m = chat_message(chat_chunks(out))
    assert m["content"] == "It is sunny in Paris."
    assert m["tool_calls"] == [{"id": "toolu_01NoArgs", "name": "get_time", "arguments": ""}]
    assert m["finish"] == "tool_calls"
    assert t.report.dropped == ["content[].server_tool_use", "content[].web_search_tool_result", "content[].citations"]
    assert "srvtoolu" not in out.decode()


def test_stop_sequence_becomes_stop_and_is_recorded_dropped():
    out, t = translate("anthropic_ping_cr.sse")
    m = chat_message(chat_chunks(out))
    assert m["content"] == "héllo 日本 🎉" and m["finish"] == "stop"
    assert t.report.dropped == ["stop_sequence"]
    assert t.report.stop_reason == "stop_sequence"


@pytest.mark.parametrize("stop,finish", [("end_turn", "stop"), ("stop_sequence", "stop"), ("max_tokens", "length"),
                                         ("tool_use", "tool_calls"), ("refusal", "content_filter"),
                                         ("pause_turn", "stop"), ("model_context_window_exceeded", "length")])
def test_stop_reason_maps_to_finish_reason(stop, finish):
    data = (b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","model":"c","usage":{"input_tokens":3}}}\n\n'
            b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"' + stop.encode()
            + b'","stop_sequence":null},"usage":{"output_tokens":2}}\n\nevent: message_stop\ndata: {"type":"message_stop"}\n\n')
    out, t = translate(data, "anthropic", "openai")
    assert chat_message(chat_chunks(out))["finish"] == finish


def test_include_usage_false_sends_no_usage_chunk():
    out, t = translate("anthropic_validated_text_tool.sse", include_usage=False)
    chunks = chat_chunks(out)
    assert all("usage" not in c for c in chunks[:-1])
    assert [c for c in chunks[:-1] if not c["choices"]] == []
    assert t.client_usage is not None  # still reported to the ledger


def test_anthropic_error_event_becomes_chat_error_chunk():
    out, t = translate("anthropic_error_midstream.sse")
    chunks = chat_chunks(out)
    assert chunks[-1] == {"error": {"message": "Overloaded", "type": "server_error", "param": None, "code": None}}
    assert "[DONE]" not in chunks
    assert t.report.errors == ["Overloaded"] and not t.report.completed


@pytest.mark.parametrize("client", ["openai", "openai-responses"])
def test_anthropic_stream_cut_after_message_delta_is_not_complete(client):
    """message_delta carries the stop reason, but the stream is complete only at message_stop:
    cut between them, the client gets an error, never a clean end ([DONE] / response.completed)."""
    head = (b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","model":"c",'
            b'"usage":{"input_tokens":3}}}\n\nevent: message_delta\ndata: {"type":"message_delta","delta":'
            b'{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":2}}\n\n')
    out, t = translate(head, "anthropic", client)
    assert b"[DONE]" not in out and b"response.completed" not in out and b"upstream ended the stream early" in out
    assert not t.report.completed and t.report.errors == ["upstream ended the stream early"]
    out, t = translate(head + b'event: message_stop\ndata: {"type":"message_stop"}\n\n', "anthropic", client)
    assert t.report.completed and not t.report.errors and (b"[DONE]" in out or b"response.completed" in out)


def test_truncated_anthropic_stream_ends_in_error_not_done():
    out, t = translate("anthropic_truncated.sse")
    chunks = chat_chunks(out)
    assert chunks[-1]["error"]["message"] == "upstream ended the stream early"
    assert "[DONE]" not in chunks and all(not c["choices"] or c["choices"][0]["finish_reason"] is None
                                          for c in chunks[:-1])


def test_llama_server_anthropic_endpoint():
    out, t = translate("llama_server_messages.sse")
    m = chat_message(chat_chunks(out))
    assert m["content"] == "Say hello.<|" and m["finish"] == "length"
    assert m["usage"] == {"prompt_tokens": 26, "completion_tokens": 4, "total_tokens": 30,
                          "prompt_tokens_details": {"cached_tokens": 0}}


# --------------------------------------------------------------------------------------
# the translator object


def test_output_is_not_buffered():
    """Every complete upstream event yields its translated bytes from the same feed call
    (only the message end waits for the usage chunk / [DONE])."""
    data = raw("chat_validated_parallel_tools.sse")
    t = make_stream_translator("openai", "anthropic", created=CREATED)
    events = [e + b"\n\n" for e in data.split(b"\n\n") if e]
    outs = [t.feed(e) for e in events]
    assert all(outs[:-3])  # every content chunk produced output at once
    assert outs[-3] == b""  # the finish chunk: message_delta is held for the usage
    assert b"message_delta" in outs[-2]  # ... which rides on the usage chunk
    assert t.feed(b"data: {\"id\":") == b""  # an incomplete event: nothing yet


def test_started_and_fail_are_idempotent():
    t = make_stream_translator("openai", "anthropic")
    assert not t.started
    assert t.feed(raw("chat_crlf.sse")[:10]) == b"" and not t.started
    t2 = make_stream_translator("openai", "anthropic")
    assert t2.feed(b'data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n')
    assert t2.started
    err = t2.fail("upstream connection reset")
    assert anthropic_events(err) == [("error", {"type": "error", "error": {"type": "api_error",
                                                                         "message": "upstream connection reset"}})]
    assert t2.fail("again") == b"" and t2.close() == b"" and t2.feed(b"data: x\n\n") == b""
    assert t2.report.errors == ["upstream connection reset"]


def test_fail_after_completion_sends_nothing():
    t = make_stream_translator("anthropic", "openai")
    t.feed(raw("anthropic_validated_text_tool.sse"))
    assert t.report.completed
    assert t.fail("late") == b"" and t.report.errors == []


def test_fail_in_chat_protocol():
    t = make_stream_translator("anthropic", "openai")
    t.feed(raw("anthropic_validated_text_tool.sse")[:400])
    chunks = chat_chunks(t.fail("upstream connection reset"))
    assert chunks == [{"error": {"message": "upstream connection reset", "type": "server_error", "param": None,
                                 "code": None}}]


@pytest.mark.parametrize("pair", [("openai", "openai"), ("anthropic", "anthropic"), ("gemini", "gemini"),
                                  ("openai", "nope")])
def test_pairs_without_a_translator_are_refused(pair):
    with pytest.raises(ValueError):
        make_stream_translator(*pair)
