"""Toy Chat: a Cohere-style protocol (one host, a bearer key, SSE streams) as facts, for
tests/suites/test_toy_protocol.py. It is registered only by that test (``protocols.register(FACTS, CODEC)``):
nothing in addon/ knows it, which is the point.

Wire format (a small subset of Cohere's v2 chat):
- request: ``POST https://api.toy.example/v2/chat`` ``{"model", "messages": [{"role",
  "content": str}], "max_tokens", "stream"}``, key in ``Authorization: Bearer``;
- whole reply: ``{"id", "model", "message": {"role": "assistant", "content": [{"type":
  "text", "text"}]}, "finish_reason": "COMPLETE"|"MAX_TOKENS", "usage": {"input_tokens",
  "output_tokens"}}``;
- stream: ``event: message-start`` / ``content-delta`` (``{"text"}``) / ``message-end``
  (``{"finish_reason", "usage"}``); errors ``{"message": str}`` whole, ``event: error`` in a stream.
"""

from __future__ import annotations

import json
from typing import Any

from tokunseba.protocols.anthropic import COUNTING_NAME as ANTHROPIC
from tokunseba.protocols.facts import Check, Protocol, RuleShape, d, lst, non_empty_list, positive_int, role_user, typed
from tokunseba.sse import encode_event

NAME = "toy"
HOST = "api.toy.example"
FINISH_TO_STOP = {"COMPLETE": "end_turn", "MAX_TOKENS": "max_tokens", "ERROR": "refusal"}
STOP_TO_FINISH = {"max_tokens": "MAX_TOKENS", "model_context_window_exceeded": "MAX_TOKENS"}  # else COMPLETE


def error_body(status: int, message: str, etype: str | None = None) -> bytes:
    return json.dumps({"message": message}).encode()


def sse_error(message: str) -> bytes:
    return encode_event(json.dumps({"type": "error", "message": message}), "error")


def _text_of(m: dict[str, Any]) -> bool:
    return isinstance(m.get("content"), str)


FACTS = Protocol(
    name=NAME,
    title="Toy Chat (Cohere-style)",
    clients="tests/suites/test_toy_protocol.py",
    hosts=(HOST,),
    api_prefixes=("/v2",),
    paths={"chat": "/chat"},
    turn_kinds=("chat", "chat"),
    auth_header=("authorization", "Bearer {key}"),
    key_env="TOY_API_KEY",
    version_headers={},
    error_body=error_body,
    stream_error=sse_error,
    usage_counting=ANTHROPIC,  # input_tokens excludes nothing cached (the toy has no cache)
    usage_key="usage",
    terminal_event="message-end",
    skipped_events=frozenset({"content-delta"}),
    rule_shape=RuleShape(
        "messages", ("content",), typed("image"), role_user, "content", typed("text"),
        tool_count=lambda body: len(lst(body.get("tools"))),
        thinking=lambda body: bool(d(body.get("thinking"))),
    ),
    checks=(Check("messages", non_empty_list("messages"), "Toy: at least one message"),
            Check("max_tokens", positive_int("max_tokens"), "Toy: max_tokens is an integer ≥ 1")),
    max_output_field="max_tokens",
)
