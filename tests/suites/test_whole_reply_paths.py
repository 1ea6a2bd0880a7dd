"""The short paths of whole-reply translation say what the long ones say (hypothesis).

``translate.reply`` decodes a whole reply straight to a ``Message`` (``Codec.decode_message``)
and encodes it straight to the client's body; the definitions they shortcut stay the oracle:
- a whole Gemini object decodes to what the stream decoder's events for it collect to (the
  same message, the same records, the same 502s);
- the Gemini whole-reply encoder writes what ``merge_chunks`` makes of the stream encoder's
  chunks for the message's events (the same body, usage and records, the same 502s);
- ``Usage.common_fields()`` is ``fields()`` of ``to("openai")``, and ``Usage.plain()`` names
  only reports whose every conversion carries input and output alone;
- ``decode_reply`` (what reply_facts reads) is the message's events, collected back to it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokunseba import translate as tr
from tokunseba.errors import TranslationError, UntranslatableReply
from tokunseba.neutral.events import StreamError
from tokunseba.neutral.message import Block, Message
from tokunseba.neutral.report import ReplyReport
from tokunseba.neutral.usage import Usage
from tokunseba.protocols.anthropic import COUNTING_NAME as ANTHROPIC
from tokunseba.protocols.gemini import COUNTING_NAME as GEMINI
from tokunseba.protocols.openai_chat import COUNTING_NAME as OPENAI
from tests.support.gemini_chunks import chunks_of, merge_chunks
from tokunseba.sse import SSEDecoder

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CREATED = 1767225600
DATA = Path(__file__).resolve().parents[1] / "data"

# ---------------------------------------------------------------- generated values

COUNT = st.one_of(st.none(), st.integers(-5, 5000), st.booleans(), st.sampled_from(["7", 1.5]))
TEXT = st.sampled_from(["", "hi", "ünï ✓", "x" * 40, "a\nb"])
ARGS = st.sampled_from(['{"a":1}', "", "{}", "[1]", "not json", '{"x":{"y":[1,2]}}', '"s"', " ", '{"ü":"✓"}'])


def _usage_dict(keys: list[str]):
    return st.dictionaries(st.sampled_from(keys), COUNT, max_size=len(keys))


OPENAI_KEYS = ["prompt_tokens", "completion_tokens", "total_tokens", "input_tokens", "output_tokens",
               "cache_read_input_tokens", "cache_creation_input_tokens"]
ANTHROPIC_KEYS = ["input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"]
GEMINI_KEYS = ["promptTokenCount", "candidatesTokenCount", "totalTokenCount", "cachedContentTokenCount",
               "thoughtsTokenCount", "toolUsePromptTokenCount"]
DETAILS = st.one_of(st.none(), st.just("x"), st.dictionaries(
    st.sampled_from(["cached_tokens", "cache_write_tokens", "reasoning_tokens", "thinking_tokens"]), COUNT))


@st.composite
def usages(draw) -> Usage:
    counting = draw(st.sampled_from([OPENAI, ANTHROPIC, GEMINI]))
    keys = {OPENAI: OPENAI_KEYS, ANTHROPIC: ANTHROPIC_KEYS, GEMINI: GEMINI_KEYS}[counting]
    r = draw(_usage_dict(keys))
    if draw(st.booleans()):  # the plainest shapes, often
        r = {k: draw(st.integers(0, 5000)) for k in keys[:3]}
    if counting != GEMINI:
        for k in draw(st.lists(st.sampled_from(["prompt_tokens_details", "completion_tokens_details",
                                                "input_tokens_details", "output_tokens_details"]), max_size=2)):
            r[k] = draw(DETAILS)
    return Usage(counting, r)


@st.composite
def messages(draw) -> Message:
    blocks = []
    for i in range(draw(st.integers(0, 5))):
        kind = draw(st.sampled_from(["text", "text", "tool_use", "tool_use", "thinking", "redacted_thinking", "other"]))
        b = Block(kind)
        if kind in ("text", "thinking"):
            b.text = draw(TEXT)
            b.signature = draw(st.sampled_from([None, "", "sig"]))
        if kind == "thinking":
            b.raw = draw(st.sampled_from([None, {"source": "choices[0].message.reasoning_content"}]))
        if kind == "tool_use":
            b.id = draw(st.sampled_from(["call_1", f"call_{i}", "", None, "toolu_01A"]))
            b.name = draw(st.sampled_from(["Bash", "", None]))
            b.text = draw(ARGS)
            b.signature = draw(st.sampled_from([None, "gsig"]))
        if kind in ("redacted_thinking", "other"):
            b.raw = draw(st.sampled_from([None, {}, {"type": "server_tool_use"}, {"source": "output[1]"}]))
        blocks.append(b)
    m = Message(draw(st.sampled_from([None, "", "msg_1", "r 1"])), draw(st.sampled_from([None, "", "model-x"])), blocks)
    m.stop_reason = draw(st.sampled_from(["end_turn", "tool_use", "max_tokens", "stop_sequence", "refusal",
                                          "pause_turn", "model_context_window_exceeded", None, "weird"]))
    m.stop_sequence = draw(st.sampled_from([None, "", "</s>"]))
    m.usage = draw(st.none() | usages())
    if draw(st.integers(0, 19)) == 0:
        m.error = StreamError(500, "api_error", draw(st.sampled_from(["boom", ""])))
    m.stopped = True
    return m


PART = st.one_of(
    st.fixed_dictionaries({"text": st.one_of(TEXT, st.just(5))},
                          optional={"thought": st.sampled_from([True, False, "yes"]),
                                    "thoughtSignature": st.sampled_from(["sig", ""])}),
    st.fixed_dictionaries({"functionCall": st.one_of(
        st.fixed_dictionaries({"name": st.sampled_from(["Bash", "", None]),
                               "args": st.sampled_from([{"a": 1}, {}, None, [1], "s"])},
                              optional={"id": st.sampled_from(["call_1", "", None])}),
        st.just("x"))}, optional={"thoughtSignature": st.sampled_from(["sig", ""])}),
    st.just({"inlineData": {"mimeType": "image/png", "data": "xx"}}),
    st.just({"executableCode": {"code": "x"}, "text": "t"}),
    st.sampled_from(["x", 5, None, {}]),
)
CANDIDATE = st.fixed_dictionaries(
    {"content": st.one_of(st.fixed_dictionaries({"parts": st.lists(PART, max_size=5), "role": st.just("model")}),
                          st.sampled_from([None, {}, "x"]))},
    optional={"finishReason": st.sampled_from(["STOP", "MAX_TOKENS", "SAFETY", "MALFORMED_FUNCTION_CALL", "OTHER",
                                               "", "WEIRD"]),
              "finishMessage": st.sampled_from(["why", None]),
              "index": st.sampled_from([0, 0, 0, 1]),
              "safetyRatings": st.sampled_from([[], [{"category": "x"}], None])})
GEMINI_OBJECT = st.fixed_dictionaries(
    {"candidates": st.one_of(st.lists(CANDIDATE, min_size=1, max_size=2), st.sampled_from([[], None, ["x"]]))},
    optional={"usageMetadata": st.one_of(st.none(), st.just({}), _usage_dict(GEMINI_KEYS)),
              "modelVersion": st.sampled_from(["gemini-2.5", None, 5]),
              "responseId": st.sampled_from(["r1", None, "", "r 1"]),
              "promptFeedback": st.sampled_from([{"blockReason": "SAFETY"}, {"safetyRatings": []}, None]),
              "createTime": st.just("t"), "weird": st.just(1)})


def _outcome(fn):
    """What a call gives: ("ok", value) or ("502", message) for a translation error."""
    try:
        return "ok", fn()
    except TranslationError as e:
        return str(e.status), e.message


# ---------------------------------------------------------------- Gemini: decode


def _stream_decoded(body: bytes) -> tuple[Message, ReplyReport]:
    """The old whole-reply decoder: the stream decoder over the object as one SSE event."""
    report = ReplyReport()
    dec = tr.CODECS["gemini"].stream_decoder(report)
    sse = SSEDecoder()
    events = [e for ev in sse.feed(b"data: " + body + b"\r\n\r\n") + sse.close() for e in dec.on_event(ev)]
    events += dec.close()
    for ev in events:
        if isinstance(ev, StreamError):
            raise UntranslatableReply(502, ev.message)
    return Message.collect(events), report


@SETTINGS
@given(GEMINI_OBJECT)
def test_a_whole_gemini_object_decodes_as_the_stream_decoder_reads_it(obj):
    body = json.dumps(obj).encode()

    def straight():
        report = ReplyReport()
        return tr.CODECS["gemini"].decode_message(body, report), report

    assert repr(_outcome(straight)) == repr(_outcome(lambda: _stream_decoded(body)))


def test_the_gemini_fixtures_decode_as_the_stream_decoder_reads_them():
    for sse in sorted((DATA / "gemini").glob("*.sse")):
        d = SSEDecoder()
        for ev in d.feed(sse.read_bytes()) + d.close():
            if ev.data.strip():
                body = ev.data.encode() if isinstance(ev.data, str) else ev.data
                report = ReplyReport()
                assert repr(_outcome(lambda: (tr.CODECS["gemini"].decode_message(body, report), report))) \
                    == repr(_outcome(lambda: _stream_decoded(body))), sse.name


# ---------------------------------------------------------------- Gemini: encode


def _merged_stream(msg: Message) -> tuple[dict, dict | None, ReplyReport]:
    """The old whole-reply encoder: the stream encoder over the message's events, its chunks
    merged as a client merges them; an error chunk is a 502."""
    report = ReplyReport()
    enc = tr.CODECS["gemini"].stream_encoder(report, True, CREATED)
    out = merge_chunks(chunks_of(b"".join(enc.encode(ev) for ev in msg.events())))
    if "error" in out:
        raise UntranslatableReply(502, out["error"].get("message") or "the upstream reply cannot be carried to Gemini")
    return out, enc.client_usage, report


@SETTINGS
@given(messages())
def test_the_gemini_whole_reply_is_the_stream_merged(msg):
    def straight():
        report = ReplyReport()
        body, usage = tr.CODECS["gemini"].encode_reply(msg, report, CREATED)
        return json.loads(body), usage, report

    got, want = _outcome(straight), _outcome(lambda: _merged_stream(msg))
    if got[0] == "ok" and want[0] == "ok":
        assert got[1][:2] == want[1][:2]
        assert json.dumps(got[1][0]) == json.dumps(want[1][0])  # key order too
        r1, r2 = got[1][2], want[1][2]
        assert (r1.dropped, r1.warnings, r1.stop_reason, r1.completed) == (r2.dropped, r2.warnings, r2.stop_reason,
                                                                           r2.completed)
    else:
        assert got == want


# ---------------------------------------------------------------- usage


@SETTINGS
@given(usages())
def test_openai_fields_are_the_fields_of_the_openai_usage(u):
    assert u.common_fields() == Usage(OPENAI, u.to("openai")).fields()


@SETTINGS
@given(usages())
def test_a_plain_usage_carries_input_and_output_alone(u):
    plain = u.plain()
    if plain is None:
        return
    i, o = plain
    assert u.common_fields() == {"input": i, "output": o, "cache_read": None, "cache_write": None, "reasoning": None}
    assert {k: v for k, v in u.to("anthropic").items()} == {"input_tokens": max(i, 0), "output_tokens": o}


# ---------------------------------------------------------------- every codec


REPLIES = sorted((DATA / "streams").glob("*.reply.json"))


def _upstream(path: Path) -> str:
    """The protocol of a reply, by its shape (llama-server's Messages reply has a Chat-ish name)."""
    doc = json.loads(path.read_bytes())
    return "anthropic" if doc.get("type") == "message" else "openai-responses" if doc.get("object") == "response" \
        else "openai"


@pytest.mark.parametrize("path", REPLIES, ids=lambda p: p.name)
def test_decode_reply_is_the_message_events(path):
    """reply_facts reads decode_reply's events: they collect back to translate.reply's message."""
    codec = tr.CODECS[_upstream(path)]
    body = path.read_bytes()
    r1, r2 = ReplyReport(), ReplyReport()
    assert Message.collect(codec.decode_reply(body, r1)) == codec.decode_message(body, r2)
    assert (r1.dropped, r1.warnings) == (r2.dropped, r2.warnings)


@pytest.mark.parametrize("field", ["text", "thinking"])
def test_an_anthropic_text_that_is_not_a_string_is_a_502(field):
    block = {"type": "text", "text": 5} if field == "text" else {"type": "thinking", "thinking": ["x"], "signature": "s"}
    body = json.dumps({"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": [block],
                       "stop_reason": "end_turn", "stop_sequence": None, "usage": {}}).encode()
    for client in ("openai", "openai-responses", "gemini"):
        with pytest.raises(UntranslatableReply) as e:
            tr.reply("anthropic", client, body, created=CREATED)
        assert e.value.status == 502 and f"{field} that is not a string" in e.value.message
