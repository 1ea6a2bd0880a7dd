"""Which provider turn is this request? Table-driven detection from host, path and method.

Only provider turns are detected; everything else (Claude Code's ``/api/claude_code/settings``,
Codex's WebSocket ``GET /v1/responses``, model lists, telemetry...) returns ``None`` and must
pass through untouched (docs/dev/architecture.md §2 rule 8).

Provider hosts need the exact API path (``/v1/messages``). A protocol's backend hosts (its
facts' ``backends``: the ChatGPT backend for Codex signed in with ChatGPT) carry its turns at
their own whole paths only (``/backend-api/codex/responses``): every other request there (model
lists, account checks, plugin calls) is not a turn. Hosts given in ``extra_hosts`` (a
user's own endpoint, e.g. ``"127.0.0.1:8000"``) accept any prefix before the protocol's path
(``/v1/chat/completions``, ``/openai/v1/chat/completions``, ``/chat/completions``), since
self-hosted servers mount their API in different places.

``is_provider_host`` / ``looks_like_provider_call`` say what a request (read by attribute, as
mitmproxy holds it) is when no turn was planned for it; ``extra_for`` reads the
tokunseba_provider_hosts option for one host.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

from .registry import GENERATION, REGISTRY  # GENERATION: the registry's change counter (read per turn)


@dataclass(frozen=True)
class Detected:
    protocol: str
    kind: str  # a path kind of the protocol: "messages" | "count_tokens" | "chat" | "responses" | "generate" ...
    model: str | None = None  # only when the model travels in the path (Gemini)
    backend: str | None = None  # the backend host it came to (a protocol's ``backends``), else None


def api_hosts() -> dict[str, tuple[str, ...]]:
    """API host -> protocols it serves (the path picks one), from the registry: one base-URL
    listener each (cli/run.py)."""
    out: dict[str, tuple[str, ...]] = {}
    for proto in REGISTRY.values():
        for host in proto.hosts:
            out[host] = out.get(host, ()) + (proto.name,)
    return out


def provider_hosts() -> dict[str, tuple[str, ...]]:
    """Every host whose turns are detected -> the protocols it carries: the API hosts, then the
    protocols' backend hosts (intercepted, their credentials redacted for display)."""
    out = api_hosts()
    for proto in REGISTRY.values():
        for host in proto.backends:
            out[host] = out.get(host, ()) + (proto.name,)
    return out


def _backends() -> dict[str, list[tuple[str, str, str]]]:
    """backend host -> [(protocol, kind, whole path)]."""
    out: dict[str, list[tuple[str, str, str]]] = {}
    for proto in REGISTRY.values():
        for host, paths in proto.backends.items():
            out.setdefault(host, []).extend((proto.name, kind, path) for kind, path in paths.items())
    return out


def _pattern(template: str) -> str:
    """Regex for a path template: literal text, "{model}" one path segment."""
    return "(?P<model>[^/:]+)".join(re.escape(part) for part in template.split("{model}"))


Table = dict[str, list[tuple[str, re.Pattern[str]]]]


def _compile(any_prefix: bool) -> Table:
    """protocol -> [(kind, path regex)]: the protocol's own prefixes, or any prefix at all."""
    out: Table = {}
    for proto in REGISTRY.values():
        pre = "(?:/[^?#]*)?" if any_prefix else "(?:" + "|".join(re.escape(p) for p in proto.api_prefixes) + ")"
        out[proto.name] = [(kind, re.compile(f"^{pre}{_pattern(t)}$")) for kind, t in proto.paths.items()]
    return out


Backends = dict[str, list[tuple[str, str, str]]]
# (registry generation, API hosts, API-host regexes, a user's own host regexes, backend paths)
_tables: list[tuple[int, dict[str, tuple[str, ...]], Table, Table, Backends]] = []


def _current() -> tuple[dict[str, tuple[str, ...]], Table, Table, Backends]:
    """The detection tables of the registry as it is now (rebuilt only when it changed)."""
    gen = GENERATION[0]
    if not _tables or _tables[0][0] != gen:
        # a user's own host: the API may be mounted anywhere
        _tables[:] = [(gen, api_hosts(), _compile(any_prefix=False), _compile(any_prefix=True), _backends())]
    _, hosts, provider_rx, extra_rx, backends = _tables[0]
    return hosts, provider_rx, extra_rx, backends


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


def _match(table: Table, protocols: tuple[str, ...], path: str) -> Detected | None:
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
    hosts, provider_rx, extra_rx, backends = _current()
    if protos := hosts.get(full) or hosts.get(bare):
        return _match(provider_rx, protos, path)
    if paths := backends.get(full) or backends.get(bare):  # a backend: its whole turn paths only
        name = bare if bare in backends else full
        return next((Detected(proto, kind, backend=name) for proto, kind, p in paths if p == path), None)
    if extra_hosts:
        lowered = {_split_host(k)[0]: v for k, v in extra_hosts.items()}
        if proto := lowered.get(full) or lowered.get(bare):
            return _match(extra_rx, (proto,), path)
    return None


def api_path(protocol: str, kind: str, model: str | None = None) -> str:
    """Path (with query) of a ``kind`` request under an endpoint's base URL, e.g. "/messages".

    Raises ValueError for a kind the protocol does not have, or a missing path model.
    """
    pp = REGISTRY.get(protocol)
    if pp is None or kind not in pp.paths:
        raise ValueError(f"protocol {protocol!r} has no {kind!r} requests")
    template = pp.paths[kind]
    if "{model}" in template:
        if not model:
            raise ValueError(f"a {protocol} {kind!r} request needs a model in its path")
        template = template.replace("{model}", quote(model, safe=""))
    query = pp.queries.get(kind)
    return f"{template}?{query}" if query else template


def guess(path: str) -> str | None:
    """The protocol whose turn path ``path`` has under any prefix, or None: for answering in
    the client's own protocol when a request failed before detection could say."""
    path = path.split("#", 1)[0].split("?", 1)[0]
    _, _, any_prefix, _ = _current()
    for proto, kinds in any_prefix.items():
        if any(rx.match(path) for _, rx in kinds):
            return proto
    return None


def extra_for(extra_hosts: Mapping[str, str], host: str, port: int) -> dict[str, str] | None:
    """The tokunseba_provider_hosts entry (``HOST[:PORT]`` -> protocol) for this host, as
    ``detect()`` takes it."""
    if not extra_hosts:
        return None
    proto = extra_hosts.get(f"{host}:{port}".lower()) or extra_hosts.get(host.lower())
    return {host: proto} if proto else None


def is_provider_host(req: Any, extra_hosts: Mapping[str, str]) -> bool:
    host = req.pretty_host.lower()
    return host in provider_hosts() or host in extra_hosts or f"{host}:{req.port}" in extra_hosts


def looks_like_provider_call(req: Any, extra_hosts: Mapping[str, str]) -> bool:
    """Planning failed before detection: is this a provider call we must not let through?"""
    if not is_provider_host(req, extra_hosts):
        return False
    return bool(req.method == "POST" and guess(req.path) is not None)
