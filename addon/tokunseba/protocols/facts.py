"""What a protocol's facts are: the ``Protocol`` record each ``protocols/<name>.py`` fills in
and ``protocols/__init__.py`` registers, and the small types inside it (where a client
protocol keeps what rules look at, a validation check).

Contract: data and pure functions over JSON values only (no I/O, no codec, no mitmproxy).
Every module outside the codecs that needs something per protocol reads it from here, through
the registry; a fact that is listed in a module's own table elsewhere is a copy that can drift.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..neutral import Counting

# tokunseba's own header on every reply it handles, whatever the protocol: the turn's request id
REQUEST_ID_HEADER = "x-tokunseba-request-id"

Problem = tuple[str, str]  # (JSON path, what is wrong)


@dataclass(frozen=True)
class Check:
    """One thing a client protocol forbids in a request (validate.py refuses a translated turn
    that breaks it, with a 400 naming the path)."""

    name: str
    find: Callable[[dict[str, Any]], Iterator[Problem]]
    reason: str


@dataclass(frozen=True)
class RuleShape:
    """Where a client protocol keeps what rules look at (routing.facts.turn_facts reads it)."""

    turns: str  # top-level list of messages / input items / contents (Responses: or a string)
    nested: tuple[str, ...]  # keys of a message or block holding further blocks (tool results!)
    is_image: Callable[[dict[str, Any]], bool]  # an image block (documents/PDFs are not images)
    is_user: Callable[[dict[str, Any]], bool]  # a user message
    parts: str  # key of a message's content: a string or a list of parts
    is_text: Callable[[dict[str, Any]], bool]  # a text part (tool results are not user text)
    tool_count: Callable[[dict[str, Any]], int]
    thinking: Callable[[dict[str, Any]], bool]
    # the role of one item of ``turns`` ("user", "assistant", "system"...; Responses: "item" for a non-message)
    role_of: Callable[[dict[str, Any]], Any] = lambda m: m.get("role")
    # the tool call ids a request's last turn answers (its trailing tool results), in order
    answered_calls: Callable[[dict[str, Any]], list[str]] = lambda body: []
    # a document block (a PDF, a text file: a file that is not an image), found like is_image
    is_document: Callable[[dict[str, Any]], bool] = lambda block: False
    # the provider-run tools a request relies on (names; [] when none): those it declares when it
    # declares no tool of the client's own, or the one its tool_choice forces (Claude Code's
    # WebSearch request; a provider-run tool offered beside the client's own tools is not relied on)
    server_tools: Callable[[dict[str, Any]], list[str]] = lambda body: []
    # the names of the tools a request declares (its tool set, as earned routes stratify turns)
    tool_names: Callable[[dict[str, Any]], list[str]] = lambda body: []
    # the JSON schema a request asks its reply to follow (structured output), or None
    output_schema: Callable[[dict[str, Any]], dict[str, Any] | None] = lambda body: None


@dataclass(frozen=True)
class Counter:
    """A protocol's own token counter, as its endpoints serve it: what a count request routed to
    an endpoint of this protocol is asked as, and how its number comes back (docs/dev/architecture.md §4c:
    counted by the target's own counter, never estimated). Pure functions over JSON values."""

    kind: str  # the request kind (a key of ``Protocol.paths``) of a count at an endpoint
    name: str  # how the ledger and errors name it: "Anthropic count_tokens"
    # a turn's request body in this protocol (a translated one) and the model asked -> the count request body
    request: Callable[[dict[str, Any], str | None], dict[str, Any]]
    read: Callable[[Any], int | None]  # the counter's reply (parsed JSON) -> its number (None: none in it)
    answer: Callable[[int], dict[str, Any]]  # a number -> this protocol's count reply to its client
    # a client's count request body -> the body of the turn it counts (what rules and translators read)
    as_turn: Callable[[dict[str, Any]], dict[str, Any]] = lambda body: body


def count_of(key: str) -> Callable[[Any], int | None]:
    """A counter reply's number at top-level ``key``: a non-negative integer, else None."""

    def read(doc: Any) -> int | None:
        v = doc.get(key) if isinstance(doc, dict) else None
        return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None

    return read


def only(keys: Sequence[str]) -> Callable[[dict[str, Any], str | None], dict[str, Any]]:
    """A count request body: the turn's body with only ``keys`` (what the counter takes), in the turn's order."""
    wanted = frozenset(keys)
    return lambda body, model: {k: v for k, v in body.items() if k in wanted}


@dataclass(frozen=True)
class Protocol:
    """Everything tokunseba knows of one protocol outside its codec (translate/<name>/)."""

    name: str  # "anthropic": the name in rules, the ledger and the CLI
    title: str  # "Anthropic Messages": what --help and `models` call it
    clients: str  # which clients speak it, for --help
    # ---- where its turns live (protocols.detect) ----
    hosts: tuple[str, ...]  # provider hosts (a host may serve two protocols: the path decides)
    api_prefixes: tuple[str, ...]  # the API version prefixes on a provider host
    paths: Mapping[str, str]  # request kind -> path under the prefix; "{model}" is a path segment
    turn_kinds: tuple[str, str]  # the kind of a turn asked (whole, streamed) of an endpoint
    count_kinds: frozenset[str] = frozenset()  # token-count kinds of its clients (never shadowed)
    counter: Counter | None = None  # its endpoints' own token counter (None: the protocol has none)
    queries: Mapping[str, str] = field(default_factory=dict)  # kind -> query string a request needs
    # hosts of a service other than the protocol's API that carry its turns at paths of their own
    # (the ChatGPT backend, for Codex signed in with ChatGPT): host -> {request kind: whole path}.
    # There only these paths are turns; everything else on the host passes untouched
    backends: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # request kinds only an endpoint of this protocol can answer -> why: a route that would
    # translate one to another protocol is refused (turn/plan.py), the rules go on
    native_kinds: Mapping[str, str] = field(default_factory=dict)
    # ---- credentials and headers (endpoints, credentials.py) ----
    auth_header: tuple[str, str] = ("authorization", "Bearer {key}")  # (name, value template)
    key_env: str = ""  # the environment variable a built-in endpoint takes its key from
    builtin_url: str | None = None  # a built-in endpoint named after the protocol, at this base URL
    version_headers: Mapping[str, str] = field(default_factory=dict)  # kept on a same-protocol retarget: why
    kept_query: Mapping[str, str] = field(default_factory=dict)  # query parameters kept likewise: why
    sent_headers: Mapping[str, str] = field(default_factory=dict)  # sent to its endpoints when translating/probing
    # request headers of its clients that carry a credential or an account's identity, beyond the
    # names credentials.py knows for every protocol -> why: never sent to another host (the
    # allow-list keeps them anyway), redacted in the ledger, the logs and mitmweb
    credential_headers: Mapping[str, str] = field(default_factory=dict)
    # ---- which login a client turn is sent with (the rules' ``login``; explain) ----
    logins: Mapping[str, str] = field(default_factory=dict)  # each login this protocol tells -> what it is
    # (backend host the turn came to or None, its headers with lower-case names) -> (login, why);
    # None: this protocol's turns do not tell
    login: Callable[[str | None, Mapping[str, str]], tuple[str, str]] | None = None
    # ---- what its provider reports on its replies about the account (issue 42 reads them) ----
    # reply header name prefixes (lower-case) whose headers report the account's usage windows:
    # kept as they came (a ``provider_limits`` ledger event), the client's bytes untouched
    limit_headers: tuple[str, ...] = ()
    # ---- errors in this protocol's own envelope (docs/dev/architecture.md rule 6) ----
    # (status, message, neutral error type or None) -> a whole JSON error body
    error_body: Callable[[int, str, str | None], bytes] = field(default=lambda s, m, t: b"")
    # an endpoint's error (any protocol's, read neutrally: neutral.error.UpstreamError) -> (status,
    # whole JSON error body) in this protocol, in its own words: a context-window error as the
    # "too long" error its clients act on (None: error_body with the error's status and message)
    upstream_error: Callable[[Any], tuple[int, bytes]] | None = None
    # message -> one SSE event that ends a passed-on stream with an error (502 semantics)
    stream_error: Callable[[str], bytes] = field(default=lambda m: b"")
    # (message, seconds until the cap's window resets, the reset as epoch seconds) -> (status, headers,
    # whole JSON body): the answer its clients take as "stop now, retrying will not help" (a reached
    # spending cap): a 429 in the shape each client reads as final, never 401/403 (login), never 5xx
    stop_now: Callable[[str, float, float], tuple[int, dict[str, str], bytes]] | None = None
    # ---- usage (the ledger, prices, the stream watch) ----
    usage_counting: str = ""  # how its usage numbers count: a ``Counting``'s name ("anthropic", "openai"...)
    # that counting itself, when this protocol brings it (its usage fields and conversions, registered
    # with it); None: it counts as a convention another protocol brings (``usage_counting`` names it)
    counting: Counting | None = None
    usage_key: str = "usage"  # where a whole reply carries its usage object
    # where a whole reply names the model that answered (a stream's first event names it too,
    # read by the codec's decoder): OpenTelemetry's gen_ai.response.model for replies passed on
    reply_model_key: str = "model"
    # ---- streams passed on unchanged (turn/stream_watch.py, the relay) ----
    stream_judged: bool = True  # a stream has an end of its own to judge completeness by
    terminal_event: str | None = None  # the SSE event name that ends a complete stream, if named
    skipped_events: frozenset[str] = frozenset()  # SSE event names carrying no usage, end or error
    # the same for a protocol whose events have no name (Chat): (an event's data, parsed) -> whether it
    # carries no usage, end or error, only a piece of the reply's text (None: every such event is decoded)
    skipped_chunk: Callable[[Any], bool] | None = None
    passthrough_keepalive: bool = True  # a comment line may be put into its unchanged stream
    # ---- requests (rules, validation, check) ----
    rule_shape: RuleShape | None = None
    # what its provider's API takes in a turn (routing/accepts.py): every API here takes images,
    # documents and its own provider-run tools; an endpoint on loopback takes text only unless it says
    accepts: tuple[str, ...] = ("text", "images", "documents", "server_tools")
    # the request keys that make its prompt's cacheable prefix, in the order its provider reads
    # them (ledger/prefix.py hashes them block by block: where two turns' prefixes part)
    cache_prefix: tuple[str, ...] = ()
    checks: tuple[Check, ...] = ()
    max_output_field: str = "max_tokens"  # the request field holding the maximum output
    max_output_required: bool = False  # the protocol refuses a request without one
    # ---- provider state a reply carries that must go back to its origin (reasoning/state.py) ----
    # a reply's blocks (kind, id, text, signature, raw) -> that state in this protocol's wire form (None: none)
    state_payload: Callable[[Sequence[Any]], dict[str, Any] | None] | None = None
    state_kind: Callable[[dict[str, Any]], str] | None = None  # what such a payload is, for explain
    # ---- reasoning effort (neutral/effort.py: the neutral levels and budgets) ----
    # each way this protocol spells an effort -> (how it maps to the neutral level, why): its
    # codec's field table converts it; this is the table of record (`tokunseba models`, tests)
    effort_spellings: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    # the request-body paths that carry an effort in this protocol (a 400 about reasoning to a
    # translated request that carried one gets a hint: turn/reply.py)
    effort_fields: tuple[tuple[str, ...], ...] = ()
    # ---- OpenTelemetry GenAI semantic conventions (proxy/otel_spans.py): their well-known values ----
    genai_operation: str = "chat"  # gen_ai.operation.name of a turn of this protocol's clients
    genai_provider: str | None = None  # gen_ai.provider.name of an upstream asked in this protocol

    def __post_init__(self) -> None:
        if self.counting is not None:
            if not self.usage_counting:
                object.__setattr__(self, "usage_counting", self.counting.name)
            elif self.usage_counting != self.counting.name:
                raise ValueError(f"protocol {self.name!r}: usage_counting {self.usage_counting!r} is not "
                                 f"its counting's name {self.counting.name!r}")

    @functools.cached_property
    def model_in_path(self) -> bool:
        """The model travels in the URL, not the body (Gemini). (Cached: asked per turn.)"""
        return any("{model}" in p for p in self.paths.values())

    def turn_kind(self, stream: bool) -> str:
        """The request kind to ask of an endpoint of this protocol for a turn."""
        return self.turn_kinds[1 if stream else 0]


# ---- small helpers the protocol modules build their rule shapes and checks from ----


def json_schema(fmt: dict[str, Any]) -> dict[str, Any] | None:
    """The schema of a structured-output format ``{type: json_schema, schema}`` (the shape
    Anthropic's ``output_config.format`` and Responses' ``text.format`` share; Chat nests it
    under ``json_schema``), or None."""
    if fmt.get("type") != "json_schema":
        return None
    schema = fmt.get("schema", d(fmt.get("json_schema")).get("schema"))
    return schema if isinstance(schema, dict) else None


def d(x: Any) -> dict[str, Any]:
    return x if isinstance(x, dict) else {}


def lst(x: Any) -> list[Any]:
    return x if isinstance(x, list) else []


def typed(*types: str) -> Callable[[dict[str, Any]], bool]:
    """A block whose ``type`` is one of ``types``."""
    return lambda block: block.get("type") in types


def relied_on(declared: Sequence[tuple[str, bool]], forced: str | None) -> list[str]:
    """The provider-run tools a request relies on, from its tools in order as (name, provider-run)
    and the name its tool_choice forces (None: none): the forced one when it is provider-run,
    else every provider-run one when it declares nothing else."""
    server = [name for name, run in declared if run]
    if forced is not None:
        return [forced] if forced in server else []
    return server if server and len(server) == len(declared) else []


def role_user(m: dict[str, Any]) -> bool:
    return m.get("role") == "user"


def positive_int(*fields: str) -> Callable[[dict[str, Any]], Iterator[Problem]]:
    """A check: each of ``fields``, when present and not null, is an integer ≥ 1."""

    def find(body: dict[str, Any]) -> Iterator[Problem]:
        for f in fields:
            v = body.get(f)
            if f in body and v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                yield f, f"must be a positive integer, got {v!r}"

    return find


def non_empty_list(name: str) -> Callable[[dict[str, Any]], Iterator[Problem]]:
    """A check: ``name`` is a list of messages with at least one."""

    def find(body: dict[str, Any]) -> Iterator[Problem]:
        v = body.get(name)
        if not isinstance(v, list):
            yield name, f"must be a list of messages, got {type(v).__name__ if v is not None else 'nothing'}"
        elif not v:
            yield name, "must not be empty"

    return find


# ---- count_tokens: probe (an endpoint without a counter of its own) ----

_PROBE_LEFT_OUT = ("stream", "stream_options", "reasoning_effort", "reasoning", "thinking")  # a 1-token turn takes none


def probe_counter(p: Protocol, max_output_field: str | None = None) -> Counter:
    """A counter for an endpoint of ``p`` that has none of its own (``count_tokens: probe``): the
    turn itself, not streamed, its reasoning settings left out and its maximum output 1
    (``max_output_field``, else the protocol's), sent as a turn; the number is the whole input its
    reply's usage reports (the cached tokens counted once). Costs one tiny turn per count."""
    from ..neutral import Usage, includes_cached  # noqa: PLC0415 - only a probing endpoint needs it

    *parents, key = (max_output_field or p.max_output_field).split(".")

    def request(body: dict[str, Any], model: str | None) -> dict[str, Any]:
        out = {k: v for k, v in body.items() if k not in _PROBE_LEFT_OUT}
        holder = out
        for name in parents:
            holder[name] = dict(d(holder.get(name)))
            holder = holder[name]
        holder[key] = 1
        return out

    def read(doc: Any) -> int | None:
        usage = d(doc).get(p.usage_key)
        if not isinstance(usage, dict) or not p.usage_counting:
            return None
        f = Usage(p.usage_counting, usage).fields()
        if f["input"] is None:
            return None
        if includes_cached(p.usage_counting):
            return f["input"]
        return f["input"] + (f["cache_read"] or 0) + (f["cache_write"] or 0)

    return Counter(kind=p.turn_kinds[0], name=f"{p.title} probe (a turn of at most 1 output token)",
                   request=request, read=read, answer=lambda n: {})
