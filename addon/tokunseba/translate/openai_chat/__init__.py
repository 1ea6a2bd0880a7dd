"""The OpenAI Chat Completions codec: request.py (decode + encode), reply.py, stream.py."""

from __future__ import annotations

from ...protocols import openai_chat as po
from ..codec import Codec
from . import reply, request
from .stream import ChatDecoder, ChatEncoder

CODEC = Codec(
    protocol=po.PROTOCOL,
    decode_request=request.decode,
    encode_request=request.encode,
    decode_reply=reply.decode,
    encode_reply=reply.encode,
    stream_decoder=ChatDecoder,
    stream_encoder=lambda report, include_usage, created: ChatEncoder(report, include_usage=include_usage,
                                                                      created=created),
    encode_error=po.error_reply,
    decode_message=reply.decode_message,
    stop_field="stop",
    place_cache=request.place_cache_breakpoints,
    carry_cache=request.mark_breakpoints,
    refused_leaving=("n above 1 (every other protocol returns exactly one choice)",),
    refused_arriving=("tool names longer than 64 characters (renaming would invent a tool)",),
)
