"""Which turns a shadow (or a replay) can take: one place for the rules' load-time warning
and for the shadow sender's run-time refusal.

A shadow re-sends the client's whole request to another endpoint. Built today: Anthropic
Messages, Chat Completions and Responses clients, to endpoints of those three protocols
(through the translators where the protocols differ). Gemini clients and Gemini targets
are not shadowed yet: their model and stream flag travel in the URL, which the sender does
not build. Everything else a shadow refuses is what the translators refuse.
"""

from __future__ import annotations

# client protocol -> the request kind a shadow re-sends (token counts are never shadowed)
SHADOW_KINDS = {"anthropic": "messages", "openai": "chat", "openai-responses": "responses"}
# target protocol -> the request kind to ask of it
TARGET_KIND = dict(SHADOW_KINDS)


def shadow_refusal(client: str, target: str) -> str | None:
    """None when turns of ``client`` protocol can be shadowed to a ``target`` endpoint as far
    as the sender goes (the translators may still refuse a turn), else why not."""
    if client not in SHADOW_KINDS:
        return f"{client} turns are not shadowed or replayed yet"
    if target not in TARGET_KIND:
        return f"shadows and replays to {target} endpoints are not built yet (the model travels in the URL)"
    return None
