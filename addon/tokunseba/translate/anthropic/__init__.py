"""The Anthropic Messages codec: decode.py and encode.py (requests), cache.py (cache breakpoints),
reply.py, stream.py."""

from __future__ import annotations

from ...protocols import anthropic as pa
from ..codec import Codec
from . import decode, encode, reply
from .cache import place_cache_breakpoints
from .stream import AnthropicDecoder, AnthropicEncoder

CODEC = Codec(
    protocol=pa.PROTOCOL,
    decode_request=decode.decode,
    encode_request=encode.encode,
    decode_reply=reply.decode,
    encode_reply=reply.encode,
    stream_decoder=AnthropicDecoder,
    stream_encoder=lambda report, include_usage, created: AnthropicEncoder(report, created=created),
    decode_message=reply.decode_message,
    encode_error=pa.error_reply,
    stop_field="stop_sequences",
    place_cache=place_cache_breakpoints,
    cache_marker="cache_control",
    refused_leaving=(),
    refused_arriving=("tool call ids that do not match ^[a-zA-Z0-9_-]+$ (ids are never rewritten)",),
)
