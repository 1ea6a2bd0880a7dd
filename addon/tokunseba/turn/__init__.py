"""One provider turn's plain lifecycle, from the intercepted request to the reply the client
gets: no mitmproxy, no sockets, no asyncio (tests/suites/test_layering.py keeps it so).

- planning: ``plan`` (prepare, decide, translate for the route chosen, build: a ``Turn``),
  ``planner`` (the same as one object the adapter drives, round after round, and the flow's
  state begun), ``target`` (where a request object points, its headers, the plan applied to
  it: duck-typed, never mitmproxy's);
- the reply: ``reply`` (its mode, the stream translator, the whole reply translated),
  ``disposition`` (what the ``response`` hook does with it), ``outcome``, ``stream_watch``,
  ``encoding``, ``pump`` (a reply on its way to the client);
- a failed attempt and the next one: ``failover`` (which failures move on, cooldowns and
  slots, the next attempt), ``last_word`` (what the client gets when none is left);
- around the turn: ``flowstate`` (what the adapter holds per flow), ``presentation`` (what
  mitmweb shows of it), ``console_line``, ``access`` (who may have turns routed), ``base_url``
  (how it came in), ``retries`` (a request that repeats a recent one of its session),
  ``provider_limits`` (what a reply's headers say about the account's limits).

The adapter (proxy/route.py) plans a request through ``planner`` and applies the ``Turn`` it gets
with ``target.aim``.
The package's face is ``__all__`` (what proxy/ and shadow/ take, from here only: tests/
test_exported_members.py); a name is read from its module when first asked, so importing the
package costs nothing. ``from tokunseba.turn import name`` still finds what the one-module
``turn`` had (read lazily from ``plan`` and ``reply``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .base_url import BASE_URL as VIA_BASE_URL, PROXY as VIA_PROXY, client_label, misdirected
    from .cap_note import cap_line, cap_note as endpoint_cap_note
    from .console_line import client_name, turn_line
    from .cost import turn_cost
    from .disposition import Disposition, dispose, failure_message, translate_whole_reply
    from .encoding import Decoding, EncodingError, is_identity
    from .quota_seen import WindowWatch
    from .failover import (attempt_headers, Broken, Capacity, Chain, Failure, HOLD_MAX, Replan, Slot, available, classify,
                           may_fail_over, move_on, needs_body, next_turn, note_attempt)
    from .flowstate import CLIENT_KEY, FlowState
    from .last_word import Told, final, say_busy
    from .outcome import Outcome, shape_problem, upstream_failure
    from .plan import (LocalResponse, REQUEST_ID_HEADER, SSE_CONTENT_TYPE, Turn, client_error, is_count,
                       is_responses_websocket, translate_for_endpoint, websocket_declined)
    from .planner import Planning, begin
    from .presentation import MAX_REPLAYABLE, ORIGINAL_KEY, present, record_original, show_client_url
    from .provider_limits import EVENT, limit_headers
    from .pump import MAX_STORED_BODY, Pump, reply_completed
    from .reply import response_mode, retarget_error, stream_translator
    from .retries import RetryWatch
    from .stream_watch import error_event
    from .target import aim, extra_for, field_name, guess_protocol, is_provider_host, looks_like_provider_call
    from .ws_plan import ENDPOINT_WS, HERE, PROVIDER, carrier, plan_message
    from .ws_transcript import Reply, Transcript
    from .ws_wire import (ServerEvent, ServerEvents, SseMessages, TURN, WARMUP, as_sse, delta_type,
                          read_client_message, server_event)

_MODULES = {"access", "base_url", "budget_gate", "cap_note", "console_line", "cost", "disposition", "encoding",
            "failover", "flowstate", "last_word", "outcome", "plan", "planner", "presentation", "provider_limits",
            "pump", "quota_seen", "reply", "retries", "stream_watch", "target", "ws_plan", "ws_transcript", "ws_wire"}

# the face: name -> (its module, its name there); no face name is a module's name (the import
# system would bind the module over it: cap_note's cap_note is endpoint_cap_note)
_FACE: dict[str, tuple[str, str]] = {
    "VIA_BASE_URL": ("base_url", "BASE_URL"), "VIA_PROXY": ("base_url", "PROXY"),
    "misdirected": ("base_url", "misdirected"),
    "Capacity": ("failover", "Capacity"), "attempt_headers": ("failover", "attempt_headers"),
    "WindowWatch": ("quota_seen", "WindowWatch"),
    "client_label": ("base_url", "client_label"),
    "cap_line": ("cap_note", "cap_line"), "endpoint_cap_note": ("cap_note", "cap_note"),
    "client_name": ("console_line", "client_name"), "turn_line": ("console_line", "turn_line"),
    "turn_cost": ("cost", "turn_cost"), "Disposition": ("disposition", "Disposition"),
    "dispose": ("disposition", "dispose"), "failure_message": ("disposition", "failure_message"),
    "translate_whole_reply": ("disposition", "translate_whole_reply"), "Decoding": ("encoding", "Decoding"),
    "EncodingError": ("encoding", "EncodingError"), "is_identity": ("encoding", "is_identity"),
    "Broken": ("failover", "Broken"), "Chain": ("failover", "Chain"),
    "Failure": ("failover", "Failure"), "HOLD_MAX": ("failover", "HOLD_MAX"), "Replan": ("failover", "Replan"),
    "Slot": ("failover", "Slot"), "available": ("failover", "available"), "classify": ("failover", "classify"),
    "may_fail_over": ("failover", "may_fail_over"), "move_on": ("failover", "move_on"),
    "needs_body": ("failover", "needs_body"), "next_turn": ("failover", "next_turn"),
    "note_attempt": ("failover", "note_attempt"), "CLIENT_KEY": ("flowstate", "CLIENT_KEY"),
    "FlowState": ("flowstate", "FlowState"), "Told": ("last_word", "Told"), "final": ("last_word", "final"),
    "say_busy": ("last_word", "say_busy"), "Outcome": ("outcome", "Outcome"),
    "shape_problem": ("outcome", "shape_problem"), "upstream_failure": ("outcome", "upstream_failure"),
    "LocalResponse": ("plan", "LocalResponse"), "REQUEST_ID_HEADER": ("plan", "REQUEST_ID_HEADER"),
    "SSE_CONTENT_TYPE": ("plan", "SSE_CONTENT_TYPE"), "Turn": ("plan", "Turn"),
    "client_error": ("plan", "client_error"), "is_count": ("plan", "is_count"),
    "is_responses_websocket": ("plan", "is_responses_websocket"),
    "translate_for_endpoint": ("plan", "translate_for_endpoint"),
    "websocket_declined": ("plan", "websocket_declined"),
    "Planning": ("planner", "Planning"), "begin": ("planner", "begin"),
    "MAX_REPLAYABLE": ("presentation", "MAX_REPLAYABLE"), "ORIGINAL_KEY": ("presentation", "ORIGINAL_KEY"),
    "present": ("presentation", "present"), "record_original": ("presentation", "record_original"),
    "show_client_url": ("presentation", "show_client_url"), "EVENT": ("provider_limits", "EVENT"),
    "limit_headers": ("provider_limits", "limit_headers"), "MAX_STORED_BODY": ("pump", "MAX_STORED_BODY"),
    "Pump": ("pump", "Pump"), "reply_completed": ("pump", "reply_completed"),
    "response_mode": ("reply", "response_mode"), "retarget_error": ("reply", "retarget_error"),
    "stream_translator": ("reply", "stream_translator"), "RetryWatch": ("retries", "RetryWatch"),
    "error_event": ("stream_watch", "error_event"), "aim": ("target", "aim"), "extra_for": ("target", "extra_for"),
    "field_name": ("target", "field_name"), "guess_protocol": ("target", "guess_protocol"),
    "is_provider_host": ("target", "is_provider_host"),
    "looks_like_provider_call": ("target", "looks_like_provider_call"), "ENDPOINT_WS": ("ws_plan", "ENDPOINT_WS"),
    "HERE": ("ws_plan", "HERE"), "PROVIDER": ("ws_plan", "PROVIDER"), "carrier": ("ws_plan", "carrier"),
    "plan_message": ("ws_plan", "plan_message"), "Reply": ("ws_transcript", "Reply"),
    "Transcript": ("ws_transcript", "Transcript"), "ServerEvent": ("ws_wire", "ServerEvent"),
    "ServerEvents": ("ws_wire", "ServerEvents"), "SseMessages": ("ws_wire", "SseMessages"),
    "TURN": ("ws_wire", "TURN"), "WARMUP": ("ws_wire", "WARMUP"), "as_sse": ("ws_wire", "as_sse"),
    "delta_type": ("ws_wire", "delta_type"), "read_client_message": ("ws_wire", "read_client_message"),
    "server_event": ("ws_wire", "server_event"),
}

__all__ = [
    "VIA_BASE_URL", "VIA_PROXY", "misdirected", "Capacity", "attempt_headers", "WindowWatch",
    "client_label", "cap_line", "endpoint_cap_note", "client_name", "turn_line",
    "turn_cost", "Disposition", "dispose", "failure_message", "translate_whole_reply", "Decoding", "EncodingError",
    "is_identity", "Broken", "Chain", "Failure", "HOLD_MAX", "Replan", "Slot", "available", "classify",
    "may_fail_over", "move_on", "needs_body", "next_turn", "note_attempt", "CLIENT_KEY", "FlowState", "Told", "final",
    "say_busy", "Outcome", "shape_problem", "upstream_failure", "LocalResponse", "REQUEST_ID_HEADER",
    "SSE_CONTENT_TYPE", "Turn", "client_error", "is_count", "is_responses_websocket", "translate_for_endpoint",
    "websocket_declined", "Planning", "begin", "MAX_REPLAYABLE", "ORIGINAL_KEY", "present",
    "record_original", "show_client_url", "EVENT", "limit_headers", "MAX_STORED_BODY", "Pump", "reply_completed",
    "response_mode", "retarget_error", "stream_translator", "RetryWatch", "error_event", "aim", "extra_for",
    "field_name", "guess_protocol", "is_provider_host", "looks_like_provider_call", "ENDPOINT_WS", "HERE", "PROVIDER",
    "carrier", "plan_message", "Reply", "Transcript", "ServerEvent", "ServerEvents", "SseMessages", "TURN", "WARMUP",
    "as_sse", "delta_type", "read_client_message", "server_event",
]


def __getattr__(name: str) -> Any:
    """``from tokunseba.turn import Turn``: a face name read from its module when asked; any other
    name of ``plan`` and ``reply`` (what the one-module ``turn`` had) too."""
    if name.startswith("__") or name in _MODULES:  # a module of the package: the import system loads it
        raise AttributeError(name)
    if name in _FACE:
        module, attr = _FACE[name]
        return getattr(importlib.import_module(f"{__name__}.{module}"), attr)
    for module in ("plan", "reply"):  # what the one-module ``turn`` had, in these two now
        found = getattr(importlib.import_module(f"{__name__}.{module}"), name, _MODULES)
        if found is not _MODULES:
            return found
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
