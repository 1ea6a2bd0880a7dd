"""The WebSocket part: Codex's Responses session over WebSocket, every turn seen, recorded and
routed (docs/dev/clients.md "Responses over WebSocket").

mitmproxy relays the upgraded connection; its hooks give this part each whole message:
- ``started`` (``websocket_start``): a Responses WebSocket (protocols/openai_responses_ws.py
  ``is_upgrade``) gets its connection state (``Session``: its turns and
  transcript, turn/ws_session.py, and the messages waiting for the provider's answer);
- ``message`` (``websocket_message``): a client ``response.create`` is a turn, planned by the
  rules as the same body over HTTPS (turn/planner.py), admitted under the spending caps as it
  is (proxy/budgeting.py ``admit_now``; a reached cap answers with Codex's own
  ``usage_limit_reached`` error event; a full endpoint makes it wait up to its ``queue_s``,
  off the hook: ``queued``), recorded, and carried where its route says: kept at its provider,
  the message goes on untouched (or, continuing a response tokunseba made, with the whole
  conversation instead); queued, answered here or routed: by ``RoutedTurns``
  (proxy/ws_routed.py; the connection's state: proxy/ws_connection.py); routed, it is dropped
  and the turn goes over the endpoint's own WebSocket (retargeted) or HTTPS (httpx, streamed), its reply (translated by the stream
  translators) written into the client's WebSocket event by event (``inject.websocket``); an
  attempt failing before anything was written moves on as over HTTPS (turn/failover.py; back
  at the provider, the client's message is sent there); answered here, an ``error`` event. A
  warm-up (``generate: false``) goes to the provider, not recorded. The provider's events end
  each turn it answers (usage from ``response.completed``), read by the stream watch as over
  HTTPS once the turn has ended (a delta, kept as it came, is only checked to be JSON then:
  nothing is parsed on its way); a passed-on turn's
  start and end are recorded once the message in hand is relayed (``after_relay``);
- ``ended`` (``websocket_end``): a turn still open is interrupted, never a success.
Each turn's end: its holds settled from the usage its ``response.completed`` reported (a cut
connection keeps its hold as its charge), the ledger row, the console line, its span, the flow's
comment and mark.
Fail closed: a message whose handling fails is answered with an error event, never sent on
half-handled.
"""

from __future__ import annotations

import time
from typing import Any

from mitmproxy import ctx, http
from mitmproxy.hooks import UpdateHook

from .. import jsonc
from ..protocols import extra_for
from ..protocols import openai_responses as p_responses
from ..protocols import openai_responses_ws as p_ws
from ..turn import Arrival, Outcome, Planning, Pump, Turn
from ..webview import CLIENT_KEY, MARKS
from .budgeting import settle
from .core import Core, Part, log
from .record import console
from .route import reverse_host
from .ws_connection import Session, Waiting, after_relay
from .ws_routed import RoutedTurns, ended_status, error_message, free_slot

class WebSockets(Part):
    def __init__(self, core: Core) -> None:
        self.core = core
        self.sessions: dict[str, Session] = {}
        self.routes = RoutedTurns(core, self)  # the turns carried by tokunseba: queued, answered here, routed

    # ---- the hooks
    def started(self, flow: http.HTTPFlow) -> None:
        try:
            req = flow.request
            host = req.pretty_host  # parsed from the Host header: once
            if not p_ws.is_upgrade(method="GET", host=host, path=req.path, headers=req.headers.items(multi=True),
                                   extra_hosts=extra_for(self.core.provider_hosts, host, req.port)):
                return
            self.sessions[flow.id] = Session(flow, host)
            self.core.reach.answered(req.host, req.port)  # it upgraded: the next upgrade need not connect first
            arrival = Arrival(reverse_host(flow))  # through the proxy, or to a base-URL listener
            flow.metadata[CLIENT_KEY] = arrival.client(req.headers.get("user-agent"), p_responses.PROTOCOL)
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
                self.inject(s, error_message(500, "api_error", f"tokunseba internal error: {e}"))

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
                self.interrupted(s, w.turn, w.watched(), why)

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
            self.to_provider(s, msg, cm.doc, None)
        elif cm.kind == p_ws.TURN and cm.doc is not None:
            self._turn(s, msg, cm.doc)

    def to_provider(self, s: Session, msg: Any, doc: dict, turn: Turn | None, conversation: Any = ...) -> None:
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
        planning, conversation = s.turns_of.plan(doc, host=s.host, port=req.port, path=req.path,
                                                  headers=req.headers, rules=core.rules, health=core.health,
                                                  capacity=core.capacity, provider_hosts=core.provider_hosts,
                                                  keeper=core.keeper, earned=core.earned, quota=core.windows.board)
        if planning is None:  # not a provider turn after all: left alone
            return
        ep, slot = planning.next()
        if ep is not None and slot is None and ep.queue_s > 0:  # full: it waits for a slot, off the hook
            payload = msg.content
            msg.drop()
            self.routes.queue(s, payload, doc, planning, conversation, ep)
            return
        self.routes.take(s, msg, doc, planning, conversation, free_slot(planning, (ep, slot)))

    # ---- a server message: the provider's events for the oldest message waiting
    def _server_message(self, s: Session, payload: bytes) -> None:
        if not s.waiting:
            return
        if p_ws.is_delta(payload) and not s.server.pending:  # most messages: a delta, kept as it came
            s.waiting[0].delta(payload)  # nothing in it ends a turn or names a response: read once the turn ends
            return
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
                    after_relay(self._provider_ended, s, w, ev)

    def _provider_ended(self, s: Session, w: Waiting, ev: p_ws.ServerEvent) -> None:
        """A turn the provider answered ended with ``ev``: its events watched, its records."""
        pump = w.watched()
        assert w.turn is not None and pump is not None
        pump(b"")
        self.finish(s, w.turn, pump.outcome(ended_status(w.turn, ev)), w.turn.outcome)

    # ---- a turn's end
    def interrupted(self, s: Session, turn: Turn, pump: Pump | None, why: str, planning: Planning | None = None) -> None:
        turn.error = why
        out = pump.outcome(None) if pump is not None else Outcome(None)
        out.failed = True
        self.core.recorder.event(turn, "websocket_closed", {"message": why})
        self.finish(s, turn, out, "interrupted", planning)

    def finish(self, s: Session, turn: Turn, out: Outcome, outcome: str, planning: Planning | None = None) -> None:
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

    def inject(self, s: Session, payload: bytes) -> None:
        ctx.master.commands.call("inject.websocket", s.flow, True, payload, True)
