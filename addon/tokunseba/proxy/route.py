"""The route part: a provider call planned and applied, and a failed attempt's next one.

- ``on_request`` (the ``request`` hook): what is refused at the door (a base-URL listener
  asked for another host, a Responses WebSocket upgrade whose host cannot be reached), then one call plans the turn
  (``plan``: turn/plan.py's prepare, decide and build, with the endpoint's connection opened
  and a slot taken before the turn is committed to it, then its admission under the spending
  caps: ``_admit``) and one applies it (``apply``: the
  flow's state, its records started, the request aimed through the relay by turn/target.py
  ``aim``; a request passed on as the client sent it has its start records and mitmweb's record
  made in the loop's next step, once it has left: ``FlowState.pending``); fail closed: an exception answers a provider call with an error in its protocol.
  Whatever the client gets from here (a refusal at the door, a turn answered here, the
  fail-closed error) is one value, an ``Answer``, applied in one place (``answer``);
- ``failover``: the relay's call when an attempt failed before any byte reached the client
  (turn/failover.py decides; here only the waiting for the next endpoint's slot);
- the rules file: loaded at ``configure``, reloaded when it changes on disk (a broken edit
  keeps the rules in force); the endpoints in use checked once at start, in the background.

Owns ``tokunseba_rules``, ``_budget_lease_s`` (the caps open with the rules: proxy/budgeting.py),
``_probe_timeout_ms``, ``_connect_timeout_ms``, ``_keepalive_s``,
``_provider_hosts`` and ``_allow_remote_clients`` (with mitmproxy's ``proxyauth``).
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from typing import Any

from mitmproxy import ctx, exceptions, http
from mitmproxy.net.http.http1 import connection_close
from mitmproxy.proxy.mode_specs import ReverseMode

from ..budgets import Verdict
from ..credentials import KNOWN_SECRETS, endpoint_keys
from ..ledger import default_instance, instance_id
from ..pricing import PricesError, rules_prices
from ..protocols import extra_for, guess_protocol, looks_like_provider_call
from ..protocols import openai_responses_ws as p_ws
from ..routing import Endpoint, EndpointHealth, RulesError, load_rules, quota_thresholds
from ..states import Action
from ..turn import Arrival
from ..turn import FailedAttempt, Failure, Replan, Slot
from ..turn import Ending, FlowState
from ..turn import LocalResponse, Turn
from ..turn import Planning
from ..turn import show_client_url
from ..webview import RECORD_KEY
from .core import Core, Part, log, note_windows, option, present_outcome, respond, upstream_proxy_mode
from .options import keepalive_seconds, lease_seconds, provider_hosts_of, stamp
from .provider_reach import Unreachable, answer_unreachable, check_endpoints, describe
from .relay import PREFIX as RELAY_PREFIX
from .relay import UpstreamConn
from .budgeting import admits_off_loop, keep_leases, open_caps, rerouted_to
from .recorder import soon
from .shadowing import maybe_shadow

KEYS = {"tokunseba_rules", "tokunseba_budget_lease_s", "tokunseba_probe_timeout_ms", "tokunseba_connect_timeout_ms",
        "tokunseba_keepalive_s", "tokunseba_provider_hosts", "tokunseba_allow_remote_clients"}
RULES_POLL_S = 1.0
MAX_REPLAYABLE = 1024  # rewritten flows whose client request (URL, headers) is kept in memory for mitmweb's Replay


@dataclass(frozen=True)
class Answer:
    """What the client gets from here instead of a provider's reply, applied in one place
    (``answer``): ``response`` (a refusal at the door, a turn answered here, an error in the
    client's protocol); ``comment``, what mitmweb says of the flow (None: its turn's presentation
    says it); ``failed``, the turn it ends in error (the request hook failed: fail closed)."""

    response: LocalResponse
    comment: str | None = None
    failed: FlowState | None = None


@dataclass
class Planned:
    """A turn planned for a flow, with what its first attempt holds: the endpoint's connection
    (opened or from the relay's pool), and its planning (the chosen endpoint's slot, the
    client's request as prepared for the next attempts, the client's host and port)."""

    turn: Turn
    conn: UpstreamConn | None
    planning: Planning


def answer(flow: http.HTTPFlow, said: Answer) -> None:
    """The one place the route part answers the client: the response set, the flow's comment,
    and a turn that failed here presented as ended in error."""
    respond(flow, said.response)
    if said.comment is not None:
        flow.comment = said.comment
    if said.failed is not None:
        show_client_url(flow, said.failed)
        present_outcome(flow, said.failed, Ending(said.failed.turn, "error"), 500)


def misdirected_answer(flow: http.HTTPFlow, listener: str) -> Answer | None:
    """A base-URL listener forwards only to its own provider host: the 421 for a flow that named
    another one."""
    wrong = Arrival(listener).misdirected(flow.request.pretty_host, flow.request.path)
    if wrong is None:
        return None
    return Answer(wrong, f"tokunseba: refused (421): this base URL forwards only to {listener}")


def reverse_host(flow: http.HTTPFlow) -> str | None:
    """The provider host of the base-URL (reverse) listener the flow came in on; None when it
    came through the HTTPS proxy (turn/base_url.py)."""
    mode = getattr(flow.client_conn, "proxy_mode", None)
    return mode.address[0] if isinstance(mode, ReverseMode) else None


def after_left(core: Core, flow: http.HTTPFlow, started: Any) -> None:
    """A request passed on as the client sent it has left (``Route.apply``): its turn's start
    records and mitmweb's record of it; a failure here can no longer answer the client (logged)."""
    try:
        core.recorder.start(started.state.turn)
        keep_original(core, flow, started)
    except Exception:
        log.exception("tokunseba: could not record a passed-on turn's start")


def keep_original(core: Core, flow: http.HTTPFlow, started: Any) -> None:
    """The client's request kept for mitmweb (``Started.keep_original``), and in memory for
    its Replay when the flow was rewritten."""
    if started.keep_original(flow):
        core.replayable[flow.id] = (started.client_url, started.client_headers)
        while len(core.replayable) > MAX_REPLAYABLE:
            core.replayable.popitem(last=False)


class Route(Part):
    KEYS = KEYS  # the options this part owns

    def __init__(self, core: Core) -> None:
        self.core = core
        self.access: tuple[bool, bool] | None = None  # (proxyauth set, tokunseba_allow_remote_clients), as plan read them
        self.rules_stamp: tuple | None = None
        self.rules_checked = 0.0
        self.upstream = False  # mitmproxy sends through an upstream proxy (--mode upstream:…; configure)
        self.endpoint_check: asyncio.Future | None = None  # the start-up connect to every endpoint in use

    def configure(self, updated: set[str]) -> None:
        if "mode" in updated:  # mitmproxy's own: through an upstream proxy, provider hosts are not checked
            self.upstream = upstream_proxy_mode()
        if {"proxyauth", "tokunseba_allow_remote_clients"} & updated:
            self.access = None  # read again at the next turn
        try:
            if "tokunseba_rules" in updated or "tokunseba_budget_lease_s" in updated:
                self.load_rules()
            if "tokunseba_keepalive_s" in updated:
                self.core.relay.keepalive_s = keepalive_seconds(ctx.options.tokunseba_keepalive_s)
            if "tokunseba_provider_hosts" in updated:
                self.core.provider_hosts = provider_hosts_of(ctx.options.tokunseba_provider_hosts)
        except (RulesError, ValueError) as e:
            raise exceptions.OptionsError(str(e)) from None

    # ---- the rules
    def load_rules(self) -> None:
        core, path = self.core, ctx.options.tokunseba_rules or None
        before = stamp(path)
        rules = load_rules(path)
        try:
            core.prices = rules_prices(path)  # the file's prices: (the console line's and the span's cost)
        except PricesError as e:
            raise RulesError([str(e)]) from None
        core.rules = rules
        KNOWN_SECRETS.set(endpoint_keys(core.rules.endpoints.values(), os.environ))
        # a file still being written when read is read again at the next poll
        self.rules_stamp = before if stamp(path) == before else None
        for w in core.rules.warnings:
            log.warning(w)
        core.caps = open_caps(core.rules, ledger=ctx.options.tokunseba_ledger or None,
                              instance=ctx.options.tokunseba_instance or default_instance(), owner=instance_id(),
                              lease_s=lease_seconds(ctx.options.tokunseba_budget_lease_s), prices=core.prices,
                              previous=core.caps)
        core.health = EndpointHealth()
        core.windows.board.thresholds = quota_thresholds(core.rules.routes)  # said once when a window crosses one
        if core.relay.port:  # reloaded while running: say again which endpoints cannot be reached
            self.soon_check_endpoints()

    def maybe_reload_rules(self) -> None:
        """The rules file changed on disk: reload it (at most one stat a second). A broken
        edit keeps the rules in force and says why."""
        now = time.monotonic()
        if now - self.rules_checked < RULES_POLL_S:
            return
        self.rules_checked = now
        path = ctx.options.tokunseba_rules or None
        if path is None or stamp(path) == self.rules_stamp:
            return
        try:
            self.load_rules()
            log.warning(f"tokunseba: reloaded {path}: {len(self.core.rules.routes)} routes")
        except RulesError as e:
            self.rules_stamp = stamp(path)
            log.error(f"tokunseba: kept the previous rules: {e}")

    async def start(self) -> None:
        """At ``running``: the relay listens, and the endpoints in use are checked."""
        if upstream_proxy_mode():
            log.warning("tokunseba: routed turns reach their endpoints directly, not through the upstream proxy")
        await self.core.relay.start()
        self.soon_check_endpoints()
        self.rules_watch = asyncio.ensure_future(watch_rules(self))  # an edit is said when made, not at a turn
        self.leases = asyncio.ensure_future(keep_leases(lambda: self.core.caps))  # holds renewed, dead ones swept

    def stop(self) -> None:
        for name in ("rules_watch", "leases"):
            if (w := getattr(self, name, None)) is not None:
                w.cancel()

    def soon_check_endpoints(self) -> None:
        """Connect once to every endpoint a route uses, in the background (start-up is not
        delayed): each one that cannot be reached is said in one warning, with what happens
        to the turns routed there (proxy/provider_reach.py), and starts in its back-off; a
        connection that worked waits in the relay's pool for the first turn."""
        core = self.core
        check = check_endpoints(core.rules, core.relay, core.health, timeout=ctx.options.tokunseba_probe_timeout_ms / 1000,
                                cli=os.environ.get("TOKUNSEBA_CLI") or "tokunseba")
        self.endpoint_check = asyncio.ensure_future(check)  # kept: a task nobody holds may be collected

    # ---- the request hook
    async def on_request(self, flow: http.HTTPFlow) -> None:
        """The ``request`` hook: the flow is routed, passed on, or answered here (one ``Answer``,
        applied by ``answer``)."""
        said = await self._request(flow)
        if said is not None:
            answer(flow, said)

    async def _request(self, flow: http.HTTPFlow) -> Answer | None:
        """What the request hook does with the flow: None when it goes on (aimed, or left
        alone); else what the client gets from here."""
        turn = None
        try:
            listener = reverse_host(flow)
            if listener is not None and (wrong := misdirected_answer(flow, listener)) is not None:
                return wrong
            if flow.request.method == "GET":  # never a turn (a WebSocket's turns: proxy/websocket.py)
                return await self._websocket(flow)
            self.maybe_reload_rules()
            planned = await self.plan(flow)
            if planned is None:
                return None
            turn = planned.turn
            if turn.action in (Action.TRANSLATE, Action.RETARGET) and turn.url and not self.core.relay.port:
                await self.core.relay.start()  # a routed turn that came before running() had started it
            maybe_shadow(self.core.shadows, self.core.rules, self.apply(flow, planned, listener),
                         (turn.host, planned.planning.port))
            return None if turn.local is None else Answer(turn.local)
        except Exception as e:
            log.exception("tokunseba: request hook failed")
            return self._fail_closed(flow, turn, e)

    async def _websocket(self, flow: http.HTTPFlow) -> Answer | None:
        """A Responses WebSocket upgrade goes on to its host, whatever the rules say: each of
        its messages is a turn the rules decide (proxy/websocket.py). Declined (426, in Codex's
        envelope, not HTML: Codex falls back to HTTPS at once) only when that host cannot be
        reached: then the connection has no WebSocket peer."""
        req = flow.request
        extra = extra_for(self.core.provider_hosts, req.pretty_host, req.port)
        if p_ws.is_upgrade(method="GET", host=req.pretty_host, path=req.path,
                           headers=req.headers.items(multi=True), extra_hosts=extra) \
                and (bad := await self._unreachable(flow)) is not None:
            why = bad.message(req.pretty_host)
            return Answer(LocalResponse.upgrade_declined(why), f"❌ error 426: {why}")
        return None

    def _fail_closed(self, flow: http.HTTPFlow, turn: Turn | None, e: Exception) -> Answer | None:
        """The request hook failed: a provider call is answered with an error in its protocol,
        never let out half-handled; other traffic is left alone (None)."""
        state = self.core.flows.get(flow.id) or (FlowState(turn) if turn is not None else None)
        if state is not None:
            t = state.turn
            t.action, t.outcome, t.error = Action.RESPOND, "error", str(e)
            return Answer(t.client_error(500, f"tokunseba internal error: {e}", "api_error"), failed=state)
        if looks_like_provider_call(flow.request, self.core.provider_hosts):
            return Answer(LocalResponse.error(guess_protocol(flow.request.path), 500, f"tokunseba internal error: {e}",
                                              "api_error"))
        return None

    # ---- one call plans a request
    async def plan(self, flow: http.HTTPFlow) -> Planned | None:
        """Detect, decide and build the turn (turn/planner.py). A routed turn's upstream
        connection is opened (or taken from the relay's pool) here, before the turn is
        committed to its route: a connect that fails marks the endpoint down and the turn is
        decided again without it (passive health: no probe, and the healthy path pays no extra
        round trip). So is an endpoint cooling down (retry-after) or full (max_concurrency;
        after waiting up to its queue_s for a slot): the turn takes a slot of the endpoint it
        goes to. A turn passed through to its own provider host is first checked to be reachable."""
        core = self.core
        planning = Planning.of(flow.request, rules=core.rules, health=core.health, capacity=core.capacity,
                               provider_hosts=core.provider_hosts, keeper=core.keeper, earned=core.earned,
                               quota=core.windows.board)
        if planning is None:
            return None
        ep, slot = planning.next()  # the rules' first choice; a turn to no endpoint awaits nothing
        conn, connected = await self._connect(planning, ep, slot) if ep is not None else (None, None)
        verdict = None
        if core.caps is not None and not planning.counts:  # one atomic hold per cap (budgeting.py)
            verdict, conn, connected = await self._admit(planning, conn, connected)
        if self.access is None:  # read once per change (configure), not twice a turn
            self.access = bool(option("proxyauth", "")), bool(option("tokunseba_allow_remote_clients", False))
        turn = planning.turn(env=os.environ, retries=core.retries, access=self.access, connected=connected,
                             peer=flow.client_conn.peername[0] if flow.client_conn.peername else None, verdict=verdict)
        if verdict is not None:
            for line in verdict.lines:
                log.warning(line)
            if turn.local is not None and verdict.held and core.caps is not None:  # answered here: nothing to charge
                core.caps.release(verdict)
        if turn.action == Action.PASS and turn.local is None:
            await self._check_reach(flow, planning, turn)
        return Planned(turn, conn, planning)

    async def _admit(self, planning: Planning, conn: UpstreamConn | None, connected: tuple[Endpoint, Slot] | None
                     ) -> tuple[Verdict, UpstreamConn | None, tuple[Endpoint, Slot] | None]:
        """The turn's holds under the caps that apply to its decision. A budget that says
        ``on_limit: reroute`` hands it to the next route whose ``when`` matches (its connection and
        slot given back, the next one opened), recorded; with no route after it, the turn is
        answered as a reached cap."""
        core = self.core
        assert core.caps is not None
        events: list[tuple[str, dict]] = []
        while True:
            caps, facts = core.caps, planning.budget_facts()
            if admits_off_loop(caps):  # a round trip to the database: off the event loop
                verdict = await asyncio.to_thread(caps.admit, facts, request_id=planning.request_id, now=time.time())
            else:  # SQLite: a short local transaction
                verdict = caps.admit(facts, request_id=planning.request_id, now=time.time())
            if not verdict.reroutes:
                break
            event = planning.reroute(verdict)
            if event is None:
                break
            if conn is not None:
                core.relay.pool.put(conn)
            if connected is not None:
                connected[1].release()
            ep, slot = planning.next()
            conn, connected = await self._connect(planning, ep, slot) if ep is not None else (None, None)
            events.append(("budget_rerouted", event))
            if rerouted_to(planning, verdict, event):  # nothing after it takes the turn: the cap stops it
                break
        verdict.events[:0] = events
        return verdict, conn, connected

    async def _connect(self, planning: Planning, ep: Endpoint | None,
                       slot: Slot | None) -> tuple[UpstreamConn | None, tuple[Endpoint, Slot] | None]:
        """The connection to the endpoint the rules choose (first ``ep``, with ``slot`` when one
        was free), round after round without each one found full or down, with that endpoint and
        the turn's slot there; (None, None) when the turn goes to no endpoint."""
        core, timeout = self.core, ctx.options.tokunseba_probe_timeout_ms / 1000
        while True:
            if ep is None:
                return None, None
            if slot is None and ep.queue_s > 0 and ep.name not in planning.full:
                slot = await core.capacity.wait(ep, ep.queue_s)
            if slot is None:
                planning.full.add(ep.name)
                ep, slot = planning.next()
                continue
            try:
                conn = await core.relay.connect(ep.url, timeout)
            except Exception as e:
                why = describe(e, ep.host, ep.port, timeout).reason
                wait = planning.unreachable(ep, slot, why)
                log.warning(f"tokunseba: endpoint {ep.name} ({ep.host}:{ep.port}) is unreachable "
                            f"({why}); skipped for {wait:g} s")
                ep, slot = planning.next()
                continue
            return conn, (ep, slot)

    async def _slot(self, ep: Endpoint, full: set[str]) -> Slot | None:
        """A slot of ``ep`` for this turn (waiting up to its queue_s), or None (noted in ``full``)."""
        slot = self.core.capacity.acquire(ep)
        if slot is None and ep.queue_s > 0 and ep.name not in full:
            slot = await self.core.capacity.wait(ep, ep.queue_s)
        if slot is None:
            full.add(ep.name)
        return slot

    async def _check_reach(self, flow: http.HTTPFlow, planning: Planning, turn: Turn) -> None:
        """A turn passing through to its provider host: connect to that host first, as
        mitmproxy would; one that cannot be reached is answered in the client's protocol
        (proxy/provider_reach.py) instead of with mitmproxy's HTML 502 page. Not in upstream-proxy
        mode (mitmproxy connects through that proxy, not directly)."""
        bad = await self._unreachable(flow)
        if bad is not None:
            answer_unreachable(turn, bad, asked=turn.host)  # its console line says why (record.console)
            planning.say_busy(turn, then=f"{turn.host} could not be reached: {bad.reason}")  # routes skipped: 429/503

    async def _unreachable(self, flow: http.HTTPFlow) -> Unreachable | None:
        """Why the flow's own host cannot be reached (connected to as mitmproxy would), or None
        (reached, or not checked: the check is off, or in upstream-proxy mode)."""
        timeout_ms = ctx.options.tokunseba_connect_timeout_ms
        if timeout_ms <= 0 or self.upstream:
            return None
        req = flow.request
        return await self.core.reach.check(req.host, req.port, tls=req.scheme == "https", ssl_context=self.core.reach_ssl,
                                           timeout=timeout_ms / 1000)

    # ---- one call applies it
    def apply(self, flow: http.HTTPFlow, planned: Planned, listener: str | None = None) -> FlowState:
        """The flow's state and records start (turn/planner.py ``Planning.begin``); the request is
        aimed where the turn goes (``Started.aim``), or left to be answered here (its
        ``turn.local``: ``on_request`` answers it). ``listener``: the base-URL listener's host
        the flow came in on (None: through the HTTPS proxy)."""
        core, turn, req = self.core, planned.turn, flow.request
        client_close = req.http_version.startswith("HTTP/1") and connection_close(req.http_version, req.headers)
        started = planned.planning.begin(flow, turn, listener=listener, client_close=client_close, now=time.monotonic())
        state = started.state
        core.flows[flow.id] = state
        if started.as_sent:  # passed on as the client sent it: nothing for mitmweb's Replay to keep, and
            # nothing reads its record or its start records before its reply: both once the request has left
            state.pending = lambda: after_left(core, flow, started)
            soon(state.settle)
            return state
        core.recorder.start(turn)
        if turn.local is None:  # every routed turn goes through the relay
            routed = turn.action in (Action.TRANSLATE, Action.RETARGET) and turn.url
            started.aim(req, self._through_relay(flow, state, planned.conn, started.keepalive) if routed else None)
        elif planned.conn is not None:  # answered here: the connection waits for another turn
            core.relay.pool.put(planned.conn)
        keep_original(core, flow, started)
        return state

    def _through_relay(self, flow: http.HTTPFlow, state: FlowState, conn: UpstreamConn | None,
                       keepalive: bool) -> tuple[int, str]:
        """A routed turn's target registered with the relay (with the failover hand-off when the
        turn has a chain); the relay's port and path."""
        turn, relay = state.turn, self.core.relay
        assert turn.url is not None
        if not relay.port:  # started in running(), or by the request hook of a turn that came before it
            raise RuntimeError("the tokunseba relay is not running")
        ep = turn.endpoint
        replan = (lambda failure, headers: self.failover(flow, state, failure, headers)) if state.chain else None
        token, _ = relay.register(turn.url, conn, keepalive=keepalive, replan=replan,
                                  first_byte_s=ep.first_byte_timeout_s if ep else None, protocol=turn.target_protocol)
        state.relay_token = token
        return relay.port, f"{RELAY_PREFIX}{token}"

    # ---- a failed attempt and the next one
    async def failover(self, flow: http.HTTPFlow, state: FlowState, failure: Failure,
                       headers: list[tuple[str, str]]) -> Replan | None:
        """The relay's call when an attempt failed before any byte reached the client: noted
        and the next one planned (turn/failover.py); here only the waiting for its slot."""
        core, turn, chain = self.core, state.turn, state.chain
        assert chain is not None
        note_windows(core, turn, lambda: chain.attempt_headers(turn),  # a held failure's windows (a rejected 429)
                     [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers])
        failed = FailedAttempt.of(turn, chain, failure, headers, ms=(time.monotonic() - state.attempt_at) * 1000,
                                  now=time.time(), rules=core.rules, health=core.health, capacity=core.capacity,
                                  env=os.environ, held=state)
        nxt, slot = await self._next(failed)
        moved = failed.settle(nxt)  # given up: what the client is told is chain.told (turn/last_word.py)
        log.warning(moved.line)
        core.recorder.event(turn, "attempt_failed", moved.record)
        if nxt is None:
            return None
        if (call := turn.decision.earn if turn.decision else None) is not None:  # a session's tier only rises
            core.earned.served(call, on_candidate=nxt.endpoint is not None and nxt.endpoint.name == call.candidate)
        state.turn, state.slot, state.attempt_at = nxt, slot, time.monotonic()
        core.recorder.next_attempt(nxt, chain.trace)
        rec = flow.metadata.get(RECORD_KEY)
        if isinstance(rec, dict):
            rec.update(endpoint=nxt.endpoint.name if nxt.endpoint and nxt.action != Action.PASS else None,
                       endpoint_url=nxt.url, target_protocol=nxt.target_protocol)
        return moved.replan

    async def _next(self, failed: FailedAttempt) -> tuple[Turn | None, Slot | None]:
        """The next attempt after ``failed``, with a slot of its endpoint (waiting for one)."""
        for _ in range(failed.rounds):
            nxt = failed.candidate()
            if nxt is None or nxt.action == Action.PASS or nxt.endpoint is None:
                return nxt, None
            slot = await self._slot(nxt.endpoint, failed.full)
            if slot is not None:
                return nxt, slot
        return None, None


async def watch_rules(route: Route) -> None:
    """Check the rules file every RULES_POLL_S while the proxy runs: a broken live edit is
    reported when it is saved, not when the next turn arrives."""
    while True:
        await asyncio.sleep(RULES_POLL_S)
        try:
            route.maybe_reload_rules()
        except Exception:  # a failed check must not end the watch
            log.exception("tokunseba: could not check the rules file")
