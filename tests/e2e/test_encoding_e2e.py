"""Compressed upstream replies through a real mitmdump: an OpenAI-compatible upstream that
gzips / deflates / brotli- / zstd-compresses its SSE (or its whole JSON) despite
`accept-encoding: identity` still reaches the anthropic SDK as a complete, translated,
identity-encoded reply, recorded as a clean turn."""

from __future__ import annotations

import gzip
import json
import zlib

import brotli
import pytest

from .test_ledger_truth_e2e import finished_row
from .test_proxy_e2e import ant_client, chat_reply, chat_text_stream
from tests.support.upstream import Reply

try:
    from compression import zstd
except ImportError:
    from backports import zstd

pytestmark = pytest.mark.e2e

PACK = {"gzip": gzip.compress, "deflate": zlib.compress, "br": brotli.compress, "zstd": zstd.compress}


def pieces(data: bytes, n: int = 7) -> list[bytes]:
    """The compressed bytes cut in ``n`` uneven pieces, each written as its own chunk."""
    cuts = sorted({len(data) * i * i // (n * n) for i in range(1, n)} | {0, len(data)})
    return [data[a:b] for a, b in zip(cuts, cuts[1:]) if b > a]


@pytest.mark.parametrize("encoding", sorted(PACK))
def test_compressed_stream_is_decoded_before_translation(client_env, upstreams, encoding):
    oai = upstreams["oai"]
    sse = b"".join(chat_text_stream(f"chatcmpl-{encoding}", ("Hel", "lo ", "compressed", "!")))
    oai.script(Reply(200, {"content-type": "text/event-stream", "content-encoding": encoding},
                     pieces(PACK[encoding](sse)), delay=0.01, framing="chunked"))
    with ant_client().messages.with_streaming_response.create(
            model="claude-enc", max_tokens=10, stream=True, messages=[{"role": "user", "content": "hi"}]) as resp:
        assert "content-encoding" not in resp.headers
        rid = resp.headers["x-tokunseba-request-id"]
        body = resp.read()
    assert b"event: message_stop" in body and b"event: error" not in body
    text = "".join(json.loads(line[6:])["delta"].get("text", "") for line in body.split(b"\n")
                   if line.startswith(b"data: ") and b'"content_block_delta"' in line)
    assert text == "Hello compressed!"
    row = finished_row(client_env, rid)
    assert (row["outcome"], row["status"], row["error"]) == ("translated", 200, None)
    assert oai.requests[-1].headers.get("accept-encoding") == "identity"


@pytest.mark.parametrize("encoding", ["gzip", "br"])
def test_compressed_whole_reply_is_translated_and_sent_identity(client_env, upstreams, encoding):
    oai = upstreams["oai"]
    body = json.dumps(chat_reply("chatcmpl-whole-enc", "packed")).encode()
    oai.script(Reply(200, {"content-type": "application/json", "content-encoding": encoding}, [PACK[encoding](body)]))
    raw = ant_client().messages.with_raw_response.create(model="claude-enc", max_tokens=10,
                                                         messages=[{"role": "user", "content": "hi"}])
    assert "content-encoding" not in raw.headers
    assert raw.parse().content[0].text == "packed"
