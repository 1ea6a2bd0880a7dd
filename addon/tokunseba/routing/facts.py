"""The facts of one turn that rules look at (``TurnFacts``, read by ``turn_facts``), and the
``when`` conditions (predicates) rules test them with, one row each in ``PREDICATES``.

A row is everything about one ``when`` key: its YAML key, how its value is read from the
rules file (``read(reader, node, what)``: the value as stored in ``Route.when``, or None after
reporting ``FILE:LINE: what is wrong`` to the reader), and its check (``check(value, facts)``:
``(holds, reason)``, the reason said whether it holds or not; reasons go to the trace, so the
ledger: never a credential, a request's text bounded). The file reader
(routing/rules_file.py) accepts exactly these keys, ``decide`` (routing/rules.py) runs the
checks in the route's order, and routing/client_requests.py judges the pinned clients with
the same checks.

How to add a predicate (as ``login: chatgpt|api_key`` was): one edit, here —

1. if the turn does not carry the fact yet, give ``TurnFacts`` a field (with a default) and
   fill it in ``turn_facts``;
2. add one row to ``PREDICATES``: ``"login": Predicate(_read_login, _check_login)``, with its
   check next to the others (a yes/no fact: ``_flag``; a value read as one of a few words:
   ``one_of``; a YAML type only: ``scalar("int")`` and the like).

Nothing else changes: the file's ``when`` accepts the key (unknown keys are errors listing
these), and ``decide``, ``explain`` and ``check`` see it. docs/dev/architecture.md §4 lists the
keys for the user.

Contract: pure; never raises on odd request bodies (wrong types count as absent).
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from yaml.nodes import Node, ScalarNode

from .accepts import content_refusal
from .endpoints import Endpoint
from .quota import KEYS as QUOTA_KEYS, check_quota, quota_problem
from .session_facts import Speaker, speaker
from .yaml_reader import YamlReader
from .. import protocols
from ..credentials import is_credential_header
from ..protocols import NAMES as PROTOCOLS  # a live view of the registry
from ..protocols import VISIBILITY
from ..protocols import RuleShape
from ..translate import pair_refusal


@dataclass
class TurnFacts:
    client: str  # protocol of the client
    model: str | None
    tools: bool  # the turn declares tools
    thinking: bool  # the turn asks for reasoning
    images: bool  # an image anywhere, including inside tool results
    request_bytes: int
    last_user_text: str | None
    headers: dict[str, str]  # lower-case names
    tool_count: int = 0
    who: Speaker = field(default_factory=Speaker)  # session, agent, background, client (routing/session_facts.py)
    documents: bool = False  # a document (PDF, text file) anywhere, including inside tool results
    server_tools: tuple[str, ...] = ()  # the provider-run tools it relies on (protocols.facts.RuleShape)
    quota: Any = None  # routing.quota.AccountQuota: the windows of the account the turn spends (set by turn/planner.py)
    login: str | None = None  # which login the client sent it with (protocols' ``login``: chatgpt | api_key); None: not told
    tool_names: tuple[str, ...] = ()  # the tools it declares, as declared (earned routes' strata: routing/strata.py)
    output_schema: dict | None = None  # the JSON schema its reply must follow (structured output), else None


def content_refused(facts: TurnFacts, ep: Endpoint) -> str | None:
    """Why a turn with these facts cannot go to ``ep``, by what ``ep`` takes (routing/accepts.py)."""
    if not (facts.images or facts.documents or facts.server_tools):
        return None
    return content_refusal(facts.client, images=facts.images, documents=facts.documents,
                           server_tools=facts.server_tools, endpoint=ep.name, protocol=ep.protocol,
                           takes=ep.takes, said=ep.accepts is not None)


def turn_refusal(facts: TurnFacts, ep: Endpoint) -> str | None:
    """Why a route to ``ep`` is refused for this turn: no translator for the pair, or content
    ``ep`` does not take (docs/dev/architecture.md rule 4); None: it is not."""
    return pair_refusal(facts.client, ep.protocol) or content_refused(facts, ep)


def _d(x: Any) -> dict:
    return x if isinstance(x, dict) else {}


def _l(x: Any) -> list:
    return x if isinstance(x, list) else []


def _last_user_text(turns: Any, shape: RuleShape) -> str | None:
    """Text of the last user message: its string content, or its text parts joined."""
    if isinstance(turns, str):  # Responses `input` may be a bare string
        return turns
    msg = next((m for m in reversed(_l(turns)) if isinstance(m, dict) and shape.is_user(m)), {})
    content = msg.get(shape.parts)
    if isinstance(content, str):
        return content
    parts = [p for p in _l(content) if isinstance(p, dict) and shape.is_text(p)]
    texts = [p["text"] for p in parts if isinstance(p.get("text"), str)]
    return "\n".join(texts) if texts else None


def _media(turns: Any, shape: RuleShape) -> tuple[bool, bool]:
    """(an image, a document) anywhere in the turns, at any depth of nested block lists: one walk
    for both (a turn's facts are read for every request), ended once both are found."""
    images = documents = False
    stack: list[Any] = list(_l(turns))
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            images = images or shape.is_image(x)
            documents = documents or shape.is_document(x)
            if images and documents:
                break
            stack.extend(v for k in shape.nested if isinstance(v := x.get(k), list))
        elif isinstance(x, list):
            stack.extend(x)
    return images, documents


def turn_facts(
    client: str, body: Any, request_bytes: int, headers: Mapping[str, str], *, model: str | None = None,
    login: str | None = None,
) -> TurnFacts:
    """What rules see of one turn. Never raises on odd bodies: wrong types count as absent.

    ``model`` overrides the body's (Gemini carries the model in the path); ``login`` is the
    client protocol's word for the login that sent it (turn/plan.py reads it from the
    protocol's facts: the host and headers say it).
    """
    body = _d(body)
    if model is None and isinstance(body.get("model"), str):
        model = body["model"]
    hdrs = {str(k).lower(): str(v) for k, v in headers.items()}
    who = speaker(client, hdrs, body, lazy=True)  # a fingerprint is hashed only if a rule or the record reads it
    facts = protocols.find(client)
    shape = facts.rule_shape if facts is not None else None  # where the client protocol keeps it
    if shape is None:
        return TurnFacts(client, model, False, False, False, request_bytes, None, hdrs, who=who, login=login)
    count = shape.tool_count(body)
    images, documents = _media(body.get(shape.turns), shape)
    return TurnFacts(
        client=client,
        model=model,
        tools=count > 0,
        thinking=shape.thinking(body),
        images=images,
        request_bytes=request_bytes,
        last_user_text=_last_user_text(body.get(shape.turns), shape),
        headers=hdrs,
        tool_count=count,
        who=who,
        documents=documents,
        server_tools=tuple(shape.server_tools(body)),
        login=login,
        tool_names=tuple(shape.tool_names(body)),
        output_schema=shape.output_schema(body),
    )


# ---------------------------------------------------------------------------------------------
# Reading a condition's value from the rules file: each gives the value as stored, or None
# after an error (reported to the reader with the node's line)

Read = Callable[[YamlReader, Node, str], Any]  # (reader, value node, "route 'x': when.key") -> value


def scalar(kind: str) -> Read:
    """A value of one YAML type (``YamlReader.value``'s kinds: "text", "texts", "int", "bool", ...)."""
    return lambda r, node, what: r.value(node, kind, what)


def one_of(*allowed: str) -> Read:
    """A text that must be one of ``allowed``."""

    def read(r: YamlReader, node: Node, what: str) -> str | None:
        v = r.value(node, "text", what)
        if v is not None and v not in allowed:
            r.error(node, f"{what} must be one of: {', '.join(allowed)}; got {v!r}")
            return None
        return v

    return read


def _read_protocols(r: YamlReader, node: Node, what: str) -> list[str] | None:
    v = r.value(node, "texts", what)
    for p in v or ():
        if p not in PROTOCOLS:
            r.error(node, f"{what}: unknown protocol {p!r} (expected one of: {', '.join(PROTOCOLS)})")
            return None
    return v


def _read_size(r: YamlReader, node: Node, what: str) -> int | None:
    v = r.value(node, "int", what)
    if v is not None and v < 0:
        r.error(node, f"{what} must not be negative, got {v}")
        return None
    return v


def _read_regex(r: YamlReader, node: Node, what: str) -> str | None:
    v = r.value(node, "text", what)
    try:
        if v is not None:
            re.compile(v)
    except re.error as e:
        r.error(node, f"{what}: bad regex {v!r}: {e.msg} at position {e.pos}")
        return None
    return v


def _read_headers(r: YamlReader, node: Node, what: str) -> dict[str, str] | None:
    m = r.mapping(node, what, None)
    if m is None:
        return None
    out: dict[str, str | None] = {}  # None: a bad regex (reported)
    for name, (kn, vn) in m.items():
        if name.lower() in out:
            r.error(kn, f"{what}: header {name!r} given twice (names are case-insensitive)")
        out[name.lower()] = v = r.value(vn, "text", f"{what}.{name}")
        if v is not None and is_header_regex(v):
            try:
                _header_regex(v)
            except re.error as e:
                r.error(vn, f"{what}.{name}: bad regex {v[1:-1]!r}: {e.msg} at position {e.pos}")
                out[name.lower()] = None
    return None if None in out.values() else out  # type: ignore[return-value]


# ---------------------------------------------------------------------------------------------
# Checking a condition against a turn: each gives (holds, reason) whether it holds or not

Check = Callable[[Any, TurnFacts], tuple[bool, str]]


def _check_client(want: list[str], f: TurnFacts) -> tuple[bool, str]:
    ok = f.client in want
    return ok, f"client {f.client!r} {'is' if ok else 'is not'} {' or '.join(want)}"


def _check_model(globs: list[str], f: TurnFacts) -> tuple[bool, str]:
    shown = ", ".join(repr(g) for g in globs)
    if f.model is None:
        return False, f"request names no model, rule wants {shown}"
    hit = next((g for g in globs if fnmatch.fnmatchcase(f.model, g)), None)
    if hit is not None:
        return True, f"model {f.model!r} matches {hit!r}"
    return False, f"model {f.model!r} does not match {shown}"


def _flag(name: str, has: Callable[[TurnFacts], bool], said: Callable[[TurnFacts], str], wants: tuple[str, str]):
    """Check of a yes/no fact; ``wants`` says what the rule wants for false and true."""

    def check(want: bool, f: TurnFacts) -> tuple[bool, str]:
        ok = has(f) == want
        return ok, f"{name}: {said(f)}, {'as the rule wants' if ok else 'rule wants ' + wants[want]}"

    return check


def _check_bytes(limit: int, f: TurnFacts) -> tuple[bool, str]:
    ok = f.request_bytes <= limit
    return ok, f"request is {f.request_bytes} bytes, {'within' if ok else 'over'} the {limit} limit"


def _check_last_user(pattern: str, f: TurnFacts) -> tuple[bool, str]:
    if f.last_user_text is None:
        return False, f"no last user text to match /{pattern}/"
    ok = re.search(pattern, f.last_user_text) is not None
    return ok, f"last user text {'matches' if ok else 'does not match'} /{pattern}/"


_GLOB_CHARS = frozenset("*?[")


def is_header_regex(value: str) -> bool:
    """A header value written ``/REGEX/`` is a regular expression (searched); any other is a glob."""
    return len(value) >= 2 and value.startswith("/") and value.endswith("/")


@functools.lru_cache(maxsize=256)
def _header_regex(value: str) -> re.Pattern:
    return re.compile(value[1:-1])


def header_matches(want: str, got: str) -> bool:
    """``got`` matches the rule's value: ``/REGEX/`` searched, else a glob (exact when it has
    no ``*``, ``?`` or ``[``), case-sensitive."""
    if is_header_regex(want):
        return _header_regex(want).search(got) is not None
    if _GLOB_CHARS.isdisjoint(want):
        return got == want
    return fnmatch.fnmatchcase(got, want)


def _check_headers(want: dict[str, str], f: TurnFacts) -> tuple[bool, str]:
    parts, ok = [], True
    for name, value in want.items():
        got = f.headers.get(name)
        hit = got is not None and header_matches(value, got)
        ok &= hit
        if got is None:
            parts.append(f"header {name} absent")
        elif is_credential_header(name):  # a trace (and so the ledger) never shows credentials
            parts.append(f"header {name} {'has' if hit else 'does not have'} the rule's value")
        elif is_header_regex(value) or not _GLOB_CHARS.isdisjoint(value):
            how = "regex" if is_header_regex(value) else "glob"
            parts.append(f"header {name} is {_shown(got)}, {'matches' if hit else 'does not match'} {how} {value!r}")
        else:
            parts.append(f"header {name} is {_shown(got)}" + ("" if hit else f", rule wants {value!r}"))
    return ok, "; ".join(parts)


def _shown(value: str, limit: int = 120) -> str:
    """A request's value in a trace: bounded (the trace is recorded)."""
    return repr(value) if len(value) <= limit else repr(value[:limit]) + f"… ({len(value)} chars)"


def _cannot_say(key: str, f: TurnFacts) -> str:
    who = f.who.client or "this client"
    can = ", ".join(name for name, _ in VISIBILITY[key])
    return f"{key}: {who} does not say (only {can} can), so the rule does not match"


def _check_background(want: bool, f: TurnFacts) -> tuple[bool, str]:
    got = f.who.background
    if got is None:
        return False, _cannot_say("background", f)
    ok = got == want
    what = f"background turn ({f.who.background_why})" if got else f"not a background turn ({f.who.background_why})"
    return ok, f"background: {what}, {'as the rule wants' if ok else 'rule wants ' + str(want).lower()}"


def _check_agent(want: str, f: TurnFacts) -> tuple[bool, str]:
    got = f.who.agent
    if got is None:
        return False, _cannot_say("agent", f)
    ok = got == want
    said = f"{got} {f.who.agent_id}" if f.who.agent_id else got
    return ok, f"agent: {said}, {'as the rule wants' if ok else 'rule wants ' + want}"


def _check_session(globs: list[str], f: TurnFacts) -> tuple[bool, str]:
    got = f.who.session
    shown = ", ".join(repr(g) for g in globs)
    if got is None:
        return False, f"session: none known for this turn, rule wants {shown}"
    kind = "fingerprint" if f.who.session_fingerprint else "session"
    hit = next((g for g in globs if fnmatch.fnmatchcase(got, g)), None)
    if hit is not None:
        return True, f"{kind} {got!r} matches {hit!r}"
    return False, f"{kind} {got!r} does not match {shown}"


def logins() -> dict[str, str]:
    """Every login a registered protocol tells (``when.login``'s values) -> what it is."""
    return {name: what for p in protocols.all_protocols() for name, what in p.logins.items()}


def _read_login(r: YamlReader, node: Node, what: str) -> str | None:
    return one_of(*logins())(r, node, what)  # the registry's logins as they are now


def _check_login(want: str, f: TurnFacts) -> tuple[bool, str]:
    if f.login is None:
        return False, f"login: a {f.client} turn does not say which login sent it, rule wants {want}"
    ok = f.login == want
    return ok, f"login: {f.login}, {'as the rule wants' if ok else 'rule wants ' + want}"


def _read_quota(r: YamlReader, node: Node, what: str) -> dict | None:
    """``{above: 0.8}`` or ``{window: 5h, above: 0.8}`` (routing/quota.py ``quota_problem``)."""
    m = r.mapping(node, what, QUOTA_KEYS)
    if m is None:
        return None
    got = {k: (r.number(vn) if k == "above" and r.number(vn) is not None else
               vn.value if isinstance(vn, ScalarNode) else r.got(vn)) for k, (_, vn) in m.items()}
    if problem := quota_problem(got):
        r.error(node, f"{what}: {problem.removeprefix('quota: ')}")
        return None
    return got


# ---------------------------------------------------------------------------------------------
# The predicates: one row per ``when`` key (the order is the one errors list them in)


@dataclass(frozen=True)
class Predicate:
    """One ``when`` key: how its value is read from the rules file, and how it is checked."""

    read: Read  # (reader, node, what) -> the value as stored in Route.when, None after an error
    check: Check  # (value, facts) -> (holds, reason)


AGENTS = ("main", "subagent")
_BOOL = scalar("bool")

PREDICATES: dict[str, Predicate] = {
    "client": Predicate(_read_protocols, _check_client),
    "model": Predicate(scalar("texts"), _check_model),
    "tools": Predicate(_BOOL, _flag(
        "tools", lambda f: f.tools,
        lambda f: f"request declares {f.tool_count} tool{'s' * (f.tool_count != 1)}" if f.tools
        else "request declares no tools", ("none", "some"))),
    "thinking": Predicate(_BOOL, _flag(
        "thinking", lambda f: f.thinking,
        lambda f: "request asks for it" if f.thinking else "request does not ask for it", ("it off", "it on"))),
    "images": Predicate(_BOOL, _flag(
        "images", lambda f: f.images, lambda f: "request has images" if f.images else "no images",
        ("none", "some"))),
    "documents": Predicate(_BOOL, _flag(
        "documents", lambda f: f.documents, lambda f: "request has documents" if f.documents else "no documents",
        ("none", "some"))),
    "server_tools": Predicate(_BOOL, _flag(
        "server_tools", lambda f: bool(f.server_tools),
        lambda f: f"request relies on provider-run tools ({', '.join(f.server_tools)})"
        if f.server_tools else "request relies on no provider-run tool", ("none", "some"))),
    "max_request_bytes": Predicate(_read_size, _check_bytes),
    "last_user_matches": Predicate(_read_regex, _check_last_user),
    "header": Predicate(_read_headers, _check_headers),
    "background": Predicate(_BOOL, _check_background),
    "agent": Predicate(one_of(*AGENTS), _check_agent),
    "session": Predicate(scalar("texts"), _check_session),
    "quota": Predicate(_read_quota, check_quota),  # the account's subscription windows (routing/quota.py)
    "login": Predicate(_read_login, _check_login),  # chatgpt | api_key (Codex; protocols' ``logins``)
}


def read_when(r: YamlReader, node: Node, where: str) -> dict[str, Any]:
    """A route's ``when`` mapping: every key a predicate, every value read by its row (None after
    an error, reported)."""
    m = r.mapping(node, f"{where}: when", tuple(PREDICATES)) or {}
    return {key: PREDICATES[key].read(r, vn, f"{where}: when.{key}") for key, (_, vn) in m.items()}


def check_when(when: Mapping[str, Any], facts: TurnFacts) -> list[tuple[bool, str]]:
    """Each condition of a ``when``, in its order, checked against a turn: (holds, reason)."""
    return [PREDICATES[k].check(v, facts) for k, v in when.items()]
