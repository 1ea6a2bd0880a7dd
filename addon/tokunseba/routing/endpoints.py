"""Endpoints: where a routed turn goes, and with which credentials (docs/dev/architecture.md §2 rule 7).

An endpoint's ``url`` is its API base including the version segment
(``http://127.0.0.1:8000/v1``); request paths come from protocols.detect's table. The key is
never stored: ``key_env`` names the environment variable that holds it.

Health is passive (``EndpointHealth``): nothing probes an endpoint. A failed connect marks
it down for a back-off (2 s, doubling per failure in a row, at most 30 s); once that has
passed, the next turn tries it again, and a connect that works marks it up.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from .. import protocols
from ..protocols import openai_chat as openai_chat_facts
from .accepts import accepts_problem, default_accepts
from ..neutral import EFFORT_PINS, LEVELS
from ..protocols import api_path
from ..protocols import probe_counter
from ..translate import MAX_TOKENS_FIELDS, SYSTEM_ROLES

DEFAULT_PORTS = {"https": 443, "http": 80}
# an endpoint's token counter (``count_tokens``): its protocol's own ("native"; the default where
# its protocol has one: protocols.<name>.COUNTER), none at all, or the counter of another protocol
# that the same server also serves under the endpoint's URL (a protocol name: llama-server serves
# Anthropic's POST /v1/messages/count_tokens beside its Chat Completions, counted by its own
# tokenizer over the prompt its chat template builds)
# how a Chat endpoint takes a client's freeform tools (Codex's exec and apply_patch): "native" as
# Chat's own custom tools, "function" as functions of one string ``input``; unset, native at the
# hosts protocols.openai_chat.NATIVE_CUSTOM_TOOL_HOSTS names
CUSTOM_TOOLS = ("native", "function")
COUNT_TOKENS = ("native", "none", "probe")  # probe: the turn itself with max_tokens 1, its reported input
# cache breakpoints on translated turns (translate.request ``cache``): "off" (the default: none
# added; a client's own that the target protocol cannot take are dropped, recorded) |
# "breakpoints" (the endpoint takes explicit breakpoints, e.g. OpenAI GPT-5.6+ prompt_cache_breakpoint:
# the client's own are carried) | "auto" (also placed on the stable prefix, for a client whose
# provider caches by itself routed to an endpoint that caches only when asked: Anthropic)
CACHE = ("off", "breakpoints", "auto")


def _counting_protocols() -> list[str]:
    return [p.name for p in protocols.all_protocols() if p.counter is not None]
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot be an endpoint base URL, or None when it can."""
    try:
        parts = urlsplit(url)
        if "@" in parts.netloc:  # checked first, and never echoed: it would hold a secret
            return "url must not contain credentials (user:password@); name the key's env var in key_env"
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as e:
        return f"url {url!r} is not a valid URL ({e})"
    if parts.scheme not in DEFAULT_PORTS:
        return f"url must start with http:// or https://, got {url!r}"
    if not parts.hostname:
        return f"url {url!r} has no host"
    if parts.query or parts.fragment:
        return f"url {url!r} must be the API base (e.g. http://127.0.0.1:8000/v1), without query or fragment"
    return None


def _one_of(field: str, allowed: Collection[str]) -> Callable[[Any], str | None]:
    return lambda v: None if v in allowed else f"{field} must be one of: {', '.join(allowed)}; got {v!r}"


# endpoint field -> check of its value (None = fine). Shared by Endpoint and the rules loader,
# which checks the YAML types first and reports each problem at its line.
FIELD_CHECKS: dict[str, Callable[[Any], str | None]] = {
    "protocol": _one_of("protocol", protocols.NAMES),  # a live view of the registry
    "url": url_problem,
    "key_env": lambda v: None if v is None or _ENV_NAME.fullmatch(v) else (
        "key_env must be the NAME of an environment variable holding the key (e.g. LOCAL_KEY), "
        "not the key itself"
    ),
    "max_tokens": lambda v: None if v is None or v > 0 else f"max_tokens must be a positive integer, got {v}",
    "system_role": _one_of("system_role", SYSTEM_ROLES),
    "max_tokens_field": _one_of("max_tokens_field", MAX_TOKENS_FIELDS),
    "stop": lambda v: None if v is None or (0 < len(v) <= 4 and all(isinstance(x, str) and x for x in v)) else (
        "stop must be a list of 1 to 4 non-empty strings"
    ),
    "first_byte_timeout_s": lambda v: None if v is None or 0 < v < float("inf") else (
        f"first_byte_timeout_s must be a number of seconds above 0 (leave it out: no limit), got {v}"
    ),
    "cooldown_max_s": lambda v: None if 0 <= v < float("inf") else (
        f"cooldown_max_s must be a number of seconds, 0 or more (0: retry-after is not heeded), got {v}"
    ),
    "max_concurrency": lambda v: None if v is None or v >= 1 else (
        f"max_concurrency must be an integer of 1 or more (leave it out: no limit), got {v}"
    ),
    "queue_s": lambda v: None if 0 <= v < float("inf") else f"queue_s must be a number of seconds, 0 or more, got {v}",
    "effort": lambda v: None if v is None or v in EFFORT_PINS else (
        f"effort must be one of: {', '.join(EFFORT_PINS)} (a level every turn asks, or omit: none); got {v!r}"),
    "max_effort": lambda v: None if v is None or v in LEVELS else (
        f"max_effort must be one of: {', '.join(LEVELS)}; got {v!r}"),
    "custom_tools": lambda v: None if v is None or v in CUSTOM_TOOLS else (
        f"custom_tools must be one of: {', '.join(CUSTOM_TOOLS)} (native: the endpoint takes Chat's custom tools, "
        "as OpenAI's own API does; function: as functions of one string parameter 'input'); got {v!r}"),
    "accepts": accepts_problem,
    "cache": _one_of("cache", CACHE),
    "context_tokens": lambda v: None if v is None or v > 0 else (
        f"context_tokens must be a positive integer (the tokens the endpoint's model holds: prompt and reply), got {v}"),
    "count_tokens": lambda v: None if v is None or v in COUNT_TOKENS or v in _counting_protocols() else (
        f"count_tokens must be one of: {', '.join([*COUNT_TOKENS, *_counting_protocols()])} (native: the "
        "protocol's own counter, the default where it has one; probe: the turn itself sent with a maximum output "
        "of 1 token, its reported input returned; a protocol name: that protocol's counter, served "
        f"by the same server under the endpoint's URL); got {v!r}"),
}


def count_tokens_problem(protocol: str, count_tokens: str | None) -> str | None:
    """Why an endpoint of ``protocol`` cannot say ``count_tokens`` (native where its protocol has no counter)."""
    facts = protocols.find(protocol)
    if count_tokens == "native" and facts is not None and facts.counter is None:
        return (f"count_tokens: native, but {facts.title} has no token counter of its own; "
                "say count_tokens: none (count requests routed here are then answered with an error), or the "
                "protocol whose counter the same server also serves (llama-server: anthropic)")
    return None


def custom_tools_problem(protocol: str, custom_tools: str | None) -> str | None:
    """Why an endpoint of ``protocol`` cannot say ``custom_tools`` (only Chat endpoints have a choice)."""
    if custom_tools is not None and protocol != openai_chat_facts.PROTOCOL:
        return (f"custom_tools is for Chat Completions endpoints (protocol: {openai_chat_facts.PROTOCOL}): "
                "the other protocols take freeform tools one way only")
    return None


@dataclass(frozen=True)
class Endpoint:
    name: str
    protocol: str  # anthropic | openai | openai-responses | gemini
    url: str  # API base including the version segment, e.g. http://127.0.0.1:8000/v1
    key_env: str | None = None  # env var holding this endpoint's key
    model: str | None = None  # model to ask for when the route names none
    # the most a translated turn there may produce: a client's larger limit is capped to it, and a
    # client that names none is sent it (plumbing; Anthropic, which requires one, always)
    max_tokens: int | None = None
    system_role: str = "system"  # OpenAI-compatible: role for system text ("system" | "developer")
    max_tokens_field: str = "max_completion_tokens"  # "max_tokens" for local servers (Ollama, old llama.cpp)
    # stop strings the server needs to end a turn (e.g. a chat template's end marker that a base
    # model prints as text); added to translated requests and recorded as plumbing
    stop: tuple[str, ...] | None = None
    # failover and capacity (turn/failover.py): no status line within this many
    # seconds is a failure (None: no limit); retry-after / rate-limit reset hints keep the
    # endpoint out of later turns for at most cooldown_max_s; at max_concurrency turns in
    # flight a new turn goes to the next route, after waiting up to queue_s for a slot
    first_byte_timeout_s: float | None = None
    cooldown_max_s: float = 60.0
    max_concurrency: int | None = None
    queue_s: float = 0.0
    # reasoning effort (neutral/effort.py): pin every turn's level ("omit": send none), or cap it
    effort: str | None = None
    max_effort: str | None = None
    # its token counter (COUNT_TOKENS; None: native where its protocol has one): ``counter``
    count_tokens: str | None = None
    # a Chat endpoint's way with freeform tools (CUSTOM_TOOLS; None: by its host): ``native_custom_tools``
    custom_tools: str | None = None
    # what it takes in a turn (routing/accepts.py KINDS; None: its default, ``takes``)
    accepts: tuple[str, ...] | None = None
    cache: str = "off"  # CACHE
    # the tokens its model holds, prompt and reply (llama-server's -c): `tokunseba check` names the
    # clients whose turns cannot fit (routing/client_requests.py). Not enforced when a turn is
    # sent: the server's own context error fails the turn over (turn/failover.py)
    context_tokens: int | None = None
    builtin: bool = False

    def __post_init__(self) -> None:
        problems = [p for f, check in FIELD_CHECKS.items() if (p := check(getattr(self, f)))]
        if not problems and (p := count_tokens_problem(self.protocol, self.count_tokens)):
            problems.append(p)
        if not problems and (p := custom_tools_problem(self.protocol, self.custom_tools)):
            problems.append(p)
        if problems:
            raise ValueError(f"endpoint {self.name!r}: {'; '.join(problems)}")

    @property
    def scheme(self) -> str:
        return urlsplit(self.url).scheme

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or ""

    @property
    def port(self) -> int:
        parts = urlsplit(self.url)
        return parts.port or DEFAULT_PORTS[parts.scheme]

    @property
    def base_path(self) -> str:
        return urlsplit(self.url).path.rstrip("/")

    @property
    def native_custom_tools(self) -> bool:
        """Whether this endpoint takes freeform tools as Chat's own ``custom`` tools."""
        if self.protocol != openai_chat_facts.PROTOCOL:
            return False
        if self.custom_tools is not None:
            return self.custom_tools == "native"
        return self.host in openai_chat_facts.NATIVE_CUSTOM_TOOL_HOSTS

    @property
    def takes(self) -> tuple[str, ...]:
        """What a turn sent here may hold (``accepts``, else its default: routing/accepts.py)."""
        return self.accepts if self.accepts is not None else default_accepts(self.protocol, self.host)

    @property
    def counter_protocol(self) -> str | None:
        """The protocol whose counter a count request routed here is asked of (None: none)."""
        if self.count_tokens == "none":
            return None
        if self.count_tokens == "probe":
            return self.protocol
        name = self.protocol if self.count_tokens in (None, "native") else self.count_tokens
        return name if protocols.get(name).counter is not None else None

    @property
    def counter(self) -> protocols.Counter | None:
        """The token counter a count request routed here is asked of (None: it has none)."""
        if self.count_tokens == "probe":
            return self._probe
        name = self.counter_protocol
        return protocols.get(name).counter if name is not None else None

    @functools.cached_property
    def _probe(self) -> protocols.Counter:
        """``count_tokens: probe``: the turn asked with a maximum output of 1 (this endpoint's field)."""
        facts = protocols.get(self.protocol)
        # max_tokens_field is the Chat endpoints' choice (its default is Chat's own field)
        field = self.max_tokens_field if facts.max_output_field == Endpoint.max_tokens_field else None
        return probe_counter(facts, field)

    def counter_url(self, model: str | None = None) -> str:
        """Full URL of this endpoint's counter (``counter``, which must exist), e.g. ``…/v1/messages/count_tokens``."""
        name, counter = self.counter_protocol, self.counter
        assert name is not None and counter is not None
        return self.url.rstrip("/") + api_path(name, counter.kind, model or self.model)

    @property
    def no_counter_why(self) -> str | None:
        """Why a count routed here cannot be answered (None: it has a counter)."""
        if self.counter is not None:
            return None
        return "count_tokens: none in the rules" if self.count_tokens == "none" else \
            f"{protocols.get(self.protocol).title} has no token counter"

    def request_url(self, kind: str, model: str | None = None) -> str:
        """Full URL of a ``kind`` request ("messages", "chat", "generate"...) at this endpoint.

        ``model`` (else the endpoint's model) is needed only where it travels in the path
        (Gemini). Raises ValueError for a kind this endpoint's protocol does not have.
        """
        return self.url.rstrip("/") + api_path(self.protocol, kind, model or self.model)

    def auth_headers(self, env: Mapping[str, str]) -> dict[str, str]:
        """This endpoint's own credential header, from ``env[key_env]``; {} when there is none."""
        key = env.get(self.key_env) if self.key_env else None
        if not key:
            return {}
        name, template = protocols.get(self.protocol).auth_header
        return {name: template.format(key=key)}

    def same_host(self, host: str, port: int) -> bool:
        """Whether ``host:port`` is this endpoint's host (so client credentials may go there)."""
        return host.lower().rstrip(".").strip("[]") == self.host.rstrip(".") and port == self.port


# one built-in endpoint per protocol whose facts name a provider base URL, named after it
BUILTIN_ENDPOINTS: dict[str, Endpoint] = {
    p.name: Endpoint(p.name, p.name, p.builtin_url, p.key_env, builtin=True)
    for p in protocols.all_protocols() if p.builtin_url
}


class EndpointHealth:
    """Which endpoints (by host and port) are down, from connects that failed; no probes."""

    def __init__(self, backoff_s: float = 2.0, max_backoff_s: float = 30.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.backoff_s, self.max_backoff_s, self.clock = backoff_s, max_backoff_s, clock
        self._down: dict[tuple[str, int], tuple[float, int, str]] = {}  # -> (until, failures in a row, why)

    def reachable(self, ep: Endpoint) -> bool:
        """False while ``ep`` is in its back-off after a failed connect."""
        state = self._down.get((ep.host, ep.port))
        return state is None or self.clock() >= state[0]

    def failed(self, ep: Endpoint, why: str = "") -> float:
        """A connect to ``ep`` failed: down for the next back-off (returned, in seconds)."""
        n = self._down.get((ep.host, ep.port), (0.0, 0, ""))[1] + 1
        wait = min(self.backoff_s * 2 ** (n - 1), self.max_backoff_s)
        self._down[(ep.host, ep.port)] = (self.clock() + wait, n, why)
        return wait

    def ok(self, ep: Endpoint) -> None:
        self._down.pop((ep.host, ep.port), None)

    def left(self, ep: Endpoint) -> float:
        """Seconds left of ``ep``'s back-off (0 when it is not down)."""
        state = self._down.get((ep.host, ep.port))
        return max(0.0, state[0] - self.clock()) if state is not None else 0.0

    def why(self, ep: Endpoint) -> str | None:
        """Why ``ep`` is down (its last failed connect), while it is."""
        state = self._down.get((ep.host, ep.port))
        return state[2] if state is not None and self.clock() < state[0] else None

    def down(self) -> dict[str, str]:
        """``host:port`` -> why, for the endpoints in their back-off now."""
        now = self.clock()
        return {f"{h}:{p}": why for (h, p), (until, _, why) in self._down.items() if now < until}
