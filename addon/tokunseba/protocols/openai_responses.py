"""OpenAI Responses API (Codex CLI): paths, detection facts and stop reasons
(docs/dev/protocols.md C.1, C.3, E.3; docs/dev/clients.md §3), and the ChatGPT backend Codex uses when
signed in with ChatGPT: its turn paths, its login and credential headers, the limit headers of its
replies. Its codec is translate/openai_responses/.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from .. import jsonc
from ..sse import encode_event
from . import openai_chat
from .facts import (Check, json_schema, Counter, Problem, Protocol, RuleShape, count_of, d, lst, only, positive_int, relied_on,
                    role_user, typed)

PROTOCOL = "openai-responses"
HOSTS = ("api.openai.com",)  # shared with Chat Completions: the path decides
API_PREFIXES = ("/v1",)
# kind -> path under the API prefix. `GET /v1/responses` (Codex's WebSocket upgrade) is not a
# turn: detection only looks at POST. `/v1/responses/input_tokens` is its token counter.
# `/responses/compact` is Codex's remote compaction (codex-rs/codex-api/src/endpoint/compact.rs:
# POST `{base}/responses/compact`, a Responses body of model, instructions and the history as
# `input`; the reply is one JSON object whose `output` is the compacted history).
PATHS = {"responses": "/responses", "input_tokens": "/responses/input_tokens", "compact": "/responses/compact"}
QUERIES: dict[str, str] = {}  # kind -> query string the request URL needs
AUTH_HEADER = ("authorization", "Bearer {key}")
KEY_ENV = "OPENAI_API_KEY"
NATIVE_KINDS = {
    "compact": "a compaction's reply is the provider's own compacted history (an encrypted compaction item "
               "Codex keeps as its whole context), which no endpoint of another protocol makes",
}

# The ChatGPT backend: Codex signed in with ChatGPT (`codex login`, the default) sends the same
# Responses turns and compactions to the ChatGPT base URL https://chatgpt.com/backend-api/codex
# (codex-rs: the built-in provider's base URL under a ChatGPT login), with
# `Authorization: Bearer <ChatGPT access token>` and `ChatGPT-Account-ID`. Only these two paths
# are turns there: its model list (`/backend-api/codex/models`), account and settings checks
# (`/backend-api/wham/...`), usage polls, plugin and MCP calls (`/backend-api/ps/...`), token
# refresh (auth.openai.com) and telemetry pass untouched and unrecorded.
CHATGPT_HOST = "chatgpt.com"
CHATGPT_BASE_PATH = "/backend-api/codex"
BACKENDS = {CHATGPT_HOST: {kind: CHATGPT_BASE_PATH + PATHS[kind] for kind in ("responses", "compact")}}
ACCOUNT_HEADER = "chatgpt-account-id"  # the ChatGPT account a ChatGPT login's turn is for (Codex sends it)
CREDENTIAL_HEADERS = {
    ACCOUNT_HEADER: "names the ChatGPT account of a ChatGPT login (sent with its access token in authorization)",
}
LOGINS = {
    "chatgpt": "signed in with ChatGPT (`codex login`): the ChatGPT backend, its access token and account id",
    "api_key": "an API key (CODEX_API_KEY, OPENAI_API_KEY, a provider's env_key): no ChatGPT account",
}


def login_of(backend: str | None, headers: Mapping[str, str]) -> tuple[str, str]:
    """Which login a Responses turn is sent with, and why: ``chatgpt`` when it goes to the
    ChatGPT backend or names a ChatGPT account, else ``api_key``."""
    if backend in BACKENDS:
        return "chatgpt", f"sent to the ChatGPT backend ({backend})"
    if headers.get(ACCOUNT_HEADER):
        return "chatgpt", "names a ChatGPT account (ChatGPT-Account-ID header)"
    return "api_key", "not the ChatGPT backend, no ChatGPT account named"


# What the ChatGPT backend's replies report about the account's subscription windows
# (`x-codex-primary-used-percent`, `-window-minutes`, `-reset-at`, and `secondary`: read by Codex
# to warn its user; ../shared/user-needs.md 2026-12-07 §2): kept as they came, for issue 42.
LIMIT_HEADERS = ("x-codex-",)

# a response's end -> neutral stop reason (E.3): status "completed" ends the turn (a
# function_call item makes it tool_use), "incomplete" says why in incomplete_details.reason
INCOMPLETE_TO_STOP: dict[str, str] = {
    "max_output_tokens": "max_tokens",
    "content_filter": "refusal",
}
# terminal stream events: the response snapshot they carry holds status, output and usage
TERMINAL_EVENTS = ("response.completed", "response.incomplete", "response.failed")
# response.failed / error event code -> the HTTP status it stands for (a stream has none)
CODE_STATUS: dict[str, int] = {
    "context_length_exceeded": 400,
    "invalid_prompt": 400,
    "rate_limit_exceeded": 429,
    "insufficient_quota": 429,
    "usage_not_included": 429,
    "server_error": 500,
}
# neutral stop reason -> (response status, incomplete_details.reason) (E.3)
STOP_TO_STATUS: dict[str, tuple[str, str | None]] = {
    "end_turn": ("completed", None),
    "stop_sequence": ("completed", None),  # which sequence matched has no field: dropped, recorded
    "tool_use": ("completed", None),
    "pause_turn": ("completed", None),  # lossy, as for Chat
    "max_tokens": ("incomplete", "max_output_tokens"),
    "model_context_window_exceeded": ("incomplete", "max_output_tokens"),
    "refusal": ("incomplete", "content_filter"),
}
# error codes Codex acts on (docs/dev/protocols.md C.3): an upstream that said one keeps it
CODEX_ERROR_CODES = frozenset({"context_length_exceeded", "insufficient_quota", "usage_not_included",
                               "rate_limit_exceeded"})


def sse_error(code: str, message: str) -> bytes:
    """A mid-stream ``event: error`` (Codex and the SDK raise on it)."""
    return encode_event(jsonc.dumpb({"type": "error", "code": code, "message": message, "param": None}), "error")


OUTPUT_OF = {"function_call_output": "function_call", "custom_tool_call_output": "custom_tool_call"}

# Tool namespaces (Codex). Responses Lite folds every plain function and freeform tool into
# one namespace of this name (in an ``additional_tools`` input item); its calls come back
# with or without it and Codex runs them either way. Every other namespace (``clock``,
# ``collaboration``, an MCP server's ``mcp__<server>__``) is part of the call's address:
# Codex routes a call by the exact (namespace, name) pair and answers one that lost its
# namespace with "unsupported call: <name>".
DEFAULT_NAMESPACE = "functions"
NAMESPACE_JOIN = "__"  # a namespaced tool's flat name elsewhere: <namespace>__<name> (MCP's own style)


def flat_tool_name(namespace: str | None, name: str) -> str:
    """The flat name a tool of ``namespace`` has at an endpoint of another protocol: its own
    name in no namespace or the default one, else ``<namespace>__<name>`` (a namespace that
    already ends in ``__``, as MCP's do, is not joined twice)."""
    if not namespace or namespace == DEFAULT_NAMESPACE:
        return name
    return namespace + name if namespace.endswith(NAMESPACE_JOIN) else namespace + NAMESPACE_JOIN + name


REASONING_ITEM_KEYS = ("type", "id", "summary", "content", "encrypted_content")


def state_payload(blocks: Sequence[Any]) -> dict[str, Any] | None:
    """Reasoning items (id, summary, encrypted_content) as the endpoint made them, to go back
    before their calls (the stream decoder hands the whole item in the block's raw)."""
    items = []
    for b in blocks:
        it = (b.raw or {}).get("item") if b.kind == "thinking" else None
        if isinstance(it, dict) and it.get("type") == "reasoning" and isinstance(it.get("id"), str):
            items.append({k: it[k] for k in REASONING_ITEM_KEYS if it.get(k) is not None})
    return {"items": items} if items else None


def _answered_calls(body: dict[str, Any]) -> list[str]:
    """The call_ids of the trailing function_call_output (and custom tool output) items."""
    out: list[str] = []
    for item in reversed(lst(body.get("input"))):
        if not isinstance(item, dict) or item.get("type") not in ("function_call_output", "custom_tool_call_output"):
            break
        if isinstance(item.get("call_id"), str):
            out.append(item["call_id"])
    return out[::-1]


def _orphan_outputs(body: dict[str, Any]) -> Iterator[Problem]:
    if body.get("previous_response_id"):  # earlier turns live server-side: nothing to check here
        return
    calls: set[tuple[str, str]] = set()
    for i, item in enumerate(lst(body.get("input"))):
        item = d(item)
        t = item.get("type")
        if isinstance(t, str) and t in OUTPUT_OF.values() and isinstance(item.get("call_id"), str):
            calls.add((t, item["call_id"]))
        elif isinstance(t, str) and t in OUTPUT_OF and (OUTPUT_OF[t], item.get("call_id")) not in calls:
            yield f"input[{i}].call_id", f"{item.get('call_id')!r} matches no earlier {OUTPUT_OF[t]} item"


def _tool_count(body: dict[str, Any]) -> int:
    """The tools a request declares: Codex's "lite" models declare them in an input item, grouped
    in namespaces (a namespace counts its tools)."""
    def count(tools: Any) -> int:
        return sum(len(lst(d(t).get("tools"))) if d(t).get("type") == "namespace" else 1 for t in lst(tools))
    extra = [i for i in lst(body.get("input")) if d(i).get("type") == "additional_tools"]
    return count(body.get("tools")) + sum(count(d(i).get("tools")) for i in extra)


def _tool_names(body: dict[str, Any]) -> list[str]:
    """The names of the tools a request declares (a namespace's tools as ``namespace.name``; a
    hosted tool by its type)."""
    def names(tools: Any, prefix: str = "") -> list[str]:
        out: list[str] = []
        for t in map(d, lst(tools)):
            name = str(t["name"]) if isinstance(t.get("name"), str) else str(t.get("type"))
            out += names(t.get("tools"), f"{name}.") if t.get("type") == "namespace" else [prefix + name]
        return out
    extra = [i for i in lst(body.get("input")) if d(i).get("type") == "additional_tools"]
    return names(body.get("tools")) + [n for i in extra for n in names(d(i).get("tools"))]


# hosted tools: OpenAI runs them (docs/dev/protocols.md C); function, custom, namespace, local_shell,
# shell, computer_use_preview, tool_search (execution: client) and apply_patch run on the client
HOSTED_TOOLS = ("web_search", "web_search_preview", "web_search_2025_08_26", "web_search_preview_2025_03_11",
                "file_search", "code_interpreter", "image_generation", "mcp")


def _server_tools(body: dict[str, Any]) -> list[str]:
    """The hosted tools a request relies on (declared alone, or forced by tool_choice)."""
    tools = [*lst(body.get("tools")),
             *(t for i in lst(body.get("input")) if d(i).get("type") == "additional_tools" for t in lst(d(i).get("tools")))]
    declared = [(str(d(t).get("type")), d(t).get("type") in HOSTED_TOOLS) for t in tools]
    choice = body.get("tool_choice")
    forced = d(choice).get("type") if d(choice).get("type") in HOSTED_TOOLS else None
    return relied_on(declared, forced)


# POST /v1/responses/input_tokens (docs/dev/protocols.md C) -> {"object": "response.input_tokens", "input_tokens": N}
COUNTER = Counter(
    kind="input_tokens",
    name="OpenAI Responses input_tokens",
    request=only(("model", "input", "instructions", "tools", "tool_choice", "reasoning", "text",
                  "parallel_tool_calls", "previous_response_id", "conversation", "truncation")),
    read=count_of("input_tokens"),
    answer=lambda n: {"object": "response.input_tokens", "input_tokens": n},
)


def stop_now(message: str, reset_in_s: float, reset_at: float) -> tuple[int, dict[str, str], bytes]:
    """A reached cap: 429 ``usage_limit_reached``, the error Codex has for a used-up plan
    (codex-rs/core/src/api_bridge.rs reads ``error.type`` and ``error.resets_at``, epoch
    seconds, and shows when it resets; Codex never retries a 429), with ``x-should-retry:
    false`` for the SDKs."""
    body = jsonc.dumpb({"error": {"type": "usage_limit_reached", "code": "usage_limit_reached", "message": message,
                                  "param": None, "resets_at": int(reset_at + 0.999),
                                  "resets_in_seconds": max(0, int(reset_in_s + 0.999))}})
    return 429, {"x-should-retry": "false", "retry-after": str(max(61, int(reset_in_s + 0.999)))}, body


FACTS = Protocol(
    name=PROTOCOL,
    title="OpenAI Responses",
    clients="Codex CLI",
    hosts=HOSTS,
    api_prefixes=API_PREFIXES,
    paths=PATHS,
    queries=QUERIES,
    backends=BACKENDS,
    native_kinds=NATIVE_KINDS,
    turn_kinds=("responses", "responses"),
    count_kinds=frozenset({"input_tokens"}),
    counter=COUNTER,
    auth_header=AUTH_HEADER,
    key_env=KEY_ENV,
    version_headers={"openai-beta": "beta features the body uses (Codex: responses=experimental)"},
    credential_headers=CREDENTIAL_HEADERS,
    logins=LOGINS,
    login=login_of,
    limit_headers=LIMIT_HEADERS,
    upstream_error=openai_chat.error_reply,
    error_body=lambda status, message, etype: openai_chat.error_body(status, message),  # Chat's envelope
    stop_now=lambda message, reset_in_s, reset_at: stop_now(message, reset_in_s, reset_at),
    stream_error=lambda message: sse_error("server_error", message),
    counting=openai_chat.COUNTING,  # Responses usage shares Chat's definitions
    skipped_events=frozenset({"response.output_text.delta", "response.function_call_arguments.delta",
                              "response.reasoning_summary_text.delta"}),
    cache_prefix=("tools", "instructions", "input"),
    rule_shape=RuleShape(
        "input", ("content", "output"), typed("input_image"),
        lambda m: role_user(m) and m.get("type", "message") == "message", "content", typed("input_text"),
        tool_count=_tool_count,
        thinking=lambda body: bool(r := d(body.get("reasoning"))) and r.get("effort") != "none",
        role_of=lambda m: m.get("role") if m.get("type", "message") == "message" else "item",
        answered_calls=_answered_calls,
        is_document=typed("input_file"),
        server_tools=_server_tools,
        tool_names=_tool_names,
        output_schema=lambda body: json_schema(d(d(body.get("text")).get("format"))),
    ),
    checks=(
        Check("max_output_tokens", positive_int("max_output_tokens"),
              "Responses API: max_output_tokens is a positive integer (the API itself wants ≥ 16)"),
        Check("call output ids", _orphan_outputs,
              "Responses API: a function_call_output answers a function_call earlier in the input"),
    ),
    max_output_field="max_output_tokens",
    genai_provider="openai",
    effort_spellings={"reasoning.effort": ("the level itself", "Responses and Chat share OpenAI's levels")},
    effort_fields=(("reasoning",),),
    state_payload=state_payload,  # reasoning items, before their calls (reasoning/state.py)
    state_kind=lambda p: "reasoning item" + ("s" if len(p.get("items", ())) > 1 else ""),
)


def register_protocols(register: Callable[..., object]) -> None:
    """The built-in plugin (entry-point group ``tokunseba.protocols``): these facts and the codec,
    named for the registry to import on first use (``protocols/`` imports no codec)."""
    register(FACTS, "tokunseba.translate.openai_responses:CODEC")


# ---- Responses over WebSocket (Codex's built-in provider: an upgrade of GET …/responses with
# OpenAI-Beta: responses_websockets=…; one JSON text message per client turn, one per server event)
WS_CREATE = "response.create"  # the client's turn message: a Responses body with this ``type``
WS_WARMUP_FIELD = "generate"  # ``generate: false``: a warm-up, answered with an empty response, never a turn
WS_ONLY_FIELDS = ("type", "generate")  # message fields that are no part of an HTTPS body
# the server events that end a response (its usage is in response.completed's ``response.usage``)
WS_TERMINAL_EVENTS = frozenset({"response.completed", "response.failed", "response.incomplete", "error"})
