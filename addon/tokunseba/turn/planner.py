"""The plan of one intercepted request, as one object the adapter drives (sans-IO).

The adapter (proxy/route.py) makes a ``Planning`` from the request (``Planning.of``: detected
and parsed, turn/plan.py ``prepare_request``), then asks it round after round for the
endpoint the rules choose (``next``, with that endpoint's slot when one is free now) and
does only what needs the event loop: waiting for a slot (``queue_s``), opening the
connection. It tells the planning when a connect failed (``unreachable``: the endpoint is
marked down and the next round decides without it) and ends with ``turn`` (told which endpoint
took the connection, and the slot held there): the ``Turn`` built for the last decision and settled against the proxy's state (a retry of a
recent request, endpoints known down, a client that may not have turns routed, a cooling
endpoint's retry-after, every route busy, whether it may be shadowed). Each round rules out
one more endpoint, so there are at most ``2 × endpoints + 1``. ``begin`` then starts the
flow's state for that turn: a ``Started``, which the adapter applies (``Started.aim``: the
request aimed, turn/target.py; ``Started.keep_original``: the client's own request kept for a
replay, turn/presentation.py). A failed attempt's next one: turn/failed_attempt.py. No I/O, no
asyncio: the adapter calls a few functions here instead of many small ones everywhere.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import protocols
from ..outcomes import TurnOutcome
from ..budgets import Verdict
from ..reasoning import Keeper
from ..protocols import extra_for
from ..routing import Endpoint, EndpointHealth, QuotaBoard, Rules, Tried, account_of
from ..states import Action, Decided
from ..webview import CLIENT_KEY, MARKS, ORIGINAL_KEY
from .budget_gate import apply_verdict, budget_facts, rerouted
from .access import may_spend_keys, refuse_remote_client
from .base_url import Arrival
from .failover import Capacity, Chain, Slot, available
from .flowstate import FlowState, Shown
from .last_word import say_busy
from .plan import Plan, Prepared, Turn, build_turn, decide_request, is_count, new_request_id, prepare_request
from .presentation import MAX_ORIGINAL, record_original
from .retries import RetryWatch, retry_key
from .target import aim, leaves_as_sent, target_of


@dataclass
class Planning:
    rules: Rules
    health: EndpointHealth
    capacity: Capacity
    prep: Prepared
    host: str  # the client's host (pretty: from its Host header) and port, as detected
    port: int
    path: str
    plan: Plan | None = None  # the last decision, translated for its route
    slot: Slot | None = None  # the chosen endpoint's slot, held by the turn
    full: set[str] = field(default_factory=set)  # endpoints found full (after their queue_s) for this turn
    rounds: int = 0
    earned: Any = None  # the proxy's routing.EarnBook: routes with earn: (routing/earn.py)
    after: str | None = None  # a budget rerouted the turn (on_limit: reroute): only the routes after this one
    kept: list[Tried] = field(default_factory=list)  # the trace up to that reroute (explain shows it)
    request_id: str = field(default_factory=new_request_id)  # the turn's, known before it is built (budget holds)

    @classmethod
    def of(cls, req: Any, *, rules: Rules, health: EndpointHealth, capacity: Capacity,
           provider_hosts: Mapping[str, str], keeper: Keeper | None, earned: Any = None,
           quota: QuotaBoard | None = None, parsed: dict | None = None) -> Planning | None:
        """The planning of a request (mitmproxy's, read by attribute), or None: not a provider turn
        (``parsed``: its body's JSON object, when the caller has it already: not parsed again)."""
        if req.method != "POST":
            return None
        host, port = req.pretty_host, req.port  # pretty_host parses the Host header: once
        prep = prepare_request(method=req.method, host=host, port=port, path=req.path,
                               headers=req.headers.items(multi=True), body=req.get_content(strict=False) or b"",
                               extra_hosts=extra_for(provider_hosts, host, port), parsed=parsed)
        if prep is None:
            return None
        prep.keeper = keeper
        if quota is not None and quota.windows and prep.facts is not None:  # the client's account, before it is sent
            prep.facts.quota = quota.view(account_of(host, req.headers.fields))
        return cls(rules, health, capacity, prep, host, port, req.path, earned=earned)

    def next(self) -> tuple[Endpoint | None, Slot | None]:
        """The rules decide (again); the endpoint the turn goes to, with a slot of it when one
        is free now (None: wait up to its queue_s for one, or it is full), or (None, None):
        nothing to connect to (not routed, or no round left)."""
        if self.prep.req is None or self.rounds >= 2 * len(self.rules.endpoints) + 1:
            return None, None
        self.rounds += 1
        self.plan = decide_request(self.rules, self.prep, available(self.health, self.capacity, self.full),
                                   earned=self.earned.status if self.earned is not None else None,
                                   after=self.after)
        if self.kept:
            self.plan.decision.trace = self.kept + self.plan.decision.trace
        d = self.plan.decision
        ep = d.endpoint if d.action == Decided.ROUTE else None
        return ep, (self.capacity.acquire(ep) if ep is not None else None)

    def budget_facts(self) -> dict[str, str | None]:
        """What the budgets' scopes look at, for the decision as it stands (turn/budget_gate.py)."""
        return budget_facts(self.prep, self.plan)

    def reroute(self, verdict: Verdict) -> dict[str, Any] | None:
        """A budget with ``on_limit: reroute`` refused the route chosen: the next round decides
        among the routes after it (the event's data), or None when the turn was not on a route."""
        if self.plan is None or self.plan.decision.route is None:
            return None
        self.kept, event = rerouted(self.plan, verdict)
        self.after = event["from_route"]
        return event

    def unreachable(self, ep: Endpoint, slot: Slot, why: str) -> float:
        """``ep`` could not be connected to: its slot given back, the endpoint down for a back-off
        (the seconds returned); the next round decides without it."""
        slot.release()
        return self.health.failed(ep, why)

    def turn(self, *, env: Mapping[str, str], retries: RetryWatch, peer: str | None, access: tuple[bool, bool],
             connected: tuple[Endpoint, Slot] | None = None, verdict: Verdict | None = None) -> Turn:
        """The ``Turn`` of the last decision, settled (see the module's docstring). ``connected``:
        the endpoint that took the connection (its health is good again) and the slot the turn
        holds there, given back when the turn does not go to that endpoint after all. ``verdict``:
        its admission under the caps (a reached one answers it here)."""
        if connected is not None:
            self.health.ok(connected[0])
            self.slot = connected[1]
        turn = build_turn(self.rules, self.prep, self.plan, env=env, request_id=self.request_id)
        turn.retry_of = retries.seen(retry_key(session=turn.who.own_session, client=turn.who.client, host=self.host,
                                               path=self.path, body=self.prep.body), turn.request_id, turn.started_at)
        if turn.retry_of:
            turn.events.append(("retry", {"of": turn.retry_of}))
        say_endpoint_unreachable(turn, self.health.down())
        proxyauth, allow_remote = access
        refuse_remote_client(turn, peer, proxyauth=proxyauth, allow_remote=allow_remote)
        self.capacity.say_when(turn)  # on_failure: error at a cooling endpoint: 503 with retry-after
        if turn.outcome == TurnOutcome.REFUSED and any(k == "unmatched_refused" for k, _ in turn.events):
            self.say_busy(turn)  # every route busy: 429/503, never a 400
        turn.may_shadow = may_spend_keys(peer, proxyauth=proxyauth, allow_remote=allow_remote)
        if verdict is not None:  # its caps: holds to settle, marks, or the client's own "stop now"
            apply_verdict(turn, verdict, time.time())
        plan = self.plan
        call = plan.decision.earn if plan is not None else None
        if call is not None and self.earned is not None and turn.local is None:  # a session's tier only rises
            self.earned.served(call, on_candidate=turn.endpoint is not None and turn.endpoint.name == call.candidate)
        if self.slot is not None and (turn.local is not None or plan is None or turn.endpoint is not plan.decision.endpoint):
            self.slot.release()
            self.slot = None
        return turn

    def say_busy(self, turn: Turn, *, then: str | None = None) -> bool:
        """``turn``, answered without being sent, answered ``busy`` instead when the routes that
        matched were skipped as cooling, full or unreachable (turn/last_word.py ``say_busy``;
        ``then``: it was passed on to a host that cannot be reached either); whether it was."""
        return say_busy(turn, self.rules, self.capacity, self.health, then=then)

    @property
    def counts(self) -> bool:
        """A token-count request: answered by its route's endpoint's own counter (no spending cap
        holds it)."""
        return is_count(self.prep.det)

    def begin(self, flow: Any, turn: Turn, *, listener: str | None, client_close: bool, now: float) -> Started:
        """The flow's state as its turn starts (``flow``: mitmproxy's, read and written by
        attribute): the request id, the client's original body and name, what mitmweb shows
        (``Shown``, comment, mark), and for a routed turn the chain its next attempts are planned
        from; the turn holds this planning's slot. ``listener``: the base-URL listener's host the
        flow came in on (None: through the HTTPS proxy). What the adapter applies next is the
        ``Started``'s."""
        req = flow.request
        state = FlowState(turn, slot=self.slot, attempt_at=now, client_close=client_close)
        arrival = Arrival(listener)
        turn.via = arrival.via
        flow.metadata["tokunseba.request_id"] = turn.request_id
        if turn.action == Action.TRANSLATE or turn.body is not None:
            flow.metadata[ORIGINAL_KEY] = turn.original_body[:MAX_ORIGINAL].decode("utf-8", "replace")
        flow.metadata[CLIENT_KEY] = arrival.client(req.headers.get("user-agent"), turn.client_protocol)
        # a request that leaves as the client sent it needs no copy of its headers to compare or keep
        as_sent = turn.local is None and leaves_as_sent(turn)
        client_url, client_headers = req.url, req.headers if as_sent else req.headers.copy()
        state.shown = Shown(client_url, client_target=target_of(req))
        flow.comment = f"{turn.request_id} · {turn.summary()}"  # the id first: ~comment tk-… finds the turn
        flow.marked = MARKS.get(turn.outcome, "")
        if turn.local is None and turn.action in (Action.TRANSLATE, Action.RETARGET):
            state.chain = Chain(self.prep, client_url, client_headers.fields,
                                trace=list(turn.decision.trace) if turn.decision else [])
        # some clients read a keep-alive comment line as JSON: Gemini CLI's unchanged stream gets none
        keepalive = turn.action == Action.TRANSLATE or (turn.action == Action.RETARGET
                                                        and protocols.get(turn.client_protocol).passthrough_keepalive)
        return Started(state, client_url, client_headers, keepalive, as_sent)


def say_endpoint_unreachable(turn: Turn, down: dict[str, str]) -> None:
    """A turn answered with an error because its route's endpoint is unreachable (its route
    says ``on_unreachable: error``): the answer also names the endpoint's host and why it is
    down (``down``: ``host:port`` -> why, endpoints.EndpointHealth.down) and the request id."""
    ep = turn.endpoint
    if ep is None or turn.local is None or turn.outcome != "error" or not turn.error or "unreachable" not in turn.error:
        return
    where = f"{ep.host}:{ep.port}"
    turn.error = f"{turn.error}: {where}: {down.get(where) or 'in its back-off'}"
    turn.local = turn.client_error(turn.local.status,
                                   f"tokunseba: {turn.error}; the turn was not sent (request {turn.request_id})")


@dataclass
class Started:
    """A flow's turn begun (``Planning.begin``): its state, and what the adapter applies with it —
    the request aimed where the turn goes (``aim``: turn/target.py), the client's own request
    kept for mitmweb's Replay (``keep_original``: turn/presentation.py ``record_original``)."""

    state: FlowState
    client_url: str  # the client's own URL and headers, before the request is aimed
    client_headers: Any
    keepalive: bool  # the reply's stream, when it goes through the relay, may carry keep-alive comments
    as_sent: bool = False  # ``aim`` leaves the request as the client sent it (client_headers: the request's own)

    def aim(self, req: Any, relay: tuple[int, str] | None) -> None:
        """The request pointed where the turn goes (``relay``: the relay's port and path, for a
        routed turn), its headers and body as the plan says."""
        aim(req, self.state.turn, relay)

    def keep_original(self, flow: Any) -> bool:
        """The client's request line and headers kept in the flow's metadata (redacted); True when
        the flow was rewritten: its client's own request is what a replay must send."""
        return record_original(flow, self.state, self.client_url, self.client_headers, as_sent=self.as_sent)
