"""The Gemini codec (generativelanguage ``generateContent`` / ``streamGenerateContent``):
decode.py and encode.py (requests), reply.py, stream.py, over the neutral model (docs/dev/architecture.md §3,
issue 11). The model and the stream flag travel in the URL, so the request decoder reads
the client's path and an encoded body names no model (the caller puts it in the URL).
"""

from __future__ import annotations

from ...protocols import gemini as pg
from ..codec import Codec
from . import decode, encode, reply
from .stream import GeminiDecoder, GeminiEncoder

CODEC = Codec(
    protocol=pg.PROTOCOL,
    decode_request=decode.decode,
    encode_request=encode.encode,
    decode_reply=reply.decode,
    encode_reply=reply.encode,
    stream_decoder=GeminiDecoder,
    stream_encoder=lambda report, include_usage, created: GeminiEncoder(report),
    decode_message=reply.decode_message,
    encode_error=pg.error_reply,
    stop_field="generationConfig.stopSequences",
    url_carries_model=True,
    refused_leaving=("cachedContent (content stored at Google)", "candidateCount above 1",
                     "a functionResponse that answers no call in the history",
                     "streamGenerateContent without alt=sse"),
    refused_arriving=("function names Gemini rejects (not [A-Za-z_][A-Za-z0-9_.:-]{0,63})",
                      "a tool result that answers no call in the history (Gemini needs the function's name)",
                      "function-call arguments that are not a JSON object"),
)
