"""The OpenAI Responses codec: decode.py (with tool_declarations.py) and encode.py (requests),
reply.py, stream.py."""

from __future__ import annotations

from ...protocols import openai_chat as po
from ...protocols import openai_responses as pr
from ..codec import Codec
from . import decode, encode, reply
from .stream import ResponsesDecoder, ResponsesEncoder

CODEC = Codec(
    protocol=pr.PROTOCOL,
    decode_request=decode.decode,
    encode_request=encode.encode,
    decode_reply=reply.decode,
    encode_reply=reply.encode,
    stream_decoder=ResponsesDecoder,
    stream_encoder=lambda report, include_usage, created: ResponsesEncoder(report, created=created),
    decode_message=reply.decode_message,
    encode_error=po.error_reply,  # Responses errors use the OpenAI envelope
    stop_field=None,  # Responses has no stop sequences
    refused_leaving=("built-in tool calls in the history (local shell, shell, apply_patch_call, computer, MCP "
                     "server calls, ...), items or state stored by the provider (previous_response_id, "
                     "item_reference, encrypted compaction); two tools that would share one flat name "
                     "(freeform tools and namespaced tools travel as declared encodings)",),
    refused_arriving=("tool names longer than 64 characters (renaming would invent a tool)",),
)
