"""The protocol registry: every protocol tokunseba speaks, its facts and its codec.

``protocols/<name>.py`` holds all of one protocol's facts outside its codec (hosts and paths,
auth header, error envelope, usage counting and conversions, stream end and keep-alive style,
version headers, rule shape, validation checks, maximum output field...) as a
``facts.Protocol`` named ``FACTS``; its codec is ``translate/<name>/``'s ``CODEC``. A protocol
joins through one seam, ``register(facts, codec)``, called by a plugin that the entry-point
group ``tokunseba.protocols`` names: the four built in are such plugins (each facts module's
``register_protocols``), and a package that ships a fifth is found the same way
(protocols/plugins.py), when this package is first imported. A codec may be given as
``"module:attr"``: it is imported when first used (the CLI's commands that never translate,
`tokunseba run` among them, never import one).
Detection, endpoints, rules, credentials, validation, the stream watch, the ledger, shadows,
replay, prices and the CLI read the registry, never a table of their own, so a registered
protocol is known everywhere.

    from tokunseba import protocols
    protocols.get("gemini").usage_key          # "usageMetadata"
    protocols.NAMES                            # a live view: anthropic, openai, ...
    protocols.register(facts, codec) / unregister(name)
    protocols.origin("anthropic")              # "built in", or the plugin package it came from

Contract: data only, no I/O; ``protocols/`` imports no codec (translate/: the entry points name
them) and no adapter.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Any

from ..neutral import add_counting
from . import plugins
from .facts import REQUEST_ID_HEADER, Check, Counter, Problem, Protocol, RuleShape

__all__ = ["Protocol", "Counter", "RuleShape", "Check", "Problem", "REGISTRY", "CODECS", "NAMES", "get", "find",
           "register", "unregister", "generation", "all_protocols", "FALLBACK", "for_errors", "counting", "origin",
           # the fact sheets and helpers other packages read (imported below, once the registry is whole)
           "anthropic", "clients", "gemini", "openai_chat", "openai_responses", "openai_responses_ws", "TOOL_ID_RE", "VISIBILITY", "Detected",
           "api_hosts", "api_path", "detect", "guess", "provider_hosts", "probe_counter", "CONTEXT_STATUSES",
           "FAILOVER_STATUSES", "RESET_HEADERS", "RETRY_HEADERS", "is_context_window", "DEFAULT_NAMESPACE",
           "flat_tool_name", "ACCOUNT_HEADERS", "ACCOUNT_ID_HEADERS", "Reading", "SkipNotes", "WindowState", "has_windows",
           "read_windows", "window_names", "REQUEST_ID_HEADER", "extra_for", "is_provider_host",
           "looks_like_provider_call", "guess_protocol", "may_be_failure"]

from .registry import GENERATION, REGISTRY  # noqa: E402  (detect reads them from there)


class _Codecs(dict[str, Any]):
    """name -> its codec (a ``translate.codec.Codec``, typed there: protocols/ imports no codec).
    A codec registered as ``"module:attr"`` is imported on first use and kept."""

    def __getitem__(self, name: str) -> Any:
        v = dict.__getitem__(self, name)
        return self._resolve(name, v) if isinstance(v, str) else v

    def get(self, name: str, default: Any = None) -> Any:
        v = dict.get(self, name, default)
        return self._resolve(name, v) if isinstance(v, str) else v

    def values(self) -> list[Any]:  # type: ignore[override]
        return [self[k] for k in self]

    def items(self) -> list[tuple[str, Any]]:  # type: ignore[override]
        return [(k, self[k]) for k in self]

    def _resolve(self, name: str, ref: str) -> Any:
        module, _, attr = ref.partition(":")
        codec = getattr(importlib.import_module(module), attr)
        if getattr(codec, "protocol", None) != name:
            raise ValueError(f"{ref} is the codec of {getattr(codec, 'protocol', None)!r}, not of {name!r}")
        dict.__setitem__(self, name, codec)
        return codec


CODECS = _Codecs()
NAMES = REGISTRY.keys()  # a live view: in registration order
_ORIGINS: dict[str, plugins.Origin] = {}


def register(facts: Protocol, codec: Any = None) -> Protocol:
    """The one seam: add (or replace) a protocol, its facts and its codec (a ``Codec``, or
    ``"module:attr"`` naming one, imported on first use; None: a protocol without one, whose
    turns are only passed on or retargeted to its own endpoints). Its usage counting
    (``facts.counting``) is registered with it. ``ValueError`` when the codec is for another
    protocol, or the counting's name is taken by another one."""
    if isinstance(codec, str):
        if not codec.partition(":")[2]:
            raise ValueError(f"the codec of protocol {facts.name!r} must be named as 'module:attr', not {codec!r}")
    elif codec is not None and getattr(codec, "protocol", None) != facts.name:
        raise ValueError(f"the codec given for protocol {facts.name!r} is for {getattr(codec, 'protocol', None)!r}")
    if facts.counting is not None:
        add_counting(facts.counting)
    REGISTRY[facts.name] = facts
    if codec is not None:
        CODECS[facts.name] = codec
    else:
        CODECS.pop(facts.name, None)
    GENERATION[0] += 1
    return facts


def unregister(name: str) -> None:
    """Remove a protocol (tests that register one of their own)."""
    CODECS.pop(name, None)
    _ORIGINS.pop(name, None)
    if REGISTRY.pop(name, None) is not None:
        GENERATION[0] += 1


def origin(name: str) -> str:
    """Where protocol ``name`` came from: "built in", "plugin NAME (PACKAGE VERSION)", or
    "registered in-process" (a test's own)."""
    o = _ORIGINS.get(name)
    return str(o) if o is not None else "registered in-process"


def _from_plugin(facts: Protocol, codec: Any, where: plugins.Origin) -> None:
    """``register`` as a plugin calls it: a name already taken by another plugin is refused."""
    if facts.name in REGISTRY and _ORIGINS.get(facts.name) != where:
        raise ValueError(f"protocol {facts.name!r} is already registered ({origin(facts.name)})")
    register(facts, codec)
    _ORIGINS[facts.name] = where


def load_plugins(only: list[str] | None = None) -> list[str]:
    """Load the protocol plugins (``plugins.load``: every installed one unless
    ``TOKUNSEBA_PLUGINS`` says otherwise; ``only``: these outside ones). Returns what could not
    be loaded. Runs once on import; a test may call it again for a plugin it chose."""
    return plugins.load(_from_plugin, only)


def generation() -> int:
    """A number that changes whenever the registry does."""
    return GENERATION[0]


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


def guess_protocol(path: str) -> str:
    """The client's protocol by its path (OpenAI Chat's envelope when the path says none)."""
    return guess(path) or FALLBACK


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


# the face's names from the package's modules: after the registry above, which detect reads
from . import anthropic, clients, gemini, openai_chat, openai_responses, openai_responses_ws  # noqa: E402
from .anthropic import TOOL_ID_RE  # noqa: E402
from .clients import VISIBILITY  # noqa: E402
from .detect import (Detected, api_hosts, api_path, detect, extra_for, guess, is_provider_host,  # noqa: E402
                     looks_like_provider_call, provider_hosts)
from .facts import probe_counter  # noqa: E402
from .failures import (CONTEXT_STATUSES, FAILOVER_STATUSES, RESET_HEADERS, RETRY_HEADERS, is_context_window,  # noqa: E402
                       may_be_failure)
from .openai_responses import DEFAULT_NAMESPACE, flat_tool_name  # noqa: E402
from .limits import (ACCOUNT_HEADERS, ACCOUNT_ID_HEADERS, Reading, SkipNotes, WindowState, has_windows,  # noqa: E402
                     read_windows, window_names)

load_plugins()  # last: a plugin's modules import this package, which must be whole by then
