"""Translation between provider protocols: requests, whole replies and streams.

Protocol names used everywhere: ``anthropic`` (Messages), ``openai`` (Chat Completions),
``openai-responses`` (Responses API), ``gemini``.
"""

from __future__ import annotations

PROTOCOLS = ("anthropic", "openai", "openai-responses", "gemini")

# (client protocol, target protocol) pairs that have a translator. Same-protocol pairs
# need none (pass-through or retarget). Everything else is refused before sending.
TRANSLATABLE: frozenset[tuple[str, str]] = frozenset({
    ("anthropic", "openai"),  # Claude Code -> a local or OpenAI-compatible server
    ("openai", "anthropic"),  # Chat Completions tools -> an Anthropic endpoint
    ("openai-responses", "openai"),  # Codex -> a Chat-only (local) server
    ("gemini", "anthropic"),  # Gemini CLI / google-genai -> an Anthropic endpoint
    ("gemini", "openai"),  # Gemini CLI's easy turns -> a local Chat server
    ("anthropic", "gemini"),  # Claude Code -> a Gemini endpoint
    ("openai", "gemini"),  # Chat clients -> a Gemini endpoint
    ("openai-responses", "gemini"),  # Codex -> a Gemini endpoint
})


def pair_refusal(client: str, target: str) -> str | None:
    """None when a turn of ``client`` protocol can go to a ``target`` endpoint, else why not."""
    if client == target or (client, target) in TRANSLATABLE:
        return None
    return f"no translator from {client} to {target}"
