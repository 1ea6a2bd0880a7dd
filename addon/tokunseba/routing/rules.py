"""Routing rules: YAML -> validated endpoints and routes; ``decide(turn)`` -> decision + trace.

The file format is docs/architecture.md §4. Every mistake is reported at load time as one line
``FILE:LINE: what is wrong``; a route whose target its client protocol cannot reach is a
warning at load time (``FILE:LINE: warning: ...``) and ``refused`` at run time, where
evaluation simply goes on with the next route (docs/architecture.md §2 rule 4).

Failing closed is the user's choice: a route with ``on_failure: error`` (alias:
``on_unreachable: error``) answers with an error when its endpoint is down, cooling down or
full (``decide`` returns an "error" decision), and when it fails (turn/failover.py), instead of
trying the next route (``on_failure: next``, the default; ``decide(after=...)`` finds
it), and top-level ``unmatched: refuse`` (``Rules.unmatched``, applied by
turn/plan.py) answers every provider turn no route takes instead of passing it through.

This is the only module that imports yaml, with prices.py (which reads the price table
with this module's ``_Reader``, for the same ``FILE:LINE`` errors).
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from .accepts import content_refusal
from .quota import KEYS as QUOTA_KEYS, check_quota, quota_problem
from .endpoints import BUILTIN_ENDPOINTS, FIELD_CHECKS, Endpoint, count_tokens_problem, custom_tools_problem
from ..protocols.clients import VISIBILITY
from ..credentials import is_credential_header
from .session_facts import Speaker, speaker
from .shadowable import shadow_refusal
from .. import protocols
from ..protocols import NAMES as PROTOCOLS  # a live view of the registry
from ..protocols.facts import RuleShape
from ..translate import CODECS, pair_refusal
from ..states import Decided


class RulesError(Exception):
    """Rules that cannot be used. ``str(e)`` is the first problem, one line
    ``FILE:LINE: what is wrong``; ``e.errors`` holds every problem found."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__(errors[0])
        self.errors = errors


@dataclass
class Route:
    name: str
    when: dict  # condition -> value, as written (client/model normalised to lists, header names lower-case)
    to: str | None  # None: a shadow-only route (the turn passes through and is shadowed)
    model: str | None = None
    on_refused: str = "skip"  # "skip" | "error"
    line: int = 0
    on_unreachable: str = "skip"  # on_failure as stored: "skip" (= next) | "error" (answer the client with an error)
    shadow: str | None = None  # endpoint that also gets the turn, in the background (shadow/turns.py)
    shadow_sample: float = 1.0  # fraction of matching turns to shadow

    @property
    def on_failure(self) -> str:
        """``next`` (a failed, unreachable, cooling or full endpoint: the next route whose
        ``when`` matches, then what ``unmatched`` says) | ``error`` (an error to the client).
        ``on_unreachable`` is its older name (``skip`` = ``next``)."""
        return "error" if self.on_unreachable == "error" else "next"


@dataclass
class Rules:
    endpoints: dict[str, Endpoint]  # built-ins + the file's own
    routes: list[Route]
    source: str
    warnings: list[str] = field(default_factory=list)
    unmatched: str = "pass"  # a provider turn no route takes: "pass" (to its original host) | "refuse"
    # a turn answering tool calls: "follow" (to the endpoint and model that made them, while a
    # route to that endpoint takes this client) | "route" (routed afresh, like any turn)
    tool_loops: str = "follow"
    aliased: list[str] = field(default_factory=list)  # routes that say on_unreachable (on_failure's older name)


# ---------------------------------------------------------------------------------------------
# The facts of one turn that rules look at


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


def content_refused(facts: TurnFacts, ep: Endpoint) -> str | None:
    """Why a turn with these facts cannot go to ``ep``, by what ``ep`` takes (routing/accepts.py)."""
    if not (facts.images or facts.documents or facts.server_tools):
        return None
    return content_refusal(facts.client, images=facts.images, documents=facts.documents,
                           server_tools=facts.server_tools, endpoint=ep.name, protocol=ep.protocol,
                           takes=ep.takes, said=ep.accepts is not None)


def turn_refusal(facts: TurnFacts, ep: Endpoint) -> str | None:
    """Why a route to ``ep`` is refused for this turn: no translator for the pair, or content
    ``ep`` does not take (docs/architecture.md rule 4); None: it is not."""
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
    client: str, body: Any, request_bytes: int, headers: Mapping[str, str], *, model: str | None = None
) -> TurnFacts:
    """What rules see of one turn. Never raises on odd bodies: wrong types count as absent.

    ``model`` overrides the body's (Gemini carries the model in the path).
    """
    body = _d(body)
    if model is None and isinstance(body.get("model"), str):
        model = body["model"]
    hdrs = {str(k).lower(): str(v) for k, v in headers.items()}
    who = speaker(client, hdrs, body)
    facts = protocols.find(client)
    shape = facts.rule_shape if facts is not None else None  # where the client protocol keeps it
    if shape is None:
        return TurnFacts(client, model, False, False, False, request_bytes, None, hdrs, who=who)
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
    )


# ---------------------------------------------------------------------------------------------
# Conditions: each check gives (holds, reason) whether it holds or not


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


CHECKS: dict[str, Callable[[Any, TurnFacts], tuple[bool, str]]] = {
    "client": _check_client,
    "model": _check_model,
    "tools": _flag("tools", lambda f: f.tools,
                   lambda f: f"request declares {f.tool_count} tool{'s' * (f.tool_count != 1)}" if f.tools
                   else "request declares no tools", ("none", "some")),
    "thinking": _flag("thinking", lambda f: f.thinking,
                      lambda f: "request asks for it" if f.thinking else "request does not ask for it",
                      ("it off", "it on")),
    "images": _flag("images", lambda f: f.images,
                    lambda f: "request has images" if f.images else "no images", ("none", "some")),
    "documents": _flag("documents", lambda f: f.documents,
                       lambda f: "request has documents" if f.documents else "no documents", ("none", "some")),
    "server_tools": _flag("server_tools", lambda f: bool(f.server_tools),
                          lambda f: f"request relies on provider-run tools ({', '.join(f.server_tools)})"
                          if f.server_tools else "request relies on no provider-run tool", ("none", "some")),
    "max_request_bytes": _check_bytes,
    "last_user_matches": _check_last_user,
    "header": _check_headers,
    "background": _check_background,
    "agent": _check_agent,
    "session": _check_session,
    "quota": check_quota,  # the account's subscription windows (routing/quota.py)
}
AGENTS = ("main", "subagent")


# ---------------------------------------------------------------------------------------------
# Decision


@dataclass(eq=False)
class Tried:
    """One route as ``decide`` tried it (a decision's ``trace`` is these, in order): whether its
    ``when`` held and why (``reasons``), why the pair or the translation refused the turn
    (``refused``), or that the route's ``endpoint`` could not take it (``unreachable``;
    ``unavailable``: why not, when not simply down: cooling down, full). A tool loop followed
    or not (reasoning/loop_route.py) is one too, naming the loop (``loop``).

    ``record()`` is its recorded form (the ledger's JSON, the endpoint by name, only where the
    route was skipped). It also reads as that form (``t["refused"]``, ``t.get("route")``, equal
    to that dict), so what reads recorded traces reads a live one the same."""

    route: str
    matched: bool
    reasons: list[str]
    refused: str | None = None
    unreachable: bool = False
    endpoint: Endpoint | None = field(default=None, repr=False)  # the route's endpoint
    unavailable: str | None = None
    loop: str | None = None  # the tool loop: "tool loop: call_1 made by ds/m (tk-…)"

    def record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"route": self.route, "matched": self.matched, "reasons": self.reasons,
                               "refused": self.refused, "unreachable": self.unreachable}
        if self.loop is not None:
            out["loop"] = True
        if self.endpoint is not None and (self.refused or self.unreachable):
            out["endpoint"] = self.endpoint.name
        if self.unavailable is not None:
            out["unavailable"] = self.unavailable
        return out

    def __getitem__(self, key: str) -> Any:
        return self.record()[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.record().get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self.record()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Tried):
            return self.record() == other.record()
        return self.record() == other if isinstance(other, dict) else NotImplemented

    __hash__ = None  # type: ignore[assignment]


def records(trace: list[Tried]) -> list[dict[str, Any]]:
    """A trace as recorded (the ledger, the console line, explain)."""
    return [t.record() for t in trace]


@dataclass
class Decision:
    action: Decided  # PASS (no route: pass through untouched) | ROUTE | ERROR (refused, on_refused: error)
    route: Route | None  # with "pass": a shadow-only route that matched, else None
    endpoint: Endpoint | None
    model: str | None  # model to send; None = keep the client's
    trace: list[Tried]  # each route tried, in order
    reason: str  # one-line summary


def decide(
    rules: Rules,
    facts: TurnFacts,
    *,
    refusal: Callable[[Route, Endpoint], str | None] | None = None,
    reachable: Callable[[Endpoint], bool | str | None] | None = None,
    after: str | None = None,
) -> Decision:
    """First route whose conditions hold, whose pair is translatable and whose endpoint is
    available wins; no such route = pass through. A refused route with ``on_refused: error``
    or an unavailable one with ``on_failure: error`` ends the search with an "error".

    ``reachable(ep)``: True/None when ``ep`` may take the turn, else False (unreachable) or
    why not (cooling down, full). ``after``: only the routes after the route of that name
    are looked at (failover: the next route once that one's endpoint failed)."""
    if refusal is None:
        refusal = lambda route, ep: turn_refusal(facts, ep)  # noqa: E731
    trace: list[Tried] = []
    skipped: list[str] = []
    routes = rules.routes
    if after is not None:
        names = [r.name for r in routes]
        routes = routes[names.index(after) + 1:] if after in names else []
    for route in routes:
        results = [CHECKS[k](v, facts) for k, v in route.when.items()]
        entry = Tried(route.name, all(ok for ok, _ in results),
                      [r for _, r in results] or ["no conditions: matches every turn"])
        trace.append(entry)
        if not entry.matched:
            continue
        if route.to is None:  # shadow-only: served as if unrouted, shadowed in the background
            return Decision(Decided.PASS, route, None, None, trace, f"{route.name}: shadow only, passed through")
        ep = entry.endpoint = rules.endpoints[route.to]
        if why := refusal(route, ep):
            entry.refused = why
            if route.on_refused == "error":
                return Decision(Decided.ERROR, route, ep, None, trace, f"route {route.name} refused: {why}")
            skipped.append(f"{route.name} refused ({why})")
            continue
        ok = True if reachable is None else reachable(ep)
        if ok is not True and ok is not None:
            why = "unreachable" if ok is False else str(ok)
            entry.unreachable = True
            if ok is not False:
                entry.unavailable = why
            if route.on_failure == "error":
                return Decision(Decided.ERROR, route, ep, None, trace,
                                f"route {route.name}: endpoint {ep.name} is {why} (on_failure: error)")
            skipped.append(f"{route.name}: endpoint {ep.name} {why}")
            continue
        return Decision(Decided.ROUTE, route, ep, route.model or ep.model, trace, f"{route.name} → {ep.name}")
    reason = "no usable route: " + "; ".join(skipped) if skipped else "no route matched"
    return Decision(Decided.PASS, None, None, None, trace, reason)


# ---------------------------------------------------------------------------------------------
# Loading and validation

TOP_KEYS = ("endpoints", "routes", "unmatched", "tool_loops")
ROUTE_KEYS = ("name", "when", "to", "model", "on_refused", "on_failure", "on_unreachable", "shadow", "shadow_sample")
ON_REFUSED = ("skip", "error")
ON_FAILURE = ("next", "error")
ON_UNREACHABLE = ("skip", "error")  # on_failure's older name: skip = next
UNMATCHED = ("pass", "refuse")
TOOL_LOOPS = ("follow", "route")  # follow: a turn answering tool calls goes where they were made (turn/plan.py)
# endpoint key -> (YAML type, required)
ENDPOINT_KEYS: dict[str, tuple[str, bool]] = {
    "protocol": ("text", True),
    "url": ("text", True),
    "key_env": ("text", False),
    "model": ("text", False),
    "max_tokens": ("int", False),
    "system_role": ("text", False),
    "max_tokens_field": ("text", False),
    "stop": ("texts", False),
    "first_byte_timeout_s": ("number", False),
    "cooldown_max_s": ("number", False),
    "max_concurrency": ("int", False),
    "queue_s": ("number", False),
    "effort": ("text", False),
    "max_effort": ("text", False),
    "count_tokens": ("text", False),
    "custom_tools": ("text", False),
    "accepts": ("texts", False),
    "cache": ("text", False),
    "context_tokens": ("int", False),
}
_BOOL, _INT, _FLOAT, _NULL = (f"tag:yaml.org,2002:{t}" for t in ("bool", "int", "float", "null"))


class _Reader:
    """Walks the composed YAML nodes, collecting errors with their lines."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.problems: list[tuple[int, str]] = []
        self.aliased: list[str] = []  # routes that say on_unreachable
        self._con = SafeConstructor()

    def line(self, node: Node) -> int:
        return node.start_mark.line + 1

    def error(self, node: Node | int, msg: str) -> None:
        line = node if isinstance(node, int) else self.line(node)
        self.problems.append((line, f"{self.source}:{line}: {msg}"))

    @property
    def errors(self) -> list[str]:
        """Every problem, in file order."""
        return [m for _, m in sorted(self.problems, key=lambda p: p[0])]

    @staticmethod
    def _got(node: Node) -> str:
        if isinstance(node, MappingNode):
            return "a mapping"
        if isinstance(node, SequenceNode):
            return "a list"
        return "nothing" if node.tag == _NULL else repr(node.value)

    def mapping(
        self, node: Node, what: str, allowed: tuple[str, ...] | None
    ) -> dict[str, tuple[Node, Node]] | None:
        """{key: (key node, value node)}; unknown or duplicate keys are errors."""
        if not isinstance(node, MappingNode):
            self.error(node, f"{what} must be a mapping, got {self._got(node)}")
            return None
        out: dict[str, tuple[Node, Node]] = {}
        for k, v in node.value:
            if not isinstance(k, ScalarNode) or k.tag == _NULL:
                self.error(k, f"{what}: keys must be plain names, got {self._got(k)}")
            elif k.value in out:
                first = self.line(out[k.value][0])
                self.error(k, f"{what}: duplicate key {k.value!r} (first at line {first})")
            elif allowed is not None and k.value not in allowed:
                self.error(k, f"{what}: unknown key {k.value!r} (expected one of: {', '.join(allowed)})")
            else:
                out[k.value] = (k, v)
        return out

    def value(self, node: Node, kind: str, what: str) -> Any:
        """A scalar of ``kind`` ("text" | "int" | "number" | "bool" | "texts"), or None after an error."""
        if kind == "texts" and isinstance(node, SequenceNode):
            items = [self.value(n, "text", what) for n in node.value]
            if not items:
                self.error(node, f"{what} must not be an empty list")
            return items if items and None not in items else None
        ok = isinstance(node, ScalarNode) and {
            "text": node.tag not in (_NULL, _BOOL) and node.value != "",
            "texts": node.tag not in (_NULL, _BOOL) and node.value != "",
            "int": node.tag == _INT,
            "number": node.tag in (_INT, _FLOAT),
            "bool": node.tag == _BOOL,
        }[kind]
        if not ok:
            wanted = {"text": "a string", "texts": "a string or a list of strings", "int": "an integer",
                      "number": "a number", "bool": "true or false"}[kind]
            self.error(node, f"{what} must be {wanted}, got {self._got(node)}")
            return None
        if kind in ("int", "bool", "number"):
            return self._con.construct_object(node)
        return [node.value] if kind == "texts" else node.value


def _when_value(r: _Reader, key: str, node: Node, where: str) -> Any:
    """Parse and check one ``when`` condition; None after an error."""
    what = f"{where}: when.{key}"
    match key:
        case "client":
            v = r.value(node, "texts", what)
            for p in v or ():
                if p not in PROTOCOLS:
                    r.error(node, f"{what}: unknown protocol {p!r} (expected one of: {', '.join(PROTOCOLS)})")
                    return None
            return v
        case "model":
            return r.value(node, "texts", what)
        case "tools" | "thinking" | "images" | "documents" | "server_tools" | "background":
            return r.value(node, "bool", what)
        case "agent":
            v = r.value(node, "text", what)
            if v is not None and v not in AGENTS:
                r.error(node, f"{what} must be one of: {', '.join(AGENTS)}; got {v!r}")
                return None
            return v
        case "session":
            return r.value(node, "texts", what)
        case "quota":
            v = r.mapping(node, what, QUOTA_KEYS)
            if v is None:
                return None
            got = {k: r._con.construct_object(vn) for k, (_, vn) in v.items()}
            if problem := quota_problem(got):
                r.error(node, f"{what}: {problem.removeprefix('quota: ')}")
                return None
            return got
        case "max_request_bytes":
            v = r.value(node, "int", what)
            if v is not None and v < 0:
                r.error(node, f"{what} must not be negative, got {v}")
                return None
            return v
        case "last_user_matches":
            v = r.value(node, "text", what)
            try:
                if v is not None:
                    re.compile(v)
            except re.error as e:
                r.error(node, f"{what}: bad regex {v!r}: {e.msg} at position {e.pos}")
                return None
            return v
        case "header":
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
            return None if None in out.values() else out
    raise AssertionError(key)  # pragma: no cover - keys are checked against CHECKS first


def _endpoints(r: _Reader, node: Node) -> tuple[dict[str, Endpoint], set[str]]:
    """The file's endpoints, and every name it declares (valid or not)."""
    out: dict[str, Endpoint] = {}
    declared: set[str] = set()
    for name, (kn, vn) in (r.mapping(node, "endpoints", None) or {}).items():
        declared.add(name)
        where = f"endpoint {name!r}"
        if name in BUILTIN_ENDPOINTS:
            r.error(kn, f"{where} shadows the built-in endpoint of that name; choose another name")
            continue
        m = r.mapping(vn, where, tuple(ENDPOINT_KEYS))
        if m is None:
            continue
        before = len(r.problems)
        kwargs: dict[str, Any] = {}
        for key, (kind, required) in ENDPOINT_KEYS.items():
            if key not in m:
                if required:
                    r.error(vn, f"{where} has no {key!r}")
                continue
            _, kv = m[key]
            if not required and isinstance(kv, ScalarNode) and kv.tag == _NULL:
                continue  # `model:` left empty = not set
            if key == "cache" and isinstance(kv, ScalarNode) and kv.tag == _BOOL:  # YAML reads off/on as booleans
                kv = ScalarNode("tag:yaml.org,2002:str", kv.value.lower(), kv.start_mark, kv.end_mark)
            v = r.value(kv, kind, f"{where}: {key}")
            if kind == "number" and v is not None:
                v = float(v)
            if v is not None and key in FIELD_CHECKS and (problem := FIELD_CHECKS[key](v)):
                r.error(kv, f"{where}: {problem}")
            kwargs[key] = tuple(v) if key in ("stop", "accepts") and v is not None else v
        if "count_tokens" in m and isinstance(kwargs.get("protocol"), str) and (
                problem := count_tokens_problem(kwargs["protocol"], kwargs.get("count_tokens"))):
            r.error(m["count_tokens"][1], f"{where}: {problem}")
        if "custom_tools" in m and isinstance(kwargs.get("protocol"), str) and (
                problem := custom_tools_problem(kwargs["protocol"], kwargs.get("custom_tools"))):
            r.error(m["custom_tools"][0], f"{where}: {problem}")
        if "queue_s" in m and "max_concurrency" not in m:
            r.error(m["queue_s"][0], f"{where}: queue_s without max_concurrency (queue_s is how long a turn "
                                     "waits for one of the endpoint's max_concurrency slots)")
        if len(r.problems) == before:
            out[name] = Endpoint(name=name, **kwargs)
    return out, declared


def _route_label(node: Node, i: int) -> str:
    """How errors name a route: by its name when it has one, else by position."""
    if isinstance(node, MappingNode):
        for k, v in node.value:
            if k.value == "name" and isinstance(v, ScalarNode) and v.value:
                return f"route {v.value!r}"
    return f"route #{i}"


def _routes(r: _Reader, node: Node, endpoints: dict[str, Endpoint], declared: set[str]) -> list[Route]:
    if not isinstance(node, SequenceNode):
        r.error(node, f"routes must be a list, got {r._got(node)}")
        return []
    routes: list[Route] = []
    first_line: dict[str, int] = {}
    for i, rn in enumerate(node.value, 1):
        m = r.mapping(rn, _route_label(rn, i), ROUTE_KEYS)
        if m is None:
            continue
        before = len(r.problems)
        name = r.value(m["name"][1], "text", f"route #{i}: name") if "name" in m else None
        if "name" not in m:
            r.error(rn, f"route #{i} has no 'name'")
        elif name in first_line:
            r.error(m["name"][1], f"duplicate route name {name!r} (first at line {first_line[name]})")
        elif name is not None:
            first_line[name] = r.line(rn)
        where = f"route {name!r}" if name else f"route #{i}"
        to = r.value(m["to"][1], "text", f"{where}: to") if "to" in m else None
        if "to" not in m and "shadow" not in m:
            r.error(rn, f"{where} has no 'to' (the endpoint to send matching turns to) and no 'shadow'")
        else:
            _endpoint_ref(r, m, "to", to, where, endpoints, declared)
        shadow, sample = _shadow_keys(r, m, where, endpoints, declared)
        model = None
        if "model" in m and m["model"][1].tag != _NULL:
            model = r.value(m["model"][1], "text", f"{where}: model")
        on_refused = _choice(r, m, "on_refused", ON_REFUSED, where)
        on_unreachable = _on_failure(r, m, where)
        when: dict[str, Any] = {}
        if "when" in m and m["when"][1].tag != _NULL:
            for key, (kn, vn) in (r.mapping(m["when"][1], f"{where}: when", tuple(CHECKS)) or {}).items():
                when[key] = _when_value(r, key, vn, where)
        if len(r.problems) == before and (to in endpoints or (to is None and shadow in endpoints)):
            assert name is not None  # a route without one has a problem
            routes.append(Route(name, when, to, model, on_refused, r.line(rn), on_unreachable, shadow, sample))
    return routes


def _endpoint_ref(r: _Reader, m: dict, key: str, name: str | None, where: str, endpoints: dict[str, Endpoint],
                  declared: set[str]) -> None:
    """An endpoint named by a route key must exist (an invalid declared one is reported at its own line)."""
    if key in m and name is not None and name not in endpoints and name not in declared:
        known = ", ".join(sorted(endpoints.keys() | declared))
        r.error(m[key][1], f"{where}: unknown endpoint {name!r} in '{key}' (known: {known})")


def _shadow_keys(r: _Reader, m: dict, where: str, endpoints: dict[str, Endpoint],
                 declared: set[str]) -> tuple[str | None, float]:
    """``shadow: ENDPOINT`` and ``shadow_sample: 0..1`` (default 1.0; only with shadow)."""
    shadow = r.value(m["shadow"][1], "text", f"{where}: shadow") if "shadow" in m else None
    _endpoint_ref(r, m, "shadow", shadow, where, endpoints, declared)
    sample = 1.0
    if "shadow_sample" in m:
        node = m["shadow_sample"][1]
        value = r._con.construct_object(node) if isinstance(node, ScalarNode) and node.tag in (_INT, _FLOAT) else None
        if value is None or not 0 <= value <= 1:
            r.error(node, f"{where}: shadow_sample must be a number from 0 to 1, got {r._got(node)}")
        else:
            sample = float(value)
        if "shadow" not in m:
            r.error(m["shadow_sample"][0], f"{where}: shadow_sample without 'shadow' (the endpoint to shadow to)")
    return shadow, sample


def _on_failure(r: _Reader, m: dict[str, tuple[Node, Node]], where: str) -> str:
    """``on_failure: next|error``, or its older name ``on_unreachable: skip|error``; stored as
    ``Route.on_unreachable`` ("skip" | "error"). Both keys on one route must agree."""
    failure = _choice(r, m, "on_failure", ON_FAILURE, where) if "on_failure" in m else None
    older = _choice(r, m, "on_unreachable", ON_UNREACHABLE, where) if "on_unreachable" in m else None
    if failure is not None and older is not None and (failure == "error") != (older == "error"):
        r.error(m["on_unreachable"][1], f"{where}: on_unreachable: {older} contradicts on_failure: {failure} "
                                        "(on_unreachable is the older name of on_failure; keep one)")
    if older is not None:
        r.aliased.append(str(m["name"][1].value) if "name" in m else where)
    if failure is not None:
        return "error" if failure == "error" else "skip"
    return older or "skip"


def _choice(r: _Reader, m: dict[str, tuple[Node, Node]], key: str, allowed: tuple[str, ...], where: str) -> str:
    """A key whose value is one of ``allowed`` (the first is the default)."""
    if key not in m:
        return allowed[0]
    v = r.value(m[key][1], "text", f"{where}: {key}")
    if v is not None and v not in allowed:
        r.error(m[key][1], f"{where}: {key} must be one of: {', '.join(allowed)}; got {v!r}")
    return v if v in allowed else allowed[0]


def _warnings(rules: Rules) -> list[str]:
    """Routes some of whose clients could never reach their target (refused at run time)."""
    out = []
    for route in rules.routes:
        if route.shadow is not None:
            out += _shadow_warnings(rules, route)
        if route.to is None:
            continue
        ep = rules.endpoints[route.to]
        why = [w for c in route.when.get("client") or PROTOCOLS if (w := pair_refusal(c, ep.protocol))]
        if why:
            then = "answered with an error" if route.on_refused == "error" else "go on to the next route"
            out.append(
                f"{rules.source}:{route.line}: warning: route {route.name!r} → {ep.name} ({ep.protocol}): "
                f"{'; '.join(why)}; such turns are refused here and {then}"
            )
        out += _max_output_warnings(rules, route, ep)
    return out + _count_warnings(rules) + _cache_warnings(rules)


def _cache_warnings(rules: Rules) -> list[str]:
    """An endpoint whose ``cache`` asks for breakpoints its protocol has no way to take (Gemini):
    nothing is placed there (its translations say so too)."""
    out = []
    for ep in rules.endpoints.values():
        codec = CODECS.get(ep.protocol)
        if ep.cache != "off" and codec is not None and codec.place_cache is None and codec.carry_cache is None:
            out.append(f"{rules.source}: warning: endpoint {ep.name} ({ep.protocol}): cache: {ep.cache}, but "
                       f"{ep.protocol} requests take no cache breakpoints: none are placed or carried there")
    return out


def _count_warnings(rules: Rules) -> list[str]:
    """Each endpoint without a token counter that routes send clients who count to, once (at its
    first such route): their count requests follow their turns there and get an error (never an
    estimate). Not said when the endpoint says ``count_tokens: none`` (the user means it)."""
    seen: dict[str, tuple[Route, list[str], list[str]]] = {}
    for route in rules.routes:
        ep = rules.endpoints.get(route.to or "")
        if ep is None or ep.counter is not None or ep.count_tokens == "none":
            continue
        counting = [c for c in route.when.get("client") or PROTOCOLS
                    if (f := protocols.find(c)) is not None and f.count_kinds and pair_refusal(c, ep.protocol) is None]
        if counting:
            first, names, clients = seen.setdefault(ep.name, (route, [], []))
            names.append(route.name)
            clients += [c for c in counting if c not in clients]
    out = []
    for name, (route, names, clients) in seen.items():
        ep = rules.endpoints[name]
        out.append(f"{rules.source}:{route.line}: warning: route{'s' * (len(names) > 1)} {', '.join(map(repr, names))} "
                   f"→ {ep.name} ({ep.protocol}): count requests of {', '.join(clients)} clients follow their turns "
                   f"there and get an error ({ep.no_counter_why}): give it count_tokens: probe (each count is one turn "
                   "of at most 1 output token), the protocol whose counter the same server serves (llama-server: "
                   "count_tokens: anthropic), or count_tokens: none")
    return out


def _max_output_warnings(rules: Rules, route: Route, ep: Endpoint) -> list[str]:
    """An endpoint whose protocol requires a maximum output (Anthropic ``max_tokens``) with no
    ``max_tokens:`` of its own, taking clients whose protocol may omit it: every such turn
    that sets none would fail at run time."""
    target = protocols.find(ep.protocol)
    if target is None or not target.max_output_required or ep.max_tokens is not None:
        return []
    omitting = [c for c in route.when.get("client") or PROTOCOLS
                if c != ep.protocol and (f := protocols.find(c)) is not None and not f.max_output_required
                and pair_refusal(c, ep.protocol) is None]
    if not omitting:
        return []
    return [f"{rules.source}:{route.line}: warning: route {route.name!r} → {ep.name} ({ep.protocol}): "
            f"{target.title} requires {target.max_output_field} and endpoint {ep.name} sets no default; "
            f"turns of {', '.join(omitting)} clients that send none would fail: add `max_tokens:` to endpoint {ep.name}"]


def _shadow_warnings(rules: Rules, route: Route) -> list[str]:
    """A shadow endpoint some of the route's clients cannot reach: those turns are not shadowed."""
    assert route.shadow is not None  # called for a route with a shadow
    ep = rules.endpoints[route.shadow]
    why = [w for c in route.when.get("client") or PROTOCOLS
           if (w := shadow_refusal(c, ep.protocol) or pair_refusal(c, ep.protocol))]
    if not why:
        return []
    return [f"{rules.source}:{route.line}: warning: route {route.name!r} shadow → {ep.name} ({ep.protocol}): "
            f"{'; '.join(why)}; such turns are served but not shadowed"]


def load_rules_text(text: str, source: str = "<rules>") -> Rules:
    """Parse and validate rules; RulesError (one line per problem, file and line) if unusable."""
    r = _Reader(source)
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"{mark.line + 1}:{mark.column + 1}" if mark else "1"
        what = (
            f"{e.context}, {e.problem}"
            if e.context and e.problem and e.problem.startswith("but ")
            else " ".join(filter(None, (e.problem, e.context and f"({e.context})")))
        )
        raise RulesError([f"{source}:{where}: YAML syntax error: {what}"]) from None
    except yaml.YAMLError as e:
        raise RulesError([f"{source}:1: YAML error: {str(e).splitlines()[0]}"]) from None
    endpoints: dict[str, Endpoint] = dict(BUILTIN_ENDPOINTS)
    routes: list[Route] = []
    unmatched, tool_loops = UNMATCHED[0], TOOL_LOOPS[0]
    if root is not None and not (isinstance(root, ScalarNode) and root.tag == _NULL):
        top = r.mapping(root, "the rules file", TOP_KEYS)
        if top is not None:
            unmatched = _choice(r, top, "unmatched", UNMATCHED, "the rules file")
            tool_loops = _choice(r, top, "tool_loops", TOOL_LOOPS, "the rules file")
            declared: set[str] = set()
            if "endpoints" in top and top["endpoints"][1].tag != _NULL:
                user, declared = _endpoints(r, top["endpoints"][1])
                endpoints.update(user)
            if "routes" in top and top["routes"][1].tag != _NULL:
                routes = _routes(r, top["routes"][1], endpoints, declared)
    if r.errors:
        raise RulesError(r.errors)
    rules = Rules(endpoints, routes, source, unmatched=unmatched, tool_loops=tool_loops, aliased=r.aliased)
    rules.warnings = _warnings(rules)
    return rules


def load_rules(path: str | Path | None) -> Rules:
    """Rules from a file; None = no rules (every turn passes through)."""
    if path is None:
        return Rules(dict(BUILTIN_ENDPOINTS), [], "<no rules>")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RulesError([f"{path}: no such rules file"]) from None
    except (OSError, UnicodeDecodeError) as e:
        raise RulesError([f"{path}: cannot read rules file: {e}"]) from None
    return load_rules_text(text, str(path))


def check_file(path: str | Path | None) -> tuple[bool, list[str]]:
    """For ``tokunseba check``: (ok, lines to print)."""
    try:
        rules = load_rules(path)
    except RulesError as e:
        return False, e.errors
    return True, [counts_line(rules), *policy_lines(rules), *who_lines(rules), *accepts_lines(rules), *rules.warnings]


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def counts_line(rules: Rules) -> str:
    """``check``'s first line: what the file declares, the built-in endpoints apart, and a
    file that routes nothing said as such."""
    declared = sum(1 for e in rules.endpoints.values() if not e.builtin)
    builtin = len(rules.endpoints) - declared
    line = f"OK: {_n(declared, 'endpoint')} declared (+{builtin} built in), {_n(len(rules.routes), 'route')}"
    if not rules.routes:
        line += (" — nothing is routed: every turn passes through" if rules.unmatched == "pass"
                 else f" — every provider turn is refused (unmatched: {rules.unmatched})")
    return line


_CONTENT = {"images": "images", "documents": "documents", "server_tools": "provider-run tools"}


def accepts_lines(rules: Rules) -> list[str]:
    """For each route whose endpoint does not take some content its ``when`` lets through
    (routing/accepts.py): which turns are refused there, before sending, and what happens then."""
    out = []
    for route in rules.routes:
        if route.to is None:
            continue
        ep = rules.endpoints[route.to]
        open_to = [k for k in _CONTENT if route.when.get(k) is not False]
        missing = [k for k in open_to if k not in ep.takes]
        cross = [c for c in route.when.get("client") or PROTOCOLS if c != ep.protocol
                 and pair_refusal(c, ep.protocol) is None] if "server_tools" in open_to and "server_tools" in ep.takes else []
        if not missing and not cross:
            continue
        said = "" if ep.accepts is not None else " by default" + (" (an endpoint on loopback: a local server)"
                                                                  if ep.takes == ("text",) else "")
        then = "answered with an error" if route.on_refused == "error" else "go on to the next route"
        what = []
        if missing:
            names = [_CONTENT[k] for k in missing]
            what.append("turns with " + (", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]))
        if cross:
            what.append(f"turns of {', '.join(cross)} clients relying on provider-run tools (no translation "
                        f"to {ep.protocol} carries them)")
        out.append(f"accepts: route {route.name!r} → {ep.name} takes {', '.join(ep.takes)}{said}: "
                   f"{' and '.join(what)} are refused there before sending and {then}")
    return out


def who_lines(rules: Rules) -> list[str]:
    """For each who-is-talking key the routes use (background, agent, session): which clients
    can say it, and how (protocols/clients.py); the others' turns never match it."""
    out = []
    for key, seen in VISIBILITY.items():
        users = [r.name for r in rules.routes if key in r.when]
        if not users:
            continue
        how = "; ".join(f"{client}: {what}" for client, what in seen)
        tail = ("" if key == "session" else
                "; any other client cannot say, and the condition does not match its turns")
        out.append(f"when.{key} (route{'s' * (len(users) > 1)} {', '.join(users)}): seen from {how}{tail}")
    return out


def policy_lines(rules: Rules) -> list[str]:
    """What happens to turns no route takes, and when a route's endpoint is unreachable
    (shown by `tokunseba check`; `tokunseba models` shows the same per route)."""
    unmatched = {"pass": "pass through to the host the client asked for",
                 "refuse": "answered with an error in the client's protocol, never sent on"}[rules.unmatched]
    erring = [r.name for r in rules.routes if r.on_failure == "error"]
    what = "an endpoint unreachable, cooling down, full, or failing before the reply's first byte"
    if not erring:
        failure = f"next for every route ({what}: the next route whose when matches, then unmatched)"
    else:
        rest = "; next for the others" if len(erring) < len(rules.routes) else ""
        failure = f"error for {', '.join(erring)}{rest} ({what}: an error to the client)"
    lines = [f"unmatched: {rules.unmatched} (turns no route takes, unparseable ones included: {unmatched})",
             f"on_failure: {failure}",
             f"tool_loops: {rules.tool_loops} (a turn answering tool calls: " + (
                 "goes to the endpoint and model that made them, while a route to that endpoint takes its client)"
                 if rules.tool_loops == "follow" else "routed afresh, like any turn)")]
    if rules.aliased:
        lines.append(f"note: on_unreachable (route {', '.join(rules.aliased)}) is the older name of on_failure "
                     "(skip = next); both mean the same")
    return lines
