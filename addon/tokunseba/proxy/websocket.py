"""The WebSocket part: Codex's Responses session over WebSocket, every turn seen, recorded and
routed (docs/clients.md "Responses over WebSocket").

mitmproxy relays the upgraded connection; its hooks give this part each whole message:
- ``started`` (``websocket_start``): a Responses WebSocket (turn/plan.py
  ``is_responses_websocket``) gets its connection state (``Session``: the transcript,
  turn/ws_transcript.py, and the messages waiting for the provider's answer);
- ``message`` (``websocket_message``): a client ``response.create`` is a turn, planned by the
  rules exactly as the same body over HTTPS (turn/planner.py), admitted under the spending caps
  as it is (proxy/budgeting.py ``admit_now``: the same holds, ``on_limit`` reroute and warn; a
  reached cap answers with Codex's own ``usage_limit_reached`` error event), recorded, and carried where its
  route says: kept at its provider, the message goes on untouched (or, when it continues a
  response tokunseba made, with the whole conversation instead); routed (retargeted or
  translated), the message is dropped, the turn goes over HTTPS (httpx, streamed), its reply
  (translated by the stream translators) is written into the client's WebSocket event by
  event as JSON text messages (mitmproxy's ``inject.websocket``); answered here (refused, an
  error), an ``error`` event. A warm-up (``generate: false``) goes to the provider and is not a
  turn: not recorded. The provider's events end each turn it answers (its usage from
  ``response.completed``), read by the stream watch as the same events over HTTPS would be
  (a delta, most of a reply, is only checked to be JSON: nothing in it is recorded);
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
from ..turn import ENDPOINT_WS, HERE, PROVIDER, carrier, plan_message
from ..turn import Reply, Transcript
from ..turn import (TURN, WARMUP, ServerEvent, ServerEvents, SseMessages, as_sse, delta_type, read_client_message,
                            server_event)
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


@dataclass
class Waiting:
    """A message passed on to the provider, until its response ends: a turn (recorded), or a
    warm-up (``turn`` None)."""

    turn: Turn | None
    conversation: list | None
    reply: Reply = field(default_factory=Reply)
    pump: Pump | None = None


@dataclass
class Session:
    """One Responses WebSocket connection's state."""

    flow: http.HTTPFlow
    transcript: Transcript = field(default_factory=Transcript)
    waiting: deque[Waiting] = field(default_factory=deque)
    server: ServerEvents = field(default_factory=ServerEvents)
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
            if msg.from_client and read_client_message(msg.content).kind == TURN:
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
                self._interrupted(s, w.turn, w.pump, why)

    def stop(self) -> None:
        for s in list(self.sessions.values()):
            for task in list(s.routed):
                task.cancel()

    # ---- a client message
    def _client_message(self, s: Session, msg: Any) -> None:
        if not msg.is_text:
            return
        cm = read_client_message(msg.content)
        if cm.kind == WARMUP and cm.doc is not None:
            self._to_provider(s, msg, cm.doc, None)
        elif cm.kind == TURN and cm.doc is not None:
            self._turn(s, msg, cm.doc)

    def _to_provider(self, s: Session, msg: Any, doc: dict, turn: Turn | None) -> None:
        """The message goes on to the provider (untouched, unless it continues a response
        tokunseba made); its events are awaited."""
        conversation = s.transcript.conversation(doc)
        instead = s.transcript.for_provider(doc)
        if instead is not None:
            msg.content = jsonc.dumpb(instead)
            if turn is not None:
                self.core.recorder.event(turn, "websocket_rewritten", {
                    "previous_response_id": doc.get("previous_response_id"), "items": len(instead.get("input") or []),
                    "why": "it continues a response tokunseba made: the whole conversation goes instead"})
        s.waiting.append(Waiting(turn, conversation, pump=Pump(turn) if turn is not None else None))

    def _turn(self, s: Session, msg: Any, doc: dict) -> None:
        core, flow, req = self.core, s.flow, s.flow.request
        planning, conversation = plan_message(doc, s.transcript, host=req.pretty_host, port=req.port, path=req.path,
                                              headers=req.headers, rules=core.rules, health=core.health,
                                              capacity=core.capacity, provider_hosts=core.provider_hosts,
                                              keeper=core.keeper, earned=core.earned, quota=core.windows.board)
        if planning is None:  # not a provider turn after all: left alone
            return
        connected, verdict = _free_slot(planning), None
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
        s.turns += 1
        goes = carrier(turn, conversation_known=conversation is not None,
                       endpoint_websocket=turn.url not in self.no_websocket)
        turn.events.append(("websocket", {"connection": flow.id, "turn": s.turns, "carried": goes}))
        s.open[turn.request_id] = turn
        core.recorder.start(turn)
        if goes == PROVIDER:
            self._to_provider(s, msg, doc, turn)
            return
        msg.drop()  # the provider never sees it: answered here, or routed
        if goes == HERE:
            if planning.slot is not None:
                planning.slot.release()
            if turn.local is not None:  # refused (a reached cap: Codex's usage_limit_reached), or an error
                self._inject(s, jsonc.dumpb(_error_doc(turn.local.status, turn.local.body, turn.local.headers)))
                self._finish(s, turn, Outcome(turn.local.status), turn.outcome)
                return
            turn.action = Action.RESPOND
            turn.error = ("it continues a response this connection no longer holds (previous_response_id); "
                          "tokunseba cannot carry the whole conversation to another endpoint")
            self._inject(s, _error_message(400, "invalid_request_error", f"tokunseba: {turn.error}"))
            self._finish(s, turn, Outcome(400), "error")
            return
        assert conversation is not None
        task = asyncio.ensure_future(self._routed(s, turn, planning, conversation, over_websocket=goes == ENDPOINT_WS))
        s.routed.add(task)
        task.add_done_callback(s.routed.discard)

    # ---- a routed turn: over HTTPS, its events written into the client's WebSocket
    async def _routed(self, s: Session, turn: Turn, planning: Planning, conversation: list, *,
                      over_websocket: bool) -> None:
        translated = turn.action == Action.TRANSLATE
        pump = Pump(turn, stream_translator(turn) if translated else None)
        sse, reply, status = SseMessages(), Reply(), None
        assert turn.url is not None
        body = turn.body if turn.body is not None else planning.prep.body
        headers = self._headers(s.flow, turn)

        def send(chunks: list[bytes]) -> None:
            for m in sse.feed(b"".join(chunks)):
                reply.on(server_event(m).doc)
                self._inject(s, m)

        try:
            if over_websocket:
                sock = await self._endpoint_socket(s, turn)
                if sock is not None:  # over the endpoint's own WebSocket
                    status = await self._over_websocket(s, turn, sock, body, reply, pump, send)
                    send(pump(b""))
                    out = pump.outcome(status)
                    s.transcript.answered(reply.response_id, conversation, reply.output, ours=True)
                    self._finish(s, turn, out, turn.outcome, planning)
                    return
            client = self._client()
            async with client.stream("POST", turn.url, content=body, headers=headers) as r:
                status = r.status_code
                if status >= 400:
                    raw = await r.aread()
                    if translated:
                        st, said = translate.error(turn.target_protocol or turn.client_protocol, turn.client_protocol,
                                                   status, raw)
                    else:
                        st, said = status, raw
                    err = _error_doc(st, said)
                    turn.error = str(err.get("error", {}).get("message") or f"HTTP {status}")
                    self._inject(s, jsonc.dumpb(err))
                    self._finish(s, turn, Outcome(st), "error", planning)
                    return
                async for chunk in r.aiter_raw():
                    send(pump(chunk))
            send(pump(b""))
            for m in sse.close():
                reply.on(server_event(m).doc)
                self._inject(s, m)
            out = pump.outcome(status)
            s.transcript.answered(reply.response_id, conversation, reply.output, ours=True)
            self._finish(s, turn, out, turn.outcome, planning)
        except asyncio.CancelledError:
            self._interrupted(s, turn, pump, "the WebSocket connection closed mid-turn", planning)
            raise
        except Exception as e:
            why = f"endpoint {turn.endpoint.name if turn.endpoint else '?'} failed: {e or type(e).__name__}"
            turn.error = why
            said = pump.t.fail(f"tokunseba: {why}") if pump.t is not None else error_event(turn.client_protocol,
                                                                                           f"tokunseba: {why}")
            send([said] if said else [])
            for m in sse.close():
                self._inject(s, m)
            out = pump.outcome(status)
            out.failed = True
            self._finish(s, turn, out, "error", planning)

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

    async def _over_websocket(self, s: Session, turn: Turn, sock: EndpointSocket, body: bytes, reply: Reply,
                              pump: Pump, send) -> int:
        """The turn as one ``response.create`` message on the endpoint's WebSocket (the whole
        conversation, no previous id); its events written into the client's WebSocket as they
        come (through the pump: watched, an echoed key redacted). The status it ended with."""
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
            ev = server_event(text.encode())
            send(pump(as_sse(ev)))
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
        if not s.server.pending and delta_type(payload) is not None:  # most messages: a delta
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
            if w.pump is not None:
                w.pump(as_sse(ev))
            if ev.terminal:
                s.waiting.popleft()
                s.transcript.answered(w.reply.response_id, w.conversation, w.reply.output, ours=False)
                if w.turn is not None and w.pump is not None:
                    w.pump(b"")
                    status = _ended(w.turn, ev)
                    out = w.pump.outcome(status)
                    self._finish(s, w.turn, out, w.turn.outcome)

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


def _ended(turn: Turn, ev: ServerEvent) -> int:
    """The status a turn ended with by its terminal event: an ``error`` event's (its message the
    turn's error), else 200 (a ``response.failed`` is judged by the stream watch)."""
    failure = ev.failure()
    if failure is None:
        return 200
    turn.error = turn.error or failure[1]
    return failure[0]


def _free_slot(planning: Planning) -> tuple[Any, Any] | None:
    """The rules' choice with a free slot there (an endpoint found full: they decide without it;
    no waiting in a message hook), or None: the turn goes to no endpoint."""
    ep, slot = planning.next()
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
