"""Refuse what the client's own protocol forbids, before a turn is translated (issue 8, item 6).

The original provider would answer such a request with a 400; a translated endpoint (a local
server) may not check, and answer nonsense. So a turn that is about to be **translated** is
checked against its client protocol's rules (``CHECKS``: one row per rule, with its reason)
and, when one fails, answered with a 400 in the client's error envelope naming the JSON path.

Only translated turns are checked. Pass-through and same-protocol retargets go to a server
that speaks the client's protocol and checks for itself (its own error reaches the client
unchanged), and checking them here would mean a second, possibly stricter, opinion on
traffic tokunseba promises to leave byte-identical.

Only what the protocols surely forbid is refused: a token limit that is not a positive
integer, an empty message list, and a tool result whose id answers no earlier tool call
(Responses: unless ``previous_response_id`` holds the earlier turns server-side).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

Problem = tuple[str, str]  # (JSON path, what is wrong)


@dataclass(frozen=True)
class Check:
    name: str
    find: Callable[[dict], Iterator[Problem]]
    reason: str


def _list(x: Any) -> list:
    return x if isinstance(x, list) else []


def _dict(x: Any) -> dict:
    return x if isinstance(x, dict) else {}


def _positive_int(*fields: str) -> Callable[[dict], Iterator[Problem]]:
    def find(body: dict) -> Iterator[Problem]:
        for f in fields:
            v = body.get(f)
            if f in body and v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                yield f, f"must be a positive integer, got {v!r}"

    return find


def _non_empty_list(field: str) -> Callable[[dict], Iterator[Problem]]:
    def find(body: dict) -> Iterator[Problem]:
        v = body.get(field)
        if not isinstance(v, list):
            yield field, f"must be a list of messages, got {type(v).__name__ if v is not None else 'nothing'}"
        elif not v:
            yield field, "must not be empty"

    return find


def _anthropic_orphan_results(body: dict) -> Iterator[Problem]:
    calls: set[str] = set()
    for i, m in enumerate(_list(body.get("messages"))):
        for j, block in enumerate(_list(_dict(m).get("content"))):
            block = _dict(block)
            if block.get("type") in ("tool_use", "server_tool_use") and isinstance(block.get("id"), str):
                calls.add(block["id"])
            elif block.get("type") == "tool_result" and block.get("tool_use_id") not in calls:
                yield (f"messages[{i}].content[{j}].tool_use_id",
                       f"{block.get('tool_use_id')!r} matches no earlier tool_use block")


def _chat_orphan_results(body: dict) -> Iterator[Problem]:
    calls: set[str] = set()
    for i, m in enumerate(_list(body.get("messages"))):
        m = _dict(m)
        for c in _list(m.get("tool_calls")):
            if isinstance(_dict(c).get("id"), str):
                calls.add(c["id"])
        if m.get("role") == "tool" and m.get("tool_call_id") not in calls:
            yield f"messages[{i}].tool_call_id", f"{m.get('tool_call_id')!r} matches no earlier assistant tool_calls id"


OUTPUT_OF = {"function_call_output": "function_call", "custom_tool_call_output": "custom_tool_call"}


def _responses_orphan_outputs(body: dict) -> Iterator[Problem]:
    if body.get("previous_response_id"):  # earlier turns live server-side: nothing to check here
        return
    calls: set[tuple[str, str]] = set()
    for i, item in enumerate(_list(body.get("input"))):
        item = _dict(item)
        t = item.get("type")
        if t in OUTPUT_OF.values() and isinstance(item.get("call_id"), str):
            calls.add((t, item["call_id"]))
        elif t in OUTPUT_OF and (OUTPUT_OF[t], item.get("call_id")) not in calls:
            yield f"input[{i}].call_id", f"{item.get('call_id')!r} matches no earlier {OUTPUT_OF[t]} item"


CHECKS: dict[str, tuple[Check, ...]] = {
    "anthropic": (
        Check("max_tokens", _positive_int("max_tokens"), "Messages API: max_tokens is an integer ≥ 1"),
        Check("messages", _non_empty_list("messages"), "Messages API: at least one message"),
        Check("tool_result ids", _anthropic_orphan_results,
              "Messages API: each tool_result answers a tool_use of an earlier turn"),
    ),
    "openai": (
        Check("token limits", _positive_int("max_tokens", "max_completion_tokens"),
              "Chat Completions: max_tokens / max_completion_tokens are integers ≥ 1"),
        Check("messages", _non_empty_list("messages"), "Chat Completions: at least one message"),
        Check("tool message ids", _chat_orphan_results,
              "Chat Completions: a tool message answers a tool_calls id of an earlier assistant message"),
    ),
    "openai-responses": (
        Check("max_output_tokens", _positive_int("max_output_tokens"),
              "Responses API: max_output_tokens is a positive integer (the API itself wants ≥ 16)"),
        Check("call output ids", _responses_orphan_outputs,
              "Responses API: a function_call_output answers a function_call earlier in the input"),
    ),
}


def first_problem(protocol: str, body: dict) -> Problem | None:
    """The first thing in ``body`` that ``protocol`` forbids, as (JSON path, what is wrong)."""
    for check in CHECKS.get(protocol, ()):
        for problem in check.find(body):
            return problem
    return None
