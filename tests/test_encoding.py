"""Incremental content-encoding decoding: gzip, deflate (zlib-wrapped and raw), br, zstd and
chains of them give the original bytes whatever the split; unknown codings and truncated or
corrupt bodies are errors with a one-line reason."""

from __future__ import annotations

import gzip
import zlib

import brotli
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokunseba.encoding import Decoding, EncodingError, UnsupportedEncoding, is_identity

try:
    from compression import zstd
except ImportError:
    from backports import zstd

PLAIN = b"".join(b'event: content_block_delta\ndata: {"type":"content_block_delta","text":"w%d "}\n\n' % i
                 for i in range(300))


def raw_deflate(b: bytes) -> bytes:
    c = zlib.compressobj(wbits=-15)
    return c.compress(b) + c.flush()


PACKERS = {"gzip": gzip.compress, "x-gzip": gzip.compress, "deflate": zlib.compress, "br": brotli.compress,
           "zstd": zstd.compress}


def decode(header: str, data: bytes, cuts: list[int]) -> bytes:
    d = Decoding(header)
    out, prev = [], 0
    for c in sorted(set(cuts)) + [len(data)]:
        out.append(d.feed(data[prev:c]))
        prev = c
    out.append(d.close())
    return b"".join(out)


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(sorted(PACKERS)), cuts=st.lists(st.integers(0, 4000), max_size=20))
def test_any_split_gives_the_original(name, cuts):
    packed = PACKERS[name](PLAIN)
    assert decode(name, packed, [c % (len(packed) + 1) for c in cuts]) == PLAIN


def test_every_single_split_point_and_one_byte_feeds():
    for name, pack in PACKERS.items():
        packed = pack(PLAIN)
        for i in range(0, len(packed) + 1, max(1, len(packed) // 50)):
            assert decode(name, packed, [i]) == PLAIN, (name, i)
        assert decode(name, packed, list(range(len(packed)))) == PLAIN


def test_raw_deflate_concatenated_gzip_and_chains():
    assert decode("deflate", raw_deflate(PLAIN), [5]) == PLAIN
    assert decode("gzip", gzip.compress(PLAIN[:100]) + gzip.compress(PLAIN[100:]), [50]) == PLAIN
    assert decode("gzip, br", brotli.compress(gzip.compress(PLAIN)), [3, 99]) == PLAIN
    assert decode("identity", PLAIN, [7]) == PLAIN and decode("", PLAIN, []) == PLAIN
    assert is_identity(None) and is_identity(" identity ") and not is_identity("gzip")


def test_bad_input_is_a_one_line_error():
    with pytest.raises(UnsupportedEncoding, match=r"^unsupported content-encoding 'compress'$"):
        Decoding("compress")
    for name, pack in PACKERS.items():
        packed = pack(PLAIN)
        with pytest.raises(EncodingError):
            decode(name, packed[: len(packed) // 2], [])
    with pytest.raises(EncodingError, match="invalid gzip data"):
        Decoding("gzip").feed(b"this is not gzip at all")
