"""Which turns a shadow (or a replay) can take: one place for the rules' load-time warning
(here, below the rules, so routing never imports shadow/), for the adapter's choice of turns
to shadow and for the shadow sender's run-time refusal.

A shadow re-sends the client's whole request to another endpoint (through the translators
where the protocols differ), asking the target protocol's whole-reply kind (its facts'
``turn_kinds``). Token counts are never shadowed. A protocol whose model and stream flag
travel in the URL (Gemini: its facts' ``model_in_path``) is neither shadowed nor a shadow
target yet: the sender does not build such URLs. Everything else a shadow refuses is what
the translators refuse.
"""

from __future__ import annotations

from .. import protocols


def shadow_kind(client: str) -> str | None:
    """The request kind a shadow of a ``client`` turn re-sends, or None when not shadowed."""
    facts = protocols.find(client)
    if facts is None or facts.model_in_path:
        return None
    return facts.turn_kind(False)


def shadowable(client: str, kind: str) -> bool:
    """Whether a ``client`` request of ``kind`` is a turn worth shadowing."""
    return kind != "" and kind == shadow_kind(client)


def target_kind(target: str) -> str | None:
    """The request kind to ask of a ``target`` endpoint, or None when it cannot be a shadow's."""
    return shadow_kind(target)


def shadow_refusal(client: str, target: str) -> str | None:
    """None when turns of ``client`` protocol can be shadowed to a ``target`` endpoint as far
    as the sender goes (the translators may still refuse a turn), else why not."""
    if shadow_kind(client) is None:
        return f"{client} turns are not shadowed or replayed yet"
    if target_kind(target) is None:
        return f"shadows and replays to {target} endpoints are not built yet (the model travels in the URL)"
    return None
