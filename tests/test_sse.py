"""The incremental SSE codec (tokunseba.sse): framing rules of docs/dev/protocols.md §0."""

from __future__ import annotations

import random

import pytest

from tokunseba.sse import SSEDecoder, SSEEvent, encode_event


def decode(data: bytes, pieces: list[int] | None = None) -> list[SSEEvent]:
    """Feed ``data`` cut at the given offsets, then close."""
    d = SSEDecoder()
    out: list[SSEEvent] = []
    last = 0
    for cut in pieces or []:
        out += d.feed(data[last:cut])
        last = cut
    out += d.feed(data[last:])
    return out + d.close()


@pytest.mark.parametrize("nl", [b"\n", b"\r\n", b"\r"])
def test_line_ends(nl):
    raw = nl.join([b"event: message_start", b'data: {"a":1}', b"", b'data: {"b":2}', b"", b""])
    assert decode(raw) == [SSEEvent("message_start", '{"a":1}'), SSEEvent(None, '{"b":2}')]


def test_mixed_line_ends_in_one_stream():
    raw = b"data: 1\r\n\r\ndata: 2\r\rdata: 3\n\n"
    assert [e.data for e in decode(raw)] == ["1", "2", "3"]


def test_comments_are_ignored():
    raw = b": ping - 2026-12-02 14:09:49\n\ndata: x\n: inside an event\n\n:\n\n"
    assert decode(raw) == [SSEEvent(None, "x")]


def test_multi_line_data_is_joined_with_newline():
    raw = b"event: e\ndata: first\ndata: second\ndata:third\n\n"
    assert decode(raw) == [SSEEvent("e", "first\nsecond\nthird")]


def test_only_one_leading_space_is_stripped():
    assert decode(b"data:  two spaces\n\n") == [SSEEvent(None, " two spaces")]


def test_event_names_and_ids():
    raw = b"id: 7\nevent: content_block_delta\ndata: {}\n\nevent: ping\ndata: {}\n\n"
    assert decode(raw) == [SSEEvent("content_block_delta", "{}", "7"), SSEEvent("ping", "{}")]


def test_retry_and_unknown_fields_are_ignored():
    assert decode(b"retry: 100\nfoo: bar\ndata: d\n\n") == [SSEEvent(None, "d")]


@pytest.mark.parametrize("nl", [b"\n", b"\r\n", b"\r"])
def test_final_event_without_blank_line_is_dispatched_at_close(nl):
    d = SSEDecoder()
    assert d.feed(b"data: 1" + nl + nl + b"event: last" + nl + b"data: 2" + nl) == [SSEEvent(None, "1")]
    assert d.pending
    assert d.close() == [SSEEvent("last", "2")]


def test_final_line_without_line_end_is_dispatched_at_close():
    d = SSEDecoder()
    assert d.feed(b"data: tail") == []
    assert d.close() == [SSEEvent(None, "tail")]


def test_split_between_cr_and_lf_is_one_line_end():
    raw = b"data: a\r\n\r\ndata: b\r\n\r\n"
    for cut in range(len(raw) + 1):
        assert decode(raw, [cut]) == [SSEEvent(None, "a"), SSEEvent(None, "b")], cut


def test_split_inside_multibyte_utf8():
    text = "héllo 日本 🎉"
    raw = f"data: {text}\n\n".encode()
    for cut in range(len(raw) + 1):
        assert decode(raw, [cut]) == [SSEEvent(None, text)], cut


def test_random_splits_give_the_same_events():
    raw = (
        b"event: a\r\ndata: 1\r\n\r\n: c\n\nevent: b\rdata: \xe6\x97\xa5\xe6\x9c\xac\r\rdata: x\ndata: y\n\n"
        b"data: \xf0\x9f\x8e\x89\r\n\r\n"
    )
    whole = decode(raw)
    assert [e.data for e in whole] == ["1", "日本", "x\ny", "🎉"]
    rng = random.Random(1234)
    for _ in range(200):
        cuts = sorted(rng.sample(range(1, len(raw)), rng.randint(1, 12)))
        assert decode(raw, cuts) == whole
    assert decode(raw, list(range(1, len(raw)))) == whole  # byte by byte


def test_empty_feed_is_a_no_op():
    d = SSEDecoder()
    assert d.feed(b"") == []
    assert d.feed(b"data: 1\r") == []
    assert d.feed(b"") == []
    assert d.feed(b"\n\n") == [SSEEvent(None, "1")]


def test_encode_event_round_trips():
    raw = encode_event('{"type":"ping"}', "ping") + encode_event(b'{"x":"\xc3\xa9"}')
    assert raw == b'event: ping\ndata: {"type":"ping"}\n\ndata: {"x":"\xc3\xa9"}\n\n'
    assert decode(raw) == [SSEEvent("ping", '{"type":"ping"}'), SSEEvent(None, '{"x":"é"}')]


@pytest.fixture
def small_cap():
    from tokunseba import sse

    sse.set_max_event_bytes(1000)
    yield 1000
    sse.set_max_event_bytes(sse.DEFAULT_MAX_EVENT_BYTES)


def test_an_event_or_line_past_the_cap_raises_and_frees_its_buffer(small_cap):
    from tokunseba.sse import SSETooLarge

    ok = b"data: " + b"x" * 900 + b"\n\n"
    assert decode(ok * 3) == [SSEEvent(None, "x" * 900)] * 3  # each event under the cap: fine
    for raw in (b"data: " + b"y" * 5000,  # one line that never ends
                b"".join(b"data: " + b"z" * 100 + b"\n" for _ in range(20))):  # many lines, no blank line
        for step in (1, 64, 4096, len(raw)):
            d = SSEDecoder()
            with pytest.raises(SSETooLarge, match=r"larger than 1000 bytes \(the cap; option tokunseba_max_event_bytes\)"):
                for i in range(0, len(raw), step):
                    d.feed(raw[i:i + step])
            assert not d.pending  # what was buffered is gone
    with pytest.raises(ValueError):
        from tokunseba.sse import set_max_event_bytes

        set_max_event_bytes(0)


FAST_AND_NOT = [  # shapes the block-at-a-time fast path takes, and shapes it must leave to the line path
    b"event: a\ndata: 1\n\n", b"data: 2\n\n", b"event:  sp\ndata:  two spaces\n\n", b"event: x:y\ndata: {\"a\":1}\n\n",
    b"data: \xe6\x97\xa5\n\n", b"data: bad \xff utf8\n\n", b"event: only-name\n\n", b": comment\n\n", b"data:nospace\n\n",
    b"data: a\ndata: b\n\n", b"event: e\ndata: d\nid: 7\n\n", b"id: 1\ndata: x\n\n", b"retry: 5\ndata: r\n\n",
    b"\n\n", b"\n\n\ndata: after blank lines\n\n", b"event: a\r\ndata: cr\r\n\r\n", b"data: z\n\n",
]


@pytest.mark.parametrize("comments", [False, True])
def test_the_fast_path_makes_the_events_the_line_path_makes(comments):
    """Fed whole, complete simple events take the fast path; fed byte by byte, every byte
    goes through the line-by-line path: both give the same events, in any mix and order."""
    rng = random.Random(7)
    for _ in range(300):
        raw = b"".join(rng.choices(FAST_AND_NOT, k=rng.randint(1, 8)))
        whole, slow = SSEDecoder(comments=comments), SSEDecoder(comments=comments)
        got = whole.feed(raw) + whole.close()
        want = [e for i in range(len(raw)) for e in slow.feed(raw[i:i + 1])] + slow.close()
        assert got == want, raw
