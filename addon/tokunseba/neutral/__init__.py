"""The neutral model every codec speaks (docs/dev/architecture.md §3): N protocols cost 2N parts.

- ``events``: a reply as neutral events (message start, block start / delta / signature /
  stop for text, tool calls, thinking, other blocks; message stop with stop reason and
  usage; usage after the stop; an error);
- ``message``: a whole reply = its events collected (``Message.collect``);
- ``conversation``: a request (``Conversation``) and a request translation's result
  (``RequestTranslation``);
- ``usage``: usage exactly as reported, converted only where definitions differ;
- ``report``: drops / plumbing / warnings (``ReplyReport``, ``note_once``);
- ``error``: an upstream's error read from any envelope (``UpstreamError``);
- ``ids``: ids minted as recorded plumbing;
- ``output_format``: structured output (a JSON object, or one following a JSON Schema), the
  schema dialects converted on the way in and out.

Rules: ``neutral`` imports no codec (``translate``) and no ``protocols`` module; codecs and
protocol modules import it.
"""

from __future__ import annotations

from .conversation import Capped, Conversation, RequestTranslation
from .effort import BUDGETS, EFFORT_PINS, LEVELS, apply_endpoint, budget_for, level_for_budget
from .error import (ERROR_TYPES, STATUS_FOR_TYPE, UpstreamError, error_from_obj, error_type_for_status,
                    parse_error_body, status_for_type)
from .events import (EARLY_END, KEEPALIVE, NAMELESS_CALL, BlockDelta, BlockKind, BlockSignature, BlockStart, BlockStop,
                     Event, KeepAlive, MessageStart, MessageStop, StreamError, UsageUpdate)
from .ids import odd_id, safe, synth_tool_id
from .message import Block, Message
from .report import ReplyReport, note_once
from .state import PROVIDER_STATE, ProviderState, state_for
from .tools import (FREEFORM_PARAM, ClientTool, ClientTools, FreeformInputStream, freeform_arguments, freeform_input,
                    freeform_parameters, freeform_tools)
from .usage import COUNTINGS, Counting, Tokens, Usage, add_counting, count, first, includes_cached, plus, sub

from .endpoint_cap import (CUT, limit_text, told_stop)

from .output_format import (JSON_OBJECT, JSON_SCHEMA, OutputFormat, PLUMBING_NAME, TEXT, close_objects,
                            from_openapi, keep_keywords, read as read_format)

__all__ = [
    "Capped", "Conversation", "RequestTranslation", "BUDGETS", "EFFORT_PINS", "LEVELS", "apply_endpoint",
    "budget_for", "level_for_budget", "ERROR_TYPES", "STATUS_FOR_TYPE", "UpstreamError", "error_from_obj",
    "error_type_for_status", "parse_error_body", "status_for_type", "EARLY_END", "KEEPALIVE", "NAMELESS_CALL",
    "BlockDelta", "BlockKind", "BlockSignature", "BlockStart", "BlockStop", "Event", "KeepAlive", "MessageStart",
    "MessageStop", "StreamError", "UsageUpdate", "odd_id", "safe", "synth_tool_id", "Block", "Message", "ReplyReport",
    "note_once", "PROVIDER_STATE", "ProviderState", "state_for", "FREEFORM_PARAM", "ClientTool", "ClientTools",
    "FreeformInputStream", "freeform_arguments", "freeform_input", "freeform_parameters", "freeform_tools",
    "COUNTINGS", "Counting", "Tokens", "Usage", "add_counting", "count", "first", "includes_cached", "plus", "sub",
    "CUT", "limit_text", "told_stop",
    "JSON_OBJECT", "JSON_SCHEMA", "OutputFormat", "PLUMBING_NAME", "TEXT", "close_objects", "from_openapi",
    "keep_keywords", "read_format",
]
