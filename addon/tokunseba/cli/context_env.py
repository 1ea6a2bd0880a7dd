"""`tokunseba env --rules FILE`: the Claude Code settings that keep its context within the
smallest context window a rule may send its main turns to.

Claude Code assumes a 200k-token window for a model it does not know, so a main turn routed to
a local model with a 4k or 32k window fails once the conversation outgrows it. It reads its real
window from ``CLAUDE_CODE_MAX_CONTEXT_TOKENS`` and compacts by ``CLAUDE_CODE_AUTO_COMPACT_WINDOW``
(``CLAUDE_SETTINGS``). A route may take Claude Code's main turns unless its ``when`` rules them out
(``client`` without anthropic, ``background: true``, ``agent: subagent``, ``tools: false``: a main
turn always offers tools); its ``to:`` and its ``earn:`` candidate may both serve them. The
window is the endpoint's ``context_tokens:`` (never guessed; `models --probe` reads a
llama-server's). Reads the rules; no network.
"""

from __future__ import annotations

from typing import Any

from ..protocols import anthropic

CLAUDE_CODE_PROTOCOL = anthropic.PROTOCOL  # the protocol Claude Code speaks

# the Claude Code settings a window sets, each with why
CLAUDE_SETTINGS: tuple[tuple[str, str], ...] = (
    ("CLAUDE_CODE_MAX_CONTEXT_TOKENS", "the window Claude Code assumes (200k for a model it does not know)"),
    ("CLAUDE_CODE_AUTO_COMPACT_WINDOW", "the window it compacts the conversation against"),
)


def _may_take_main_turns(when: dict[str, Any]) -> bool:
    clients = when.get("client")
    return ((clients is None or CLAUDE_CODE_PROTOCOL in clients) and when.get("background") is not True
            and when.get("agent") != "subagent" and when.get("tools") is not False)


def main_turn_targets(rules: Any) -> list[tuple[str, Any]]:
    """(route, endpoint) for each endpoint a route may send Claude Code's main turns to."""
    out = []
    for r in rules.routes:
        if not _may_take_main_turns(r.when):
            continue
        for name in (r.to, r.earn.to if r.earn is not None else None):
            if name is not None and name in rules.endpoints:
                out.append((r.name, rules.endpoints[name]))
    return out


def context_lines(rules: Any) -> list[str]:
    targets = main_turn_targets(rules)
    said = [(route, ep) for route, ep in targets if ep.context_tokens]
    unsaid = sorted({f"{ep.name} (route {route})" for route, ep in targets if not ep.context_tokens and not ep.builtin})
    out = []
    if said:
        route, ep = min(said, key=lambda t: t[1].context_tokens)
        out.append(f"# Claude Code: its main turns may go to {ep.name} (route {route}), whose window is "
                   f"{ep.context_tokens} tokens (context_tokens:), the smallest a rule sends them to:")
        out += [f"export {name}={ep.context_tokens}  # {why}" for name, why in CLAUDE_SETTINGS]
    if unsaid:
        out.append(f"# Claude Code's main turns may also go to {', '.join(unsaid)}, whose window the rules do not say "
                   "(give the endpoint context_tokens:; `tokunseba models --probe` reads a llama-server's)")
    return out
