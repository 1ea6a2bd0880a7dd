"""What the pinned clients send, measured, and the routes that can never match one of them, or
whose endpoint cannot hold them.

``KINDS``: one row per kind of model request a pinned client makes, as measured through the
proxy (``tokunseba_ledger_bodies=true``; README, "Which turns are easy today"): its protocol,
its model (None: whatever model the user picks), whether it declares tools, asks for
thinking, and the smallest body seen. ``never_matching(rules)`` gives a ``tokunseba check``
warning (``FILE:LINE``) for each route whose ``client`` takes a pinned client's protocol but
whose conditions no kind of that client's requests meets: such a route never sees that
client's turns (a newcomer's "easy turns" route that Claude Code never sends anything to).
``too_big(rules)`` gives one for each route whose endpoint says its ``context_tokens`` and a kind
of a client's requests the route can match whose smallest measured prompt is larger: every such
turn is answered with the server's context error there and fails over (all of Codex's turns on
the 4096-token local server the demo starts by default).

Only the conditions a request kind fixes are judged (client, model when the client fixes
it, tools, thinking, images, max_request_bytes, smallest size); the others (header,
last_user_matches, session, agent, background) depend on the conversation and are taken as
able to match. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from .facts import PREDICATES, TurnFacts
from .rules import OnFailure, Route, Rules, Unmatched


@dataclass(frozen=True)
class Kind:
    client: str  # the client, as the README names it
    protocol: str  # its protocol (rules' `client:`)
    what: str  # which request, and how to make the client send it
    model: str | None  # None: the model the user picks (--model / -m / -c model=)
    tools: bool
    thinking: bool
    min_bytes: int  # the smallest body measured
    # the smallest prompt measured, in tokens (llama-server's count for gemma-3-270m, through the
    # proxy, unless said otherwise); None: not measured
    min_prompt_tokens: int | None = None


CLAUDE_CODE, GEMINI_CLI, CODEX = "Claude Code 2.1.197", "Gemini CLI 0.61.0", "Codex 0.171.0"
KINDS: tuple[Kind, ...] = (
    # `claude -p "…"`: 48.5 KB, 9 tools, thinking adaptive; interactive 54.3 KB, 10 tools
    Kind(CLAUDE_CODE, "anthropic", "main turn", None, True, True, 48_482, 12_000),
    # `claude -p --tools "" --system-prompt "…" "…"`: 1.2 KB, thinking still on
    Kind(CLAUDE_CODE, "anthropic", "main turn with --tools \"\" --system-prompt", None, False, True, 1_191, 147),
    # the same with --model haiku and MAX_THINKING_TOKENS=0: thinking disabled, 1.1 KB
    Kind(CLAUDE_CODE, "anthropic", "main turn with --tools \"\" --system-prompt and MAX_THINKING_TOKENS=0", None,
         False, False, 1_105, 140),
    # with a first prompt (interactive, or -p alongside its main turn): Haiku, tools [], thinking disabled, 2.2 KB
    Kind(CLAUDE_CODE, "anthropic", "session title", "claude-haiku-4-5-20251001", False, False, 2_200, 383),
    # `gemini -p "…"` without -m: the router's flash-lite call, no tools (792 prompt tokens)
    Kind(GEMINI_CLI, "gemini", "router call", "gemini-3.5-flash-lite", False, False, 3_000, 792),
    # its main turns: its tools and a 23 KB system prompt (5,114 prompt tokens in an empty folder)
    Kind(GEMINI_CLI, "gemini", "main turn", None, True, False, 23_000, 5_114),
    # `codex exec "…"`: Responses, 74.3 KB (default model, tools inside `input`; 6,894 prompt tokens),
    # 38.8 KB with gpt-5.5 (10 tools; 5,904 prompt tokens)
    Kind(CODEX, "openai-responses", "main turn", None, True, True, 38_763, 5_904),
)
JUDGED = ("client", "model", "tools", "thinking", "images", "max_request_bytes")

# what to do about a route a client's turns never match: the step that makes one of its turns match
NEXT: dict[str, str] = {
    CLAUDE_CODE: "`claude -p --tools \"\" --system-prompt \"…\" \"…\"` sends a 1.2 KB tool-less main turn, and its "
                 "session title is Haiku with no tools and thinking off (rules/examples/easy-turns-local.yaml)",
    GEMINI_CLI: "without -m its router call is a tool-less flash-lite turn (rules/examples/gemini-cli-easy-turns.yaml)",
    CODEX: "Codex always sends tools and 38.8 KB or more (-c model=gpt-5.5; 74 KB, about 7k tokens, with its default "
           "model): leave out tools: false and max_request_bytes, and give a local endpoint the context it needs "
           "(scripts/localmodel.sh start --ctx 16384; rules/examples/codex-local.yaml), or route it to another endpoint",
}


# what to do about a route whose endpoint cannot hold a client's turns
ROOM: dict[str, str] = {
    CLAUDE_CODE: "keep its main turns with the provider (tools: false, max_request_bytes), as "
                 "rules/examples/easy-turns-local.yaml does, or give the endpoint a model with a larger context",
    GEMINI_CLI: "a larger context (scripts/localmodel.sh start --ctx 16384, and say context_tokens: 16384; "
                "rules/examples/gemini-cli-local.yaml), or route its main turns to another endpoint",
    CODEX: "a larger context (scripts/localmodel.sh start --ctx 16384, and say context_tokens: 16384; "
           "rules/examples/codex-local.yaml), or another endpoint; -c model=gpt-5.5 is still 5,904 tokens",
}


def _facts(k: Kind) -> TurnFacts:
    return TurnFacts(client=k.protocol, model=k.model, tools=k.tools, thinking=k.thinking, images=False,
                     request_bytes=k.min_bytes, last_user_text=None, headers={}, tool_count=1 if k.tools else 0)


def can_match(route: Route, k: Kind) -> bool:
    """Whether some request of kind ``k`` meets ``route``'s conditions (those ``k`` fixes)."""
    facts = _facts(k)
    for key, want in route.when.items():
        if key not in JUDGED or (key == "model" and k.model is None):
            continue
        if not PREDICATES[key].check(want, facts)[0]:
            return False
    return True


def never_matching(rules: Rules) -> list[str]:
    """A warning per route and pinned client whose protocol the route takes but none of whose
    requests can match it."""
    out = []
    clients = dict.fromkeys(k.client for k in KINDS)
    for route in rules.routes:
        wanted = route.when.get("client")
        for client in clients:
            kinds = [k for k in KINDS if k.client == client]
            if wanted is not None and kinds[0].protocol not in wanted:
                continue
            if wanted is None and not any(key in route.when for key in JUDGED):
                continue  # no condition a request kind fixes: it matches whatever comes
            if any(can_match(route, k) for k in kinds):
                continue
            sent = "; ".join(f"{k.what}: {'tools' if k.tools else 'no tools'}, thinking {'on' if k.thinking else 'off'}, "
                             f"{k.min_bytes / 1000:.1f} KB or more" + (f", model {k.model}" if k.model else "")
                             for k in kinds)
            out.append(f"{rules.source}:{route.line}: warning: route {route.name!r} can never match {client}'s "
                       f"turns (it sends {sent}; README: \"Which turns are easy today\"); next: {NEXT[client]}")
    return out


def too_big(rules: Rules) -> list[str]:
    """A warning per route and kind of a pinned client's requests that the route can match but
    whose smallest measured prompt is larger than its endpoint's ``context_tokens``."""
    out = []
    for route in rules.routes:
        ep = rules.endpoints.get(route.to) if route.to else None
        if ep is None or ep.context_tokens is None:
            continue
        wanted = route.when.get("client")
        for k in KINDS:
            if k.min_prompt_tokens is None or k.min_prompt_tokens <= ep.context_tokens:
                continue
            if (wanted is not None and k.protocol not in wanted) or not can_match(route, k):
                continue
            then = ("the client gets that error (on_failure: error)" if route.on_failure == OnFailure.ERROR else
                    "each such turn fails over to the next route whose when matches, then unmatched: "
                    + ("refused" if rules.unmatched == Unmatched.REFUSE else "its provider"))
            out.append(f"{rules.source}:{route.line}: warning: route {route.name!r} → {ep.name}: {k.client}'s {k.what} "
                       f"({k.min_prompt_tokens:,} prompt tokens or more, measured) cannot fit endpoint {ep.name}'s "
                       f"context_tokens {ep.context_tokens:,}: the server answers a context error and {then}; "
                       f"next: {ROOM[k.client]}")
    return out
