"""Usage read on the side of passed-on replies (pass-through and retargeted turns) by the
stream watch and ``outcome.usage_of``, whatever their Content-Encoding, without changing a
byte (docs/dev/pitfalls.md 27: compressed SSE gave empty usage rows elsewhere), for every protocol."""

from __future__ import annotations

import gzip
import zlib

import brotli
import pytest

from tokunseba.turn.outcome import usage_of
from tokunseba.turn.stream_watch import StreamWatch

ANT = (b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","type":"message","role":"assistant",'
       b'"model":"x","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":7,"output_tokens":1}}}\n\n'
       b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},'
       b'"usage":{"output_tokens":42}}\n\nevent: message_stop\ndata: {"type":"message_stop"}\n\n')


def _zstd(data: bytes) -> bytes:
    try:
        from compression import zstd
    except ImportError:
        from backports import zstd
    return zstd.compress(data)


@pytest.mark.parametrize("encoding,encode", [
    (None, lambda b: b), ("identity", lambda b: b), ("gzip", gzip.compress), ("deflate", zlib.compress),
    ("br", brotli.compress), ("zstd", _zstd)])
def test_anthropic_usage_read_from_any_encoding_in_any_split(encoding, encode):
    blob = encode(ANT)
    for step in (1, 7, len(blob)):
        s = StreamWatch("anthropic", encoding)
        for i in range(0, len(blob), step):
            s.feed(blob[i:i + step])
        s.close()
        assert s.usage is not None and s.usage.reported == {"input_tokens": 7, "output_tokens": 42}


def test_unknown_encoding_gives_no_usage_never_a_wrong_one():
    s = StreamWatch("anthropic", "compress")
    s.feed(ANT)
    s.close()
    assert s.usage is None


def test_garbage_never_raises():
    s = StreamWatch("openai", "gzip")
    s.feed(b"not gzip at all")
    s.close()
    assert s.usage is None


def test_responses_usage_from_the_completed_event():
    ev = (b'event: response.completed\ndata: {"type":"response.completed","sequence_number":3,"response":'
          b'{"id":"r","usage":{"input_tokens":5120,"input_tokens_details":{"cached_tokens":4096},"output_tokens":41,'
          b'"total_tokens":5161}}}\n\n')
    s = StreamWatch("openai-responses")
    s.feed(ev)
    s.close()
    assert s.usage.fields() == {"input": 5120, "output": 41, "cache_read": 4096, "cache_write": None, "reasoning": None}


def test_usage_from_json_absent_means_none():
    assert usage_of("anthropic", b'{"id":"m","content":[]}') is None
    assert usage_of("openai", b'{"usage":{"prompt_tokens":3,"completion_tokens":1}}').fields()["input"] == 3
    assert usage_of("gemini", b'{"usageMetadata":{}}') is None
