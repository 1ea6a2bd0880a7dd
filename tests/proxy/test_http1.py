"""The relay's HTTP/1.1 framing (proxy/http1.py): heads, bodies in each framing, split anywhere."""

from __future__ import annotations

import pytest

from tokunseba.proxy import http1

CHUNKED = b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nx-trailer: 1\r\n\r\nNEXT"


def _feed_split(body: http1.Body, data: bytes, cuts: list[int]) -> bytes:
    out, prev = [], 0
    for c in [*cuts, len(data)]:
        out.append(body.feed(data[prev:c]))
        prev = c
    return b"".join(out)


@pytest.mark.parametrize("cut", range(len(CHUNKED) + 1))
def test_chunked_body_split_anywhere(cut):
    for cuts in ([cut], [cut, min(cut + 3, len(CHUNKED))]):
        b = http1.Body(chunked=True)
        got = _feed_split(b, CHUNKED, cuts)
        assert got == b"hello world" and b.done and b.trailing == b"NEXT"


def test_chunked_body_split_byte_by_byte():
    b = http1.Body(chunked=True)
    assert _feed_split(b, CHUNKED, list(range(1, len(CHUNKED)))) == b"hello world" and b.trailing == b"NEXT"


@pytest.mark.parametrize("cut", range(0, 13))
def test_content_length_body_split_anywhere(cut):
    b = http1.Body(10)
    data = b"0123456789EXTRA"
    assert _feed_split(b, data[:12], [cut]) + b.feed(data[12:]) == b"0123456789"
    assert b.done and b.trailing == b"EXTRA"


def test_a_cut_body_is_incomplete_and_an_until_close_one_is_not():
    b = http1.Body(chunked=True)
    b.feed(b"5\r\nhel")
    with pytest.raises(http1.Incomplete, match="incomplete chunked read"):
        b.eof()
    b = http1.Body(10)
    b.feed(b"0123")
    with pytest.raises(http1.Incomplete, match="6 bytes"):
        b.eof()
    b = http1.Body()
    assert b.feed(b"anything") == b"anything" and not b.done
    b.eof()
    assert b.done


@pytest.mark.parametrize("bad", [b"zz\r\n", b"5\r\nhelloXX\r\n"])
def test_broken_chunked_framing_raises(bad):
    with pytest.raises(http1.BadMessage):
        http1.Body(chunked=True).feed(bad)


def test_heads_and_framings():
    assert http1.split_head(b"HTTP/1.1 200 OK\r\ncontent-len") is None
    line, headers, at = http1.split_head(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nX-A:  b \r\n\r\nabc")
    assert line == b"HTTP/1.1 200 OK" and headers == [(b"content-length", b"3"), (b"x-a", b"b")] and at == 51 - 3
    assert http1.header(headers, b"x-a") == b"b" and http1.header(headers, b"nope") is None
    with pytest.raises(http1.BadMessage):
        http1.split_head(b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n")
    with pytest.raises(http1.HeadTooLarge):
        http1.split_head(b"x" * (http1.MAX_HEAD + 1))
    assert http1.body_for_reply(204, [(b"content-length", b"5")]).done
    assert http1.body_for_reply(200, [], b"HEAD").done
    assert not http1.body_for_reply(200, []).done  # until close
    assert http1.Body.of([], request=True).done  # a request without framing has no body
    with pytest.raises(http1.BadMessage):
        http1.Body.of([(b"transfer-encoding", b"gzip")])
    with pytest.raises(http1.BadMessage):
        http1.Body.of([(b"content-length", b"-1")])
    assert http1.chunk(b"abc") == b"3\r\nabc\r\n"
