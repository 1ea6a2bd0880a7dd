"""A streamed tool call whose fields a server spreads over its chunks (issue 33).

OpenAI-compatible servers and gateways do not all send a Chat tool call's ``id``, ``type``,
``function.name`` and first argument fragment in one delta: some send the id (with empty
arguments) first and the name in the next chunk, some the name first and the id after.
Whatever the spread, each client protocol's own reader (the official SDKs' stream helpers:
anthropic, openai's Responses helper, google-genai) gets the same calls, names and arguments
as from the tidy stream, at every byte split, with text and other calls streaming on; a call
that never gets a name ends in the client's error, never as a nameless call."""

from __future__ import annotations

import json

import anthropic
import openai
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from tests.suites.test_gemini_sdk import sdk_stream
from tests.translate.openai_responses.test_stream import responses_final
from tests.suites.test_sdk_accumulators import anthropic_final
from tokunseba import jsonc
from tokunseba import translate as tr

CLIENTS = ("anthropic", "openai-responses", "gemini")
CREATED = 1767225600
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# how a server may spread one call's fields over its chunks: the fields of each head chunk
# ("empty" is an empty arguments string, "args" the next argument fragment)
SPREADS = {
    "tidy": [("id", "type", "name", "empty")],  # OpenAI: the whole head in the first delta
    "id_first": [("id", "type", "empty"), ("name",)],  # the held-out peer case
    "name_first": [("name",), ("id", "type")],
    "name_with_first_args": [("id", "type", "empty"), ("name", "args")],
    "each_alone": [("type",), ("id",), ("name",)],
    "name_after_args": [("id", "type", "args"), ("args",), ("name",)],
}


def chunk(delta: dict, finish: str | None = None) -> bytes:
    c = {"id": "chatcmpl-spread", "object": "chat.completion.chunk", "created": CREATED, "model": "m",
         "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + jsonc.dumpb(c) + b"\n\n"


def call_chunks(index: int, cid: str, name: str, args: str, spread: str, pieces: int) -> list[bytes]:
    """One call's chunks: its head spread as ``spread`` says, then the rest of its arguments."""
    step = max(1, len(args) // max(1, pieces))
    frags = [args[k:k + step] for k in range(0, len(args), step)]
    out = []
    for fields in SPREADS[spread]:
        tc: dict = {"index": index}
        fn: dict = {}
        for f in fields:
            if f == "id":
                tc["id"] = cid
            elif f == "type":
                tc["type"] = "function"
            elif f == "name":
                fn["name"] = name
            elif f == "empty":
                fn["arguments"] = ""
            elif f == "args":
                fn["arguments"] = frags.pop(0) if frags else ""
        if fn:
            tc["function"] = fn
        out.append(chunk({"tool_calls": [tc]}))
    out += [chunk({"tool_calls": [{"index": index, "function": {"arguments": f}}]}) for f in frags]
    return out


def stream(calls: list[tuple], spreads: list[str], order: list[int], text: str | None) -> bytes:
    """A Chat stream: a role chunk, maybe text, the calls' chunks merged in ``order`` (a list
    of call positions: the next chunk comes from that call), the finish and usage."""
    queues = [call_chunks(i, cid, name, jsonc.dumps(a), spreads[i], 3) for i, (cid, name, a) in enumerate(calls)]
    out = [chunk({"role": "assistant", "content": ""})]
    if text:
        out.append(chunk({"content": text}))
    for who in order:
        if queues[who]:
            out.append(queues[who].pop(0))
    for q in queues:
        out += q
    out.append(chunk({}, "tool_calls"))
    usage = {"id": "chatcmpl-spread", "object": "chat.completion.chunk", "created": CREATED, "model": "m",
             "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}}
    out.append(b"data: " + jsonc.dumpb(usage) + b"\n\ndata: [DONE]\n\n")
    return b"".join(out)


def translated(raw: bytes, client: str, cuts: list[int] | None = None) -> tuple[bytes, object]:
    t = tr.stream("openai", client, created=CREATED)
    if cuts is None:
        return t.feed(raw) + t.close(), t
    parts, last = [], 0
    for c in cuts:
        parts.append(t.feed(raw[last:c]))
        last = c
    return b"".join(parts) + t.feed(raw[last:]) + t.close(), t


def sdk_read(client: str, out: bytes) -> tuple[str, list[tuple]]:
    """(text, calls as (id, name, arguments object)) as the client's own SDK reads the stream."""
    if client == "anthropic":
        m = anthropic_final(out)
        text = "".join(b.text for b in m.content if b.type == "text")
        return text, [(b.id, b.name, b.input) for b in m.content if b.type == "tool_use"]
    if client == "openai-responses":
        r = responses_final(out)
        text = "".join(p.text for it in r.output if it.type == "message" for p in it.content if p.type == "output_text")
        return text, [(it.call_id, it.name, json.loads(it.arguments)) for it in r.output if it.type == "function_call"]
    chunks = sdk_stream(out)
    text = "".join(p.text for c in chunks if c.candidates and c.candidates[0].content
                   for p in c.candidates[0].content.parts or [] if p.text)
    return text, [(fc.id, fc.name, fc.args) for c in chunks for fc in (c.function_calls or [])]


ID = st.from_regex(r"call_[A-Za-z0-9]{1,12}", fullmatch=True)
NAME = st.from_regex(r"[a-z][a-z0-9_]{0,15}", fullmatch=True)
ARGS = st.dictionaries(st.text(min_size=1, max_size=5), st.integers() | st.text(max_size=8), min_size=1, max_size=3)


@SETTINGS
@given(st.lists(st.tuples(ID, NAME, ARGS), min_size=1, max_size=2, unique_by=lambda c: c[0]),
       st.lists(st.sampled_from(sorted(SPREADS)), min_size=2, max_size=2),
       st.lists(st.integers(0, 1), max_size=12), st.none() | st.text(min_size=1, max_size=8),
       st.sampled_from(CLIENTS), st.data())
def test_every_spread_reads_as_the_tidy_stream(calls, spreads, order, text, client, data):
    order = [o for o in order if o < len(calls)]
    tidy_out, tidy_t = translated(stream(calls, ["tidy", "tidy"], [], text), client)
    raw = stream(calls, spreads, order, text)
    out, t = translated(raw, client)
    assert t.report.completed and not t.report.errors, t.report.errors
    assert not any("without a function name" in w for w in t.report.warnings)
    want_text, want_calls = sdk_read(client, tidy_out)
    got_text, got_calls = sdk_read(client, out)
    note(f"{client} {spreads} {order}\n{raw.decode()}\n{out.decode()}")
    assert want_calls == [(cid, name, args) for cid, name, args in calls]  # the tidy stream itself is right
    assert got_text == want_text == (text or "")
    assert sorted(got_calls, key=lambda c: c[0]) == sorted(want_calls, key=lambda c: c[0])
    cuts = sorted(data.draw(st.lists(st.integers(1, len(raw) - 1), max_size=8, unique=True)))
    assert translated(raw, client, cuts)[0] == out  # any split, the same bytes


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("spread", sorted(SPREADS))
def test_each_spread_at_every_byte_split(spread, client):
    calls = [("call_LATE1", "get_weather", {"city": "Paris"})]
    raw = stream(calls, [spread], [], "Looking.")
    out, t = translated(raw, client)
    assert sdk_read(client, out) == ("Looking.", calls)
    assert not t.report.errors
    for cut in range(1, len(raw)):
        assert translated(raw, client, [cut])[0] == out, f"differs when cut at byte {cut}"


def test_the_issue_case_names_the_call_for_an_anthropic_client():
    """The reproduction of issue 33: the id with empty arguments, then the name, then the
    arguments: the client's tool_use block opens with its name, its id byte for byte."""
    raw = b"".join([
        chunk({"role": "assistant", "content": ""}),
        chunk({"tool_calls": [{"index": 0, "id": "call_LATE1", "type": "function", "function": {"arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"name": "get_weather"}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{\"city\":\"Paris\"}"}}]}),
        chunk({}, "tool_calls"), b"data: [DONE]\n\n"])
    out, t = translated(raw, "anthropic")
    starts = [json.loads(line[6:]) for line in out.decode().splitlines()
              if line.startswith("data: ") and "content_block_start" in line]
    assert [s["content_block"] for s in starts] == [
        {"type": "tool_use", "id": "call_LATE1", "name": "get_weather", "input": {}}]
    assert anthropic_final(out).content[0].input == {"city": "Paris"}


def test_text_and_a_named_call_stream_on_while_another_waits_for_its_name():
    """Only the nameless call's fragments wait: the other call opens, and its arguments
    go out as they arrive, before the late name."""
    head = chunk({"role": "assistant", "content": ""})
    a_id = chunk({"tool_calls": [{"index": 0, "id": "call_A", "type": "function", "function": {"arguments": "{\"x\""}}]})
    b_all = chunk({"tool_calls": [{"index": 1, "id": "call_B", "type": "function",
                                   "function": {"name": "beta", "arguments": "{\"y\":2}"}}]})
    t = tr.stream("openai", "anthropic", created=CREATED)
    first = t.feed(head + a_id + b_all)
    assert b'"name":"beta"' in first and b'{\\"y\\":2}' in first and b"call_A" not in first
    rest = t.feed(chunk({"tool_calls": [{"index": 0, "function": {"name": "alpha", "arguments": ":1}"}}]}))
    assert b'"id":"call_A","name":"alpha"' in rest
    final = anthropic_final(first + rest + t.feed(chunk({}, "tool_calls") + b"data: [DONE]\n\n") + t.close())
    assert sorted((b.id, b.name, b.input) for b in final.content) == [
        ("call_A", "alpha", {"x": 1}), ("call_B", "beta", {"y": 2})]


@pytest.mark.parametrize("client", CLIENTS)
def test_a_call_that_never_gets_a_name_ends_in_the_clients_error(client):
    raw = b"".join([
        chunk({"role": "assistant", "content": ""}),
        chunk({"tool_calls": [{"index": 0, "id": "call_NONAME", "type": "function", "function": {"arguments": "{}"}}]}),
        chunk({}, "tool_calls"), b"data: [DONE]\n\n"])
    out, t = translated(raw, client)
    assert t.report.errors and "without a function name" in t.report.errors[0]
    assert b"call_NONAME" not in out  # never a nameless call
    with pytest.raises((anthropic.APIError, openai.APIError, Exception)):
        sdk_read(client, out)


def test_a_named_call_whose_server_sends_no_id_gets_a_synthesised_one_at_the_finish():
    raw = b"".join([
        chunk({"role": "assistant", "content": ""}),
        chunk({"tool_calls": [{"index": 0, "function": {"name": "ping", "arguments": "{}"}}]}),
        chunk({}, "tool_calls"), b"data: [DONE]\n\n"])
    out, t = translated(raw, "anthropic")
    (block,) = anthropic_final(out).content
    assert block.name == "ping" and block.id
    assert any(w.startswith("id_synthesized") for w in t.report.warnings)


def test_a_whole_reply_with_a_nameless_call_is_a_502():
    from tokunseba.errors import UntranslatableReply

    body = jsonc.dumpb({"id": "c1", "object": "chat.completion", "created": CREATED, "model": "m", "choices": [
        {"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"arguments": "{}"}}]}}]})
    for client in ("anthropic", "openai-responses", "gemini"):
        with pytest.raises(UntranslatableReply) as e:
            tr.reply("openai", client, body)
        assert e.value.status == 502 and "without a function name" in e.value.message


@pytest.mark.parametrize(("upstream", "client"), [(u, c) for u in ("anthropic", "openai-responses")
                                                   for c in ("anthropic", "openai", "openai-responses", "gemini") if u != c])
def test_no_upstream_passes_a_nameless_call_on(upstream, client):
    """The other upstreams carry a call's id and name in one event (Anthropic's
    content_block_start, Responses' output_item.added, Gemini's whole functionCall); one that
    names nothing ends in the client's error, streamed and whole, never a nameless call."""
    from tokunseba.neutral.events import BlockDelta, BlockStart, BlockStop, MessageStart, MessageStop
    from tokunseba.neutral.message import Message
    from tokunseba.neutral.report import ReplyReport

    evs = [MessageStart("msg_nameless", "m"), BlockStart(0, "tool_use", id="call_nn", name=""), BlockDelta(0, "{}"),
           BlockStop(0), MessageStop("tool_use")]
    enc = tr.CODECS[upstream].stream_encoder(ReplyReport(), True, CREATED)
    raw = b"".join(enc.encode(e) for e in evs)
    t = tr.stream(upstream, client, created=CREATED)
    out = t.feed(raw) + t.close()
    assert t.report.errors and "without a function name" in t.report.errors[0] and b"call_nn" not in out
    whole = tr.CODECS[upstream].encode_reply(Message.collect(evs), ReplyReport(), CREATED)[0]
    from tokunseba.errors import UntranslatableReply
    with pytest.raises(UntranslatableReply):
        tr.reply(upstream, client, whole)
