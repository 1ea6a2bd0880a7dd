"""Which provider turn is this request? Table-driven detection from host, path and method.

Only provider turns are detected; everything else (Claude Code's ``/api/claude_code/settings``,
Codex's WebSocket ``GET /v1/responses``, model lists, telemetry...) returns ``None`` and must
pass through untouched (design.md §2 rule 8).

Provider hosts need the exact API path (``/v1/messages``); hosts given in ``extra_hosts`` (a
user's own endpoint, e.g. ``"127.0.0.1:8000"``) accept any prefix before the protocol's path
(``/v1/chat/completions``, ``/openai/v1/chat/completions``, ``/chat/completions``), since
self-hosted servers mount their API in different places.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import quote, unquote

from . import gemini, openai_responses


@dataclass(frozen=True)
class Detected:
    protocol: str
    kind: str  # "messages" | "count_tokens" | "chat" | "responses" | "generate" | "stream_generate" | "count"
    model: str | None = None  # only when the model travels in the path (Gemini)


@dataclass(frozen=True)
class ProtocolPaths:
    """Where a protocol's turns live: API prefixes and, per kind, the path under the prefix."""

    prefixes: tuple[str, ...]
    paths: Mapping[str, str]  # kind -> path template; "{model}" is a path segment
    queries: Mapping[str, str]  # kind -> query string an outgoing request needs


PATHS: dict[str, ProtocolPaths] = {
    "anthropic": ProtocolPaths(
        ("/v1",), {"messages": "/messages", "count_tokens": "/messages/count_tokens"}, {}
    ),
    "openai": ProtocolPaths(("/v1",), {"chat": "/chat/completions"}, {}),
    openai_responses.PROTOCOL: ProtocolPaths(
        openai_responses.API_PREFIXES, openai_responses.PATHS, openai_responses.QUERIES
    ),
    gemini.PROTOCOL: ProtocolPaths(gemini.API_PREFIXES, gemini.PATHS, gemini.QUERIES),
}

# host -> protocols it serves (the path picks one)
PROVIDER_HOSTS: dict[str, tuple[str, ...]] = {}
for _host, _proto in (
    ("api.anthropic.com", "anthropic"),
    ("api.openai.com", "openai"),
    *((h, openai_responses.PROTOCOL) for h in openai_responses.HOSTS),
    *((h, gemini.PROTOCOL) for h in gemini.HOSTS),
):
    PROVIDER_HOSTS[_host] = PROVIDER_HOSTS.get(_host, ()) + (_proto,)


def _pattern(template: str) -> str:
    """Regex for a path template: literal text, "{model}" one path segment."""
    return "(?P<model>[^/:]+)".join(re.escape(part) for part in template.split("{model}"))


def _compile(any_prefix: bool) -> dict[str, list[tuple[str, re.Pattern[str]]]]:
    """protocol -> [(kind, path regex)]: the protocol's own prefixes, or any prefix at all."""
    out: dict[str, list[tuple[str, re.Pattern[str]]]] = {}
    for proto, pp in PATHS.items():
        pre = "(?:/[^?#]*)?" if any_prefix else "(?:" + "|".join(re.escape(p) for p in pp.prefixes) + ")"
        out[proto] = [(kind, re.compile(f"^{pre}{_pattern(t)}$")) for kind, t in pp.paths.items()]
    return out


_PROVIDER_RX = _compile(any_prefix=False)
_EXTRA_RX = _compile(any_prefix=True)  # a user's own host: the API may be mounted anywhere


def _split_host(host: str) -> tuple[str, str]:
    """(host as given, host without port), lower-case, trailing dot dropped."""
    h = host.strip().lower()
    if h.startswith("["):  # [::1]:8000
        bare = h[: h.find("]") + 1] if "]" in h else h
    elif h.count(":") == 1:
        bare = h.partition(":")[0]
    else:
        bare = h
    return h.rstrip("."), bare.rstrip(".")


def _match(table: dict, protocols: tuple[str, ...], path: str) -> Detected | None:
    for proto in protocols:
        for kind, rx in table.get(proto, ()):
            if m := rx.match(path):
                model = m.groupdict().get("model")
                return Detected(proto, kind, unquote(model) if model else None)
    return None


def detect(
    host: str, path: str, method: str = "POST", extra_hosts: Mapping[str, str] | None = None
) -> Detected | None:
    """The provider turn a request is, or None for anything that must pass through untouched."""
    if method.upper() != "POST":
        return None
    path = path.split("#", 1)[0].split("?", 1)[0]
    full, bare = _split_host(host)
    if protos := PROVIDER_HOSTS.get(full) or PROVIDER_HOSTS.get(bare):
        return _match(_PROVIDER_RX, protos, path)
    if extra_hosts:
        lowered = {_split_host(k)[0]: v for k, v in extra_hosts.items()}
        if proto := lowered.get(full) or lowered.get(bare):
            return _match(_EXTRA_RX, (proto,), path)
    return None


def api_path(protocol: str, kind: str, model: str | None = None) -> str:
    """Path (with query) of a ``kind`` request under an endpoint's base URL, e.g. "/messages".

    Raises ValueError for a kind the protocol does not have, or a missing path model.
    """
    pp = PATHS.get(protocol)
    if pp is None or kind not in pp.paths:
        raise ValueError(f"protocol {protocol!r} has no {kind!r} requests")
    template = pp.paths[kind]
    if "{model}" in template:
        if not model:
            raise ValueError(f"a {protocol} {kind!r} request needs a model in its path")
        template = template.replace("{model}", quote(model, safe=""))
    query = pp.queries.get(kind)
    return f"{template}?{query}" if query else template
