"""Echo Meter's facts: where its turns live, its key, its error envelope, its stream's end, and
its own usage counting (``COUNTING``), as tokunseba's ``protocols.facts.Protocol``.

Wire format:
- request: ``POST https://api.echo.example/e1/converse`` ``{"model", "turns": [{"speaker":
  "user"|"assistant"|"system", "text": str}], "limit": int, "stream": bool}``, key in ``x-echo-key``;
- whole reply: ``{"id", "model", "text", "end": "done"|"limit", "meter": {"fresh", "reused", "made"}}``;
- stream: ``event: start`` (``{"id", "model"}``) / ``text`` (``{"text"}``) / ``end`` (``{"end",
  "meter"}``); an error is ``{"echo_error": {"status", "message"}}`` whole, ``event: error`` in a stream.

Usage (the meter) counts its own way: ``fresh`` input tokens not read from a cache, ``reused``
input tokens read from one, ``made`` output tokens; no total, no reasoning count.
"""

from __future__ import annotations

import json
from typing import Any

from tokunseba.neutral.usage import Counting, Tokens, Usage, count
from tokunseba.protocols.facts import Check, Protocol, RuleShape, d, lst, non_empty_list, positive_int
from tokunseba.sse import encode_event

NAME = "echo"
HOST = "api.echo.example"
END_TO_STOP = {"done": "end_turn", "limit": "max_tokens"}
STOP_TO_END = {"max_tokens": "limit", "model_context_window_exceeded": "limit"}  # else done


def error_body(status: int, message: str, etype: str | None = None) -> bytes:
    return json.dumps({"echo_error": {"status": status, "message": message}}).encode()


def sse_error(message: str) -> bytes:
    return encode_event(json.dumps({"message": message}), "error")


# ---- the meter: Echo's own usage counting ----
COUNTING_NAME = "echo-meter"


def meter_fields(r: dict[str, Any]) -> dict[str, int | None]:
    """The ledger's numbers in the meter's own counting: input is the fresh part only."""
    return {"input": count(r.get("fresh")), "output": count(r.get("made")), "cache_read": count(r.get("reused")),
            "cache_write": None, "reasoning": None}


def meter_tokens(r: dict[str, Any]) -> Tokens:
    fresh, reused, made = count(r.get("fresh")), count(r.get("reused")), count(r.get("made"))
    inp = None if fresh is None else fresh + (reused or 0)
    return {"input": inp, "uncached": fresh, "output": made, "cache_read": reused, "cache_write": None,
            "reasoning": None, "total": inp + made if inp is not None and made is not None else None,
            "reasoning_detail": True}


def meter_object(u: Usage) -> dict[str, Any]:
    """The meter an Echo client is sent, from any usage (only what was reported)."""
    if u.counting == COUNTING_NAME:
        return dict(u.reported)
    t = u.tokens()
    out: dict[str, Any] = {}
    if t["uncached"] is not None:
        out["fresh"] = t["uncached"]
    if t["cache_read"] is not None:
        out["reused"] = t["cache_read"]
    if t["output"] is not None:
        out["made"] = t["output"]
    return out


COUNTING = Counting(COUNTING_NAME, input_includes_cached=False, fields=meter_fields, tokens=meter_tokens,
                    write=meter_object)


def _speaker_user(m: dict[str, Any]) -> bool:
    return m.get("speaker") == "user"


FACTS = Protocol(
    name=NAME,
    title="Echo Meter",
    clients="tests/plugins/tokunseba_echo_protocol",
    hosts=(HOST,),
    api_prefixes=("/e1",),
    paths={"converse": "/converse"},
    turn_kinds=("converse", "converse"),
    auth_header=("x-echo-key", "{key}"),
    key_env="ECHO_API_KEY",
    error_body=error_body,
    stream_error=sse_error,
    counting=COUNTING,
    usage_key="meter",
    terminal_event="end",
    skipped_events=frozenset({"text"}),
    rule_shape=RuleShape(
        "turns", (), lambda block: False, _speaker_user, "text", lambda part: True,
        tool_count=lambda body: len(lst(body.get("tools"))),
        thinking=lambda body: bool(d(body.get("thinking"))),
        role_of=lambda m: m.get("speaker"),
    ),
    checks=(Check("turns", non_empty_list("turns"), "Echo: at least one turn"),
            Check("limit", positive_int("limit"), "Echo: limit is an integer ≥ 1")),
    max_output_field="limit",
)
