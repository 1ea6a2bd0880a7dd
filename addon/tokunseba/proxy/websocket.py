"""The WebSocket part: Codex's Responses session over WebSocket, every turn seen, recorded and
routed (docs/clients.md "Responses over WebSocket").

mitmproxy relays the upgraded connection; its hooks give this part each whole message:
- ``started`` (``websocket_start``): a Responses WebSocket (turn/plan.py
  ``is_responses_websocket``) gets its connection state (``Session``: its turns and
  transcript, turn/ws_session.py, and the messages waiting for the provider's answer);
- ``message`` (``websocket_message``): a client ``response.create`` is a turn, planned by the
  rules as the same body over HTTPS (turn/planner.py), admitted under the spending caps as it
  is (proxy/budgeting.py ``admit_now``; a reached cap answers with Codex's own
  ``usage_limit_reached`` error event; a full endpoint makes it wait up to its ``queue_s``,
  off the hook: ``queued``), recorded, and carried where its route says: kept at its provider,
  the message goes on untouched (or, continuing a response tokunseba made, with the whole
  conversation instead); routed, it is dropped and the turn goes over the endpoint's own
  WebSocket (retargeted) or HTTPS (httpx, streamed), its reply (translated by the stream
  translators) written into the client's WebSocket event by event (``inject.websocket``); an
  attempt failing before anything was written moves on as over HTTPS (turn/failover.py; back
  at the provider, the client's message is sent there); answered here, an ``error`` event. A
  warm-up (``generate: false``) goes to the provider, not recorded. The provider's events end
  each turn it answers (usage from ``response.completed``), read by the stream watch as over
  HTTPS once the turn has ended (a delta is only checked to be JSON); a passed-on turn's
  start and end are recorded once the message in hand is relayed (``_after_relay``);
- ``ended`` (``websocket_end``): a turn still open is interrupted, never a success.
Each turn's end: its holds settled from the usage its ``response.completed`` reported (a cut
connection keeps its hold as its charge), the ledger row, the console line, its span, the flow's
comment and mark.
Fail closed: a message whose handling fails is answered with an error event, never sent on
half-handled.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import httpx
from mitmproxy import ctx, http
from mitmproxy.hooks import UpdateHook

from .. import jsonc, translate
from ..protocols import openai_responses as p_responses
from ..protocols import openai_responses_ws as p_ws
from ..states import Action
from ..turn import client_label
from ..turn import client_name
from ..webview import CLIENT_KEY
from ..turn import Outcome
from ..turn import Turn, is_responses_websocket
from ..turn import Planning
from ..turn import Pump
from ..turn import stream_translator
from ..turn import error_event
from ..protocols import extra_for
from ..turn import Chain, FailedAttempt, Failure, classify
from ..turn import Carrier, Reply, SocketTurns
from ..webview import MARKS
from .core import Core, Part, log, option, upstream_ssl_context
from .record import console
from .budgeting import admit_now, settle
from .route import reverse_host
from .ws_client import EndpointSocket, NotUpgraded

# the upgrade's headers that are no part of an HTTPS request (hop-by-hop, the WebSocket handshake)
NOT_OVER_HTTPS = {"host", "connection", "upgrade", "content-length", "transfer-encoding", "sec-websocket-key",
                  "sec-websocket-version", "sec-websocket-extensions", "sec-websocket-protocol", "openai-beta",
                  "accept-encoding", "keep-alive"}

WS_ERROR_HEADERS = {"retry-after", "x-should-retry"}  # a local answer's headers an error event carries


UNREAD_MAX = 1 << 20  # a passed-on turn's events waiting for its watch: fed to it from this size on


@dataclass
class Waiting:
    """A message passed on to the provider, until its response ends: a turn (recorded), or a
    warm-up (``turn`` None). A turn's events are read by its pump (the stream watch, as over
    HTTPS: turn/pump.py) once it has ended (``watched``), off the way of the messages, which
    have gone on by then (``seen`` keeps them, as SSE, and the time of the first)."""

    turn: Turn | None
    conversation: list | None
    reply: Reply = field(default_factory=Reply)
    pump: Pump | None = None
    unread: list[bytes] = field(default_factory=list)
    unread_bytes: int = 0
    first_byte: float | None = None

    def seen(self, ev: p_ws.ServerEvent) -> None:
        if self.turn is None:
            return
        if self.first_byte is None:
            self.first_byte = time.time()
        sse = p_ws.as_sse(ev)
        self.unread.append(sse)
        self.unread_bytes += len(sse)
        if self.unread_bytes > UNREAD_MAX:
            self.watched()

    def watched(self) -> Pump | None:
        """The turn's pump, fed every event seen so far (None: a warm-up)."""
        if self.turn is None:
            return None
        if self.pump is None:
            self.pump = Pump(self.turn)
        if self.unread:
            self.pump(b"".join(self.unread))
            self.unread.clear()
            self.unread_bytes = 0
        if self.first_byte is not None:
            self.pump.first_byte = self.first_byte
        return self.pump


@dataclass
class Session:
    """One Responses WebSocket connection's state."""

    flow: http.HTTPFlow
    turns_of: SocketTurns = field(default_factory=SocketTurns)  # its turns planned, its responses kept
    waiting: deque[Waiting] = field(default_factory=deque)
    server: p_ws.ServerEvents = field(default_factory=p_ws.ServerEvents)
    routed: set[asyncio.Task] = field(default_factory=set)  # routed turns, streaming back
    sockets: dict[str, EndpointSocket] = field(default_factory=dict)  # endpoint name -> its WebSocket, once opened
    open: dict[str, Turn] = field(default_factory=dict)  # request id -> a turn not ended yet
    turns: int = 0
    last: str = ""  # the last turn's summary (the flow's comment)


class WebSockets(Part):
    def __init__(self, core: Core) -> None:
        self.core = core
        self.sessions: dict[str, Session] = {}
        self.client: httpx.AsyncClient | None = None
        self.no_websocket: set[str] = set()  # endpoint URLs that answered an upgrade with no WebSocket

    # ---- the hooks
    def started(self, flow: http.HTTPFlow) -> None:
        try:
            req = flow.request
            if not is_responses_websocket(method="GET", host=req.pretty_host, path=req.path,
                                          headers=req.headers.items(multi=True),
                                          extra_hosts=extra_for(self.core.provider_hosts, req.pretty_host, req.port)):
                return
            self.sessions[flow.id] = Session(flow)
            self.core.reach.answered(req.host, req.port)  # it upgraded: the next upgrade need not connect first
            via = "proxy" if reverse_host(flow) is None else "base_url"
            flow.metadata[CLIENT_KEY] = client_label(client_name(req.headers.get("user-agent"), p_responses.PROTOCOL),
                                                     via)
            flow.comment = "tokunseba: Responses over WebSocket: every turn recorded"
        except Exception:
            log.exception("tokunseba: websocket_start hook failed")

    def message(self, flow: http.HTTPFlow) -> None:
        s = self.sessions.get(flow.id)
        if s is None or flow.websocket is None or not flow.websocket.messages:
            return
        msg = flow.websocket.messages[-1]
        if msg.injected:  # what this part wrote for a routed turn (already read as it was written)
            return
        try:
            if msg.from_client:
                self._client_message(s, msg)
            else:
                self._server_message(s, msg.content)
        except Exception as e:
            log.exception("tokunseba: websocket_message hook failed")
            if msg.from_client and p_ws.read_client_message(msg.content).kind == p_ws.TURN:
                msg.drop()  # never sent on half-handled
                self._inject(s, _error_message(500, "api_error", f"tokunseba internal error: {e}"))

    def ended(self, flow: http.HTTPFlow) -> None:
        s = self.sessions.pop(flow.id, None)
        if s is None:
            return
        ws = flow.websocket
        by = "the client" if ws is not None and ws.closed_by_client else "the server"
        why = f"the WebSocket connection was closed by {by} mid-turn" + (
            f" (close code {ws.close_code})" if ws is not None and ws.close_code is not None else "")
        for task in list(s.routed):
            task.cancel()  # its own end records it interrupted
        for sock in s.sockets.values():
            sock.close()
        while s.waiting:
            w = s.waiting.popleft()
            if w.turn is not None:
                self._interrupted(s, w.turn, w.watched(), why)

    def stop(self) -> None:
        for s in list(self.sessions.values()):
            for task in list(s.routed):
                task.cancel()

    # ---- a client message
    def _client_message(self, s: Session, msg: Any) -> None:
        if not msg.is_text:
            return
        cm = p_ws.read_client_message(msg.content)
        if cm.kind == p_ws.WARMUP and cm.doc is not None:
            self._to_provider(s, msg, cm.doc, None)
        elif cm.kind == p_ws.TURN and cm.doc is not None:
            self._turn(s, msg, cm.doc)

    def _to_provider(self, s: Session, msg: Any, doc: dict, turn: Turn | None, conversation: Any = ...) -> None:
        """The message goes on to the provider (untouched, unless it continues a response
        tokunseba made); its events are awaited (``conversation``: the whole input, when the
        planning has it already). ``msg`` as bytes: the client's message, dropped while its
        turn waited or failed elsewhere, sent now (injected)."""
        if conversation is ...:
            conversation = s.turns_of.conversation(doc)
        instead = s.turns_of.for_provider(doc)
        if instead is not None and turn is not None:
            self.core.recorder.event(turn, "websocket_rewritten", {
                "previous_response_id": doc.get("previous_response_id"), "items": len(instead.get("input") or []),
                "why": "it continues a response tokunseba made: the whole conversation goes instead"})
        s.waiting.append(Waiting(turn, conversation))
        if isinstance(msg, bytes):
            ctx.master.commands.call("inject.websocket", s.flow, False, jsonc.dumpb(instead) if instead else msg, True)
        elif instead is not None:
            msg.content = jsonc.dumpb(instead)

    def _turn(self, s: Session, msg: Any, doc: dict) -> None:
        core, req = self.core, s.flow.request
        planning, conversation = s.turns_of.plan(doc, host=req.pretty_host, port=req.port, path=req.path,
                                                  headers=req.headers, rules=core.rules, health=core.health,
                                                  capacity=core.capacity, provider_hosts=core.provider_hosts,
                                                  keeper=core.keeper, earned=core.earned, quota=core.windows.board)
        if planning is None:  # not a provider turn after all: left alone
            return
        ep, slot = planning.next()
        if ep is not None and slot is None and ep.queue_s > 0:  # full: it waits for a slot, off the hook
            payload = msg.content
            msg.drop()
            self._spawn(s, self._queued(s, payload, doc, planning, conversation, ep))
            return
        self._carry(s, msg, doc, planning, conversation, _free_slot(planning, (ep, slot)))

    async def _queued(self, s: Session, payload: bytes, doc: dict, planning: Planning, conversation: list | None,
                      ep: Any) -> None:
        """A turn whose endpoint was full: it waits up to the endpoint's ``queue_s`` for a slot
        (as over HTTPS, proxy/route.py ``_connect``), then goes where the rules say."""
        waits, slot = [], None
        while ep is not None and slot is None:
            if ep.queue_s > 0 and ep.name not in planning.full:
                t0 = time.monotonic()
                slot = await self.core.capacity.wait(ep, ep.queue_s)
                waits.append({"endpoint": ep.name, "queue_s": ep.queue_s, "waited_s": round(time.monotonic() - t0, 3),
                              "slot": slot is not None})
            if self.sessions.get(s.flow.id) is not s:  # the connection closed meanwhile: nothing was sent
                if slot is not None:
                    slot.release()
                return
            if slot is None:
                planning.full.add(ep.name)
                ep, slot = planning.next()
        self._carry(s, payload, doc, planning, conversation, (ep, slot) if ep is not None else None, waits)

    def _carry(self, s: Session, msg: Any, doc: dict, planning: Planning, conversation: list | None,
               connected: tuple[Any, Any] | None, waits: list[dict] | None = None) -> None:
        """The planned turn admitted (under the caps), recorded and carried where its route says."""
        core, flow = self.core, s.flow
        verdict = None
        if core.caps is not None:  # under the caps as over HTTPS: one atomic hold per cap (proxy/budgeting.py)
            verdict, connected = admit_now(core.caps, planning, connected, lambda: _free_slot(planning))
        access = bool(option("proxyauth", "")), bool(option("tokunseba_allow_remote_clients", False))
        turn = planning.turn(env=os.environ, retries=core.retries, access=access,
                             peer=flow.client_conn.peername[0] if flow.client_conn.peername else None,
                             connected=connected, verdict=verdict)
        if verdict is not None:
            for line in verdict.lines:
                log.warning(line)
            if turn.local is not None and verdict.held and core.caps is not None:  # answered here: nothing to charge
                core.caps.release(verdict)
        turn.via = "proxy" if reverse_host(flow) is None else "base_url"
        turn.events += [("queued", w) for w in waits or []]
        s.turns += 1
        goes = s.turns_of.carrier(turn, conversation_known=conversation is not None,
                                  endpoint_websocket=turn.url not in self.no_websocket)
        turn.events.append(("websocket", {"connection": flow.id, "turn": s.turns, "carried": goes}))
        s.open[turn.request_id] = turn
        if goes == Carrier.PROVIDER:  # its start recorded once the message is on its way (_after_relay)
            _after_relay(core.recorder.start, turn)
            self._to_provider(s, msg, doc, turn, conversation)
            return
        core.recorder.start(turn)
        if not isinstance(msg, bytes):
            msg.drop()  # the provider never sees it: answered here, or routed
        if goes == Carrier.HERE:
            self._answered(s, turn, planning)
            return
        assert conversation is not None
        asked = (msg if isinstance(msg, bytes) else msg.content, doc, conversation)
        self._spawn(s, self._routed(s, turn, planning, asked, over_websocket=goes == Carrier.ENDPOINT_WS))

    def _answered(self, s: Session, turn: Turn, planning: Planning) -> None:
        """A turn answered here: refused, an error, or a routed turn whose conversation cannot be
        carried whole."""
        if planning.slot is not None:
            planning.slot.release()
            planning.slot = None
        if turn.local is not None:  # refused (a reached cap: Codex's usage_limit_reached), or an error
            self._inject(s, jsonc.dumpb(_error_doc(turn.local.status, turn.local.body, turn.local.headers)))
            self._finish(s, turn, Outcome(turn.local.status), turn.outcome)
            return
        turn.action = Action.RESPOND
        turn.error = ("it continues a response this connection no longer holds (previous_response_id); "
                      "tokunseba cannot carry the whole conversation to another endpoint")
        self._inject(s, _error_message(400, "invalid_request_error", f"tokunseba: {turn.error}"))
        self._finish(s, turn, Outcome(400), "error")

    def _spawn(self, s: Session, work: Any) -> None:
        task = asyncio.ensure_future(work)
        s.routed.add(task)
        task.add_done_callback(s.routed.discard)

    # ---- a routed turn: over the endpoint's WebSocket or HTTPS, its events written into the client's WebSocket
    async def _routed(self, s: Session, turn: Turn, planning: Planning, asked: tuple[bytes, dict, list], *,
                      over_websocket: bool) -> None:
        """Attempt after attempt: one that fails before anything was written to the client moves
        the turn on as over HTTPS (turn/failover.py: the next route, its endpoint's slot; back
        at the provider, the client's message goes there), else the client is told."""
        payload, doc, conversation = asked
        chain = Chain(planning.prep, s.flow.request.url, tuple(s.flow.request.headers.fields),
                      trace=list(turn.decision.trace) if turn.decision else [])
        while True:
            attempt_at = time.monotonic()
            failed = await self._attempt(s, turn, planning, conversation, over_websocket)
            if failed is None:
                return
            nxt = await self._move_on(s, turn, planning, chain, failed, attempt_at)
            if nxt is None:
                return
            turn = nxt
            goes = s.turns_of.carrier(turn, conversation_known=True,
                                      endpoint_websocket=turn.url not in self.no_websocket)
            if goes == Carrier.PROVIDER:
                self._to_provider(s, payload, doc, turn, conversation)
                return
            over_websocket = goes == Carrier.ENDPOINT_WS

    async def _attempt(self, s: Session, turn: Turn, planning: Planning, conversation: list,
                       over_websocket: bool) -> tuple[Failure, bytes] | None:
        """One attempt, its events written into the client's WebSocket as they come. A failure
        before anything was written is returned (with the endpoint's error body, if any): the
        turn may move on; any other end is the turn's own (finished here)."""
        pump = Pump(turn, stream_translator(turn) if turn.action == Action.TRANSLATE else None)
        write, status = _Writes(self, s), None
        body = turn.body if turn.body is not None else planning.prep.body
        try:
            sock = await self._endpoint_socket(s, turn) if over_websocket else None
            got: int | tuple[Failure, bytes] | None
            if sock is not None:  # over the endpoint's own WebSocket
                got = await self._over_websocket(s, turn, sock, body, write, pump)
            else:
                got = await self._over_https(s, turn, planning, body, write, pump)
            if got is None or isinstance(got, tuple):  # answered already, or failed before a word
                return got
            status = got
            write(pump(b""))
            write.close()
            s.turns_of.answered(write.reply, conversation, ours=True)
            self._finish(s, turn, pump.outcome(status), turn.outcome, planning)
        except asyncio.CancelledError:
            self._interrupted(s, turn, pump, "the WebSocket connection closed mid-turn", planning)
            raise
        except Exception as e:
            why = f"endpoint {turn.endpoint.name if turn.endpoint else '?'} failed: {e or type(e).__name__}"
            if not write.wrote:
                return Failure(_failure_kind(e), why), b""
            turn.error = why
            said = pump.t.fail(f"tokunseba: {why}") if pump.t is not None else error_event(turn.client_protocol,
                                                                                           f"tokunseba: {why}")
            write([said] if said else [])
            write.close()
            out = pump.outcome(status)
            out.failed = True
            self._finish(s, turn, out, "error", planning)
        return None

    async def _over_https(self, s: Session, turn: Turn, planning: Planning, body: bytes, write: "_Writes",
                          pump: Pump) -> int | tuple[Failure, bytes] | None:
        """The attempt over HTTPS (httpx, streamed): its status; a failure to move on from
        (``classify``); None: the client was told the endpoint's error (finished)."""
        assert turn.url is not None
        async with self._client().stream("POST", turn.url, content=body, headers=self._headers(s.flow, turn)) as r:
            status = r.status_code
            if status >= 400:
                raw = await r.aread()
                if (failure := classify(status, raw, turn.target_protocol)) is not None:
                    return failure, raw
                self._tell(s, turn, status, raw)
                self._finish(s, turn, Outcome(status), "error", planning)
                return None
            async for chunk in r.aiter_raw():
                write(pump(chunk))
        return status

    def _tell(self, s: Session, turn: Turn, status: int, raw: bytes) -> int:
        """The endpoint's error as an ``error`` event in the client's WebSocket (translated when
        the turn was); the status told."""
        if turn.action == Action.TRANSLATE:
            status, raw = translate.error(turn.target_protocol or turn.client_protocol, turn.client_protocol,
                                          status, raw)
        err = _error_doc(status, raw)
        turn.error = str(err.get("error", {}).get("message") or f"HTTP {status}")
        self._inject(s, jsonc.dumpb(err))
        return status

    async def _move_on(self, s: Session, turn: Turn, planning: Planning, chain: Chain, failed: tuple[Failure, bytes],
                       attempt_at: float) -> Turn | None:
        """The failed attempt noted (its endpoint cooled or backed off) and the next one planned
        with a slot of its endpoint (turn/failed_attempt.py, as over HTTPS); None: no next one,
        the client was told (finished)."""
        core, (failure, raw) = self.core, failed
        fa = FailedAttempt.of(turn, chain, failure, [], ms=(time.monotonic() - attempt_at) * 1000, now=time.time(),
                              rules=core.rules, health=core.health, capacity=core.capacity, env=os.environ)
        if planning.slot is not None:
            planning.slot.release()
            planning.slot = None
        nxt, slot = await self._next(fa)
        moved = fa.settle(nxt)  # given up: what the client is told is chain.told (turn/last_word.py)
        log.warning(moved.line)
        core.recorder.event(turn, "attempt_failed", moved.record)
        if nxt is None:
            if (told := chain.told) is not None:
                turn.error, status = told.message, told.reply.status
                self._inject(s, jsonc.dumpb(_error_doc(status, told.reply.body, told.reply.headers)))
            elif raw:
                status = self._tell(s, turn, failure.status or 502, raw)
            else:
                status, turn.error = 504 if failure.kind == "timeout" else 502, failure.why
                self._inject(s, _error_message(status, "api_error", f"tokunseba: {failure.why}"))
            out = Outcome(status)
            out.failed = True
            self._finish(s, turn, out, "error", planning)
            return None
        planning.slot = slot
        s.open.pop(turn.request_id, None)
        s.open[nxt.request_id] = nxt
        core.recorder.next_attempt(nxt, chain.trace)
        return nxt

    async def _next(self, failed: FailedAttempt) -> tuple[Turn | None, Any]:
        """The next attempt, with a slot of its endpoint (waiting up to its queue_s for one), as
        proxy/route.py ``_next``."""
        capacity = self.core.capacity
        for _ in range(failed.rounds):
            nxt = failed.candidate()
            if nxt is None or nxt.action == Action.PASS or nxt.endpoint is None:
                return nxt, None
            ep = nxt.endpoint
            slot = capacity.acquire(ep)
            if slot is None and ep.queue_s > 0 and ep.name not in failed.full:
                slot = await capacity.wait(ep, ep.queue_s)
            if slot is not None:
                return nxt, slot
            failed.full.add(ep.name)
        return None, None

    async def _endpoint_socket(self, s: Session, turn: Turn) -> EndpointSocket | None:
        """The session's WebSocket to the turn's endpoint (opened at its first turn there), or
        None: the endpoint answered the upgrade with no WebSocket (remembered: HTTPS from then on)."""
        ep = turn.endpoint
        assert ep is not None and turn.url is not None
        sock = s.sockets.get(ep.name)
        if sock is not None and not sock.closed:
            return sock
        headers = {k: v for k, v in self._headers(s.flow, turn).items()
                   if k.lower() not in ("content-type", "accept", "accept-encoding")}
        beta = s.flow.request.headers.get("openai-beta")
        if beta:
            headers["openai-beta"] = beta  # the WebSocket's own beta (responses_websockets=…)
        try:
            sock = await EndpointSocket.open(turn.url, headers, upstream_ssl_context(),
                                             max(ctx.options.tokunseba_probe_timeout_ms / 1000, 1.0))
        except NotUpgraded as e:
            self.no_websocket.add(turn.url)
            self.core.recorder.event(turn, "websocket_declined", {"endpoint": ep.name, "status": e.status,
                                                                  "then": "over HTTPS"})
            return None
        s.sockets[ep.name] = sock
        return sock

    async def _over_websocket(self, s: Session, turn: Turn, sock: EndpointSocket, body: bytes, write: "_Writes",
                              pump: Pump) -> int | tuple[Failure, bytes]:
        """The turn as one ``response.create`` message (the whole conversation) on the endpoint's
        WebSocket, its events written on through the pump: the status it ended with, or a
        failure to move on from (an ``error`` event before anything was written, ``classify``)."""
        doc = jsonc.loads(body)
        doc.pop("stream", None)
        await sock.send(jsonc.dumps({"type": p_responses.WS_CREATE, **doc}))
        self.core.recorder.event(turn, "websocket_endpoint", {"endpoint": turn.endpoint.name if turn.endpoint else None,
                                                              "carried": "the endpoint's WebSocket"})
        while True:
            text = await sock.receive()
            if text is None:
                if turn.endpoint is not None:
                    s.sockets.pop(turn.endpoint.name, None)
                raise ConnectionError("the endpoint's WebSocket closed mid-turn")
            ev = p_ws.server_event(text.encode())
            if not write.wrote and (said := ev.failure()) is not None and ev.doc is not None:
                raw = jsonc.dumpb({"error": ev.doc.get("error")})
                if (failure := classify(said[0], raw, p_responses.PROTOCOL)) is not None:
                    return failure, raw
            write(pump(p_ws.as_sse(ev)))
            if ev.terminal:
                return _ended(turn, ev)

    def _headers(self, flow: http.HTTPFlow, turn: Turn) -> dict[str, str]:
        keep = turn.keep_headers
        out = {k: v for k, v in flow.request.headers.items()
               if k.lower() not in NOT_OVER_HTTPS and (keep is None or k.lower() in keep)}
        out.update(turn.set_headers)
        out["content-type"] = "application/json"
        out["accept"] = "text/event-stream"
        out["accept-encoding"] = "identity"
        return out

    def _client(self) -> httpx.AsyncClient:
        if self.client is None:
            timeout = ctx.options.tokunseba_probe_timeout_ms / 1000
            self.client = httpx.AsyncClient(verify=upstream_ssl_context(), trust_env=False,
                                            timeout=httpx.Timeout(None, connect=max(timeout, 1.0)))
        return self.client

    # ---- a server message: the provider's events for the oldest message waiting
    def _server_message(self, s: Session, payload: bytes) -> None:
        if not s.waiting:
            return
        if not s.server.pending and p_ws.delta_type(payload) is not None:  # most messages: a delta
            try:  # it carries nothing a turn's record reads (the stream watch skips it too): JSON is all
                jsonc.loads(payload)
                return
            except Exception:
                pass  # the watch says why its client cannot read it
        for ev in s.server.feed(payload):
            if not s.waiting:
                return
            w = s.waiting[0]
            if ev.doc is not None:
                w.reply.on(ev.doc)
            w.seen(ev)
            if ev.terminal:
                s.waiting.popleft()
                s.turns_of.answered(w.reply, w.conversation, ours=False)
                if w.turn is not None:  # recorded once the event is on its way to the client
                    _after_relay(self._provider_ended, s, w, ev)

    def _provider_ended(self, s: Session, w: Waiting, ev: p_ws.ServerEvent) -> None:
        """A turn the provider answered ended with ``ev``: its events watched, its records."""
        pump = w.watched()
        assert w.turn is not None and pump is not None
        pump(b"")
        self._finish(s, w.turn, pump.outcome(_ended(w.turn, ev)), w.turn.outcome)

    # ---- a turn's end
    def _interrupted(self, s: Session, turn: Turn, pump: Pump | None, why: str, planning: Planning | None = None) -> None:
        turn.error = why
        out = pump.outcome(None) if pump is not None else Outcome(None)
        out.failed = True
        self.core.recorder.event(turn, "websocket_closed", {"message": why})
        self._finish(s, turn, out, "interrupted", planning)

    def _finish(self, s: Session, turn: Turn, out: Outcome, outcome: str, planning: Planning | None = None) -> None:
        """The turn's records, console line, span, and the connection's comment and mark."""
        if s.open.pop(turn.request_id, None) is None:
            return  # ended already
        if planning is not None and planning.slot is not None:
            planning.slot.release()
            planning.slot = None
        core, now = self.core, time.time()
        if turn.budget is not None and turn.budget.held:  # its holds become its charges, as over HTTPS
            if (settled := settle(core.caps, turn, out.usage, now, out.status)) is not None:
                core.recorder.event(turn, "budget_settled", settled)
        details = dict(out.details)
        if out.problem and outcome not in ("refused", "cancelled", "interrupted"):
            outcome = "error"
            turn.error = turn.error or out.problem
            details["problem"] = out.problem
        elif (out.failed or (out.status or 0) >= 400) and outcome not in ("refused", "cancelled", "interrupted"):
            outcome = "error"
        record = core.recorder.completion(turn, out, outcome=outcome, details=details, now=now,
                                          first_byte=out.first_byte, chain=None, attempt_at=0.0, body=None)
        console(s.flow, turn, outcome, out.status, out.usage, now)
        if core.spans is not None:
            core.spans.turn_done(turn, outcome=outcome, status=out.status, usage=out.usage, details=details, end=now,
                                 response_model=out.model, traceparent=s.flow.request.headers.get("traceparent"),
                                 tracestate=s.flow.request.headers.get("tracestate"))
        if record is not None:
            record()
        s.last = f"{turn.request_id} · {turn.summary() or outcome} · {outcome}"
        self._show(s, outcome)

    def _show(self, s: Session, outcome: str) -> None:
        flow = s.flow
        flow.comment = f"{s.last} · WebSocket: {s.turns} turn{'s' * (s.turns != 1)}"
        mark = MARKS.get(outcome, MARKS["error"])
        if flow.marked != MARKS["error"]:  # a failed turn stays marked on its connection
            flow.marked = mark
        if ctx.master.addons.get("view") is not None:
            try:
                ctx.master.addons.trigger(UpdateHook([flow]))
            except Exception:
                log.exception("tokunseba: could not update the WebSocket flow's mark and comment")

    def _inject(self, s: Session, payload: bytes) -> None:
        ctx.master.commands.call("inject.websocket", s.flow, True, payload, True)


def _after_relay(fn: Any, *args: Any) -> None:
    """Call ``fn`` once the message in hand is relayed: a hook's bookkeeping (a turn's start,
    its end's records) is kept off the message's way, as an HTTPS turn is recorded once its
    reply has gone (mitmproxy relays a message in the same step of the event loop as its
    hook, when the hooks return without awaiting). Without a running loop: now."""
    try:
        asyncio.get_running_loop().call_soon(fn, *args)
    except RuntimeError:
        fn(*args)


class _Writes:
    """A routed attempt's writes into the client's WebSocket: SSE in, a message per event out,
    the response they make (``reply``), and whether anything was written (``wrote``)."""

    __slots__ = ("part", "s", "sse", "reply", "wrote")

    def __init__(self, part: WebSockets, s: Session) -> None:
        self.part, self.s, self.sse, self.reply, self.wrote = part, s, p_ws.SseMessages(), Reply(), False

    def __call__(self, chunks: list[bytes]) -> None:
        self._out(self.sse.feed(b"".join(chunks)))

    def close(self) -> None:
        self._out(self.sse.close())

    def _out(self, messages: list[bytes]) -> None:
        for m in messages:
            self.reply.on(p_ws.server_event(m).doc)
            self.part._inject(self.s, m)
            self.wrote = True


def _failure_kind(e: BaseException) -> str:
    """A failed attempt's kind (turn/failover.py ``KINDS``) by its exception."""
    if isinstance(e, (TimeoutError, httpx.TimeoutException)):
        return "timeout"
    if isinstance(e, ConnectionError) and not isinstance(e, ConnectionRefusedError):
        return "reset"  # reset, or closed before its first event
    return "unreachable" if isinstance(e, (httpx.ConnectError, OSError)) else "reset"


def _ended(turn: Turn, ev: p_ws.ServerEvent) -> int:
    """The status a turn ended with by its terminal event: an ``error`` event's (its message the
    turn's error), else 200 (a ``response.failed`` is judged by the stream watch)."""
    failure = ev.failure()
    if failure is None:
        return 200
    turn.error = turn.error or failure[1]
    return failure[0]


def _free_slot(planning: Planning, first: tuple[Any, Any] | None = None) -> tuple[Any, Any] | None:
    """The rules' choice (``first``: the one made already) with a free slot there (an endpoint
    found full: they decide without it), or None: the turn goes to no endpoint."""
    ep, slot = first if first is not None else planning.next()
    while ep is not None and slot is None:
        planning.full.add(ep.name)
        ep, slot = planning.next()
    return (ep, slot) if ep is not None and slot is not None else None


def _error_doc(status: int, body: bytes, headers: Any = None) -> dict:
    """An ``error`` event (the WebSocket form of an HTTPS error reply) from an error body in
    the Responses (OpenAI) envelope, with the reply's headers Codex reads from the event
    (codex-api's wrapped WebSocket error: ``status``, ``error``, ``headers``; a 429 whose
    ``error.type`` is ``usage_limit_reached`` is its used-up plan, as over HTTPS)."""
    try:
        doc = jsonc.loads(body)
    except Exception:
        doc = None
    err = doc.get("error") if isinstance(doc, dict) and isinstance(doc.get("error"), dict) else \
        {"type": "api_error", "message": body[:500].decode("utf-8", "replace")}
    said = {k: v for k, v in dict(headers or {}).items() if k.lower() in WS_ERROR_HEADERS}
    return {"type": "error", "status": status, "error": err, **({"headers": said} if said else {})}


def _error_message(status: int, etype: str, message: str) -> bytes:
    return jsonc.dumpb({"type": "error", "status": status, "error": {"type": etype, "code": None, "message": message}})
