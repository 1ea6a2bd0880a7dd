"""The protocol registry: every protocol tokunseba speaks, one module of facts each.

``protocols/<name>.py`` holds all of one protocol's facts outside its codec (hosts and paths,
auth header, error envelope, usage counting, stream end and keep-alive style, version headers,
rule shape, validation checks, maximum output field...) as a ``facts.Protocol`` named
``FACTS``; this registry lists them. Detection, endpoints, rules, credentials, validation,
the stream watch, the ledger, shadows, replay, prices and the CLI read the registry, never a
table of their own, so a protocol added here (and its codec in ``translate.CODECS``) is
known everywhere.

    from tokunseba import protocols
    protocols.get("gemini").usage_key          # "usageMetadata"
    protocols.NAMES                            # a live view: anthropic, openai, ...
    protocols.register(facts) / unregister(name)

Contract: data only, no I/O; ``protocols/`` imports no codec (translate/) and no adapter.
"""

from __future__ import annotations

from collections.abc import Iterator

from . import anthropic, gemini, openai_chat, openai_responses
from .facts import Check, Counter, Problem, Protocol, RuleShape

__all__ = ["Protocol", "Counter", "RuleShape", "Check", "Problem", "REGISTRY", "NAMES", "get", "find", "register",
           "unregister", "generation", "all_protocols", "FALLBACK", "for_errors", "counting"]

REGISTRY: dict[str, Protocol] = {}
NAMES = REGISTRY.keys()  # a live view: in registration order
_generation = [0]  # bumped on every change, so derived tables (detect's regexes) rebuild


def register(facts: Protocol) -> Protocol:
    """Add (or replace) a protocol's facts."""
    REGISTRY[facts.name] = facts
    _generation[0] += 1
    return facts


def unregister(name: str) -> None:
    """Remove a protocol (tests that register one of their own)."""
    if REGISTRY.pop(name, None) is not None:
        _generation[0] += 1


def generation() -> int:
    """A number that changes whenever the registry does."""
    return _generation[0]


def get(name: str) -> Protocol:
    """The facts of a registered protocol; ``KeyError`` naming the known ones otherwise."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown protocol {name!r} (known: {', '.join(REGISTRY)})") from None


def find(name: str | None) -> Protocol | None:
    """The facts of ``name``, or None when no such protocol is registered."""
    return REGISTRY.get(name) if name is not None else None


# The envelope for an error whose client protocol is not known (a request that failed before
# detection could say): OpenAI's ``{"error": {...}}``, which most SDKs and agents read. One
# choice for whole errors and stream error events alike.
FALLBACK = "openai"


def for_errors(name: str | None) -> Protocol:
    """The facts whose error envelope a client of ``name`` gets: its own, else ``FALLBACK``'s."""
    return REGISTRY.get(name or "") or REGISTRY[FALLBACK]


def counting(name: str | None) -> str | None:
    """The usage counting convention ``name`` stands for: a protocol's (Responses counts as
    Chat), or a convention's own name (what the ledger's ``usage_protocol`` holds); None when
    neither."""
    if name is None:
        return None
    if (facts := REGISTRY.get(name)) is not None:
        return facts.usage_counting
    return name if any(p.usage_counting == name for p in REGISTRY.values()) else None


def all_protocols() -> Iterator[Protocol]:
    return iter(list(REGISTRY.values()))


for _m in (anthropic, openai_chat, openai_responses, gemini):
    register(_m.FACTS)
