"""A Responses WebSocket's turn carried by tokunseba (docs/dev/clients.md "Responses over WebSocket"):
``RoutedTurns``, held by the WebSocket hooks (proxy/websocket.py, ``WebSocketHooks``: what they
do for a turn here: write into the client's WebSocket, end a turn, pass a message on to the
provider).

- ``queue``: a turn whose endpoint is full waits up to the endpoint's ``queue_s`` for a slot,
  off the hook (``queued``), then is carried;
- ``take``: a planned turn from the message's hook is carried at once, or, when its caps are
  counted in PostgreSQL, admitted off the event loop first (its message dropped; a round trip
  never holds the loop: proxy/budgeting.py ``admit_off_loop``), then carried;
- ``carry``: a planned turn admitted under the spending caps as it is (proxy/budgeting.py
  ``admit_now``), recorded, and carried where its route says: kept at its provider (the
  message goes on, ``WebSocketHooks.to_provider``); answered here (refused, an error: an
  ``error`` event); routed: the client's message is dropped and the turn goes over the
  endpoint's own WebSocket (retargeted, opened once per connection; an endpoint that answers
  the upgrade with no WebSocket is remembered and gets HTTPS from then on) or HTTPS (httpx,
  streamed), its reply (translated by the stream translators) written into the client's
  WebSocket event by event;
- failover: an attempt failing before anything was written moves on as over HTTPS
  (turn/failover.py; the next endpoint's slot waited for up to its ``queue_s``; back at the
  provider, the client's message is sent there); else the client is told, in an ``error``
  event, and the turn ends (``WebSocketHooks.finish``). A closed connection cancels the
  turn's task: it ends interrupted, unless its client already had the reply's terminal event
  (an endpoint's HTTPS stream may end a while after it): then the turn is whole.
Also the shared answers: ``error_doc``/``error_message`` (an ``error`` event), ``free_slot``
(the rules' choice with a free slot), ``ended_status`` (a turn's status by its terminal event).
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any, Protocol

import httpx
from mitmproxy import ctx, http

from .. import jsonc, translate
from ..protocols import openai_responses as p_responses
from ..protocols import openai_responses_ws as p_ws
from ..budgets import Verdict
from ..states import Action
from ..turn import Carrier, Chain, FailedAttempt, Failure, Outcome, Planning, Pump, Reply, Turn
from .budgeting import admit_now, admit_off_loop, admits_off_loop
from .core import Core, log, option, upstream_ssl_context
from .route import reverse_host
from .ws_client import EndpointSocket, NotUpgraded
from .ws_connection import Session, after_relay

# the upgrade's headers that are no part of an HTTPS request (hop-by-hop, the WebSocket handshake)
NOT_OVER_HTTPS = {"host", "connection", "upgrade", "content-length", "transfer-encoding", "sec-websocket-key",
                  "sec-websocket-version", "sec-websocket-extensions", "sec-websocket-protocol", "openai-beta",
                  "accept-encoding", "keep-alive"}

WS_ERROR_HEADERS = {"retry-after", "x-should-retry"}  # a local answer's headers an error event carries


class WebSocketHooks(Protocol):
    """What the WebSocket hooks part (proxy/websocket.py ``WebSockets``) does for a turn carried here."""

    sessions: dict[str, Session]  # flow id -> its connection, while it is open

    def inject(self, s: Session, payload: bytes) -> None: ...

    def finish(self, s: Session, turn: Turn, out: Outcome, outcome: str, planning: Planning | None = None) -> None: ...

    def interrupted(self, s: Session, turn: Turn, pump: Pump | None, why: str,
                    planning: Planning | None = None) -> None: ...

    def to_provider(self, s: Session, msg: Any, doc: dict, turn: Turn | None, conversation: Any = ...) -> None: ...


class RoutedTurns:
    """The connections' turns carried by tokunseba: queued, admitted, answered here or routed."""

    def __init__(self, core: Core, hooks: WebSocketHooks) -> None:
        self.core, self.hooks = core, hooks
        self.client: httpx.AsyncClient | None = None
        self.no_websocket: set[str] = set()  # endpoint URLs that answered an upgrade with no WebSocket

    def queue(self, s: Session, payload: bytes, doc: dict, planning: Planning, conversation: list | None,
              ep: Any) -> None:
        """A turn whose endpoint is full (its message dropped already): it waits, off the hook."""
        self._spawn(s, self._queued(s, payload, doc, planning, conversation, ep))

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
            if self.hooks.sessions.get(s.flow.id) is not s:  # the connection closed meanwhile: nothing was sent
                if slot is not None:
                    slot.release()
                return
            if slot is None:
                planning.full.add(ep.name)
                ep, slot = planning.next()
        connected = (ep, slot) if ep is not None else None
        if admits_off_loop(self.core.caps):
            await self._admitted(s, payload, doc, planning, conversation, connected, waits)
        else:
            self.carry(s, payload, doc, planning, conversation, connected, waits)

    def take(self, s: Session, msg: Any, doc: dict, planning: Planning, conversation: list | None,
             connected: tuple[Any, Any] | None) -> None:
        """A planned turn, from the message's hook: carried at once; or, when its caps are counted
        in PostgreSQL (a round trip), its message dropped and the turn admitted off the event loop
        first, then carried (kept at its provider: the message is sent on from there)."""
        if not admits_off_loop(self.core.caps):
            self.carry(s, msg, doc, planning, conversation, connected)
            return
        payload = msg.content
        msg.drop()
        self._spawn(s, self._admitted(s, payload, doc, planning, conversation, connected))

    async def _admitted(self, s: Session, payload: bytes, doc: dict, planning: Planning, conversation: list | None,
                        connected: tuple[Any, Any] | None, waits: list[dict] | None = None) -> None:
        """The turn admitted under caps counted in PostgreSQL, its store's calls in a thread
        (proxy/budgeting.py ``admit_off_loop``), then carried; a connection closed meanwhile gives
        its holds and slot back (nothing was sent)."""
        caps = self.core.caps
        assert caps is not None  # admits_off_loop
        admitted = await admit_off_loop(caps, planning, connected, lambda: free_slot(planning))
        if self.hooks.sessions.get(s.flow.id) is not s:
            verdict, connected = admitted
            if verdict.held:
                caps.release(verdict)
            if connected is not None:
                connected[1].release()
            return
        self.carry(s, payload, doc, planning, conversation, admitted[1], waits, admitted=admitted[0])

    def carry(self, s: Session, msg: Any, doc: dict, planning: Planning, conversation: list | None,
               connected: tuple[Any, Any] | None, waits: list[dict] | None = None, *,
               admitted: Verdict | None = None) -> None:
        """The planned turn admitted (under the caps; ``admitted``: already, off the event loop),
        recorded and carried where its route says."""
        core, flow = self.core, s.flow
        verdict = admitted
        if verdict is None and core.caps is not None:  # under the caps as over HTTPS: one atomic hold per cap
            verdict, connected = admit_now(core.caps, planning, connected, lambda: free_slot(planning))
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
        if goes == Carrier.PROVIDER:  # its start recorded once the message is on its way (after_relay)
            after_relay(core.recorder.start, turn)
            self.hooks.to_provider(s, msg, doc, turn, conversation)
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
            self.hooks.inject(s, jsonc.dumpb(error_doc(turn.local.status, turn.local.body, turn.local.headers)))
            self.hooks.finish(s, turn, Outcome(turn.local.status), turn.outcome)
            return
        turn.action = Action.RESPOND
        turn.error = ("it continues a response this connection no longer holds (previous_response_id); "
                      "tokunseba cannot carry the whole conversation to another endpoint")
        self.hooks.inject(s, error_message(400, "invalid_request_error", f"tokunseba: {turn.error}"))
        self.hooks.finish(s, turn, Outcome(400), "error")

    def _spawn(self, s: Session, work: Any) -> None:
        task = asyncio.ensure_future(work)
        s.routed.add(task)
        task.add_done_callback(s.routed.discard)

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
                self.hooks.to_provider(s, payload, doc, turn, conversation)
                return
            over_websocket = goes == Carrier.ENDPOINT_WS

    async def _attempt(self, s: Session, turn: Turn, planning: Planning, conversation: list,
                       over_websocket: bool) -> tuple[Failure, bytes] | None:
        """One attempt, its events written into the client's WebSocket as they come. A failure
        before anything was written is returned (with the endpoint's error body, if any): the
        turn may move on; any other end is the turn's own (finished here)."""
        pump = Pump.of(turn)
        write, status = _Writes(self.hooks, s), None
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
            self.hooks.finish(s, turn, pump.outcome(status), turn.outcome, planning)
        except asyncio.CancelledError:
            if pump.completed:  # the client had the reply's terminal event, then left before the stream's end
                self.hooks.finish(s, turn, pump.outcome(write.status), turn.outcome, planning)
            else:
                self.hooks.interrupted(s, turn, pump, "the WebSocket connection closed mid-turn", planning)
            raise
        except Exception as e:
            why = f"endpoint {turn.endpoint.name if turn.endpoint else '?'} failed: {e or type(e).__name__}"
            if not write.wrote:
                return Failure(_failure_kind(e), why), b""
            turn.error = why
            said = pump.error_end(f"tokunseba: {why}")
            write([said] if said else [])
            write.close()
            out = pump.outcome(status)
            out.failed = True
            self.hooks.finish(s, turn, out, "error", planning)
        return None

    async def _over_https(self, s: Session, turn: Turn, planning: Planning, body: bytes, write: "_Writes",
                          pump: Pump) -> int | tuple[Failure, bytes] | None:
        """The attempt over HTTPS (httpx, streamed): its status; a failure to move on from
        (``Failure.of``); None: the client was told the endpoint's error (finished)."""
        assert turn.url is not None
        async with self._client().stream("POST", turn.url, content=body, headers=self._headers(s.flow, turn)) as r:
            status = write.status = r.status_code
            if status >= 400:
                raw = await r.aread()
                if (failure := Failure.of(status, raw, turn.target_protocol)) is not None:
                    return failure, raw
                self._tell(s, turn, status, raw)
                self.hooks.finish(s, turn, Outcome(status), "error", planning)
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
        err = error_doc(status, raw)
        turn.error = str(err.get("error", {}).get("message") or f"HTTP {status}")
        self.hooks.inject(s, jsonc.dumpb(err))
        return status

    async def _move_on(self, s: Session, turn: Turn, planning: Planning, chain: Chain, failed: tuple[Failure, bytes],
                       attempt_at: float) -> Turn | None:
        """The failed attempt noted (its endpoint cooled or backed off) and the next one planned
        with a slot of its endpoint (turn/failed_attempt.py, as over HTTPS); None: no next one,
        the client was told (finished)."""
        core, (failure, raw) = self.core, failed
        fa = FailedAttempt.of(turn, chain, failure, [], ms=(time.monotonic() - attempt_at) * 1000, now=time.time(),
                              rules=core.rules, health=core.health, capacity=core.capacity, env=os.environ,
                              held=planning)
        nxt, slot = await self._next(fa)
        moved = fa.settle(nxt)  # given up: what the client is told is chain.told (turn/last_word.py)
        log.warning(moved.line)
        core.recorder.event(turn, "attempt_failed", moved.record)
        if nxt is None:
            if (told := chain.told) is not None:
                turn.error, status = told.message, told.reply.status
                self.hooks.inject(s, jsonc.dumpb(error_doc(status, told.reply.body, told.reply.headers)))
            elif raw:
                status = self._tell(s, turn, failure.status or 502, raw)
            else:
                status, turn.error = 504 if failure.kind == "timeout" else 502, failure.why
                self.hooks.inject(s, error_message(status, "api_error", f"tokunseba: {failure.why}"))
            out = Outcome(status)
            out.failed = True
            self.hooks.finish(s, turn, out, "error", planning)
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
        failure to move on from (an ``error`` event before anything was written, ``Failure.of``)."""
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
                if (failure := Failure.of(said[0], raw, p_responses.PROTOCOL)) is not None:
                    return failure, raw
            write(pump(p_ws.as_sse(ev)))
            if ev.terminal:
                return ended_status(turn, ev)

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


class _Writes:
    """A routed attempt's writes into the client's WebSocket: SSE in, a message per event out,
    the response they make (``reply``), whether anything was written (``wrote``), and the
    status of the endpoint's reply they carry (``status``: None until its headers came)."""

    __slots__ = ("hooks", "s", "sse", "reply", "wrote", "status")

    def __init__(self, hooks: WebSocketHooks, s: Session) -> None:
        self.hooks, self.s, self.sse, self.reply, self.wrote = hooks, s, p_ws.SseMessages(), Reply(), False
        self.status: int | None = None

    def __call__(self, chunks: list[bytes]) -> None:
        self._out(self.sse.feed(b"".join(chunks)))

    def close(self) -> None:
        self._out(self.sse.close())

    def _out(self, messages: list[bytes]) -> None:
        for m in messages:
            self.reply.on(p_ws.server_event(m).doc)
            self.hooks.inject(self.s, m)
            self.wrote = True


def _failure_kind(e: BaseException) -> str:
    """A failed attempt's kind (turn/failover.py ``KINDS``) by its exception."""
    if isinstance(e, (TimeoutError, httpx.TimeoutException)):
        return "timeout"
    if isinstance(e, ConnectionError) and not isinstance(e, ConnectionRefusedError):
        return "reset"  # reset, or closed before its first event
    return "unreachable" if isinstance(e, (httpx.ConnectError, OSError)) else "reset"


def ended_status(turn: Turn, ev: p_ws.ServerEvent) -> int:
    """The status a turn ended with by its terminal event: an ``error`` event's (its message the
    turn's error), else 200 (a ``response.failed`` is judged by the stream watch)."""
    failure = ev.failure()
    if failure is None:
        return 200
    turn.error = turn.error or failure[1]
    return failure[0]


def free_slot(planning: Planning, first: tuple[Any, Any] | None = None) -> tuple[Any, Any] | None:
    """The rules' choice (``first``: the one made already) with a free slot there (an endpoint
    found full: they decide without it), or None: the turn goes to no endpoint."""
    ep, slot = first if first is not None else planning.next()
    while ep is not None and slot is None:
        planning.full.add(ep.name)
        ep, slot = planning.next()
    return (ep, slot) if ep is not None and slot is not None else None


def error_doc(status: int, body: bytes, headers: Any = None) -> dict:
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


def error_message(status: int, etype: str, message: str) -> bytes:
    return jsonc.dumpb({"type": "error", "status": status, "error": {"type": etype, "code": None, "message": message}})
