"""The Anthropic Messages codec: request.py (decode + encode), reply.py, stream.py."""

from __future__ import annotations

from ...protocols import anthropic as pa
from ..codec import Codec
from . import reply, request
from .stream import AnthropicDecoder, AnthropicEncoder

CODEC = Codec(
    protocol=pa.PROTOCOL,
    decode_request=request.decode,
    encode_request=request.encode,
    decode_reply=reply.decode,
    encode_reply=reply.encode,
    stream_decoder=AnthropicDecoder,
    stream_encoder=lambda report, include_usage, created: AnthropicEncoder(report, created=created),
    decode_message=reply.decode_message,
    encode_error=pa.error_reply,
    stop_field="stop_sequences",
    place_cache=request.place_cache_breakpoints,
    cache_marker="cache_control",
    refused_leaving=(),
    refused_arriving=("tool call ids that do not match ^[a-zA-Z0-9_-]+$ (ids are never rewritten)",),
)
