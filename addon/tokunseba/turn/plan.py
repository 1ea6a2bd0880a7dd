"""One provider turn, from intercepted request to the reply the client gets (pure, no I/O).

The mitmproxy adapter (proxy/mitm.py) plans a turn in three steps: ``prepare_request`` (detect and
parse the intercepted request), ``decide_request`` (the rules' decision, then the request
translated for the route chosen: a ``Plan``; repeated when an endpoint turns out unreachable
as the adapter connects to it, and for each attempt after a failure) and ``build_turn``; it applies
the returned ``Turn`` plan (pass through, retarget, translate or answer locally); the reply
side is turn/reply.py's. Everything here is testable without mitmproxy.

Fail closed where the rules say so: a turn no route takes (an unparseable body included)
is answered locally under ``unmatched: refuse``, and a route with ``on_unreachable: error``
answers instead of falling back. A turn about to be translated is first checked against
its client protocol's rules (validate.py). A turn leaving for another host carries only the
allow-listed headers and query parameters (credentials.py) plus the endpoint's own key; what
stays behind is recorded by name (``left_behind``).
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import jsonc
from ..routing import (
    EVENT_ROUTED, Decision, Endpoint, OnRefused, Rules, Speaker, Tried, TurnFacts, Unmatched, decide, quota_gate,
    records, routed_by_quota, speaker, turn_facts, turn_refusal,
)
from ..errors import Refused, TranslationError
from .. import protocols
from ..protocols import openai_chat as p_openai
from ..protocols import Detected, detect
from ..reasoning import follow_loop, not_followed
from ..outcomes import TurnOutcome, route_text
from .. import translate
from ..credentials import outgoing_headers, outgoing_query
from ..protocols import REQUEST_ID_HEADER
from ..states import Action, Decided
from ..translate import RequestTranslation, pair_refusal, parse_body
from ..validate import first_problem

# the maximum output a count's turn is translated with for a target that requires one (Anthropic);
# never sent: the counter's request has no such field (protocols.<name>.COUNTER.request)
COUNT_MAX_TOKENS = 32000



_ID_BYTES = 12  # 24 hex digits after "tk-"
_id_random = bytearray()  # random bytes for the next ids, fetched 64 ids at a time
_id_lock = threading.Lock()


def new_request_id() -> str:
    """``tk-`` and 24 random hex digits (96 bits): cut from random bytes fetched 64 ids at a
    time, so a turn costs no system call on mitmproxy's loop (one that releases the GIL may
    wait for another thread to give it back)."""
    with _id_lock:
        if len(_id_random) < _ID_BYTES:
            _id_random.extend(os.urandom(_ID_BYTES * 64))
        raw = bytes(_id_random[:_ID_BYTES])
        del _id_random[:_ID_BYTES]
    return "tk-" + raw.hex()


@dataclass
class LocalResponse:
    """What the client gets from tokunseba instead of a provider's reply: an error in its own
    protocol (``error``), an upgrade declined (``upgrade_declined``), or a reply made here."""

    status: int
    headers: dict[str, str]
    body: bytes

    @classmethod
    def error(cls, protocol: str, status: int, message: str, etype: str | None = None, *,
              request_id: str | None = None) -> LocalResponse:
        """An error in the client's own protocol (docs/dev/architecture.md rule 6)."""
        # `etype` is the neutral (Anthropic-named) error type; protocols without types go by status
        body = protocols.for_errors(protocol).error_body(status, message, etype)
        headers = {"content-type": "application/json"}
        if request_id:
            headers[REQUEST_ID_HEADER] = request_id
        return cls(status, headers, body)

    @classmethod
    def upgrade_declined(cls, why: str) -> LocalResponse:
        """426 in the Responses (OpenAI) envelope: Codex falls back to HTTPS POST at once (the
        upgrade's host cannot be reached: the connection would have no WebSocket peer)."""
        body = p_openai.error_body(426, f"{why}: WebSocket upgrade declined; send the turn over HTTPS")
        return cls(426, {"content-type": "application/json", "connection": "close"}, body)


@dataclass
class Turn:
    request_id: str
    started_at: float
    detected: Detected
    host: str
    path: str
    client_protocol: str
    requested_model: str | None
    stream: bool
    original_body: bytes
    # the decision
    action: Action = Action.PASS
    outcome: str = "pass_through"  # pass_through | retargeted | translated | refused | error
    decision: Decision | None = None
    endpoint: Endpoint | None = None
    target_protocol: str | None = None
    model_used: str | None = None
    # what to do to the request
    url: str | None = None
    set_headers: dict[str, str] = field(default_factory=dict)
    # another host: only these header names (lower-case) go on, besides set_headers (credentials.py)
    keep_headers: set[str] | None = None
    key_injected: bool = False  # set_headers carries an endpoint's own key
    may_shadow: bool = True  # the client may have its turn shadowed (it may spend endpoint keys: turn/access.py)
    body: bytes | None = None
    local: LocalResponse | None = None
    translation: RequestTranslation | None = None
    include_usage: bool = True
    events: list[tuple[str, dict]] = field(default_factory=list)  # ledger events to write
    error: str | None = None
    plumbing_headers: list[str] = field(default_factory=list)
    who: Speaker = field(default_factory=Speaker)  # session, agent, background, client (routing/session_facts.py)
    failed_over: str | None = None  # the attempts' chain once an attempt failed over: "small (503) → big"
    capture: Any = None  # reasoning.state.Capture: the provider state this turn's reply carries
    via: str = "proxy"  # how it came in: "proxy" (HTTPS proxy) or "base_url" (a reverse listener; proxy/mitm.py)
    retry_of: str | None = None  # the request id of the recent request this one repeats (turn/retries.py)
    # a token count asked of another protocol's counter (the endpoint's own: ``Endpoint.counter``)
    counter: protocols.Counter | None = None
    prompt: Any = None  # the request body as sent, parsed (a turn, not a count): its prefix hashes (ledger/prefix.py)
    facts: TurnFacts | None = None  # what the rules saw of it (a shadow's stratum and schema: shadow/agreement.py)
    budget: Any = None  # budgets.Verdict: its caps' holds, settled when the turn ends (turn/budget_gate.py)

    # ---- mitmweb / logs ----
    def summary(self) -> str:
        """`easy-turns → local · anthropic→openai · dropped: thinking, metadata.user_id`"""
        d = self.decision
        parts: list[str] = []
        if d is not None and d.route is not None:
            parts.append(f"{d.route.name} → {self.endpoint.name if self.endpoint else 'pass-through'}")
        elif self.failed_over:  # its routes failed: passed on to the client's own host (the chain follows)
            parts.append(f"passed on to {self.host}")
        elif d is not None and (matched := [t for t in d.trace if t.matched]) \
                and (said := route_text(None, records(matched))) != "no route":  # matched, skipped: never "no route"
            parts.append(f"{said} → {'pass-through' if self.outcome == TurnOutcome.PASS_THROUGH else 'not sent'}")
        elif self.outcome == TurnOutcome.PASS_THROUGH:
            parts.append(f"pass-through ({d.reason if d else 'body not routable'})")
        if self.outcome == TurnOutcome.TRANSLATED and self.target_protocol:
            parts.append(f"{self.client_protocol}→{self.target_protocol}"
                         + (f" · count by {self.counter.name}" if self.counter is not None else ""))
        elif self.outcome == TurnOutcome.RETARGETED:
            parts.append(f"retarget {self.client_protocol}")
        elif self.outcome in ("refused", "error"):
            parts.append(f"{self.outcome}: {self.error or (d.reason if d else '')}")
        if self.failed_over:
            parts.append(f"failed over: {self.failed_over}")
        if self.translation and self.translation.dropped:
            parts.append("dropped: " + ", ".join(_short_paths(self.translation.dropped)))
        for kind, data in self.events:  # provider state of a tool loop (reasoning/state.py)
            if kind in ("state_restored", "state_withheld"):
                n = len(data["keys"])
                parts.append(f"{kind[6:]}: {data['kind'] if kind == 'state_restored' else 'state'} of {n} "
                             f"call{'s' * (n != 1)}")
        return " · ".join(parts)

    def client_error(self, status: int, message: str, etype: str | None = None) -> LocalResponse:
        return LocalResponse.error(self.client_protocol, status, message, etype, request_id=self.request_id)


def _short_paths(paths: list[str], limit: int = 8) -> list[str]:
    seen: list[str] = []
    for p in paths:
        if p not in seen:
            seen.append(p)
    return seen[:limit] + ([f"+{len(seen) - limit} more"] if len(seen) > limit else [])



# --------------------------------------------------------------------------------------
# request side


def is_count(det: Detected) -> bool:
    """A token-count request: answered by its route's endpoint's own counter, never estimated."""
    facts = protocols.find(det.protocol)
    return facts is not None and det.kind in facts.count_kinds


@dataclass
class Prepared:
    """What is known of a provider request before any routing: parsed once per turn."""

    det: Detected
    host: str
    port: int
    path: str
    body: bytes
    req: dict | None  # None: the body is not a JSON object (nothing to route on)
    facts: TurnFacts | None
    not_routable: str | None = None
    header_names: tuple[str, ...] = ()  # as the client sent them (names only: what stays behind is recorded)
    who: Speaker = field(default_factory=Speaker)  # who is talking (routing/session_facts.py), known even without a body
    # the provider state store (reasoning.store.Keeper): restores each translation's state for its own endpoint+model
    keeper: Any = None
    login: tuple[str, str] | None = None  # (login, why) when the client protocol tells (protocols' ``login``)


@dataclass(frozen=True)
class Plan:
    """A routing decision and, for a route to another protocol, the request as it goes there:
    translated once, for that endpoint and model, after the rules chose it (``decide_request``).
    ``failure``: the translation failed without refusing the route (the client gets the error)."""

    decision: Decision
    translation: RequestTranslation | None = None
    failure: TranslationError | None = None


def prepare_request(*, method: str, host: str, port: int, path: str, headers: Iterable[tuple[str, str]], body: bytes,
                    extra_hosts: Mapping[str, str] | None = None, parsed: dict | None = None) -> Prepared | None:
    """Detect and parse a request. None: not a provider call (leave it untouched). ``parsed``:
    the body's JSON object when the caller has it already (``body`` dumped from it: a Responses
    WebSocket message's turn), not parsed again."""
    det = detect(host, path, method, extra_hosts)
    if det is None:
        return None
    headers = list(headers)
    names = tuple(k for k, _ in headers)
    hdrs = {k.lower(): v for k, v in headers}
    told = protocols.get(det.protocol).login
    login = told(det.backend, hdrs) if told is not None else None  # a ChatGPT login, an API key...
    try:
        req = parse_body(body) if parsed is None else parsed
    except TranslationError as e:
        return Prepared(det, host, port, path, body, None, None, f"body not routable: {e.message}", names,
                        who=speaker(det.protocol, hdrs, None), login=login)
    if is_count(det) and (counter := protocols.get(det.protocol).counter) is not None:
        req = counter.as_turn(req)  # routed (and translated) as the turn it counts
    facts = turn_facts(det.protocol, req, len(body), hdrs, model=det.model, login=login[0] if login else None)
    return Prepared(det, host, port, path, body, req, facts, header_names=names, who=facts.who, login=login)


def _model_override(prep: Prepared, model: str | None) -> str | None:
    requested = prep.req.get("model") if prep.req else None
    return model if model and model != requested else None


def _translate_for(prep: Prepared, ep: Endpoint, model: str | None) -> RequestTranslation:
    """The request translated for ``ep`` (``model``: the route's override, None: the client's),
    the provider state of this endpoint and model restored (routed turns only)."""
    restore = None
    if prep.keeper is not None:
        sent = model or _requested_model(prep)
        def restore(conv, keeper=prep.keeper, ep=ep, sent=sent):  # noqa: E306
            return keeper.restore(conv, ep.name, sent, ep.protocol)
    assert prep.req is not None
    if is_count(prep.det):
        # a count is translated as its turn would be for the protocol of the endpoint's counter
        # (its own; or one the same server also serves: llama-server's Anthropic count route)
        counting = ep.counter_protocol or ep.protocol
        if counting != ep.protocol:
            ep = dataclasses.replace(ep, protocol=counting)
        if ep.max_tokens is None and protocols.get(ep.protocol).max_output_required:
            # a count's turn has no maximum output; the target's turn needs one, its counter does not
            # take one (Counter.request leaves it out): a placeholder that lets the translation run
            ep = dataclasses.replace(ep, max_tokens=COUNT_MAX_TOKENS)
    return translate_for_endpoint(prep.det.protocol, ep, prep.req, model, prep.path, restore=restore)


def _requested_model(prep: Prepared) -> str | None:
    m = prep.req.get("model") if prep.req else None
    return m if isinstance(m, str) else prep.det.model


def translate_for_endpoint(src: str, ep: Endpoint, req: dict, model: str | None, path: str | None = None, *,
                           restore=None) -> RequestTranslation:
    """``req`` (in protocol ``src``) translated for endpoint ``ep``, with the endpoint's rule keys
    (max_tokens, system_role, stop strings, …): what a routed turn, a shadow and a replay send.
    ``restore(neutral conversation) -> RestoreReport``: puts back the provider state of this
    endpoint and model (reasoning.store.Keeper.restore); routed turns only.
    Raises TranslationError (a pair with no translator, or a turn the translation refuses)."""
    if pair_refusal(src, ep.protocol):  # decide() only lets translatable pairs through
        raise TranslationError(400, f"tokunseba: {pair_refusal(src, ep.protocol)}")
    return translate.request(src, ep.protocol, req, model=model, max_tokens=ep.max_tokens,
                             max_tokens_field=ep.max_tokens_field, system_role=ep.system_role, stop=ep.stop,
                             endpoint=ep.name, path=path, effort=ep.effort, max_effort=ep.max_effort,
                             restore=restore, cache=ep.cache, native_custom_tools=ep.native_custom_tools)


def _pair_refusal(facts: TurnFacts) -> Callable[[Endpoint, str | None], str | None]:
    """Whether a pair translates at all and the endpoint takes the turn's content: the rules' own
    check of a route, before translating."""
    return lambda ep, model: turn_refusal(facts, ep)


def _translated(prep: Prepared, decision: Decision) -> Plan | str:
    """Decision, then translation: the plan of a route, or why the translation refuses it.

    A route chosen is translated for its endpoint; so is one whose endpoint is unavailable
    and which says ``on_failure: error`` (its error is only the client's if the route would
    have taken the turn: a route refusing it is skipped as refused, as ``on_refused`` says)."""
    ep = decision.endpoint
    if ep is None or prep.req is None:
        return Plan(decision)
    if ep.protocol != prep.det.protocol and (why := protocols.get(prep.det.protocol).native_kinds.get(prep.det.kind)):
        return f"{prep.det.kind} requests go only to {prep.det.protocol} endpoints: {why}"
    if is_count(prep.det):  # asked of the endpoint's counter: translated unless it speaks the client's protocol
        if ep.counter_protocol in (None, prep.det.protocol):  # none (build_turn says so), or no translation
            return Plan(decision)
    elif ep.protocol == prep.det.protocol:
        return Plan(decision)
    unavailable = decision.action == Decided.ERROR and bool(decision.trace) and decision.trace[-1].unreachable
    if decision.action != Decided.ROUTE and not unavailable:
        return Plan(decision)
    try:
        tr = _translate_for(prep, ep, _model_override(prep, decision.model))
    except Refused as e:
        return e.message
    except TranslationError as e:
        return Plan(decision, failure=e) if decision.action == Decided.ROUTE else Plan(decision)
    return Plan(decision, tr) if decision.action == Decided.ROUTE else Plan(decision)


def _skipped(trace: list[Tried]) -> list[str]:
    """The routes a trace shows skipped (refused, unavailable), as ``decide`` says them in its reason."""
    out = []
    for t in trace:
        if t.refused:
            out.append(f"{t.route} refused ({t.refused})")
        elif t.unreachable:
            out.append(f"{t.route}: endpoint {t.endpoint.name if t.endpoint else None} {t.unavailable or 'unreachable'}")
    return out


def decide_request(rules: Rules, prep: Prepared, reachable: Callable[[Endpoint], bool | str | None] | None = None,
                   *, after: str | None = None, earned: Callable | None = None) -> Plan:
    """Route a prepared request, then translate it for the route chosen (once per attempt).

    A route is refused (skipped, or answered with an error when it says on_refused: error)
    when no translator exists for the pair (the rules see that), or when the translation
    itself refuses (a tool name or id the target's grammar rejects): the rules then go on
    after that route, before anything is sent."""
    assert prep.facts is not None
    client = prep.det.protocol
    note = None
    # a window of the client's account that says rejected: the endpoints that spend it (its own host) are unavailable
    reachable = quota_gate(reachable, getattr(prep.facts, "quota", None), lambda ep: ep.same_host(prep.host, prep.port))
    if after is None and prep.keeper is not None and prep.req is not None:  # a loop finishes where it started
        followed, note = follow_loop(rules, client, prep.req, prep.keeper.lookup, refused=_pair_refusal(prep.facts),
                                     reachable=reachable)
        if followed is not None:
            got = _translated(prep, followed)
            if isinstance(got, Plan):
                return got
            note = _loop_not_followed(followed, f"{followed.endpoint.name if followed.endpoint else '?'} "
                                                f"refuses this turn: {got}")
    trace: list[Tried] = [note] if note is not None else []
    while True:
        decision = decide(rules, prep.facts, reachable=reachable, after=after, earned=earned)
        trace += decision.trace
        got = _translated(prep, decision)
        if isinstance(got, Plan):
            break
        route, entry = decision.route, decision.trace[-1]  # the route chosen is the last one tried
        assert route is not None
        entry.refused, entry.unreachable, entry.unavailable = got, False, None  # refused first, as the rules would have seen it
        entry.endpoint = decision.endpoint
        if route.on_refused == OnRefused.ERROR:
            return Plan(Decision(Decided.ERROR, route, decision.endpoint, None, trace, f"route {route.name} refused: {got}"))
        after = route.name
    if len(trace) == len(decision.trace):  # decided in one pass
        return got
    reason = decision.reason
    if decision.action == Decided.PASS and decision.route is None:
        skipped = _skipped(trace)
        reason = "no usable route: " + "; ".join(skipped) if skipped else "no route matched"
    return Plan(Decision(decision.action, decision.route, decision.endpoint, decision.model, trace, reason,
                         decision.earn), got.translation, got.failure)


def _loop_not_followed(followed: Decision, why: str) -> Tried:
    """The trace note of a tool loop not followed (reasoning/loop_route.py says the others)."""
    return not_followed(followed.endpoint.name if followed.endpoint else "?", followed.trace[0].loop or "tool loop", why)


def build_turn(rules: Rules, prep: Prepared, plan: Plan | None, *, env: Mapping[str, str],
               now: float | None = None, request_id: str | None = None) -> Turn:
    """The turn for a plan (``decide_request``): pass through, retarget, translate, or answer
    locally. ``request_id``: its id when known before (the planning's: budget holds name it)."""
    det, req = prep.det, prep.req
    decision = plan.decision if plan is not None else None
    turn = _new_turn(prep, now, request_id)
    if req is None or decision is None:
        turn.events.append(("routed", {"decision": "pass", "reason": prep.not_routable or "not routed"}))
        return _unmatched(rules, turn, prep.not_routable or "not routed")
    if isinstance(req.get("model"), str):
        turn.requested_model = req["model"]
    turn.stream = (req.get("stream") is True or det.kind == "stream_generate") and not is_count(det)
    turn.prompt = None if is_count(det) else req  # as sent, unless translated (_plan_translate)
    turn.decision = decision
    turn.facts = prep.facts
    _note_trace(turn, decision)
    if decision.action == Decided.PASS:
        turn.events.append(("routed", {"decision": "pass", "reason": decision.reason}))
        if decision.route is not None:  # a shadow-only route took it: passed through on purpose
            return turn
        return _unmatched(rules, turn, decision.reason)
    if decision.action == Decided.ERROR:
        return _refuse_decided(turn, decision)
    ep = decision.endpoint
    assert ep is not None and decision.route is not None
    turn.endpoint, turn.target_protocol = ep, ep.protocol
    if is_count(det) and ep.counter is None:
        # the endpoint has no counter of its own; an estimate would be invented
        why = (f"route {decision.route.name} sends {det.kind} to endpoint {ep.name} ({ep.protocol}), which cannot "
               f"count tokens ({ep.no_counter_why}); tokunseba does not estimate them")
        turn.action, turn.outcome, turn.error = Action.RESPOND, "refused", why
        turn.events.append(("route_refused", {"rule": decision.route.name, "target": ep.name, "reason": why}))
        turn.local = turn.client_error(400, f"tokunseba: {why}", "invalid_request_error")
        return turn
    turn.model_used = decision.model or turn.requested_model
    if decision.earn is not None:  # an earned route: where it went, and the evidence (routing/earn.py)
        turn.events.append(("earn", decision.earn.record(served_by=ep.name)))
    turn.events.append(("routed", {"decision": Decided.ROUTE, "rule": decision.route.name, "endpoint": ep.name,
                                   "url": ep.url, "model": turn.model_used, "reason": decision.reason}))
    if (moved := routed_by_quota(decision)) is not None:
        turn.events.append((EVENT_ROUTED, moved))
    counting = is_count(det) and ep.counter_protocol != det.protocol  # translated for another protocol's counter
    if (ep.protocol != det.protocol or counting) and (problem := first_problem(det.protocol, req)):
        path, what = problem
        turn.action, turn.outcome, turn.error = Action.RESPOND, "error", f"invalid request: {path}: {what}"
        turn.events.append(("request_invalid", {"path": path, "problem": what}))
        turn.local = turn.client_error(400, f"tokunseba: invalid request: {path}: {what}", "invalid_request_error")
        return turn
    _plan_for_endpoint(turn, ep, plan, prep, env)
    return turn


def _new_turn(prep: Prepared, now: float | None, request_id: str | None) -> Turn:
    """A new turn for a prepared request (its id, when known before), with the login it was sent with."""
    det = prep.det
    turn = Turn(
        request_id=request_id or new_request_id(), started_at=now if now is not None else time.time(), detected=det,
        host=prep.host, path=prep.path, client_protocol=det.protocol, requested_model=det.model, stream=False,
        original_body=prep.body, who=prep.who,
    )
    if prep.login is not None:  # which login the client sent it with (explain; the rules' ``login``)
        turn.events.append(("login", {"login": prep.login[0], "why": prep.login[1]}))
    return turn


def _note_trace(turn: Turn, decision: Decision) -> None:
    """The decision's trace as the turn's events: a tool loop followed or not, routes refused,
    endpoints unreachable."""
    if decision.trace and decision.trace[0].loop is not None:  # tool_loops: follow (reasoning/loop_route.py)
        t = decision.trace[0]
        turn.events.append(("tool_loop", {"followed": t.matched, "route": t.route, "why": t.reasons[0]}))
    for t in decision.trace:
        if t.refused or t.unreachable:
            ep = t.endpoint
            if t.refused:
                turn.events.append(("route_refused", {"rule": t.route, "target": ep.name if ep else None,
                                                      "reason": t.refused}))
            else:
                turn.events.append(("endpoint_unreachable", {"rule": t.route, "endpoint": ep.name if ep else None,
                                                             "url": ep.url if ep else None}))


def _refuse_decided(turn: Turn, decision: Decision) -> Turn:
    """A decision to answer with an error: unreachable (503) or refused (400)."""
    turn.endpoint = decision.endpoint
    turn.target_protocol = decision.endpoint.protocol if decision.endpoint else None
    if decision.trace and decision.trace[-1].unreachable:  # on_unreachable: error
        turn.action, turn.outcome, turn.error = Action.RESPOND, "error", decision.reason
        turn.local = turn.client_error(503, f"tokunseba: {decision.reason}", "api_error")
        return turn
    turn.action, turn.outcome, turn.error = Action.RESPOND, "refused", decision.reason
    turn.local = turn.client_error(400, f"tokunseba: {decision.reason}", "invalid_request_error")
    return turn


def _plan_for_endpoint(turn: Turn, ep: Endpoint, plan: Plan | None, prep: Prepared, env: Mapping[str, str]) -> None:
    """The routed request planned for its endpoint: counted, retargeted or translated; a
    translation that failed answers the client with its error."""
    det = prep.det
    try:
        if is_count(det) and (ep.protocol != det.protocol or ep.counter_protocol != det.protocol):
            if ep.counter_protocol == det.protocol:  # the server also serves the client's counter
                _plan_count(turn, ep, None, prep, env)
            else:
                assert plan is not None
                if plan.failure is not None:
                    raise plan.failure
                if plan.translation is None:
                    raise TranslationError(500, f"tokunseba: no translation planned for {ep.name}")
                _plan_count(turn, ep, plan.translation, prep, env)
        elif ep.protocol == det.protocol:
            _plan_retarget(turn, ep, prep, env)
        else:
            assert plan is not None
            if plan.failure is not None:
                raise plan.failure
            if plan.translation is None:  # a plan made for another endpoint cannot be sent here
                raise TranslationError(500, f"tokunseba: no translation planned for {ep.name}")
            _plan_translate(turn, ep, plan.translation, prep, env)
    except TranslationError as e:
        turn.action, turn.outcome, turn.error = Action.RESPOND, "error", e.message
        turn.local = turn.client_error(e.status, e.message)
        turn.events.append(("translation_error", {"status": e.status, "message": e.message}))


def _unmatched(rules: Rules, turn: Turn, reason: str) -> Turn:
    """A provider turn no route takes: passes through, or (``unmatched: refuse``) is answered
    with an error in the client's protocol and never sent on."""
    if rules.unmatched != Unmatched.REFUSE:
        return turn
    why = f"no route takes this turn ({reason}) and the rules say unmatched: refuse"
    turn.action, turn.outcome, turn.error = Action.RESPOND, "refused", why
    turn.events.append(("unmatched_refused", {"reason": reason}))
    turn.local = turn.client_error(400, f"tokunseba: {why}", "invalid_request_error")
    return turn


def _leave_behind(turn: Turn, ep: Endpoint, prep: Prepared, env: Mapping[str, str], *, translated: bool,
                  query_withheld: list[str]) -> None:
    """Another host: only the allow-listed headers go on (credentials.py), with the endpoint's own
    key; what stays behind is recorded by name."""
    keep, withheld = outgoing_headers(prep.header_names, turn.client_protocol, ep.protocol, translated=translated)
    turn.keep_headers = keep
    auth = ep.auth_headers(env)
    turn.set_headers.update(auth)
    turn.key_injected = bool(auth)
    if withheld or query_withheld:
        turn.events.append(("left_behind", {"headers": withheld, "query": query_withheld,
                                            "why": f"{ep.name} is another host: only what it needs goes"}))


def _plan_retarget(turn: Turn, ep: Endpoint, prep: Prepared, env: Mapping[str, str]) -> None:
    turn.action, turn.outcome = Action.RETARGET, "retargeted"
    cross = not ep.same_host(turn.host, prep.port)
    turn.url, query_withheld = outgoing_query(ep.request_url(turn.detected.kind, turn.model_used), turn.path,
                                              turn.client_protocol, ep.protocol, cross_host=cross)
    if cross:
        _leave_behind(turn, ep, prep, env, translated=False, query_withheld=query_withheld)
    # a protocol that names the model in the path has it in request_url above; the others in the body
    if not protocols.get(turn.detected.protocol).model_in_path and turn.model_used and turn.model_used != turn.requested_model:
        turn.body = replace_top_level_model(prep.body, turn.model_used)
        if turn.body is None:
            raise TranslationError(400, "tokunseba: could not rewrite the model field of the request")


def _plan_translate(turn: Turn, ep: Endpoint, tr: RequestTranslation, prep: Prepared, env: Mapping[str, str]) -> None:
    src, dst = turn.client_protocol, ep.protocol
    turn.include_usage = tr.client_wants_usage
    turn.translation = tr
    turn.action, turn.outcome = Action.TRANSLATE, "translated"
    turn.body = jsonc.dumpb(tr.body)
    turn.prompt = tr.body
    target = protocols.get(dst)
    turn.url = ep.request_url(target.turn_kind(turn.stream), turn.model_used)
    _, query_withheld = outgoing_query(turn.url, turn.path, src, dst, cross_host=True)
    _leave_behind(turn, ep, prep, env, translated=True, query_withheld=query_withheld)
    turn.set_headers.update({"content-type": "application/json", "accept-encoding": "identity",
                             "accept": "text/event-stream" if turn.stream else "application/json"})
    for name, value in target.sent_headers.items():  # the version the translated body is written for
        turn.set_headers[name] = value
        turn.plumbing_headers.append(f"header {name}: {value}")
    turn.events.append(("protocol_translated", {"from": src, "to": dst, "dropped": tr.dropped,
                                                "plumbing": tr.plumbing + turn.plumbing_headers,
                                                "converted": tr.converted, "warnings": tr.warnings}))
    report: Any = tr.state_report  # reasoning.state.RestoreReport (translate/ does not know its type)
    if report is not None:
        turn.events.extend(report.events())
    if prep.keeper is not None:  # what this endpoint's reply carries is kept for the loop's next turn
        turn.capture = prep.keeper.capture(dst, ep.name, turn.model_used, turn.request_id)


def _plan_count(turn: Turn, ep: Endpoint, tr: RequestTranslation | None, prep: Prepared,
                env: Mapping[str, str]) -> None:
    """A count request asked of the endpoint's own counter (``Endpoint.counter``) in that
    counter's request shape: the turn it counts translated as a turn would be (``tr``), or, when
    the counter speaks the client's protocol (llama-server's Anthropic count route for an
    Anthropic client), the client's own body with the route's model. Its number is the client's
    (``count_reply``), never an estimate."""
    counter, counting = ep.counter, ep.counter_protocol
    assert counter is not None and counting is not None  # build_turn refuses a count to an endpoint without one
    src = turn.client_protocol
    turn.translation, turn.counter = tr, counter
    turn.target_protocol = counting
    turn.include_usage = False
    turn.action, turn.outcome = Action.TRANSLATE, "translated"
    if tr is not None:
        whole = tr.body
    else:
        assert prep.req is not None
        whole = {**prep.req, **({"model": turn.model_used} if turn.model_used else {})}
    sent = counter.request(whole, turn.model_used)
    turn.body = jsonc.dumpb(sent)
    # what a turn would carry and its counter takes not (max_tokens, stream, sampling): not sent
    left_out = [k for k in whole if k not in sent and not any(isinstance(v, dict) and k in v for v in sent.values())]
    turn.url = ep.counter_url(turn.model_used)
    _, query_withheld = outgoing_query(turn.url, turn.path, src, ep.protocol, cross_host=True)
    _leave_behind(turn, ep, prep, env, translated=True, query_withheld=query_withheld)
    turn.set_headers.update({"content-type": "application/json", "accept-encoding": "identity",
                             "accept": "application/json"})
    for name, value in protocols.get(counting).sent_headers.items():
        turn.set_headers[name] = value
        turn.plumbing_headers.append(f"header {name}: {value}")
    plumbing = [p for p in (tr.plumbing if tr else []) if p.split(".")[0] not in left_out]
    turn.events.append(("protocol_translated", {"from": src, "to": counting,
                                                "dropped": tr.dropped if tr else [],
                                                "plumbing": plumbing + turn.plumbing_headers,
                                                "converted": tr.converted if tr else [],
                                                "warnings": tr.warnings if tr else [],
                                                "count": {"counter": counter.name, "left_out": left_out}}))


def replace_top_level_model(body: bytes, model: str) -> bytes | None:
    """Replace the value of the top-level "model" key in raw JSON bytes, leaving every other
    byte as it was (a retarget is not a re-serialisation). None if there is no such key."""
    i, n, depth = 0, len(body), 0
    while i < n:
        c = body[i]
        if c == 0x22:  # string
            j = i + 1
            while j < n:
                cj = body[j]
                if cj == 0x5C:
                    j += 2
                    continue
                if cj == 0x22:
                    break
                j += 1
            s, e = i, j + 1
            if depth == 1:
                # is this a key? the next non-space char is ':'
                k = e
                while k < n and body[k] in b" \t\r\n":
                    k += 1
                if k < n and body[k] == 0x3A and body[s:e] == b'"model"':
                    v = k + 1
                    while v < n and body[v] in b" \t\r\n":
                        v += 1
                    if v < n and body[v] == 0x22:
                        w = v + 1
                        while w < n:
                            if body[w] == 0x5C:
                                w += 2
                                continue
                            if body[w] == 0x22:
                                break
                            w += 1
                        return body[:v] + jsonc.dumpb(model) + body[w + 1:]
                    return None
            i = e
            continue
        if c in b"{[":
            depth += 1
        elif c in b"}]":
            depth -= 1
        i += 1
    return None


def apply_header_changes(headers: Mapping[str, str] | Any, turn: Turn) -> list[str]:
    """Names (as present) to delete from a header mapping for this turn's plan."""
    out = []
    for name in list(headers.keys()):
        low = name.lower()
        if turn.keep_headers is not None and low not in turn.keep_headers:
            out.append(name)
    return out
