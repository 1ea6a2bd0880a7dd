"""Provider state put back on a neutral assistant message (docs/dev/architecture.md rule 1, §4b).

``ProviderState`` is what an endpoint itself produced on an earlier turn of a conversation
and the client's protocol could not hand back (DeepSeek's ``reasoning_content``, Anthropic's
signed thinking blocks, Gemini's ``thoughtSignature``s). It is attached to the neutral
assistant message under the key ``PROVIDER_STATE`` only by the restore step
(``reasoning.state.restore``), only when the request goes to the endpoint and model that
produced it, and only the target protocol's encoder reads it; its ``payload`` is already in
that protocol's wire form:

- ``openai``: ``{"field": "reasoning_content" | "reasoning", "text": str}`` — set on the
  assistant message (DeepSeek answers 400 without it in a tool loop);
- ``anthropic``: ``{"blocks": [thinking / redacted_thinking blocks, signatures verbatim]}``
  — first in that assistant message;
- ``gemini``: ``{"signatures": {tool call id: thoughtSignature}}`` — on those
  ``functionCall`` parts, instead of the skip value;
- ``openai-responses``: ``{"items": [reasoning items: id, summary, encrypted_content]}`` —
  before that assistant turn's message and ``function_call`` items.

A client's JSON can never produce a ``ProviderState`` (it is not a JSON value), so nothing a
client sends is taken for restored state: an encoder that finds anything else under the key
treats it as the unknown field it is.
"""

from __future__ import annotations

from typing import Any

from dataclasses import dataclass

PROVIDER_STATE = "provider_state"


@dataclass(frozen=True, slots=True)
class ProviderState:
    protocol: str  # the protocol of the endpoint that produced it (the only one that may read it)
    payload: dict[str, Any]  # that protocol's wire pieces (see the module docstring)
    source: str  # the request id of the turn that captured it (for the record)


def state_for(message: dict[str, Any], protocol: str) -> ProviderState | None:
    """The restored state on a neutral message for an encoder of ``protocol``, if any."""
    st = message.get(PROVIDER_STATE)
    return st if isinstance(st, ProviderState) and st.protocol == protocol else None
