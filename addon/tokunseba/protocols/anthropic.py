"""Anthropic Messages: the protocol's facts as data (docs/dev/protocols.md A).

Error types by HTTP status (A.7, E.6), the error envelope (as a JSON body and as an
``event: error`` SSE event), the API version tokunseba sends, and the tool-id rule.
"""

from __future__ import annotations

import re

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from .. import jsonc
from ..neutral import (  # the neutral error vocabulary is Anthropic-named
    ERROR_TYPES, STATUS_FOR_TYPE, UpstreamError, error_type_for_status, status_for_type,
)
from ..neutral import Counting, Tokens, Usage, count, sub
from ..sse import encode_event
from .failures import is_context_window
from .facts import (Check, json_schema, Counter, Problem, Protocol, RuleShape, count_of, d, lst, non_empty_list, only, relied_on,
                    positive_int, role_user, typed)

PROTOCOL = "anthropic"
# The anthropic-version tokunseba sends to an Anthropic endpoint when the client sent none
# (a translated OpenAI client; a models probe).
ANTHROPIC_VERSION = "2023-06-01"
# extended thinking: budget_tokens >= 1024 and < max_tokens; with it, temperature only 1, top_p >= 0.95
MIN_THINKING_BUDGET = 1024
THINKING_MIN_TOP_P = 0.95
SSE_PING = b'event: ping\ndata: {"type": "ping"}\n\n'  # the stream's keep-alive, as the API sends it

# A tool_use id Anthropic accepts (A.3); anything else is a 400 on the next turn.
TOOL_ID_RE = re.compile(r"[a-zA-Z0-9_-]+")  # use fullmatch: "$" would let a trailing "\n" through

# Claude Code auto-compacts when the lower-cased error message contains one of these (A.7).
PROMPT_TOO_LONG = "prompt is too long"


# status changes from another protocol's error (everything else keeps its status)
STATUS_FROM_OTHERS: dict[int, int] = {503: 529}  # Claude Code classifies 529 as overloaded


def from_upstream_error(err: UpstreamError) -> tuple[int, str, str]:
    """(status, Anthropic error type, message) for an error another protocol's upstream gave.
    A context overflow becomes a 400 ``invalid_request_error`` saying "prompt is too long"
    (the phrase Claude Code auto-compacts on), the upstream's text kept."""
    if is_context_window(err):
        msg = err.message
        if PROMPT_TOO_LONG not in msg.lower():
            msg = f"{PROMPT_TOO_LONG}: {msg}"
        return 400, "invalid_request_error", msg
    status = STATUS_FROM_OTHERS.get(err.status, err.status)
    return status, error_type_for_status(status), err.message


def error_reply(err: UpstreamError) -> tuple[int, bytes]:
    """An upstream error of another protocol as (status, Anthropic error body)."""
    status, etype, message = from_upstream_error(err)
    return status, error_body(status, message, etype)


def tool_id_problem(tool_id: object) -> str | None:
    """Why Anthropic would reject this tool_use id, or None when it is valid."""
    if isinstance(tool_id, str) and TOOL_ID_RE.fullmatch(tool_id):
        return None
    return (
        f"the upstream's tool call id {tool_id!r} is not a valid Anthropic tool_use id "
        f"(it must match ^{TOOL_ID_RE.pattern}$); it would be rejected on the next turn, so it is not forwarded"
    )


def error_envelope(etype: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": etype, "message": message}}


def error_body(status: int, message: str, etype: str | None = None) -> bytes:
    """A JSON error body: ``{"type":"error","error":{"type":…,"message":…}}``."""
    return jsonc.dumpb(error_envelope(etype or error_type_for_status(status), message))


# Claude Code gives up at once on a 429 whose retry-after exceeds 60 s, and the SDKs honour
# x-should-retry: false (a 429 without them is sent again and again: 11 times over 190 s, measured)
STOP_MIN_RETRY_AFTER_S = 61


def stop_now(message: str, reset_in_s: float, reset_at: float) -> tuple[int, dict[str, str], bytes]:
    """A reached cap: 429 ``rate_limit_error`` with ``retry-after`` (≥ 61 s: the seconds to the
    reset) and ``x-should-retry: false``."""
    wait = max(STOP_MIN_RETRY_AFTER_S, int(reset_in_s + 0.999))
    return 429, {"retry-after": str(wait), "x-should-retry": "false"}, error_body(429, message, "rate_limit_error")


def sse_error(etype: str, message: str) -> bytes:
    """An ``event: error`` SSE event carrying the same envelope."""
    return encode_event(jsonc.dumpb(error_envelope(etype, message)), "error")


# Anthropic-defined tools its client runs (docs/dev/protocols.md A: bash_*, text_editor_*, computer_*,
# memory_*); every other typed tool (web_search_*, web_fetch_*, code_execution_*, tool_search_tool_*)
# runs on the provider
_CLIENT_RUN_TYPES = ("bash_", "text_editor_", "computer_", "memory_")


def _server_tools(body: dict[str, Any]) -> list[str]:
    """The provider-run tools a request relies on (Claude Code's WebSearch: web_search alone)."""
    declared = []
    for t in lst(body.get("tools")):
        ttype = d(t).get("type")
        run = isinstance(ttype, str) and ttype != "custom" and not ttype.startswith(_CLIENT_RUN_TYPES)
        declared.append((str(d(t).get("name") or ttype), run))
    choice = d(body.get("tool_choice"))
    return relied_on(declared, choice.get("name") if choice.get("type") == "tool" else None)


def _answered_calls(body: dict[str, Any]) -> list[str]:
    """The tool_use ids the last (user) message's tool_result blocks answer."""
    msgs = lst(body.get("messages"))
    last = d(msgs[-1]) if msgs else {}
    return [b["tool_use_id"] for b in lst(last.get("content")) if isinstance(b, dict) and b.get("type") == "tool_result"
            and isinstance(b.get("tool_use_id"), str)] if last.get("role") == "user" else []


def _known(call_id: object, calls: set[str]) -> bool:
    return isinstance(call_id, str) and call_id in calls  # an id of another type (a list…) is never known


def _orphan_results(body: dict[str, Any]) -> Iterator[Problem]:
    calls: set[str] = set()
    for i, m in enumerate(lst(body.get("messages"))):
        for j, block in enumerate(lst(d(m).get("content"))):
            block = d(block)
            if block.get("type") in ("tool_use", "server_tool_use") and isinstance(block.get("id"), str):
                calls.add(block["id"])
            elif block.get("type") == "tool_result" and not _known(block.get("tool_use_id"), calls):
                yield (f"messages[{i}].content[{j}].tool_use_id",
                       f"{block.get('tool_use_id')!r} matches no earlier tool_use block")


def state_payload(blocks: Sequence[Any]) -> dict[str, Any] | None:
    """Signed thinking / redacted thinking, first in the assistant message (unsigned is not kept)."""
    out: list[dict[str, Any]] = []
    for b in blocks:
        if b.kind == "thinking" and b.signature:  # signed by the upstream itself
            out.append({"type": "thinking", "thinking": b.text, "signature": b.signature})
        elif b.kind == "redacted_thinking" and isinstance((b.raw or {}).get("data"), str):
            out.append({"type": "redacted_thinking", "data": b.raw["data"]})
    return {"blocks": out} if out else None


# POST /v1/messages/count_tokens (docs/dev/protocols.md A): a turn's body without max_tokens, stream and the
# sampling keys -> {"input_tokens": N}
# output_config.effort (adaptive thinking) -> the neutral effort level (FACTS.effort_spellings)
EFFORT_LEVELS = {"low": "low", "medium": "medium", "high": "high", "max": "xhigh"}


# ---- structured output: output_config.format (docs/dev/protocols.md F) ----
# output_config.format = {"type": "json_schema", "schema": {...}}: the reply's text is JSON following the
# schema. Anthropic's structured outputs take a subset of JSON Schema (platform.claude.com/docs/en/build-
# with-claude/structured-outputs, "JSON Schema limitations"): these keywords are not supported, minItems
# only 0 or 1, and every object closed (additionalProperties false; anything else is not supported).
OUTPUT_FORMAT_TYPES = ("json_schema",)
OUTPUT_SCHEMA_UNSUPPORTED = frozenset({
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "minLength", "maxLength", "maxItems", "minProperties", "maxProperties", "uniqueItems",
})


def output_schema_takes(keyword: str, value: Any) -> bool:
    """Whether Anthropic's structured outputs take ``keyword: value`` in a schema."""
    return keyword not in OUTPUT_SCHEMA_UNSUPPORTED and not (keyword == "minItems" and value not in (0, 1))


# ---- usage: how Anthropic counts (docs/dev/protocols.md E.4) ----
# input_tokens excludes the cached tokens (cache_read_input_tokens, cache_creation_input_tokens);
# output_tokens_details.thinking_tokens is the reasoning part of output_tokens where a server reports it.
COUNTING_NAME = "anthropic"


def usage_fields(r: dict[str, Any]) -> dict[str, int | None]:
    """A usage object's numbers in Anthropic's own counting (input without the cache)."""
    return {"input": count(r.get("input_tokens")), "output": count(r.get("output_tokens")),
            "cache_read": count(r.get("cache_read_input_tokens")),
            "cache_write": count(r.get("cache_creation_input_tokens")),
            "reasoning": count(sub(r, "output_tokens_details").get("thinking_tokens"))}


def usage_tokens(r: dict[str, Any]) -> Tokens:
    """On the common base: the input re-based to include the cache; the total is arithmetic
    (Anthropic reports none)."""
    uncached, out = count(r.get("input_tokens")), count(r.get("output_tokens"))
    cr, cw = count(r.get("cache_read_input_tokens")), count(r.get("cache_creation_input_tokens"))
    inp = None if uncached is None else uncached + (cr or 0) + (cw or 0)
    return {"input": inp, "uncached": uncached, "output": out, "cache_read": cr, "cache_write": cw,
            "reasoning": count(sub(r, "output_tokens_details").get("thinking_tokens")),
            "total": inp + out if inp is not None and out is not None else None, "reasoning_detail": True}


def usage_object(u: Usage) -> dict[str, Any]:
    """The Anthropic usage object a client sees (only reported fields): an Anthropic report as
    it came; another re-based (its input without the cached tokens)."""
    if u.counting == COUNTING_NAME:
        return dict(u.reported)
    if (plain := u.plain()) is not None:  # input and output alone: as below, sooner
        return {"input_tokens": max(plain[0], 0), "output_tokens": plain[1]}
    t = u.tokens()
    out: dict[str, Any] = {}
    if (v := t["uncached"]) is not None:
        out["input_tokens"] = v
    if (v := t["cache_write"]) is not None:
        out["cache_creation_input_tokens"] = v
    if (v := t["cache_read"]) is not None:
        out["cache_read_input_tokens"] = v
    if (v := t["output"]) is not None:
        out["output_tokens"] = v
    if (v := t["reasoning"]) is not None and t["reasoning_detail"]:
        out["output_tokens_details"] = {"thinking_tokens": v}
    return out


COUNTING = Counting(COUNTING_NAME, input_includes_cached=False, fields=usage_fields, tokens=usage_tokens,
                    write=usage_object)


COUNTER = Counter(
    kind="count_tokens",
    name="Anthropic count_tokens",
    request=only(("model", "messages", "system", "tools", "tool_choice", "thinking", "mcp_servers",
                  "context_management")),
    read=count_of("input_tokens"),
    answer=lambda n: {"input_tokens": n},
)


FACTS = Protocol(
    name=PROTOCOL,
    title="Anthropic Messages",
    clients="Claude Code, the Anthropic SDKs",
    hosts=("api.anthropic.com",),
    api_prefixes=("/v1",),
    paths={"messages": "/messages", "count_tokens": "/messages/count_tokens"},
    turn_kinds=("messages", "messages"),
    count_kinds=frozenset({"count_tokens"}),
    counter=COUNTER,
    auth_header=("x-api-key", "{key}"),
    key_env="ANTHROPIC_API_KEY",
    builtin_url="https://api.anthropic.com/v1",
    version_headers={"anthropic-version": "API version the body is written for",
                     "anthropic-beta": "beta features the body uses"},
    kept_query={"beta": "the SDK's beta namespace (?beta=true)"},
    sent_headers={"anthropic-version": ANTHROPIC_VERSION},
    upstream_error=error_reply,
    error_body=lambda status, message, etype: error_body(status, message, etype),
    stream_error=lambda message: sse_error("api_error", message),
    stop_now=stop_now,
    counting=COUNTING,
    terminal_event="message_stop",  # the stop reason comes in message_delta; complete only with this
    skipped_events=frozenset({"content_block_delta"}),
    cache_prefix=("tools", "system", "messages"),
    rule_shape=RuleShape(
        "messages", ("content",), typed("image"), role_user, "content", typed("text"),
        tool_count=lambda body: len(lst(body.get("tools"))),
        thinking=lambda body: d(body.get("thinking")).get("type") in ("enabled", "adaptive"),
        answered_calls=_answered_calls,
        is_document=typed("document"),
        server_tools=_server_tools,
        tool_names=lambda body: [t["name"] for t in lst(body.get("tools")) if isinstance(d(t).get("name"), str)],
        # Claude Code's title turn: output_config.format {type: json_schema, schema}
        output_schema=lambda body: json_schema(d(d(body.get("output_config")).get("format"))),
    ),
    checks=(
        Check("max_tokens", positive_int("max_tokens"), "Messages API: max_tokens is an integer ≥ 1"),
        Check("messages", non_empty_list("messages"), "Messages API: at least one message"),
        Check("tool_result ids", _orphan_results,
              "Messages API: each tool_result answers a tool_use of an earlier turn"),
    ),
    max_output_field="max_tokens",
    max_output_required=True,  # a request without max_tokens is a 400
    state_payload=state_payload,
    genai_provider="anthropic",
    effort_spellings={
        "thinking {type: enabled, budget_tokens: N}": (
            "level_for_budget(N); written as BUDGETS[level], at most max_tokens // 2 (dropped, recorded, when that "
            "is below 1024)", "Anthropic requires 1024 <= budget_tokens < max_tokens and counts thinking inside "
            "max_tokens: half stays for the answer and its tool calls; the client's max_tokens is never raised"),
        "thinking {type: disabled}": (
            "names no level (dropped, recorded); written for none",
            "no 'off' every target takes (gpt-5 and non-reasoning models reject 'none', Gemini 2.5 Pro and 3 a 0 "
            "budget): the target's default applies, never a level made up; Anthropic's own default is no thinking"),
        "thinking {type: adaptive} + output_config.effort": (
            "low / medium / high as named, max -> xhigh (EFFORT_LEVELS); adaptive without an effort names no level",
            "adaptive thinking lets the model choose how much within the effort"),
    },
    effort_fields=(("thinking",), ("output_config", "effort")),
    state_kind=lambda p: "+".join(sorted({b["type"] for b in p.get("blocks", ())})),
)


def register_protocols(register: Callable[..., object]) -> None:
    """The built-in plugin (entry-point group ``tokunseba.protocols``): these facts and the codec,
    named for the registry to import on first use (``protocols/`` imports no codec)."""
    register(FACTS, "tokunseba.translate.anthropic:CODEC")
