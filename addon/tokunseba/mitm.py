"""The mitmproxy adapter: the only module that imports mitmproxy (design.md §3).

Hooks stay a few lines each and delegate to the pure core (turn.py). Fail closed: any
exception while handling a provider call answers the client with an error in its own
protocol; a translated turn never falls through to the original host.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass

from mitmproxy import command, contentviews, ctx, exceptions, http

from .bridge import MARK as BRIDGE_MARK
from .bridge import Bridge
from .bridge import UpstreamConn
from .endpoints import EndpointHealth
from .encoding import Decoding, is_identity
from .errors import TranslationError
from .ledger import Ledger, instance_id
from .ledger_writer import LedgerWriter
from .rules import Rules, RulesError, load_rules
from .protocols.detect import PROVIDER_HOSTS
from .translate import PROTOCOLS
from .sse import DEFAULT_MAX_EVENT_BYTES, SSETooLarge, set_max_event_bytes
from .stream_watch import USAGE_PROTOCOL, StreamWatch, error_event, last_event_end, whole_verdict
from .translate.sniff import usage_from_json
from .translate.usage import Usage
from .turn import (REQUEST_ID_HEADER, SSE_CONTENT_TYPE, LocalResponse, Turn, apply_header_changes, build_turn,
                   client_error, decide_request, prepare_request, response_mode, stream_translator, translate_whole,
                   websocket_refusal)

log = logging.getLogger("tokunseba")

MARKS = {"pass_through": ":white_circle:", "retargeted": ":arrow_right:", "translated": ":repeat:",
         "refused": ":no_entry:", "error": ":x:"}
ORIGINAL_KEY = "tokunseba.original_request"
MAX_ORIGINAL = 4 * 1024 * 1024
RULES_POLL_S = 1.0
MAX_STORED_BODY = 4 * 1024 * 1024


class Pump:
    """The per-flow stream callable: joins output into one chunk per call, never returns
    b"" mid-stream, and turns any exception into an error event in the client's protocol.
    A translated stream is decoded from its content-encoding before the translator sees it
    (the client gets it identity-encoded); a raw one goes on as it came. A retargeted (raw,
    relayed) stream goes on whole events at a time: when its upstream breaks or it ends
    without its terminal event, the unfinished event is dropped and an error event in the
    client's protocol ends it."""

    def __init__(self, addon: "Tokunseba", turn: Turn, translator=None, content_encoding: str | None = None,
                 target=None) -> None:
        self.addon, self.turn, self.t = addon, turn, translator
        self.target = target  # the relay's record of this flow's upstream (bridge.Target), if relayed
        # relayed raw stream: bytes after the last complete event wait for the event's end
        self.hold: bytearray | None = bytearray() if target is not None and translator is None else None
        self.failed = False
        self.first_byte: float | None = None
        # raw pass-through / retarget: usage and completeness read on the side
        self.watch = StreamWatch(turn.client_protocol, content_encoding) if translator is None else None
        # translated: undo the upstream's content-encoding first (raises UnsupportedEncoding)
        self.inflate = Decoding(content_encoding) if translator is not None and not is_identity(content_encoding) \
            else None
        self.kept: bytearray | None = bytearray() if addon.ledger_bodies else None  # --ledger-bodies

    def __call__(self, data: bytes):
        try:
            if self.failed:
                return []
            if self.t is None:  # raw pass-through: bytes unchanged; timestamps and usage read on the side
                return self._raw(data)
            if self.inflate is not None:
                out = self.t.feed(self.inflate.feed(data)) if data else self.t.feed(self.inflate.close()) + self.t.close()
            else:
                out = self.t.feed(data) if data else self.t.close()
        except Exception as e:  # mitmproxy would drop the chunk silently
            if isinstance(e, SSETooLarge):
                log.warning("tokunseba: %s: turn %s ended", e, self.turn.request_id)
                why = f"tokunseba: {e}"
            else:
                log.exception("tokunseba: stream translation failed")
                why = f"tokunseba: stream translation failed: {e}"
            self.failed = True
            try:
                out = self.t.fail(why)
            except Exception:
                out = b""
        if out:
            self._mark_first_byte()
            self._keep(out)
            return [out]
        return []

    def _mark_first_byte(self) -> None:
        if self.first_byte is None:
            self.first_byte = time.time()

    def _keep(self, out: bytes) -> None:
        if self.kept is not None and len(self.kept) < MAX_STORED_BODY:
            self.kept += out[: MAX_STORED_BODY - len(self.kept)]

    def _raw(self, data: bytes) -> list[bytes]:
        try:  # the side channel must never cost the client a byte
            if data:
                self._mark_first_byte()
                self.watch.feed(data)
            else:
                self.watch.close()
        except Exception:
            log.exception("tokunseba: stream watch failed")
        out = self._whole_events(data) if self.hold is not None else data
        if out:
            self._keep(out)
        return [out] if out else []

    def _whole_events(self, data: bytes) -> bytes:
        """Relayed raw stream: the complete events so far; at the end, the rest, or (the
        upstream broke, or ended without its terminal event) an error event instead."""
        hold = self.hold
        if data:
            hold += data
            end = last_event_end(hold)
            out = bytes(hold[:end])
            del hold[:end]
            return out
        why = self.target.broken if self.target is not None else None
        verdict = self.watch.verdict() if self.watch is not None else None
        if why is None and verdict is not None and self.watch.error is None:
            why = verdict  # an upstream error event already reached the client as it came
        if why is None:
            out = bytes(hold)
        else:
            self.failed = True
            out = error_event(self.turn.client_protocol, f"tokunseba: {why}")
        hold.clear()
        return out


class Tokunseba:
    def __init__(self) -> None:
        self.rules: Rules = load_rules(None)
        self.ledger: LedgerWriter | None = None
        self.turns: dict[str, Turn] = {}
        self.modes: dict[str, str] = {}
        self.pumps: dict[str, Pump] = {}
        self.health = EndpointHealth()  # passive: a failed connect marks an endpoint down for a back-off
        self.provider_hosts: dict[str, str] = {}
        self.bridge = Bridge()
        self.rules_stamp: tuple | None = None
        self.rules_checked = 0.0
        self.bridged: dict[str, str] = {}  # flow id -> relay token

    # ---- options ----
    def load(self, loader) -> None:
        loader.add_option("tokunseba_rules", str, "", "Rules YAML file (empty: no routes, everything passes through).")
        loader.add_option("tokunseba_ledger", str, "", "Ledger SQLite path (empty: $TOKUNSEBA_HOME/ledger.db).")
        loader.add_option("tokunseba_ledger_bodies", bool, False, "Store request/response bodies in the ledger.")
        loader.add_option("tokunseba_probe_timeout_ms", int, 1500,
                          "Connect timeout for endpoints, in ms (a routed turn's connection is opened before it is "
                          "committed to its route; one that fails marks the endpoint down for a back-off).")
        loader.add_option("tokunseba_max_event_bytes", int, DEFAULT_MAX_EVENT_BYTES,
                          "Largest SSE event (or line) read from an upstream, in bytes; a bigger one ends the turn "
                          "with an error in the client's protocol.")
        loader.add_option("tokunseba_provider_hosts", Sequence[str], [],
                          "More hosts to treat as provider APIs, as HOST[:PORT]=PROTOCOL (e.g. llm.internal=openai).")

    def configure(self, updated: set[str]) -> None:
        if "tokunseba_rules" in updated:
            try:
                self._load_rules()
            except RulesError as e:
                raise exceptions.OptionsError(str(e)) from None
        if "tokunseba_max_event_bytes" in updated:
            try:
                set_max_event_bytes(ctx.options.tokunseba_max_event_bytes)
            except ValueError as e:
                raise exceptions.OptionsError(f"tokunseba_max_event_bytes: {e}") from None
        if "tokunseba_provider_hosts" in updated:
            hosts = {}
            for item in ctx.options.tokunseba_provider_hosts:
                name, sep, proto = item.rpartition("=")
                if not sep or not name or proto not in PROTOCOLS:
                    raise exceptions.OptionsError(
                        f"tokunseba_provider_hosts: {item!r} is not HOST[:PORT]=PROTOCOL with PROTOCOL in {', '.join(PROTOCOLS)}")
                hosts[name.lower()] = proto
            self.provider_hosts = hosts
        if {"tokunseba_ledger", "tokunseba_ledger_bodies"} & updated:
            self._open_ledger()

    def _open_ledger(self) -> None:
        """Open the ledger behind its writer thread, as a new owner of turns; turns left open
        by proxies that no longer run become interrupted."""
        if self.ledger is not None:
            self.ledger.close()
            self.ledger = None
        try:
            led = Ledger(ctx.options.tokunseba_ledger or None, store_bodies=ctx.options.tokunseba_ledger_bodies)
        except Exception as e:
            raise exceptions.OptionsError(f"tokunseba: cannot open the ledger: {e}") from None
        led.owner = instance_id()
        self.ledger = LedgerWriter(led)
        self.ledger.recover_interrupted()

    def _load_rules(self) -> None:
        path = ctx.options.tokunseba_rules or None
        before = _stamp(path)
        self.rules = load_rules(path)
        # a file still being written when read is read again at the next poll
        self.rules_stamp = before if _stamp(path) == before else None
        for w in self.rules.warnings:
            log.warning(w)
        self.health = EndpointHealth()

    def _maybe_reload_rules(self) -> None:
        """The rules file changed on disk: reload it (at most one stat a second). A broken
        edit keeps the rules in force and says why."""
        now = time.monotonic()
        if now - self.rules_checked < RULES_POLL_S:
            return
        self.rules_checked = now
        path = ctx.options.tokunseba_rules or None
        if path is None or _stamp(path) == self.rules_stamp:
            return
        try:
            self._load_rules()
            log.warning(f"tokunseba: reloaded {path}: {len(self.rules.routes)} routes")
        except RulesError as e:
            self.rules_stamp = _stamp(path)
            log.error(f"tokunseba: kept the previous rules: {e}")

    async def running(self) -> None:
        if ctx.options.connection_strategy != "lazy":
            ctx.options.update(connection_strategy="lazy")
        self.bridge.set_ssl_context(_upstream_ssl_context())
        if any(str(m).startswith("upstream:") for m in ctx.options.mode):
            log.warning("tokunseba: routed turns reach their endpoints directly, not through the upstream proxy")
        await self.bridge.start()

    def done(self) -> None:
        self.bridge.stop()
        if self.ledger is not None:
            self.ledger.interrupt_own()  # turns still open now will never complete
            self.ledger.close()
            self.ledger = None

    @command.command("tokunseba.status")
    def status(self) -> str:
        return f"rules={self.rules.source} routes={len(self.rules.routes)} in-flight={len(self.turns)}"

    # ---- hooks ----
    async def request(self, flow: http.HTTPFlow) -> None:
        if flow.response is not None or flow.id in self.turns:
            return
        turn = None
        try:
            if flow.request.method == "GET":
                ws = websocket_refusal(self.rules, method="GET", host=flow.request.pretty_host, path=flow.request.path,
                                       headers=flow.request.headers.items(multi=True),
                                       extra_hosts=self._extra_for(flow.request.pretty_host, flow.request.port))
                if ws is not None:
                    self._respond(flow, ws)
                    flow.comment = "tokunseba: WebSocket upgrade declined (426): Responses turns are routed over HTTPS"
                return
            self._maybe_reload_rules()
            planned = await self._plan(flow)
            if planned is not None:
                turn, conn = planned
                self._apply(flow, turn, conn)
        except Exception as e:
            log.exception("tokunseba: request hook failed")
            if turn is not None or flow.id in self.turns:
                t = turn or self.turns[flow.id]
                t.action, t.outcome, t.error = "respond", "error", str(e)
                self._respond(flow, t.client_error(500, f"tokunseba internal error: {e}", "api_error"))
                flow.marked, flow.comment = MARKS["error"], t.summary()
            elif _looks_like_provider_call(flow, self.provider_hosts):  # never let a half-handled provider call leak out
                self._respond(flow, client_error(_guess_protocol(flow), 500, f"tokunseba internal error: {e}", "api_error"))

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        turn = self.turns.get(flow.id)
        if turn is None or flow.response is None:
            return
        try:
            r = flow.response
            r.headers[REQUEST_ID_HEADER] = turn.request_id
            if r.raw_content is not None:  # answered locally, or already buffered
                return
            mode = response_mode(turn, r.status_code, r.headers.get("content-type", ""))
            if _shape_problem(turn, r.status_code, r.headers.get("content-type", "")):
                mode = "shape-error"  # buffered (not streamed): the response hook answers with the error
            self.modes[flow.id] = mode
            if mode == "raw-stream":
                target = self.bridge.targets.get(self.bridged.get(flow.id, ""))
                pump = Pump(self, turn, content_encoding=r.headers.get("content-encoding"), target=target)
            elif mode == "translate-stream":
                pump = Pump(self, turn, stream_translator(turn), content_encoding=r.headers.get("content-encoding"))
                _prepare_stream_headers(flow, SSE_CONTENT_TYPE)
            else:
                return
            self.pumps[flow.id] = pump
            r.stream = pump
        except Exception as e:
            log.exception("tokunseba: responseheaders hook failed")
            if turn.action == "translate":
                self.modes[flow.id] = "failed"
                turn.outcome, turn.error = "error", str(e)
                msg = client_error(turn.client_protocol, 502, f"tokunseba internal error: {e}", "api_error").body
                flow.response.status_code = 502
                _prepare_stream_headers(flow, "application/json")
                sent = []
                flow.response.stream = lambda b: [] if sent else (sent.append(1) or [msg])

    def response(self, flow: http.HTTPFlow) -> None:
        turn = self.turns.pop(flow.id, None)
        if turn is None:
            return
        mode = self.modes.pop(flow.id, None)
        pump = self.pumps.pop(flow.id, None)
        broken = self._bridge_done(flow, turn)
        try:
            r = flow.response
            rep = None
            mark = r.headers.get(BRIDGE_MARK) if turn.action in ("translate", "retarget") else None  # relay-made
            if mark != "connect-failed" and (mark or (broken and mode in ("translate-whole", "leave"))):
                # reset or truncated before the reply was whole: said as such, never "not valid JSON"
                why = broken or r.get_text(strict=False) or "upstream connection broke"
                self._respond(flow, turn.client_error(502, f"tokunseba: {why}", "api_error"))
                r = flow.response
                turn.outcome, turn.error = "error", why
            elif mark == "connect-failed":
                msg = r.get_text(strict=False) or "connection failed"
                ep = turn.endpoint.name if turn.endpoint else "?"
                self._event(turn, "endpoint_unreachable", {"endpoint": ep, "url": turn.endpoint.url if turn.endpoint else None,
                                                           "message": msg})
                err = turn.client_error(502, f"tokunseba: endpoint {ep} is unreachable: {msg}", "api_error")
                turn.error = msg
                self._respond(flow, err)
                r = flow.response
            elif mode == "translate-whole":
                upstream_status, raw = r.status_code, r.get_content(strict=False) or b""
                if upstream_status >= 400:
                    self._event(turn, "upstream_error", {"status": upstream_status, "message": _snippet(raw)})
                try:
                    status, headers, body, rep = translate_whole(turn, upstream_status, raw)
                except Exception:
                    # the reply could not be translated: its usage still happened, as reported
                    usage = usage_from_json(turn.target_protocol, raw) if upstream_status < 400 else None
                    raise _WholeReplyFailed(usage)
                r.status_code = status
                r.headers.pop("content-encoding", None)
                for k, v in headers.items():
                    r.headers[k] = v
                r.content = body
            elif mode == "shape-error":
                why = _shape_problem(turn, r.status_code, r.headers.get("content-type", ""))
                self._event(turn, "upstream_error", {"status": r.status_code, "message": why})
                self._respond(flow, turn.client_error(502, f"tokunseba: {why}", "api_error"))
                r = flow.response
                turn.outcome, turn.error = "error", why
            elif mode == "leave" and turn.action == "retarget" and r.status_code < 400:
                _, why = whole_verdict(r.headers.get("content-type"), r.get_content(strict=False) or b"")
                if why is not None:  # HTML or cut JSON where the client's JSON was due
                    self._event(turn, "upstream_error", {"status": r.status_code, "message": why})
                    self._respond(flow, turn.client_error(502, f"tokunseba: {why}", "api_error"))
                    r = flow.response
                    turn.outcome, turn.error = "error", why
            elif mode is None and turn.action != "respond" and r.status_code >= 400:
                self._event(turn, "upstream_error", {"status": r.status_code, "message": _snippet(r.get_content(strict=False))})
            self._complete(flow, turn, r.status_code, rep=rep, pump=pump, defer=True)
        except Exception as e:
            cause = e.__context__ if isinstance(e, _WholeReplyFailed) else e
            if not isinstance(cause, TranslationError):
                log.exception("tokunseba: response hook failed")
            msg = cause.message if isinstance(cause, TranslationError) else f"tokunseba: could not translate the reply: {cause}"
            err = turn.client_error(502, msg, "api_error")
            self._respond(flow, err)
            turn.outcome, turn.error = "error", msg
            self._complete(flow, turn, err.status, usage=e.usage if isinstance(e, _WholeReplyFailed) else None,
                           defer=True)

    def error(self, flow: http.HTTPFlow) -> None:
        turn = self.turns.pop(flow.id, None)
        if turn is None:
            return
        self.modes.pop(flow.id, None)
        pump = self.pumps.pop(flow.id, None)
        broken = self._bridge_done(flow, turn)
        try:
            msg = flow.error.msg if flow.error else "unknown error"
            if _client_went_away(msg) and _reply_completed(pump) and flow.response is not None:
                # the client hung up after the reply's terminal event (Codex resets its HTTP/2 stream
                # as soon as it has response.completed): the turn is complete
                self._event(turn, "client_closed", {"message": msg, "after": "completion"})
                self._complete(flow, turn, flow.response.status_code, pump=pump)
                return
            if _client_went_away(msg):  # Esc in Claude Code: the user's choice, not an upstream failure
                self._event(turn, "client_cancelled", {"message": msg})
                turn.outcome = "cancelled"
                turn.error = msg
            else:
                turn.error = broken or _upstream_failure(msg)
                self._event(turn, "upstream_error", {"status": None, "message": turn.error})
            self._complete(flow, turn, None, pump=pump, failed=turn.outcome != "cancelled")
        except Exception:
            log.exception("tokunseba: error hook failed")

    # ---- internals ----
    async def _plan(self, flow: http.HTTPFlow) -> tuple[Turn, UpstreamConn | None] | None:
        """Detect, decide and build the turn. A routed turn's upstream connection is opened
        (or taken from the relay's pool) here, before the turn is committed to its route: a
        connect that fails marks the endpoint down and the turn is decided again without it
        (passive health: no probe, and the healthy path pays no extra round trip)."""
        req = flow.request
        if req.method != "POST":
            return None
        prep = prepare_request(method=req.method, host=req.pretty_host, port=req.port, path=req.path,
                               headers=req.headers.items(multi=True), body=req.get_content(strict=False) or b"",
                               extra_hosts=self._extra_for(req.pretty_host, req.port))
        if prep is None:
            return None
        decision, conn = None, None
        if prep.req is not None:
            for _ in range(len(self.rules.endpoints) + 1):  # each round rules out one more endpoint
                decision = decide_request(self.rules, prep, self.health.reachable)
                ep = decision.endpoint if decision.action == "route" else None
                if ep is None:
                    break
                try:
                    conn = await self.bridge.connect(ep.url, ctx.options.tokunseba_probe_timeout_ms / 1000)
                except Exception as e:
                    wait = self.health.failed(ep, f"{type(e).__name__}: {e}")
                    log.warning(f"tokunseba: endpoint {ep.name} ({ep.host}:{ep.port}) is unreachable "
                                f"({e or type(e).__name__}); skipped for {wait:g} s")
                    continue
                self.health.ok(ep)
                break
        return build_turn(self.rules, prep, decision, env=os.environ), conn

    def _extra_for(self, host: str, port: int) -> dict[str, str] | None:
        """The tokunseba_provider_hosts entry for this host, as detect() takes it."""
        if not self.provider_hosts:
            return None
        proto = self.provider_hosts.get(f"{host}:{port}".lower()) or self.provider_hosts.get(host.lower())
        return {host: proto} if proto else None

    def _apply(self, flow: http.HTTPFlow, turn: Turn, conn: UpstreamConn | None = None) -> None:
        self.turns[flow.id] = turn
        flow.metadata["tokunseba.request_id"] = turn.request_id
        if turn.action == "translate" or turn.body is not None:
            flow.metadata[ORIGINAL_KEY] = turn.original_body[:MAX_ORIGINAL].decode("utf-8", "replace")
        self._ledger_start(turn)
        flow.comment = turn.summary()
        flow.marked = MARKS.get(turn.outcome, "")
        if turn.local is not None:
            if conn is not None:
                self.bridge.pool.put(conn)
            self._respond(flow, turn.local)
            return
        req = flow.request
        if turn.action in ("translate", "retarget") and turn.url:  # every routed turn goes through the relay
            if not self.bridge.port:  # the relay starts in running(); be sure in odd embeddings
                raise RuntimeError("the tokunseba relay is not running")
            token, url = self.bridge.register(turn.url, conn)
            self.bridged[flow.id] = token
            req.url = url
        elif turn.url:
            req.url = turn.url
        for name in apply_header_changes(req.headers, turn):
            req.headers.pop(name, None)
        for k, v in turn.set_headers.items():
            req.headers[k] = v
        if turn.body is not None:
            req.content = turn.body

    def _bridge_done(self, flow: http.HTTPFlow, turn: Turn) -> str | None:
        """Release the flow's relay target; why the upstream broke (not a refused connect), if it did."""
        token = self.bridged.pop(flow.id, None)
        target = self.bridge.finish(token) if token else None
        if target is not None and target.broken and target.broken.startswith("cannot connect") and turn.endpoint:
            self.health.failed(turn.endpoint, target.broken)
        if target is not None and target.broken and not target.broken.startswith("cannot connect"):
            turn.error = target.broken
            self._event(turn, "upstream_error", {"status": None, "message": target.broken})
            return target.broken
        return None

    def _respond(self, flow: http.HTTPFlow, lr: LocalResponse) -> None:
        flow.response = http.Response.make(lr.status, lr.body, lr.headers)

    def _ledger_start(self, turn: Turn) -> None:
        if self.ledger is None:
            return
        self.ledger.start_turn(turn.request_id, started_at=turn.started_at, client_protocol=turn.client_protocol,
                               host=turn.host, path=turn.path, requested_model=turn.requested_model, stream=turn.stream)
        d = turn.decision
        # the outcome stays NULL (open) until the turn ends: _complete writes it
        self.ledger.update_turn(
            turn.request_id, rule=d.route.name if d and d.route else None,
            endpoint=turn.endpoint.name if turn.endpoint else None, target_protocol=turn.target_protocol,
            model_used=turn.model_used or turn.requested_model,
            trace=d.trace if d else [], error=turn.error,
            **({"request_body": turn.original_body} if self.ledger_bodies else {}),
        )
        for kind, data in turn.events:
            self.ledger.event(turn.request_id, kind, data, ts=turn.started_at)

    @property
    def ledger_bodies(self) -> bool:
        try:
            return bool(ctx.options.tokunseba_ledger_bodies)
        except Exception:
            return False

    def _event(self, turn: Turn, kind: str, data: dict) -> None:
        if self.ledger is not None:
            self.ledger.event(turn.request_id, kind, data)

    def _complete(self, flow: http.HTTPFlow, turn: Turn, status: int | None, *, rep=None, pump: Pump | None = None,
                  failed: bool = False, usage=None, defer: bool = False) -> None:
        """Record how the turn ended: its outcome, status, timings and usage as reported.

        A reply that is not what a clean turn would have sent (a translated stream without
        its terminal event, an upstream error event, a cut or reset; a passed-on stream the
        watch judged broken; a 2xx whole reply that is not JSON) is recorded as an error
        with the reason, whatever its status. With ``defer`` (the ``response`` hook, which
        mitmproxy calls before it writes the reply's last bytes) the record is made once
        mitmproxy has handed those bytes to the client's connection (``_after_sent``)."""
        now = time.time()
        fb = pump.first_byte if pump is not None else None
        client_usage = None
        extra: dict = {}
        problem: str | None = None  # why the reply is not clean, though it got an answer
        t = pump.t if pump is not None else None
        if t is not None:
            rpt = t.report
            usage, client_usage = rpt.usage, t.client_usage
            extra = {"stop_reason": rpt.stop_reason, "dropped": rpt.dropped, "warnings": rpt.warnings,
                     "errors": rpt.errors, "completed": rpt.completed}
            if rpt.errors or not rpt.completed:
                problem = turn.error or "; ".join(rpt.errors) or "the translated stream did not complete"
        elif rep is not None:
            usage, client_usage = rep.usage, rep.client_usage
            extra = {"stop_reason": rep.stop_reason, "dropped": rep.dropped, "warnings": rep.warnings}
        elif pump is not None and pump.watch is not None:  # pass-through / retargeted stream
            usage = pump.watch.usage
            client_usage = usage.reported if usage else None
            if status is not None and status < 400:
                problem = pump.watch.verdict()
        elif turn.action in ("pass", "retarget") and flow.response is not None and status is not None and status < 400:
            obj, problem = whole_verdict(flow.response.headers.get("content-type"),
                                         flow.response.get_content(strict=False) or b"")
            usage = _usage_of(turn.client_protocol, obj)
            client_usage = usage.reported if usage else None
        if problem and not failed and turn.outcome not in ("cancelled", "refused"):
            failed = True
            turn.error = turn.error or problem  # a reset the relay saw says more than its symptom
            extra["problem"] = problem
        if fb is None and flow.response is not None and status is not None:
            fb = now  # whole (buffered) replies: first byte = when the reply left
        latency = (now - turn.started_at) * 1000
        ttfb = (fb - turn.started_at) * 1000 if fb else None
        if self.ledger is None:
            return
        fields = dict(status=status, latency_ms=round(latency, 3), ttfb_ms=round(ttfb, 3) if ttfb is not None else None,
                      usage_reported=usage.reported if usage else None, usage_protocol=usage.protocol if usage else None,
                      usage_client=client_usage, outcome=("error" if failed and turn.outcome != "refused" else turn.outcome))
        if turn.error:
            fields["error"] = turn.error
        if self.ledger_bodies:
            if pump is not None and pump.kept is not None:
                fields["response_body"] = bytes(pump.kept)
            elif flow.response is not None and flow.response.raw_content is not None:
                fields["response_body"] = flow.response.get_content(strict=False)[:MAX_STORED_BODY]
        done = {"status": status, "latency_ms": fields["latency_ms"], "ttfb_ms": fields["ttfb_ms"],
                "usage": usage.reported if usage else None, "usage_client": client_usage, **extra}
        ledger, rid = self.ledger, turn.request_id

        def record() -> None:
            ledger.update_turn(rid, **fields)
            ledger.event(rid, "completed", done)

        if defer:
            _after_sent(flow, record)
        else:
            record()


AFTER_SENT_MAX_TURNS = 100  # event-loop turns to wait for mitmproxy to finish a flow


def _after_sent(flow: http.HTTPFlow, fn, turns: int = AFTER_SENT_MAX_TURNS) -> None:
    """Run ``fn`` once mitmproxy has handed the reply's last bytes to the client connection.

    mitmproxy calls the ``response`` hook before it writes a whole reply, and before the end
    of a streamed one (the chunked terminator); no hook comes later. Right after writing, in
    the same synchronous step, it sets ``flow.live = False`` (``HttpStream.flow_done``). So
    this waits, a loop turn at a time, for ``flow.live`` to drop (at most ``turns`` turns,
    then records anyway). What the kernel does with those bytes afterwards is not visible
    here: a client that vanishes in that instant is not seen."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        fn()
        return

    def step(left: int) -> None:
        if flow.live and left > 0:
            loop.call_soon(step, left - 1)
            return
        try:
            fn()
        except Exception:
            log.exception("tokunseba: recording a completed turn failed")

    loop.call_soon(step, turns)


def _usage_of(protocol: str, obj) -> Usage | None:
    """The ``usage`` object of a whole JSON reply, as reported (None when absent)."""
    conv = USAGE_PROTOCOL.get(protocol)
    u = obj.get("usage") if isinstance(obj, dict) else None
    return Usage(conv, u) if conv and isinstance(u, dict) else None


def _upstream_failure(msg: str) -> str:
    """mitmproxy's error text for a flow whose upstream failed, said as what happened."""
    low = msg.lower()
    if "peer closed" in low or "reset" in low or "incomplete" in low or "broken pipe" in low:
        return f"upstream connection broke: {msg}"
    return msg


def _reply_completed(pump: Pump | None) -> bool:
    """Whether the client already had the reply's terminal event (translated or passed on)."""
    if pump is None:
        return False
    if pump.t is not None:
        return pump.t.report.completed
    return pump.watch is not None and pump.watch.completed and pump.watch.error is None


def _shape_problem(turn: Turn, status: int, content_type: str) -> str | None:
    """A routed turn's 2xx reply in the other shape than the client asked for (a stream for
    a whole request, or the reverse): what the client would choke on, said as such."""
    if turn.action not in ("translate", "retarget") or status >= 400 or turn.detected.kind in ("count_tokens", "count"):
        return None
    is_sse = content_type.split(";")[0].strip().lower() == "text/event-stream"
    if turn.stream and not is_sse:
        return f"upstream sent a whole reply ({content_type or 'no content-type'}) where a stream was due"
    if not turn.stream and is_sse:
        return "upstream sent a stream where a whole reply was due"
    return None


def _looks_like_provider_call(flow: http.HTTPFlow, extra_hosts: dict[str, str]) -> bool:
    """Planning failed before detection: is this a provider call we must not let through?"""
    host = flow.request.pretty_host.lower()
    if host not in PROVIDER_HOSTS and host not in extra_hosts and f"{host}:{flow.request.port}" not in extra_hosts:
        return False
    p = flow.request.path
    return flow.request.method == "POST" and ("/v1/messages" in p or "/chat/completions" in p or "/responses" in p
                                              or ":generateContent" in p or ":streamGenerateContent" in p)


def _guess_protocol(flow: http.HTTPFlow) -> str:
    p = flow.request.path
    if "/v1/messages" in p:
        return "anthropic"
    if "Content" in p:
        return "gemini"
    return "openai"


def _prepare_stream_headers(flow: http.HTTPFlow, content_type: str) -> None:
    h = flow.response.headers
    h.pop("content-length", None)
    h.pop("content-encoding", None)
    h["content-type"] = content_type
    if flow.request.http_version.startswith("HTTP/1"):
        h["transfer-encoding"] = "chunked"


class _WholeReplyFailed(Exception):
    """A whole reply that could not be translated, carrying the usage it reported."""

    def __init__(self, usage) -> None:
        super().__init__("whole reply translation failed")
        self.usage = usage


def _client_went_away(msg: str) -> bool:
    m = msg.lower()
    return "client disconnected" in m or "stream reset by client" in m or "client closed" in m


def _upstream_ssl_context() -> ssl.SSLContext:
    """The relay verifies endpoints' TLS as mitmproxy itself would (its ssl_* options)."""
    o = ctx.options
    if o.ssl_insecure:
        c = ssl.create_default_context()
        c.check_hostname = False
        c.verify_mode = ssl.CERT_NONE
        return c
    if o.ssl_verify_upstream_trusted_ca or o.ssl_verify_upstream_trusted_confdir:
        return ssl.create_default_context(cafile=o.ssl_verify_upstream_trusted_ca or None,
                                          capath=o.ssl_verify_upstream_trusted_confdir or None)
    import certifi  # what mitmproxy trusts by default

    return ssl.create_default_context(cafile=certifi.where())


def _stamp(path: str | None) -> tuple | None:
    """What identifies one version of a file: change time, size and inode."""
    try:
        st = os.stat(path) if path else None
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino) if st else None


def _snippet(body: bytes | None, n: int = 500) -> str:
    return (body or b"")[:n].decode("utf-8", "replace")


class OriginalRequestView(contentviews.Contentview):
    """mitmweb: the client's original request body, before tokunseba rewrote it."""

    name = "tokunseba-original"
    syntax_highlight = "yaml"

    def prettify(self, data: bytes, metadata: contentviews.Metadata) -> str:
        f = metadata.flow
        if f is None or ORIGINAL_KEY not in f.metadata:
            raise ValueError("not a flow tokunseba rewrote")
        return f.metadata[ORIGINAL_KEY]

    def render_priority(self, data: bytes, metadata: contentviews.Metadata) -> float:
        return -1


contentviews.add(OriginalRequestView)
