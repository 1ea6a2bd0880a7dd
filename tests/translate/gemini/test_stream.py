"""Gemini streams both ways (issue 11; docs/dev/clients.md §5.5;
docs/dev/protocols.md D.2, D.4-D.6): the Gemini decoder
makes blocks from whole GenerateContentResponse chunks, the encoder writes the SSE Gemini CLI
and google-genai accept. Split invariance at every cut, the stop-reason table, usage as
reported and converted only where definitions differ, ids byte for byte (minted
deterministically only when Gemini sent none), and a whole reply equal to the same reply
streamed. The google-genai SDK's own parsing is in test_gemini_sdk.py.

Fixtures: tests/data/gemini/*.sse (three are the replies of the stub Gemini CLI was
measured against, docs/dev/clients.md §5; the rest hold the hard cases: \\r and \\r\\n framing, 3- and 4-byte
UTF-8, a trailing usage chunk, filters, a broken call, an error chunk, a cut stream)."""

from __future__ import annotations

import json
from pathlib import Path

import anthropic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.suites.test_sdk_accumulators import _http, anthropic_final
from tests.translate.openai_chat.test_stream import (CREATED, STREAMS, anthropic_events, chat_chunks, check_anthropic_grammar,
                                check_chat_grammar, upstream_of)
from tests.translate.openai_chat.test_stream import translate as feed_translator
from tokunseba import translate
from tokunseba.neutral.usage import Usage
from tokunseba.protocols.anthropic import COUNTING_NAME as ANTHROPIC
from tokunseba.protocols.gemini import COUNTING_NAME as GEMINI
from tokunseba.protocols.openai_chat import COUNTING_NAME as OPENAI
from tokunseba.protocols import gemini as pg
from tests.support.gemini_chunks import chunks_of, merge_chunks
from tokunseba.sse import SSEDecoder

GEMINI_DATA = Path(__file__).resolve().parents[2] / "data" / "gemini"
GEMINI_FIXTURES = sorted(p.name for p in GEMINI_DATA.glob("*.sse"))
GEMINI_FAILING = {"malformed_call.sse", "error_midstream.sse", "truncated.sse"}
CLIENTS = ("anthropic", "openai", "openai-responses")
# the other three protocols' recorded streams (tests/data/streams), translated to a Gemini client
OTHER_FIXTURES = sorted(p.name for p in STREAMS.glob("*.sse"))


def other_upstream(name: str) -> str:
    return upstream_of(name)  # anthropic, openai or openai-responses


def raw(name: str) -> bytes:
    return (GEMINI_DATA / name).read_bytes()


def run(data: bytes, upstream: str, client: str, cuts: list[int] | None = None):
    """(output bytes, translator) of ``data`` fed at the given cut offsets."""
    return feed_translator(data, upstream, client, cuts=cuts)


def result(data: bytes, upstream: str, client: str, cuts: list[int] | None = None):
    out, t = run(data, upstream, client, cuts)
    return out, t.report, t.client_usage


def gemini_chunks(out: bytes) -> list[dict]:
    """A Gemini client's view: every event is `data: <JSON>` + CRLF CRLF, no event: line."""
    frames = out.split(pg.SSE_END)
    assert frames[-1] == b"", "every event ends with a blank line"
    for f in frames[:-1]:
        assert f.startswith(b"data: ") and b"\n" not in f and b"\r" not in f, f
    return [json.loads(f[6:]) for f in frames[:-1]]


# ---------------------------------------------------------------- split invariance


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("name", GEMINI_FIXTURES)
def test_gemini_upstream_every_single_cut(name, client):
    data = raw(name)
    whole = result(data, "gemini", client)
    assert whole[0]
    assert result(data, "gemini", client, list(range(1, len(data)))) == whole
    for cut in range(len(data) + 1):
        assert result(data, "gemini", client, [cut]) == whole, f"differs when cut at byte {cut}"


@pytest.mark.parametrize("name", OTHER_FIXTURES)
def test_gemini_client_every_single_cut(name):
    data = (STREAMS / name).read_bytes()
    up = other_upstream(name)
    whole = result(data, up, "gemini")
    assert whole[0]
    assert result(data, up, "gemini", list(range(1, len(data)))) == whole
    for cut in range(len(data) + 1):
        assert result(data, up, "gemini", [cut]) == whole, f"differs when cut at byte {cut}"


def test_fixtures_cover_the_hard_splits():
    data = b"".join(raw(n) for n in GEMINI_FIXTURES)
    assert b"\r\n\r\n" in data and b"\n\n" in data.replace(b"\r\n", b"") and b"\r\r" in data
    assert any(b >= 0xF0 for b in data) and any(0xE0 <= b < 0xF0 for b in data)


# ---------------------------------------------------------------- Gemini upstream -> clients


@pytest.mark.parametrize("name", sorted(set(GEMINI_FIXTURES) - GEMINI_FAILING))
def test_gemini_to_anthropic_grammar_and_sdk(name):
    out, t = run(raw(name), "gemini", "anthropic")
    check_anthropic_grammar(anthropic_events(out))
    final = anthropic_final(out)  # the anthropic SDK's own stream accumulator accepts it
    assert final.stop_reason == t.report.stop_reason


@pytest.mark.parametrize("name", sorted(set(GEMINI_FIXTURES) - GEMINI_FAILING))
def test_gemini_to_chat_grammar(name):
    out, _ = run(raw(name), "gemini", "openai")
    check_chat_grammar(chat_chunks(out), include_usage=True)


def test_blocks_made_from_chunks_thinking_text_two_calls():
    out, t = run(raw("thought_two_calls_no_ids.sse"), "gemini", "anthropic")
    final = anthropic_final(out)
    # the thought part is unsigned Gemini reasoning: dropped for an Anthropic client, recorded
    assert [b.type for b in final.content] == ["text", "tool_use", "tool_use"]
    assert final.content[0].text == "Résumé → done ✓"
    # no ids from Gemini: minted from its responseId and the call's place, recorded
    assert [(b.id, b.name, b.input) for b in final.content[1:]] == [
        ("call_r-_n__1_0", "read_file", {"path": "/tmp/ä.txt"}), ("call_r-_n__1_1", "run_shell_command", {"command": "ls -la"})]
    assert "id_synthesized: candidates[0].content.parts[].functionCall.id" in t.report.warnings
    assert {"candidates[0].content.parts[].thought", "candidates[0].content.parts[].thoughtSignature"} <= set(
        t.report.dropped)
    assert final.stop_reason == "tool_use"  # STOP with calls
    # usage: docs/dev/protocols.md D.6 (prompt includes cached; thoughts billed as output; tool-use prompt is input)
    assert final.usage.input_tokens == 5000 - 4000 + 7
    assert final.usage.cache_read_input_tokens == 4000
    assert final.usage.output_tokens == 300 + 200
    assert t.report.usage == Usage(GEMINI, json.loads(raw("thought_two_calls_no_ids.sse").split(b"data: ")[-1])[
        "usageMetadata"])


def test_ids_gemini_sends_travel_byte_for_byte():
    final = anthropic_final(run(raw("cli_thought_text_call_id.sse"), "gemini", "anthropic")[0])
    assert [b.id for b in final.content if b.type == "tool_use"] == ["call_acb15370ebe443b9"]


def test_ids_minted_are_deterministic():
    a = run(raw("cli_text_call_no_id.sse"), "gemini", "openai")[0]
    b = run(raw("cli_text_call_no_id.sse"), "gemini", "openai", [100, 300])[0]
    assert a == b and b'"id":"call_9307e3fdd0d24553a35d5e_0"' in a


@pytest.mark.parametrize("name,stop", [
    ("py_text_chunks.sse", "end_turn"), ("usage_trailing.sse", "max_tokens"), ("safety.sse", "refusal"),
    ("prompt_blocked.sse", "refusal"), ("cli_text_call_no_id.sse", "tool_use"), ("no_usage.sse", "end_turn"),
])
def test_finish_reason_table(name, stop):
    _, t = run(raw(name), "gemini", "anthropic")
    assert t.report.stop_reason == stop and t.report.completed


def test_content_filters_are_never_a_clean_stop():
    for name in ("safety.sse", "prompt_blocked.sse"):
        for client, field in (("openai", "content_filter"), ("openai-responses", "content_filter")):
            out, t = run(raw(name), "gemini", client)
            assert field.encode() in out and b'"finish_reason":"stop"' not in out
    assert "candidates[0].safetyRatings" in run(raw("safety.sse"), "gemini", "anthropic")[1].report.dropped


def test_usage_only_in_a_trailing_chunk_rides_on_the_stop():
    out, t = run(raw("usage_trailing.sse"), "gemini", "anthropic")
    delta = [d for n, d in anthropic_events(out) if n == "message_delta"][0]
    assert delta["usage"] == {"input_tokens": 12, "output_tokens": 2}


def test_no_usage_stays_absent():
    out, t = run(raw("no_usage.sse"), "gemini", "anthropic")
    assert t.report.usage is None and t.client_usage is None
    assert [d for n, d in anthropic_events(out) if n == "message_delta"][0]["usage"] == {}


@pytest.mark.parametrize("name,needle,status_type", [
    ("malformed_call.sse", "MALFORMED_FUNCTION_CALL", "api_error"),
    ("error_midstream.sse", "Resource has been exhausted", "rate_limit_error"),
    ("truncated.sse", "without a finishReason", "api_error"),
])
def test_broken_streams_end_in_an_error_event(name, needle, status_type):
    out, t = run(raw(name), "gemini", "anthropic")
    events = anthropic_events(out)
    check_anthropic_grammar(events)
    assert events[-1][0] == "error" and needle in events[-1][1]["error"]["message"]
    assert events[-1][1]["error"]["type"] == status_type
    assert not t.report.completed and t.report.errors


# ---------------------------------------------------------------- other upstreams -> Gemini client


@pytest.mark.parametrize("name", OTHER_FIXTURES)
def test_gemini_client_stream_shape(name):
    out, t = run((STREAMS / name).read_bytes(), other_upstream(name), "gemini")
    chunks = gemini_chunks(out)
    assert chunks
    last = chunks[-1]
    if "error" in last:
        assert set(last["error"]) == {"code", "message", "status"} and not t.report.completed
        return
    # finishReason always on the last chunk (a missing one makes Gemini CLI retry 3 times)
    assert last["candidates"][0]["finishReason"] in pg.STOP_TO_FINISH.values()
    for ch in chunks:
        for part in (ch.get("candidates") or [{}])[0].get("content", {}).get("parts", []):
            if "functionCall" in part:  # whole, args an object
                assert isinstance(part["functionCall"]["args"], dict) and part["functionCall"]["name"]


def test_anthropic_usage_oracle_for_gemini_cli():
    """docs/dev/protocols.md D.6: an Anthropic upstream reporting input 1000, cache_read 4000, output 300
    shows in Gemini CLI as prompt 5000, cached 4000, input 1000, candidates 300."""
    u = Usage(ANTHROPIC, {"input_tokens": 1000, "cache_read_input_tokens": 4000, "output_tokens": 300}).to("gemini")
    assert u == {"promptTokenCount": 5000, "cachedContentTokenCount": 4000, "candidatesTokenCount": 300,
                 "totalTokenCount": 5300}
    assert u["promptTokenCount"] - u["cachedContentTokenCount"] == 1000


def test_usage_conversions_only_where_definitions_differ():
    chat = Usage(OPENAI, {"prompt_tokens": 50, "completion_tokens": 30, "total_tokens": 80,
                          "prompt_tokens_details": {"cached_tokens": 10},
                          "completion_tokens_details": {"reasoning_tokens": 12}})
    assert chat.to("gemini") == {"promptTokenCount": 50, "candidatesTokenCount": 18, "cachedContentTokenCount": 10,
                                "thoughtsTokenCount": 12, "totalTokenCount": 80}
    gem = Usage(GEMINI, {"promptTokenCount": 5000, "cachedContentTokenCount": 4000, "candidatesTokenCount": 300,
                         "thoughtsTokenCount": 200, "toolUsePromptTokenCount": 7, "totalTokenCount": 5507})
    assert gem.to("openai") == {"prompt_tokens": 5007, "completion_tokens": 500, "total_tokens": 5507,
                               "prompt_tokens_details": {"cached_tokens": 4000},
                               "completion_tokens_details": {"reasoning_tokens": 200}}
    assert gem.to("anthropic") == {"input_tokens": 1007, "cache_read_input_tokens": 4000, "output_tokens": 500}
    assert gem.to("gemini") == gem.reported and gem.to("gemini") is not gem.reported
    # missing stays absent: never zero-filled
    assert Usage(GEMINI, {"promptTokenCount": 9}).to("anthropic") == {"input_tokens": 9}
    assert Usage(ANTHROPIC, {"output_tokens": 3}).to("gemini") == {"candidatesTokenCount": 3}
    assert Usage(GEMINI, {"promptTokenCount": 9, "cachedContentTokenCount": 4}).fields() == {
        "input": 9, "output": None, "cache_read": 4, "cache_write": None, "reasoning": None}


def test_thinking_signatures_are_not_sent_as_gemini_signatures():
    out, t = run((STREAMS / "anthropic_thinking_signature.sse").read_bytes(), "anthropic", "gemini")
    assert b"thoughtSignature" not in out and b'"thought":true' in out
    assert "content[].thinking.signature" in t.report.dropped


# ---------------------------------------------------------------- whole reply == the stream, collected


@pytest.mark.parametrize("name", sorted(set(GEMINI_FIXTURES) - GEMINI_FAILING))
def test_whole_gemini_reply_equals_the_stream_for_every_client(name):
    """The whole reply of the same content (the chunks merged as a client does) translates to
    what the translated stream accumulates to."""
    body = json.dumps(merge_chunks(gemini_chunks_of(raw(name)))).encode()
    rep = translate.reply("gemini", "anthropic", body, created=CREATED)
    streamed = anthropic_final(run(raw(name), "gemini", "anthropic")[0])
    whole = json.loads(rep.body)
    assert [_block(b) for b in whole["content"]] == [_block(b.model_dump()) for b in streamed.content]
    assert whole["stop_reason"] == streamed.stop_reason
    assert whole["usage"] == {k: v for k, v in streamed.usage.model_dump().items() if v is not None}
    assert rep.usage == run(raw(name), "gemini", "anthropic")[1].report.usage


def gemini_chunks_of(data: bytes) -> list[dict]:
    d = SSEDecoder()
    return [json.loads(e.data) for e in d.feed(data) + d.close() if e.data.strip()]


def _block(b: dict) -> dict:
    return {k: v for k, v in b.items() if v is not None and k != "citations"}


@pytest.mark.parametrize("name", sorted(n for n in OTHER_FIXTURES if (STREAMS / n.replace(".sse", ".reply.json")).exists()))
def test_whole_reply_to_gemini_equals_the_stream_merged(name):
    up = other_upstream(name)
    out, t = run((STREAMS / name).read_bytes(), up, "gemini")
    rep = translate.reply(up, "gemini", (STREAMS / name.replace(".sse", ".reply.json")).read_bytes(), created=CREATED)
    whole = json.loads(rep.body)
    assert whole == merge_chunks(chunks_of(out))
    assert rep.client_usage == t.client_usage


# ---------------------------------------------------------------- ids, both ways (hypothesis)

ID = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"), min_size=1,
             max_size=40)


@settings(max_examples=60, deadline=None)
@given(ids=st.lists(ID, min_size=1, max_size=4, unique=True), text=st.text(max_size=30))
def test_tool_ids_byte_identical_through_gemini_both_ways(ids, text):
    """Anthropic ids -> a Gemini client -> (the client echoes them) -> a Gemini upstream's
    stream -> an Anthropic client: the same bytes."""
    events = [{"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
                                                    "model": "m", "content": [], "usage": {"input_tokens": 1}}}]
    for i, tid in enumerate(ids):
        events += [{"type": "content_block_start", "index": i,
                    "content_block": {"type": "tool_use", "id": tid, "name": "f", "input": {}}},
                   {"type": "content_block_delta", "index": i,
                    "delta": {"type": "input_json_delta", "partial_json": json.dumps({"t": text})}},
                   {"type": "content_block_stop", "index": i}]
    events += [{"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 2}},
               {"type": "message_stop"}]
    sse = b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)
    to_gemini = run(sse, "anthropic", "gemini")[0]
    calls = [p["functionCall"] for c in gemini_chunks(to_gemini) for p in
             (c.get("candidates") or [{}])[0].get("content", {}).get("parts", []) if "functionCall" in p]
    assert [c["id"] for c in calls] == ids and all(c["args"] == {"t": text} for c in calls)
    back = anthropic_final(run(to_gemini, "gemini", "anthropic")[0])
    assert [b.id for b in back.content] == ids


def test_anthropic_sdk_rejects_nothing_on_a_parallel_gemini_stream():
    """A sanity check of the helper used above: the SDK client really parsed our bytes."""
    seen: list[dict] = []
    client = anthropic.Anthropic(api_key="x", base_url="http://127.0.0.1:9",
                                 http_client=_http(run(raw("thought_two_calls_no_ids.sse"), "gemini", "anthropic")[0],
                                                   seen), max_retries=0)
    with client.messages.stream(model="m", max_tokens=8, messages=[{"role": "user", "content": "x"}]) as s:
        names = [e.type for e in s]
    assert names[0] == "message_start" and names[-1] == "message_stop"


def test_pass_through_gemini_usage_is_read_on_the_side():
    """A Gemini turn passed through or retargeted: the ledger still gets usageMetadata as
    reported, from the stream (the last one) or a whole reply."""
    from tokunseba.turn.outcome import usage_of
    from tokunseba.turn.stream_watch import StreamWatch

    s = StreamWatch("gemini")
    data = raw("thought_two_calls_no_ids.sse")
    for k in range(0, len(data), 7):
        s.feed(data[k:k + 7])
    s.close()
    assert s.usage.counting == GEMINI and s.usage.reported["totalTokenCount"] == 5507
    assert s.verdict() is None and s.completed  # read, not judged: Gemini streams have no terminal event
    whole = usage_of("gemini", json.dumps(merge_chunks(gemini_chunks_of(raw("py_text_chunks.sse")))).encode())
    assert whole.reported == {"promptTokenCount": 1234, "candidatesTokenCount": 56, "totalTokenCount": 1290,
                              "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 1234}]}
    assert whole.fields() == {"input": 1234, "output": 56, "cache_read": None, "cache_write": None, "reasoning": None}
