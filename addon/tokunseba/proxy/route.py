"""The route part: a provider call planned and applied, and a failed attempt's next one.

- ``on_request`` (the ``request`` hook): what is refused at the door (a base-URL listener
  asked for another host, a Responses WebSocket upgrade), then one call plans the turn
  (``plan``: turn/plan.py's prepare, decide and build, with the endpoint's connection opened
  and a slot taken before the turn is committed to it) and one applies it (``apply``: the
  flow's state, its records started, the request aimed through the relay by turn/target.py
  ``aim``); fail closed: an exception answers a provider call with an error in its protocol;
- ``failover``: the relay's call when an attempt failed before any byte reached the client
  (turn/failover.py decides; here only the waiting for the next endpoint's slot);
- the rules file: loaded at ``configure``, reloaded when it changes on disk (a broken edit
  keeps the rules in force); the endpoints in use checked once at start, in the background.

Owns ``tokunseba_rules``, ``_probe_timeout_ms``, ``_connect_timeout_ms``, ``_keepalive_s``,
``_provider_hosts`` and ``_allow_remote_clients`` (with mitmproxy's ``proxyauth``).
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass

from mitmproxy import ctx, exceptions, http
from mitmproxy.net.http.http1 import connection_close

from .. import protocols
from ..credentials import KNOWN_SECRETS, endpoint_keys
from ..routing.endpoints import Endpoint, EndpointHealth
from ..routing.rules import RulesError, load_rules
from ..states import Action, Decided
from ..turn.access import may_spend_keys, refuse_remote_client
from ..turn.console_line import client_name
from ..turn.failover import Chain, Failure, Replan, Slot, available, may_fail_over, move_on, next_turn, note_attempt
from ..turn.flowstate import FlowState, Shown
from ..turn.last_word import final, say_busy
from ..turn.plan import (Plan, Prepared, Turn, build_turn, client_error, decide_request, is_responses_websocket,
                         prepare_request, websocket_declined, websocket_refusal)
from ..turn.presentation import MAX_ORIGINAL, ORIGINAL_KEY, show_client_url
from ..turn.retries import retry_key
from ..turn.target import aim, extra_for, guess_protocol, looks_like_provider_call, target_of
from ..webview.view import MARKS, RECORD_KEY
from ..turn import base_url
from .core import CLIENT_KEY, Core, log, option, present_outcome, respond, reverse_host, upstream_proxy_mode
from .options import keepalive_seconds, named, provider_hosts_of, stamp
from .provider_reach import Unreachable, answer_unreachable, describe, endpoints_in_use, say_endpoint_unreachable, \
    unreachable_line
from .relay import PREFIX as RELAY_PREFIX
from .relay import UpstreamConn
from .shadowing import maybe_shadow

KEYS = {"tokunseba_rules", "tokunseba_probe_timeout_ms", "tokunseba_connect_timeout_ms", "tokunseba_keepalive_s",
        "tokunseba_provider_hosts", "tokunseba_allow_remote_clients"}
RULES_POLL_S = 1.0


@dataclass
class Planned:
    """A turn planned for a flow, with what its first attempt holds: the endpoint's connection
    (opened or from the relay's pool) and slot, the client's request as prepared (for the
    next attempts), and the client's own host and port (where a shadow compares from)."""

    turn: Turn
    conn: UpstreamConn | None
    slot: Slot | None
    prep: Prepared
    origin: tuple[str, int]


class Route:
    KEYS = KEYS  # the options this part owns

    def __init__(self, core: Core) -> None:
        self.core = core
        self.access: tuple[bool, bool] | None = None  # (proxyauth set, tokunseba_allow_remote_clients), as plan read them
        self.rules_stamp: tuple | None = None
        self.rules_checked = 0.0
        self.endpoint_check: asyncio.Future | None = None  # the start-up connect to every endpoint in use

    def load(self, loader) -> None:
        for o in named(self.KEYS):
            loader.add_option(o.name, o.type, o.default, o.help, choices=o.choices)

    def configure(self, updated: set[str]) -> None:
        if {"proxyauth", "tokunseba_allow_remote_clients"} & updated:
            self.access = None  # read again at the next turn
        try:
            if "tokunseba_rules" in updated:
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
        core.rules = load_rules(path)
        KNOWN_SECRETS.set(endpoint_keys(core.rules.endpoints.values(), os.environ))
        # a file still being written when read is read again at the next poll
        self.rules_stamp = before if stamp(path) == before else None
        for w in core.rules.warnings:
            log.warning(w)
        core.health = EndpointHealth()
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

    def soon_check_endpoints(self) -> None:
        """Connect once to every endpoint a route uses, in the background (start-up is not
        delayed): each one that cannot be reached is said in one warning, with what happens
        to the turns routed there (proxy/provider_reach.py), and starts in its back-off; a
        connection that worked waits in the relay's pool for the first turn."""
        core, rules, timeout = self.core, self.core.rules, ctx.options.tokunseba_probe_timeout_ms / 1000
        cli = os.environ.get("TOKUNSEBA_CLI") or "tokunseba"

        async def one(ep) -> None:
            try:
                conn = await core.relay.connect(ep.url, timeout)
            except Exception as e:
                why = describe(e, ep.host, ep.port, timeout).reason
                core.health.failed(ep, why)
                log.warning(unreachable_line(rules, ep, why, cli=cli))
                return
            core.relay.pool.put(conn)

        async def all_of_them() -> None:
            try:
                await asyncio.gather(*(one(ep) for ep in endpoints_in_use(rules)))
            except Exception:
                log.exception("tokunseba: checking the endpoints at start failed")

        self.endpoint_check = asyncio.ensure_future(all_of_them())  # kept: a task nobody holds may be collected

    # ---- the request hook
    async def on_request(self, flow: http.HTTPFlow) -> None:
        turn = None
        try:
            if await self._refused_at_the_door(flow):
                return
            self.maybe_reload_rules()
            planned = await self.plan(flow)
            if planned is not None:
                turn = planned.turn
                maybe_shadow(self.core.shadows, self.core.rules, self.apply(flow, planned), planned.origin)
        except Exception as e:
            log.exception("tokunseba: request hook failed")
            self._fail_closed(flow, turn, e)

    async def _refused_at_the_door(self, flow: http.HTTPFlow) -> bool:
        """A base-URL listener forwards only to its own provider host; a Responses WebSocket
        upgrade is declined (426, in Codex's envelope when its host cannot be reached). True
        when the flow was answered, or is a GET (never a turn)."""
        req = flow.request
        if (listener := reverse_host(flow)) is not None and \
                (wrong := base_url.misdirected(listener, req.pretty_host, req.path)) is not None:
            respond(flow, wrong)
            flow.comment = f"tokunseba: refused (421): this base URL forwards only to {listener}"
            return True
        if req.method != "GET":
            return False
        extra = extra_for(self.core.provider_hosts, req.pretty_host, req.port)
        ws = websocket_refusal(self.core.rules, method="GET", host=req.pretty_host, path=req.path,
                               headers=req.headers.items(multi=True), extra_hosts=extra)
        if ws is not None:
            respond(flow, ws)
            flow.comment = "tokunseba: WebSocket upgrade declined (426): Responses turns are routed over HTTPS"
        elif is_responses_websocket(method="GET", host=req.pretty_host, path=req.path,
                                    headers=req.headers.items(multi=True), extra_hosts=extra) \
                and (bad := await self._unreachable(flow)) is not None:  # in Codex's envelope, not HTML
            respond(flow, websocket_declined(bad.message(req.pretty_host)))
            flow.comment = f"❌ error 426: {bad.message(req.pretty_host)}"
        return True

    def _fail_closed(self, flow: http.HTTPFlow, turn: Turn | None, e: Exception) -> None:
        """The request hook failed: a provider call is answered with an error in its protocol,
        never let out half-handled; other traffic is left alone."""
        state = self.core.flows.get(flow.id) or (FlowState(turn) if turn is not None else None)
        if state is not None:
            t = state.turn
            t.action, t.outcome, t.error = Action.RESPOND, "error", str(e)
            respond(flow, t.client_error(500, f"tokunseba internal error: {e}", "api_error"))
            show_client_url(flow, state)
            present_outcome(flow, state, "error", 500)
        elif looks_like_provider_call(flow.request, self.core.provider_hosts):
            respond(flow, client_error(guess_protocol(flow.request.path), 500, f"tokunseba internal error: {e}",
                                       "api_error"))

    # ---- one call plans a request
    async def plan(self, flow: http.HTTPFlow) -> Planned | None:
        """Detect, decide and build the turn. A routed turn's upstream connection is opened
        (or taken from the relay's pool) here, before the turn is committed to its route: a
        connect that fails marks the endpoint down and the turn is decided again without it
        (passive health: no probe, and the healthy path pays no extra round trip). So is an
        endpoint cooling down (retry-after) or full (max_concurrency; after waiting up to its
        queue_s for a slot): the turn takes a slot of the endpoint it goes to. A turn passed
        through to its own provider host is first checked to be reachable."""
        req, core = flow.request, self.core
        if req.method != "POST":
            return None
        host, port = req.pretty_host, req.port  # pretty_host parses the Host header: once
        prep = prepare_request(method=req.method, host=host, port=port, path=req.path,
                               headers=req.headers.items(multi=True), body=req.get_content(strict=False) or b"",
                               extra_hosts=extra_for(core.provider_hosts, host, port))
        if prep is None:
            return None
        prep.keeper = core.keeper
        plan, conn, slot = await self._decide(prep) if prep.req is not None else (None, None, None)
        turn = build_turn(core.rules, prep, plan, env=os.environ)
        self._settle(flow, turn, prep, host)
        if slot is not None and (turn.local is not None or plan is None or turn.endpoint is not plan.decision.endpoint):
            slot.release()
            slot = None
        if turn.action == Action.PASS and turn.local is None:
            await self._check_reach(flow, turn)
        return Planned(turn, conn, slot, prep, (turn.host, port))

    async def _decide(self, prep: Prepared) -> tuple[Plan | None, UpstreamConn | None, Slot | None]:
        """The rules' decision, again without each endpoint found down or full, with the chosen
        endpoint's connection and slot."""
        core, timeout = self.core, ctx.options.tokunseba_probe_timeout_ms / 1000
        plan, conn, slot = None, None, None
        full: set[str] = set()  # endpoints found full (after their queue_s) for this turn
        reachable = available(core.health, core.capacity, full)
        for _ in range(2 * len(core.rules.endpoints) + 1):  # each round rules out one more endpoint
            plan = decide_request(core.rules, prep, reachable)
            ep = plan.decision.endpoint if plan.decision.action == Decided.ROUTE else None
            if ep is None:
                break
            slot = await self._slot(ep, full)
            if slot is None:
                continue
            try:
                conn = await core.relay.connect(ep.url, timeout)
            except Exception as e:
                slot.release()
                slot = None
                why = describe(e, ep.host, ep.port, timeout).reason
                wait = core.health.failed(ep, why)
                log.warning(f"tokunseba: endpoint {ep.name} ({ep.host}:{ep.port}) is unreachable "
                            f"({why}); skipped for {wait:g} s")
                continue
            core.health.ok(ep)
            break
        return plan, conn, slot

    def _settle(self, flow: http.HTTPFlow, turn: Turn, prep: Prepared, host: str) -> None:
        """What the turn's plan owes to the proxy's state: a retry of a recent request, endpoints
        known down, a client that may not have turns routed, a cooling endpoint's retry-after,
        every route busy (429/503, never a 400), whether it may be shadowed."""
        core, req = self.core, flow.request
        turn.retry_of = core.retries.seen(retry_key(session=turn.who.session, client=turn.who.client, host=host,
                                                    path=req.path, body=prep.body), turn.request_id, turn.started_at)
        if turn.retry_of:
            turn.events.append(("retry", {"of": turn.retry_of}))
        say_endpoint_unreachable(turn, core.health.down())
        peer = flow.client_conn.peername[0] if flow.client_conn.peername else None
        if self.access is None:  # read once per change (configure), not twice a turn
            self.access = bool(option("proxyauth", "")), bool(option("tokunseba_allow_remote_clients", False))
        proxyauth, allow_remote = self.access
        refuse_remote_client(turn, peer, proxyauth=proxyauth, allow_remote=allow_remote)
        core.capacity.say_when(turn)  # on_failure: error at a cooling endpoint: 503 with retry-after
        if turn.outcome == "refused" and any(k == "unmatched_refused" for k, _ in turn.events):
            say_busy(turn, core.rules, core.capacity, core.health)  # every route busy: 429/503, never a 400
        turn.may_shadow = may_spend_keys(peer, proxyauth=proxyauth, allow_remote=allow_remote)

    async def _slot(self, ep: Endpoint, full: set[str]) -> Slot | None:
        """A slot of ``ep`` for this turn (waiting up to its queue_s), or None (noted in ``full``)."""
        slot = self.core.capacity.acquire(ep)
        if slot is None and ep.queue_s > 0 and ep.name not in full:
            slot = await self.core.capacity.wait(ep, ep.queue_s)
        if slot is None:
            full.add(ep.name)
        return slot

    async def _check_reach(self, flow: http.HTTPFlow, turn: Turn) -> None:
        """A turn passing through to its provider host: connect to that host first, as
        mitmproxy would; one that cannot be reached is answered in the client's protocol
        (proxy/provider_reach.py) instead of with mitmproxy's HTML 502 page. Not in upstream-proxy
        mode (mitmproxy connects through that proxy, not directly)."""
        bad = await self._unreachable(flow)
        if bad is not None:
            answer_unreachable(turn, bad, asked=turn.host)  # its console line says why (record.console)
            say_busy(turn, self.core.rules, self.core.capacity, self.core.health,  # routes skipped as busy: 429/503
                     then=f"{turn.host} could not be reached: {bad.reason}")

    async def _unreachable(self, flow: http.HTTPFlow) -> Unreachable | None:
        """Why the flow's own host cannot be reached (connected to as mitmproxy would), or None
        (reached, or not checked: the check is off, or in upstream-proxy mode)."""
        timeout_ms = ctx.options.tokunseba_connect_timeout_ms
        if timeout_ms <= 0 or upstream_proxy_mode():
            return None
        req = flow.request
        return await self.core.reach.check(req.host, req.port, tls=req.scheme == "https", ssl_context=self.core.reach_ssl,
                                           timeout=timeout_ms / 1000)

    # ---- one call applies it
    def apply(self, flow: http.HTTPFlow, planned: Planned) -> FlowState:
        """The flow's state and records start; the request is rewritten as planned (or answered here)."""
        core, turn, conn, req = self.core, planned.turn, planned.conn, flow.request
        state = core.flows[flow.id] = FlowState(turn, slot=planned.slot, attempt_at=time.monotonic())
        turn.via = base_url.PROXY if reverse_host(flow) is None else base_url.BASE_URL
        flow.metadata["tokunseba.request_id"] = turn.request_id
        if turn.action == Action.TRANSLATE or turn.body is not None:
            flow.metadata[ORIGINAL_KEY] = turn.original_body[:MAX_ORIGINAL].decode("utf-8", "replace")
        core.recorder.start(turn)
        state.client_close = req.http_version.startswith("HTTP/1") and connection_close(req.http_version, req.headers)
        flow.metadata[CLIENT_KEY] = base_url.client_label(client_name(req.headers.get("user-agent"), turn.client_protocol),
                                                          turn.via)
        client_url, client_headers = req.url, req.headers.copy()
        state.shown = Shown(client_url, client_target=target_of(req))
        flow.comment = f"{turn.request_id} · {turn.summary()}"  # the id first: ~comment tk-… finds the turn
        flow.marked = MARKS.get(turn.outcome, "")
        if turn.local is None:
            if turn.action in (Action.TRANSLATE, Action.RETARGET):
                state.chain = Chain(planned.prep, client_url, client_headers.fields,
                                    trace=list(turn.decision.trace) if turn.decision else [])
            aim(req, turn, self._through_relay(flow, state, conn))
        else:
            if conn is not None:
                core.relay.pool.put(conn)
            respond(flow, turn.local)
        core.keep_for_replay(flow, state, client_url, client_headers)
        return state

    def _through_relay(self, flow: http.HTTPFlow, state: FlowState, conn: UpstreamConn | None) -> tuple[int, str] | None:
        """Every routed turn goes through the relay: its target registered (with the failover
        hand-off when the turn has a chain); the relay's port and path, or None (not routed)."""
        turn, relay = state.turn, self.core.relay
        if turn.action not in (Action.TRANSLATE, Action.RETARGET) or not turn.url:
            return None
        if not relay.port:  # the relay starts in running(); be sure in odd embeddings
            raise RuntimeError("the tokunseba relay is not running")
        # some clients read a comment line as JSON (Gemini CLI): their unchanged stream gets no keep-alive
        keepalive = turn.action == Action.TRANSLATE or protocols.get(turn.client_protocol).passthrough_keepalive
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
        tried = note_attempt(turn, chain, failure, headers, ms=(time.monotonic() - state.attempt_at) * 1000,
                             now=time.time(), capacity=core.capacity, health=core.health)
        if state.slot is not None:
            state.slot.release()
            state.slot = None
        nxt, slot = await self._next(turn, chain) if may_fail_over(turn) else (None, None)
        moved = move_on(turn, chain, tried, failure, nxt)
        log.warning(moved.line)
        core.recorder.event(turn, "attempt_failed", moved.record)
        if nxt is None:
            chain.told = final(turn.client_protocol, chain.failed, turn.request_id)  # turn/last_word.py
            return None
        state.turn, state.slot, state.attempt_at = nxt, slot, time.monotonic()
        core.recorder.next_attempt(nxt, chain.trace)
        rec = flow.metadata.get(RECORD_KEY)
        if isinstance(rec, dict):
            rec.update(endpoint=nxt.endpoint.name if nxt.endpoint and nxt.action != Action.PASS else None,
                       endpoint_url=nxt.url, target_protocol=nxt.target_protocol)
        return moved.replan

    async def _next(self, turn: Turn, chain: Chain) -> tuple[Turn | None, Slot | None]:
        """The next attempt after ``turn`` failed, with a slot of its endpoint (waiting for one)."""
        core, full = self.core, set[str]()
        for _ in range(2 * len(core.rules.endpoints) + 1):
            nxt = next_turn(core.rules, chain, turn, reachable=available(core.health, core.capacity, full), env=os.environ)
            if nxt is None or nxt.action == Action.PASS or nxt.endpoint is None:
                return nxt, None
            slot = await self._slot(nxt.endpoint, full)
            if slot is not None:
                return nxt, slot
        return None, None
