"""The mitmproxy adapter: the only module that imports mitmproxy (docs/architecture.md §3).

The hooks and the glue between them: a turn is planned by turn.py (prepare, decide then
translate, build), a reply's fate is proxy/disposition.py's ``dispose``, and the plain parts
(target, presentation, recorder, shadowing, options, next_attempt) do the rest over plain
values; this module holds what needs mitmproxy (its flows, options, hooks and views). Fail
closed: any exception while handling a provider call answers the client with an error in
its own protocol; a translated turn never falls through to the original host. A flow that
came in on a base-URL (reverse) listener (``client_conn.proxy_mode``) takes the same path,
recorded as such; one naming another host than its listener's is refused (proxy/base_url.py).
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import cast

from mitmproxy import command, contentviews, ctx, exceptions, http
from mitmproxy.hooks import UpdateHook
from mitmproxy.net.http.http1 import connection_close
from mitmproxy.proxy.mode_specs import ReverseMode

from .. import protocols
from .access import may_spend_keys, refuse_remote_client
from . import base_url
from .relay import MARK as RELAY_MARK
from .relay import PREFIX as RELAY_PREFIX
from .relay import Relay
from .relay import Replan, UpstreamConn
from .attempts import Chain, may_fail_over, next_turn
from .next_attempt import failure_line, note_failure, replan_of, where_next
from .capacity import Capacity, Slot
from .cap_note import cap_line
from .console_line import client_name, turn_line
from .web_noise import quiet_stray_stylesheet
from .rules_watch import watch as watch_rules
from .endpoint_startup import endpoints_in_use, unreachable_line
from ..routing.endpoints import Endpoint, EndpointHealth
from .failover import Failure
from .last_word import Told, final, say_busy
from ..errors import TranslationError
from ..ledger.store import Ledger, default_instance, instance_id, take_password
from . import otel_spans
from .flowstate import FlowState, Shown
from ..ledger.writer import LedgerWriter
from .outcome import Outcome, shape_problem, upstream_failure
from .disposition import Disposition, dispose, failure_message, translate_whole_reply
from ..states import Action, Decided, Do, ReplyMode
from .provider_reach import Reach, Unreachable, answer_unreachable, describe, say_endpoint_unreachable
from .pump import Pump, reply_completed
from ..reasoning.store import Keeper, open_keeper
from ..routing.rules import Rules, RulesError, load_rules
from ..shadow.sender import ShadowSender
from .options import OPTIONS, keepalive_seconds, provider_hosts_of, stamp
from .presentation import MAX_ORIGINAL, ORIGINAL_KEY, present, record_original, show_client_url
from .recorder import TurnRecorder, after_sent
from .retries import RetryWatch, retry_key
from .shadowing import maybe_shadow, primary_done
from .target import (
    extra_for,
    field_name,
    guess_protocol,
    header_names,
    is_provider_host,
    looks_like_provider_call,
    point_at,
    set_headers,
    target_of,
)
from ..credentials import (
    KNOWN_SECRETS,
    REDACTED,
    RedactingFilter,
    endpoint_keys,
    is_credential_header,
    redact_query,
)
from ..sse import set_max_event_bytes
from ..turn import (
    REQUEST_ID_HEADER,
    SSE_CONTENT_TYPE,
    LocalResponse,
    Turn,
    apply_header_changes,
    build_turn,
    client_error,
    decide_request,
    is_responses_websocket,
    prepare_request,
    response_mode,
    retarget_error,
    stream_translator,
    websocket_declined,
    websocket_refusal,
)
from ..webview.view import MARKS, RECORD_KEY, error_message, original_view_text

log = logging.getLogger("tokunseba")
for _logger in (log, logging.getLogger("tokunseba.ledger"), logging.getLogger("tokunseba.relay")):
    _logger.addFilter(RedactingFilter())  # keys never reach the logs, whatever a message quotes

CLIENT_KEY = "tokunseba.client"  # the client's name on the console line (proxy/console_line.py)
RULES_POLL_S = 1.0
MAX_REPLAYABLE = 1024  # rewritten flows whose client request (URL, headers) is kept in memory for replay


class Tokunseba:
    def __init__(self) -> None:
        self.rules: Rules = load_rules(None)
        self.recorder = TurnRecorder()  # the ledger's writer and each turn's records, in order (proxy/recorder.py)
        self.access: tuple[bool, bool] | None = None  # (proxyauth set, tokunseba_allow_remote_clients), as _plan read them
        self.flows: dict[str, FlowState] = {}  # flow id -> its state, while in flight
        self.health = EndpointHealth()  # passive: a failed connect marks an endpoint down for a back-off
        self.capacity = Capacity()  # cooldowns (retry-after) and max_concurrency slots, across reloads
        self.retries = RetryWatch()  # a request that repeats a recent one of its session (proxy/retries.py)
        self.provider_hosts: dict[str, str] = {}
        self.relay = Relay()
        self.reach = Reach()  # pass-through provider hosts: connected to before mitmproxy does (proxy/provider_reach.py)
        self.reach_ssl: ssl.SSLContext | None = None
        self.endpoint_check: asyncio.Future | None = None  # the start-up connect to every endpoint in use
        self.rules_stamp: tuple | None = None
        self.rules_checked = 0.0
        self.shadows: ShadowSender | None = None
        self.spans: otel_spans.TurnSpans | None = None  # one OpenTelemetry span per turn, when a collector is named
        # flow id -> the client's own URL and headers (credentials included) of a rewritten
        # flow, so mitmweb's Replay can send the client's turn through the rules again. Apart
        # from FlowState: a replay comes after the flow ended, so this outlives it (bounded).
        self.replayable: OrderedDict[str, tuple[str, http.Headers]] = OrderedDict()
        self.keeper: Keeper | None = None  # provider state of translated tool loops (reasoning/store.py)

    @property
    def ledger(self) -> LedgerWriter | None:
        return self.recorder.ledger

    @ledger.setter
    def ledger(self, writer: LedgerWriter | None) -> None:
        self.recorder.ledger = writer

    @property
    def store_bodies(self) -> bool:  # tokunseba_ledger_bodies (_open_ledger)
        return self.recorder.store_bodies

    @store_bodies.setter
    def store_bodies(self, keep: bool) -> None:
        self.recorder.store_bodies = keep

    @property
    def unstarted(self) -> dict[str, Callable[[], None]]:
        """Request id -> the records of its start, until queued in the loop's next step."""
        return self.recorder.unstarted

    # ---- options ----
    def load(self, loader) -> None:
        for o in OPTIONS:  # proxy/options.py
            loader.add_option(o.name, o.type, o.default, o.help, choices=o.choices)

    def configure(self, updated: set[str]) -> None:
        if {"proxyauth", "tokunseba_allow_remote_clients"} & updated:
            self.access = None  # read again at the next turn
        if "tokunseba_rules" in updated:
            try:
                self._load_rules()
            except RulesError as e:
                raise exceptions.OptionsError(str(e)) from None
        if {"tokunseba_shadow_concurrency", "tokunseba_shadow_timeout_s"} & updated:
            self._configure_shadows()
        if "tokunseba_max_event_bytes" in updated:
            try:
                set_max_event_bytes(ctx.options.tokunseba_max_event_bytes)
            except ValueError as e:
                raise exceptions.OptionsError(f"tokunseba_max_event_bytes: {e}") from None
        if "tokunseba_console" in updated:
            if ctx.options.tokunseba_console not in ("all", "turns"):
                raise exceptions.OptionsError(f"tokunseba_console: {ctx.options.tokunseba_console!r} is not all or turns")
            _CONNECTION_CHATTER.quiet = ctx.options.tokunseba_console == "turns"
        if "tokunseba_keepalive_s" in updated:
            try:
                self.relay.keepalive_s = keepalive_seconds(ctx.options.tokunseba_keepalive_s)
            except ValueError as e:
                raise exceptions.OptionsError(str(e)) from None
        if "tokunseba_provider_hosts" in updated:
            try:
                self.provider_hosts = provider_hosts_of(ctx.options.tokunseba_provider_hosts)
            except ValueError as e:
                raise exceptions.OptionsError(str(e)) from None
        if {"tokunseba_ledger", "tokunseba_ledger_bodies", "tokunseba_instance"} & updated:
            self._open_ledger()
        if {"tokunseba_otlp_endpoint", "tokunseba_otlp_bodies", "tokunseba_instance"} & updated:
            if self.spans is not None:
                self.spans.close()
            self.spans = otel_spans.from_settings(ctx.options.tokunseba_otlp_endpoint, bodies=ctx.options.tokunseba_otlp_bodies,
                                                  instance=ctx.options.tokunseba_instance or default_instance())
        if {"tokunseba_ledger", "tokunseba_reasoning_store", "tokunseba_reasoning_retention_h",
                "tokunseba_reasoning_max"} & updated:
            o = ctx.options
            if self.keeper is not None:
                self.keeper.store.close()
            try:
                self.keeper = open_keeper(o.tokunseba_reasoning_store, o.tokunseba_ledger,
                                          retention_h=o.tokunseba_reasoning_retention_h, max_entries=o.tokunseba_reasoning_max)
            except ValueError as e:
                raise exceptions.OptionsError(str(e)) from None

    def _open_ledger(self) -> None:
        """Open the ledger behind its writer thread, as a new owner of turns; turns left open
        by proxies that no longer run become interrupted."""
        if self.ledger is not None:
            self.recorder.start_all()
            self.ledger.close()
            self.ledger = None
        self.store_bodies = bool(ctx.options.tokunseba_ledger_bodies)
        if (clean := take_password(ctx.options.tokunseba_ledger)) is not None:
            # the password goes to libpq apart from the URL; the option (mitmweb shows it) loses it
            ctx.options.update(tokunseba_ledger=clean)
            return  # configure runs again with it, and opens the ledger
        try:
            led = Ledger(ctx.options.tokunseba_ledger or None, store_bodies=self.store_bodies)
        except Exception as e:
            raise exceptions.OptionsError(f"tokunseba: cannot open the ledger: {e}") from None
        led.owner = instance_id()
        led.instance = ctx.options.tokunseba_instance or default_instance()
        self.ledger = LedgerWriter(led)
        self.ledger.recover_interrupted()

    def _configure_shadows(self) -> None:
        o = ctx.options
        if o.tokunseba_shadow_concurrency < 0 or o.tokunseba_shadow_timeout_s <= 0:
            raise exceptions.OptionsError("tokunseba_shadow_concurrency must be 0 or more (0: no shadows) and "
                                          "tokunseba_shadow_timeout_s more than 0")
        if self.shadows is not None:  # changed while running (mitmweb's options)
            self.shadows.concurrency, self.shadows.timeout_s = o.tokunseba_shadow_concurrency, o.tokunseba_shadow_timeout_s

    def _load_rules(self) -> None:
        path = ctx.options.tokunseba_rules or None
        before = stamp(path)
        self.rules = load_rules(path)
        KNOWN_SECRETS.set(endpoint_keys(self.rules.endpoints.values(), os.environ))
        # a file still being written when read is read again at the next poll
        self.rules_stamp = before if stamp(path) == before else None
        for w in self.rules.warnings:
            log.warning(w)
        self.health = EndpointHealth()
        if self.relay.port:  # reloaded while running: say again which endpoints cannot be reached
            self._soon_check_endpoints()

    def _maybe_reload_rules(self) -> None:
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
            self._load_rules()
            log.warning(f"tokunseba: reloaded {path}: {len(self.rules.routes)} routes")
        except RulesError as e:
            self.rules_stamp = stamp(path)
            log.error(f"tokunseba: kept the previous rules: {e}")

    async def running(self) -> None:
        if ctx.options.connection_strategy != "lazy":
            ctx.options.update(connection_strategy="lazy")
        self.relay.set_ssl_context(_upstream_ssl_context())
        self.reach_ssl = _upstream_ssl_context()
        if any(str(m).startswith("upstream:") for m in ctx.options.mode):
            log.warning("tokunseba: routed turns reach their endpoints directly, not through the upstream proxy")
        await self.relay.start()
        self._soon_check_endpoints()
        self.rules_watch = watch_rules(RULES_POLL_S, self._maybe_reload_rules)  # an edit is said when made
        web = getattr(ctx.master, "app", None)  # mitmweb's tornado application (mitmdump has none)
        transforms = getattr(web, "transforms", None)
        if isinstance(transforms, list):  # mitmweb: tornado is loaded (mitmdump never imports it)
            from ..webview.style import CommentColumnStyle

            if CommentColumnStyle not in transforms:
                transforms.insert(0, CommentColumnStyle)  # before gzip: it styles the page as written
        # the ledger's writer takes the ledger's calls, on its own thread (ledger/writer.py)
        self.shadows = ShadowSender(cast("Callable[[], Ledger | None]", lambda: self.ledger), concurrency=ctx.options.tokunseba_shadow_concurrency,
                                    timeout_s=ctx.options.tokunseba_shadow_timeout_s, env=os.environ,
                                    ssl_context=_upstream_ssl_context())

    def done(self) -> None:
        if (w := getattr(self, "rules_watch", None)) is not None:
            w.cancel()
        self.relay.stop()
        if self.keeper is not None:
            self.keeper.store.close()
        if self.shadows is not None:
            for t in list(self.shadows.tasks):
                t.cancel()
        if self.ledger is not None:
            self.recorder.start_all()
            self.ledger.interrupt_own()  # turns still open now will never complete
            self.ledger.close()
            self.ledger = None
        if self.spans is not None:  # after the ledger: a collector that is down may take its 2 s
            self.spans.close()
            self.spans = None

    @command.command("tokunseba.status")
    def status(self) -> str:
        return f"rules={self.rules.source} routes={len(self.rules.routes)} in-flight={len(self.flows)}"

    # ---- hooks ----
    async def request(self, flow: http.HTTPFlow) -> None:
        if flow.response is not None or flow.id in self.flows:
            return
        turn = None
        try:
            if flow.is_replay == "request" and not self._prepare_replay(flow):
                return
            if (listener := _reverse_host(flow)) is not None and \
                    (wrong := base_url.misdirected(listener, flow.request.pretty_host, flow.request.path)) is not None:
                self._respond(flow, wrong)  # a base-URL listener forwards only to its own provider host
                flow.comment = f"tokunseba: refused (421): this base URL forwards only to {listener}"
                return
            if flow.request.method == "GET":
                ws = websocket_refusal(self.rules, method="GET", host=flow.request.pretty_host, path=flow.request.path,
                                       headers=flow.request.headers.items(multi=True),
                                       extra_hosts=extra_for(self.provider_hosts, flow.request.pretty_host, flow.request.port))
                if ws is not None:
                    self._respond(flow, ws)
                    flow.comment = "tokunseba: WebSocket upgrade declined (426): Responses turns are routed over HTTPS"
                elif is_responses_websocket(method="GET", host=flow.request.pretty_host, path=flow.request.path,
                                            headers=flow.request.headers.items(multi=True),
                                            extra_hosts=extra_for(self.provider_hosts, flow.request.pretty_host,
                                                                  flow.request.port)) \
                        and (bad := await self._unreachable(flow)) is not None:  # in Codex's envelope, not HTML
                    self._respond(flow, websocket_declined(bad.message(flow.request.pretty_host)))
                    flow.comment = f"❌ error 426: {bad.message(flow.request.pretty_host)}"
                return
            self._maybe_reload_rules()
            planned = await self._plan(flow)
            if planned is not None:
                turn, conn, slot, prep = planned
                if turn.action == Action.PASS and turn.local is None:
                    await self._check_reach(flow, turn)
                origin = (turn.host, flow.request.port)  # the client's (pretty) host, before _apply retargets it
                maybe_shadow(self.shadows, self.rules, self._apply(flow, turn, conn, slot, prep), origin)
        except Exception as e:
            log.exception("tokunseba: request hook failed")
            state = self.flows.get(flow.id) or (FlowState(turn) if turn is not None else None)
            if state is not None:
                t = state.turn
                t.action, t.outcome, t.error = Action.RESPOND, "error", str(e)
                self._respond(flow, t.client_error(500, f"tokunseba internal error: {e}", "api_error"))
                show_client_url(flow, state)
                self._present(flow, state, "error", 500)
            elif looks_like_provider_call(flow.request, self.provider_hosts):  # never let a half-handled provider call leak out
                self._respond(flow, client_error(guess_protocol(flow.request.path), 500, f"tokunseba internal error: {e}", "api_error"))

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        state = self.flows.get(flow.id)
        if state is None or flow.response is None:
            return
        turn = state.turn
        try:
            r = flow.response
            r.headers[REQUEST_ID_HEADER] = turn.request_id
            _keep_client_close(r, state)
            if r.raw_content is not None:  # answered locally, or already buffered
                return
            mode = response_mode(turn, r.status_code, r.headers.get("content-type", ""))
            if shape_problem(turn, r.status_code, r.headers.get("content-type", "")):
                mode = ReplyMode.SHAPE_ERROR  # buffered (not streamed): the response hook answers with the error
            state.mode = mode
            keep = self.store_bodies or state.shadowed
            if mode == ReplyMode.RAW_STREAM:
                target = self.relay.targets.get(state.relay_token or "")
                pump = Pump(turn, content_encoding=r.headers.get("content-encoding"), target=target, keep=keep)
            elif mode == ReplyMode.TRANSLATE_STREAM:
                pump = Pump(turn, stream_translator(turn), content_encoding=r.headers.get("content-encoding"),
                            keep=keep)
                _prepare_stream_headers(flow, SSE_CONTENT_TYPE)
            else:
                return
            state.pump = pump
            r.stream = pump
        except Exception as e:
            log.exception("tokunseba: responseheaders hook failed")
            if turn.action == Action.TRANSLATE:
                state.mode = ReplyMode.FAILED
                turn.outcome, turn.error = "error", str(e)
                msg = client_error(turn.client_protocol, 502, f"tokunseba internal error: {e}", "api_error").body
                flow.response.status_code = 502
                _prepare_stream_headers(flow, "application/json")
                sent: list[bool] = []

                def once(_: bytes) -> list[bytes]:  # the error, once, whatever comes
                    if sent:
                        return []
                    sent.append(True)
                    return [msg]
                flow.response.stream = once

    def response(self, flow: http.HTTPFlow) -> None:
        state = self.flows.pop(flow.id, None)
        if state is None:
            return
        turn, mode = state.turn, state.mode
        broken = self._relay_done(state)
        show_client_url(flow, state)
        if turn.action == Action.PASS:  # the host answered, unless the relay could not reach it (a failed-over turn)
            lost = state.chain is not None and state.chain.gave_up and state.chain.failed[-1].kind == "unreachable"
            (self.reach.forget if lost else self.reach.answered)(flow.request.host, flow.request.port)
        try:
            if state.chain is not None and state.chain.told is not None and state.pump is None:
                self._tell(flow, state, state.chain.told)
                return
            r = flow.response
            assert r is not None  # the response hook has one
            # relay-made (a turn that failed over to its own host went through the relay too)
            mark = r.headers.get(RELAY_MARK) if turn.action in (Action.TRANSLATE, Action.RETARGET) or state.chain else None
            d = dispose(mark=mark, mode=mode, action=turn.action, status=r.status_code, has_pump=state.pump is not None,
                        broken=broken, shape=shape_problem(turn, r.status_code, r.headers.get("content-type", ""))
                        if mode == ReplyMode.SHAPE_ERROR else None)
            self._carry_out(flow, state, d)
        except Exception as e:
            if not isinstance(e, TranslationError):
                log.exception("tokunseba: response hook failed")
            self._fail_reply(flow, state, failure_message(e), None)

    def _carry_out(self, flow: http.HTTPFlow, state: FlowState, d: Disposition) -> None:
        """The I/O a ``Disposition`` names (proxy/disposition.py), then the turn's record."""
        turn, r = state.turn, flow.response
        assert r is not None
        rep = whole = None
        if d.record_error:
            self.recorder.event(turn, "upstream_error", {"status": r.status_code, "message": _snippet(r.get_content(strict=False))})
        if d.do == Do.ANSWER_BROKEN:  # reset or truncated before the reply was whole: said as such, never "not valid JSON"
            why = d.message or r.get_text(strict=False) or "upstream connection broke"
            self._answer_error(flow, turn, why)
        elif d.do == Do.ANSWER_UNREACHABLE:
            msg = r.get_text(strict=False) or "connection failed"
            ep = turn.endpoint.name if turn.endpoint and turn.action != Action.PASS else turn.host
            self.recorder.event(turn, "endpoint_unreachable", {"endpoint": ep, "url": turn.endpoint.url if turn.endpoint else None,
                                                       "message": msg})
            turn.error = msg
            self._respond(flow, turn.client_error(502, f"tokunseba: endpoint {ep} is unreachable: {msg}", "api_error"))
        elif d.do == Do.TRANSLATE_WHOLE:
            done = translate_whole_reply(turn, r.status_code, r.get_content(strict=False) or b"")
            if done.failure is not None:
                if done.unexpected is not None:
                    log.error("tokunseba: response hook failed", exc_info=done.unexpected)
                self._fail_reply(flow, state, done.failure, done.usage)
                return
            r.status_code = done.status
            r.headers.pop("content-encoding", None)
            for k, v in done.headers.items():
                r.headers[k] = v
            r.content = done.body
            rep = done.report
            if done.counted is not None:  # a count, not a turn's usage: recorded with the counter that answered
                self.recorder.event(turn, "counted", done.counted.record())
        elif d.do == Do.ANSWER_SHAPE:
            self.recorder.event(turn, "upstream_error", {"status": r.status_code, "message": d.message})
            self._answer_error(flow, turn, d.message or "upstream reply in the wrong shape")
        elif d.do == Do.JUDGE_WHOLE:  # a whole reply passed on: judged (parsed) once, here, for its usage and shape
            whole = Outcome.of_whole(turn.client_protocol, r.status_code, r.headers.get("content-type"),
                                     r.get_content(strict=False) or b"")
            if d.strict and whole.problem is not None:  # HTML or cut JSON where the client's JSON was due
                self.recorder.event(turn, "upstream_error", {"status": r.status_code, "message": whole.problem})
                self._answer_error(flow, turn, whole.problem)
                whole = None
        elif d.do == Do.RETARGET_ERROR:
            said = retarget_error(turn, r.status_code, r.get_content(strict=False) or b"")
            if said is not None:  # empty or HTML: the client's envelope
                self._respond(flow, said)
        r = flow.response
        assert r is not None
        _redact_whole_reply(r, turn)
        _keep_client_close(r, state)
        self._complete(flow, state, self._reply_outcome(flow, state, r.status_code, rep, whole), defer=True)

    def _tell(self, flow: http.HTTPFlow, state: FlowState, told: Told) -> None:
        """Every attempt failed: the client gets the failure that says most (proxy/last_word.py)."""
        turn = state.turn
        r = self._respond(flow, told.reply)
        _keep_client_close(r, state)
        turn.outcome, turn.error = "error", told.message
        turn.failed_over = state.chain.failed_text() if state.chain else turn.failed_over
        self.recorder.event(turn, "failover_answer", told.record())
        self._complete(flow, state, Outcome(r.status_code), defer=True)

    def _answer_error(self, flow: http.HTTPFlow, turn: Turn, why: str) -> None:
        """The client gets a 502 in its protocol saying ``why``; the turn is an error."""
        self._respond(flow, turn.client_error(502, f"tokunseba: {why}", "api_error"))
        turn.outcome, turn.error = "error", why

    def _fail_reply(self, flow: http.HTTPFlow, state: FlowState, msg: str, usage) -> None:
        """The reply could not be made: the client gets a 502 saying so, recorded with the usage
        the upstream reported all the same (a whole reply that could not be translated)."""
        turn = state.turn
        err = turn.client_error(502, msg, "api_error")
        _keep_client_close(self._respond(flow, err), state)
        turn.outcome, turn.error = "error", msg
        self._complete(flow, state, Outcome(err.status, usage=usage), defer=True)

    def error(self, flow: http.HTTPFlow) -> None:
        state = self.flows.pop(flow.id, None)
        if state is None:
            return
        turn = state.turn
        broken = self._relay_done(state)
        show_client_url(flow, state)
        if turn.action == Action.PASS and flow.response is None:
            self.reach.forget(flow.request.host, flow.request.port)  # the next turn checks it again
        try:
            msg = flow.error.msg if flow.error else "unknown error"
            if _client_went_away(msg) and reply_completed(state.pump) and flow.response is not None:
                # the client hung up after the reply's terminal event (Codex resets its HTTP/2 stream
                # as soon as it has response.completed): the turn is complete
                self.recorder.event(turn, "client_closed", {"message": msg, "after": "completion"})
                self._complete(flow, state, self._reply_outcome(flow, state, flow.response.status_code))
                return
            if _client_went_away(msg) and state.pump is not None and state.pump.cut_short:
                # the stream had been ended with an error event (the pump): the client left after it
                turn.error = state.pump.cut_short
                status = flow.response.status_code if flow.response is not None else None
                self._complete(flow, state, self._reply_outcome(flow, state, status, failed=True))
                return
            if _client_went_away(msg):  # Esc in Claude Code: the user's choice, not an upstream failure
                self.recorder.event(turn, "client_cancelled", {"message": msg})
                turn.outcome = "cancelled"
                turn.error = msg
            else:
                turn.error = broken or upstream_failure(msg)
                self.recorder.event(turn, "upstream_error", {"status": None, "message": turn.error})
            self._complete(flow, state, self._reply_outcome(flow, state, None, failed=turn.outcome != "cancelled"))
        except Exception:
            log.exception("tokunseba: error hook failed")

    # ---- internals ----
    async def _plan(self, flow: http.HTTPFlow) -> tuple[Turn, UpstreamConn | None, Slot | None, object] | None:
        """Detect, decide and build the turn. A routed turn's upstream connection is opened
        (or taken from the relay's pool) here, before the turn is committed to its route: a
        connect that fails marks the endpoint down and the turn is decided again without it
        (passive health: no probe, and the healthy path pays no extra round trip). So is an
        endpoint cooling down (retry-after) or full (max_concurrency; after waiting up to its
        queue_s for a slot): the turn takes a slot of the endpoint it goes to."""
        req = flow.request
        if req.method != "POST":
            return None
        host, port = req.pretty_host, req.port  # pretty_host parses the Host header: once
        prep = prepare_request(method=req.method, host=host, port=port, path=req.path,
                               headers=req.headers.items(multi=True), body=req.get_content(strict=False) or b"",
                               extra_hosts=extra_for(self.provider_hosts, host, port))
        if prep is None:
            return None
        prep.keeper = self.keeper
        plan, conn, slot = None, None, None
        if prep.req is not None:
            full: set[str] = set()  # endpoints found full (after their queue_s) for this turn
            available = self._available(full)
            for _ in range(2 * len(self.rules.endpoints) + 1):  # each round rules out one more endpoint
                plan = decide_request(self.rules, prep, available)
                ep = plan.decision.endpoint if plan.decision.action == Decided.ROUTE else None
                if ep is None:
                    break
                slot = await self._slot(ep, full)
                if slot is None:
                    continue
                try:
                    conn = await self.relay.connect(ep.url, ctx.options.tokunseba_probe_timeout_ms / 1000)
                except Exception as e:
                    slot.release()
                    slot = None
                    why = describe(e, ep.host, ep.port, ctx.options.tokunseba_probe_timeout_ms / 1000).reason
                    wait = self.health.failed(ep, why)
                    log.warning(f"tokunseba: endpoint {ep.name} ({ep.host}:{ep.port}) is unreachable "
                                f"({why}); skipped for {wait:g} s")
                    continue
                self.health.ok(ep)
                break
        turn = build_turn(self.rules, prep, plan, env=os.environ)
        turn.retry_of = self.retries.seen(retry_key(session=turn.who.session, client=turn.who.client, host=host,
                                                    path=req.path, body=prep.body), turn.request_id, turn.started_at)
        if turn.retry_of:
            turn.events.append(("retry", {"of": turn.retry_of}))
        say_endpoint_unreachable(turn, self.health.down())
        peer = flow.client_conn.peername[0] if flow.client_conn.peername else None
        if self.access is None:  # read once per change (configure), not twice a turn
            self.access = bool(_option("proxyauth", "")), bool(_option("tokunseba_allow_remote_clients", False))
        proxyauth, allow_remote = self.access
        refuse_remote_client(turn, peer, proxyauth=proxyauth, allow_remote=allow_remote)
        self.capacity.say_when(turn)  # on_failure: error at a cooling endpoint: 503 with retry-after
        if turn.outcome == "refused" and any(k == "unmatched_refused" for k, _ in turn.events):
            say_busy(turn, self.rules, self.capacity, self.health)  # every route busy: 429/503, never a 400
        turn.may_shadow = may_spend_keys(peer, proxyauth=proxyauth, allow_remote=allow_remote)
        if slot is not None and (turn.local is not None or plan is None or turn.endpoint is not plan.decision.endpoint):
            slot.release()
            slot = None
        return turn, conn, slot, prep

    def _available(self, full: set[str]):
        """``decide``'s test of an endpoint: False (down after a failed connect), why not
        (cooling down, full), or True."""
        health, capacity = self.health, self.capacity

        def available(ep: Endpoint) -> bool | str:
            if not health.reachable(ep):
                return False
            why = capacity.unavailable(ep, queue=ep.name not in full)
            return why or True
        return available

    async def _slot(self, ep: Endpoint, full: set[str]) -> Slot | None:
        """A slot of ``ep`` for this turn (waiting up to its queue_s), or None (noted in ``full``)."""
        slot = self.capacity.acquire(ep)
        if slot is None and ep.queue_s > 0 and ep.name not in full:
            slot = await self.capacity.wait(ep, ep.queue_s)
        if slot is None:
            full.add(ep.name)
        return slot

    def _soon_check_endpoints(self) -> None:
        """Connect once to every endpoint a route uses, in the background (start-up is not
        delayed): each one that cannot be reached is said in one warning, with what happens
        to the turns routed there (proxy/endpoint_startup.py), and starts in its back-off; a
        connection that worked waits in the relay's pool for the first turn."""
        rules, timeout = self.rules, ctx.options.tokunseba_probe_timeout_ms / 1000
        cli = os.environ.get("TOKUNSEBA_CLI") or "tokunseba"

        async def one(ep) -> None:
            try:
                conn = await self.relay.connect(ep.url, timeout)
            except Exception as e:
                why = describe(e, ep.host, ep.port, timeout).reason
                self.health.failed(ep, why)
                log.warning(unreachable_line(rules, ep, why, cli=cli))
                return
            self.relay.pool.put(conn)

        async def all_of_them() -> None:
            try:
                await asyncio.gather(*(one(ep) for ep in endpoints_in_use(rules)))
            except Exception:
                log.exception("tokunseba: checking the endpoints at start failed")

        self.endpoint_check = asyncio.ensure_future(all_of_them())  # kept: a task nobody holds may be collected

    async def _check_reach(self, flow: http.HTTPFlow, turn: Turn) -> None:
        """A turn passing through to its provider host: connect to that host first, as
        mitmproxy would; one that cannot be reached is answered in the client's protocol
        (proxy/provider_reach.py) instead of with mitmproxy's HTML 502 page. Not in upstream-proxy
        mode (mitmproxy connects through that proxy, not directly)."""
        bad = await self._unreachable(flow)
        if bad is not None:
            answer_unreachable(turn, bad, asked=turn.host)  # its console line says why (_console)
            say_busy(turn, self.rules, self.capacity, self.health,  # routes skipped as busy: 429/503
                     then=f"{turn.host} could not be reached: {bad.reason}")

    async def _unreachable(self, flow: http.HTTPFlow) -> Unreachable | None:
        """Why the flow's own host cannot be reached (connected to as mitmproxy would), or None
        (reached, or not checked: the check is off, or in upstream-proxy mode)."""
        timeout_ms = ctx.options.tokunseba_connect_timeout_ms
        if timeout_ms <= 0 or any(str(m).startswith("upstream:") for m in ctx.options.mode):
            return None
        req = flow.request
        return await self.reach.check(req.host, req.port, tls=req.scheme == "https", ssl_context=self.reach_ssl,
                                      timeout=timeout_ms / 1000)

    def _apply(self, flow: http.HTTPFlow, turn: Turn, conn: UpstreamConn | None = None, slot: Slot | None = None,
               prep=None) -> FlowState:
        state = self.flows[flow.id] = FlowState(turn, slot=slot, attempt_at=time.monotonic())
        turn.via = base_url.PROXY if _reverse_host(flow) is None else base_url.BASE_URL
        flow.metadata["tokunseba.request_id"] = turn.request_id
        if turn.action == Action.TRANSLATE or turn.body is not None:
            flow.metadata[ORIGINAL_KEY] = turn.original_body[:MAX_ORIGINAL].decode("utf-8", "replace")
        self.recorder.start(turn)
        req = flow.request
        state.client_close = req.http_version.startswith("HTTP/1") and connection_close(req.http_version, req.headers)
        flow.metadata[CLIENT_KEY] = base_url.client_label(client_name(req.headers.get("user-agent"), turn.client_protocol),
                                                          turn.via)
        client_url, client_headers = req.url, req.headers.copy()
        state.shown = Shown(client_url, client_target=target_of(req))
        flow.comment = f"{turn.request_id} · {turn.summary()}"  # the id first: ~comment tk-… finds the turn
        flow.marked = MARKS.get(turn.outcome, "")
        if turn.local is None:
            if prep is not None and turn.action in (Action.TRANSLATE, Action.RETARGET):
                state.chain = Chain(prep, client_url, client_headers.fields,
                                    trace=list(turn.decision.trace) if turn.decision else [])
            self._rewrite(flow, state, conn)
        else:
            if conn is not None:
                self.relay.pool.put(conn)
            self._respond(flow, turn.local)
        self._record_original(flow, state, client_url, client_headers)
        return state

    def _rewrite(self, flow: http.HTTPFlow, state: FlowState, conn: UpstreamConn | None) -> None:
        req, turn = flow.request, state.turn
        if turn.action in (Action.TRANSLATE, Action.RETARGET) and turn.url:  # every routed turn goes through the relay
            if not self.relay.port:  # the relay starts in running(); be sure in odd embeddings
                raise RuntimeError("the tokunseba relay is not running")
            # some clients read a comment line as JSON (Gemini CLI): their unchanged stream gets no keep-alive
            keepalive = turn.action == Action.TRANSLATE or protocols.get(turn.client_protocol).passthrough_keepalive
            ep = turn.endpoint
            replan = (lambda failure, headers: self._failover(flow, state, failure, headers)) if state.chain else None
            token, _ = self.relay.register(turn.url, conn, keepalive=keepalive, replan=replan,
                                            first_byte_s=ep.first_byte_timeout_s if ep else None,
                                            protocol=turn.target_protocol)
            state.relay_token = token
            point_at(req, "http", "127.0.0.1", self.relay.port, f"{RELAY_PREFIX}{token}")
        elif turn.url:
            req.url = turn.url
        if turn.keep_headers is not None:  # one pass over the raw fields (a name lookup scans them all)
            gone = apply_header_changes(header_names(req.headers), turn)
            if gone:  # as ``headers.pop(name)``: every field of that name, in any case
                raw = {n.encode("utf-8", "surrogateescape").lower() for n in gone}
                req.headers.fields = tuple(f for f in req.headers.fields if f[0].lower() not in raw)
        set_headers(req.headers, turn.set_headers)
        if turn.body is not None:
            req.content = turn.body

    async def _failover(self, flow: http.HTTPFlow, state: FlowState, failure: Failure,
                        headers: list[tuple[str, str]]) -> Replan | None:
        """The relay's call when an attempt failed before any byte reached the client: note
        it (cooldown from its retry-after hint, else the passive back-off; its slot freed; the
        attempt recorded), then plan the next one (attempts.next_turn), or None."""
        turn, chain = state.turn, state.chain
        assert chain is not None
        tried = note_failure(turn, failure, headers, ms=(time.monotonic() - state.attempt_at) * 1000, now=time.time(),
                             capacity=self.capacity, health=self.health)
        if state.slot is not None:
            state.slot.release()
            state.slot = None
        chain.failed.append(tried)
        nxt, slot = None, None
        if may_fail_over(turn):
            full: set[str] = set()
            available = self._available(full)
            for _ in range(2 * len(self.rules.endpoints) + 1):
                nxt = next_turn(self.rules, chain, turn, reachable=available, env=os.environ)
                if nxt is None or nxt.action == Action.PASS or nxt.endpoint is None:
                    break
                slot = await self._slot(nxt.endpoint, full)
                if slot is not None:
                    break
                nxt = None
        log.warning(failure_line(turn, tried, failure, nxt))
        self.recorder.event(turn, "attempt_failed", {**tried.record(), "next": None if nxt is None else where_next(nxt)})
        if nxt is None:
            chain.gave_up = True
            chain.told = final(turn.client_protocol, chain.failed, turn.request_id)  # proxy/last_word.py
            return None
        state.turn, state.slot, state.attempt_at = nxt, slot, time.monotonic()
        nxt.failed_over = chain.text(where_next(nxt))
        if nxt.decision is not None:
            chain.trace += nxt.decision.trace
        self.recorder.next_attempt(nxt, chain.trace)
        rec = flow.metadata.get(RECORD_KEY)
        if isinstance(rec, dict):
            rec.update(endpoint=nxt.endpoint.name if nxt.endpoint and nxt.action != Action.PASS else None,
                       endpoint_url=nxt.url, target_protocol=nxt.target_protocol)
        return replan_of(nxt, chain)

    # ---- mitmweb: what a user sees of the turn ----
    def _record_original(self, flow: http.HTTPFlow, state: FlowState, client_url: str,
                         client_headers: http.Headers) -> None:
        """The client's request as mitmweb shows it (proxy/presentation.py); the real one kept in
        memory for a replay when tokunseba rewrote it."""
        if record_original(flow, state, client_url, client_headers):
            self.replayable[flow.id] = (client_url, client_headers)
            while len(self.replayable) > MAX_REPLAYABLE:
                self.replayable.popitem(last=False)

    def _present(self, flow: http.HTTPFlow, state: FlowState, ledger_outcome: str | None, status: int | None) -> None:
        """The turn has ended: its mark and comment say so (proxy/presentation.py), pushed to
        mitmweb's open pages (mitmdump has no view: nothing to update)."""
        if present(flow, state, ledger_outcome, status) and ctx.master.addons.get("view") is not None:
            try:
                ctx.master.addons.trigger(UpdateHook([flow]))
            except Exception:
                log.exception("tokunseba: could not update the flow's mark and comment")

    def _prepare_replay(self, flow: http.HTTPFlow) -> bool:
        """mitmweb's Replay of a flow tokunseba rewrote: put the client's own request back so the
        turn goes through the rules and translators again. Refused with a clear error in the
        client's protocol when that request is no longer known (a flow loaded from a file:
        saved flows do not keep the client's key). False when the flow was answered."""
        rec = flow.metadata.get(RECORD_KEY)
        original = flow.metadata.get(ORIGINAL_KEY)
        for k in (RECORD_KEY, ORIGINAL_KEY, "tokunseba.request_id"):
            flow.metadata.pop(k, None)
        if not isinstance(rec, dict) or not rec.get("rewritten"):
            return True
        kept = self.replayable.get(flow.id)
        if kept is None or (rec.get("body_changed") and (original is None or not rec.get("body_exact"))):
            why = ("the client's request is not kept in memory (a flow loaded from a file, or an older one): "
                   "send the turn again from the client") if kept is None else "the client's body was too large to keep"
            msg = f"tokunseba: this flow cannot be replayed: tokunseba rewrote it and {why}"
            self._respond(flow, client_error(rec.get("client_protocol") or guess_protocol(flow.request.path), 400, msg,
                                             "invalid_request_error"))
            flow.marked, flow.comment = MARKS["refused"], msg
            return False
        url, headers = kept
        flow.request.headers = headers.copy()
        flow.request.url = url
        if rec.get("body_changed"):
            assert original is not None  # else refused above
            flow.request.content = original.encode("utf-8")
        return True

    def _relay_done(self, state: FlowState) -> str | None:
        """Release the flow's relay target; why the upstream broke (not a refused connect), if it did."""
        turn, token, state.relay_token = state.turn, state.relay_token, None
        if state.slot is not None:
            state.slot.release()  # the endpoint's slot is free for the next turn (the client left, or the reply ended)
        target = self.relay.finish(token) if token else None
        noted = state.chain is not None and state.chain.failed and state.chain.failed[-1].kind == "unreachable"
        if target is not None and target.broken and target.broken.startswith("cannot connect") and turn.endpoint \
                and not noted:
            self.health.failed(turn.endpoint, target.broken)
        if target is not None and target.broken and not target.broken.startswith("cannot connect"):
            turn.error = target.broken
            self.recorder.event(turn, "upstream_error", {"status": None, "message": target.broken})
            return target.broken
        return None

    def _console(self, flow: http.HTTPFlow, turn: Turn, outcome: str, status: int | None, usage, now: float,
                 chain: Chain | None = None) -> None:
        """The turn's one console line (proxy/console_line.py): what happened to it, as recorded."""
        if not log.isEnabledFor(logging.INFO):  # built only when log.info would emit it
            return
        try:
            d = turn.decision
            sent = turn.action != Action.RESPOND
            log.info(turn_line(request_id=turn.request_id, client=flow.metadata.get(CLIENT_KEY) or turn.client_protocol,
                               model=turn.requested_model, route=d.route.name if d and d.route else None,
                               to=(turn.endpoint.name if turn.endpoint and (sent or d and d.route) else turn.host)
                               + ("" if sent or d and d.route else " (not sent)")
                               + (f" (failed over: {turn.failed_over})" if turn.failed_over else ""),
                               outcome=outcome, status=status,
                               usage=usage.reported if usage else None, seconds=now - turn.started_at,
                               error=turn.error,
                               trace=d.trace if d else None,
                               attempts=[a.record() for a in chain.failed] if chain else None))
        except Exception:
            log.exception("tokunseba: could not write the turn's console line")

    def _respond(self, flow: http.HTTPFlow, lr: LocalResponse) -> http.Response:
        flow.response = r = http.Response.make(lr.status, lr.body, lr.headers)
        return r

    def _reply_outcome(self, flow: http.HTTPFlow, state: FlowState, status: int | None, rep=None,
                       whole: Outcome | None = None, *, failed: bool = False) -> Outcome:
        """The outcome of the reply the client got, from the path that made it: a stream
        (its pump), a translated whole reply (``rep``), a whole reply passed on in the
        client's own protocol (``whole``, as the response hook judged it; else judged here
        under a status below 400), or a local answer. A stream's pump and a whole reply's
        ``rep`` never meet: the mode decides one or the other."""
        turn, pump = state.turn, state.pump
        if pump is not None:
            out = pump.outcome(status)
        elif rep is not None and status is not None:
            out = Outcome.of_reply(status, rep)
        elif whole is not None:
            out = whole
        elif turn.action in (Action.PASS, Action.RETARGET) and flow.response is not None and status is not None and status < 400:
            out = Outcome.of_whole(turn.client_protocol, status, flow.response.headers.get("content-type"),
                                   flow.response.get_content(strict=False) or b"")
        else:
            out = Outcome(status)
        out.failed = failed
        return out

    def _complete(self, flow: http.HTTPFlow, state: FlowState, out: Outcome, *, defer: bool = False) -> None:
        """Record how the turn ended: its outcome, status, timings and usage as reported.

        A reply that is not what a clean turn would have sent (a translated stream without
        its terminal event, an upstream error event, a cut or reset; a passed-on stream the
        watch judged broken; a 2xx whole reply that is not JSON) is recorded as an error
        with the reason, whatever its status. With ``defer`` (the ``response`` hook, which
        mitmproxy calls before it writes the reply's last bytes) the record is made once
        mitmproxy has handed those bytes to the client's connection (``recorder.after_sent``)."""
        turn, status, usage = state.turn, out.status, out.usage
        if status is not None and status < 400 and turn.endpoint is not None and self.capacity.failures:
            self.capacity.ok(turn.endpoint)  # answered: its failures in a row start again
        now = time.time()
        details, failed = dict(out.details), out.failed
        if out.problem and not failed and turn.outcome not in ("cancelled", "refused"):
            failed = True
            turn.error = turn.error or out.problem  # a reset the relay saw says more than its symptom
            details["problem"] = out.problem
        if turn.error is None and status is not None and status >= 400 and flow.response is not None \
                and flow.response.raw_content is not None and turn.outcome != "refused":
            # an error reply (the upstream's, translated or not): its message is the turn's error, as
            # `stats` counts it an error (ledger._kind)
            turn.error = error_message(flow.response.get_content(strict=False)) or f"HTTP {status}"
        fb = out.first_byte
        if fb is None and flow.response is not None and status is not None:
            fb = now  # whole (buffered) replies: first byte = when the reply left
        body = _client_body(flow, out) if state.shadowed or self.store_bodies else None  # read only when kept
        primary_done(self.shadows, state, status, body)
        outcome = "error" if failed and turn.outcome != "refused" else turn.outcome
        if turn.capture is not None and turn.capture.kept:  # kept as the reply's stop passed (reasoning/store.py)
            self.recorder.event(turn, "state_kept", {"keys": turn.capture.kept, "endpoint": turn.capture.endpoint,
                                             "model": turn.capture.model})
        self._present(flow, state, outcome, status)
        self._console(flow, turn, outcome, status, usage, now, state.chain)
        if turn.translation is not None and (said := cap_line(request_id=turn.request_id, endpoint=turn.endpoint.name if turn.endpoint else None, converted=turn.translation.converted, details=details, original=turn.original_body)):
            log.info(said)  # the endpoint's cap, not the client's, ended the reply (proxy/cap_note.py)
        if self.spans is not None:  # the client's own headers (a rewritten request no longer has its traceparent)
            chain, headers = state.chain, self.replayable.get(flow.id, (None, flow.request.headers))[1]
            self.spans.turn_done(turn, outcome=outcome, status=status, usage=usage, details=details, end=now,
                                 response_model=out.model,
                                 attempts=len(chain.failed) + (not chain.gave_up) if chain and chain.failed else None,
                                 traceparent=headers.get("traceparent"), tracestate=headers.get("tracestate"),
                                 response_body=_client_body(flow, out) if self.spans.bodies else None)
        record = self.recorder.completion(turn, out, outcome=outcome, details=details, now=now, first_byte=fb,
                                          chain=state.chain, attempt_at=state.attempt_at, body=body)
        if record is None:
            return
        if defer:
            after_sent(flow, record)
        else:
            record()


def _client_body(flow: http.HTTPFlow, out: Outcome) -> bytes | None:
    """The reply the client got: the stream as kept, or the whole reply; None when neither."""
    if out.kept is not None:
        return out.kept
    if flow.response is not None and flow.response.raw_content is not None:
        return flow.response.get_content(strict=False)
    return None


def _reverse_host(flow: http.HTTPFlow) -> str | None:
    """The provider host of the base-URL (reverse) listener the flow came in on; None when it
    came through the HTTPS proxy (proxy/base_url.py)."""
    mode = getattr(flow.client_conn, "proxy_mode", None)
    return mode.address[0] if isinstance(mode, ReverseMode) else None


def _option(name: str, default):
    """An option's value, or ``default`` where the addon defining it is not loaded (proxyauth)."""
    return getattr(ctx.options, name) if name in ctx.options else default


def _redact_whole_reply(r: http.Response, turn: Turn) -> None:
    """An endpoint key echoed back in a whole (buffered) reply is redacted by value before the
    client, the ledger or the logs see it (streams: Pump)."""
    if not turn.key_injected or not KNOWN_SECRETS or r.raw_content is None:
        return
    body = r.get_content(strict=False) or b""
    clean = KNOWN_SECRETS.redact_bytes(body)
    if clean != body:
        r.content = clean


class _ConnectionChatter(logging.Filter):
    """Leaves mitmproxy's per-connection lines (client/server connect and disconnect, a server
    connection that failed) out of the log when ``quiet`` (tokunseba_console=turns); its
    warnings and errors still show."""

    quiet = False

    def filter(self, record: logging.LogRecord) -> bool:
        return not (self.quiet and record.levelno <= logging.INFO)


_CONNECTION_CHATTER = _ConnectionChatter()
logging.getLogger("mitmproxy.proxy.server").addFilter(_CONNECTION_CHATTER)
quiet_stray_stylesheet()  # mitmweb's page asks for a stylesheet mitmproxy 12 does not ship (proxy/web_noise.py)


class DisplayRedaction:
    """Runs after Tokunseba's hooks and before mitmproxy's own flow log (its Dumper prints a
    flow in its ``response`` / ``error`` hooks, after the request was sent): credential
    headers and secret query values of provider calls are redacted in the flow as shown
    (terminal at any flow_detail, mitmweb, saved flows), never on the wire."""

    def __init__(self, main: Tokunseba) -> None:
        self.main = main

    def response(self, flow: http.HTTPFlow) -> None:
        self._redact(flow)

    def error(self, flow: http.HTTPFlow) -> None:
        self._redact(flow)

    def _redact(self, flow: http.HTTPFlow) -> None:
        try:
            req = flow.request
            if "tokunseba.request_id" not in flow.metadata and not is_provider_host(req, self.main.provider_hosts):
                return
            fields = req.headers.fields
            if any(is_credential_header(field_name(k)) for k, _ in fields):  # one pass over the raw fields
                req.headers.fields = tuple((k, REDACTED_BYTES) if is_credential_header(field_name(k)) else (k, v)
                                           for k, v in fields)
            if "?" in req.path:
                req.path = redact_query(req.path)
            elif KNOWN_SECRETS:
                req.path = KNOWN_SECRETS.redact_text(req.path)
        except Exception:
            log.exception("tokunseba: redacting the flow for display failed")


REDACTED_BYTES = REDACTED.encode()


def _keep_client_close(r: http.Response, state: FlowState) -> None:
    """A client that asked for ``Connection: close`` gets it: mitmproxy closes the client's
    connection after a reply when the request or the reply says so, and a rewritten request
    no longer carries the client's hop-by-hop headers (a client reading to EOF would wait)."""
    if state.client_close and r.headers.get("connection", "").lower() != "close":
        r.headers["connection"] = "close"


def _prepare_stream_headers(flow: http.HTTPFlow, content_type: str) -> None:
    assert flow.response is not None
    h = flow.response.headers
    h.pop("content-length", None)
    h.pop("content-encoding", None)
    h["content-type"] = content_type
    if flow.request.http_version.startswith("HTTP/1"):
        h["transfer-encoding"] = "chunked"


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


def _snippet(body: bytes | None, n: int = 500) -> str:
    return (body or b"")[:n].decode("utf-8", "replace")


class OriginalRequestView(contentviews.Contentview):
    """mitmweb: the client's original request (URL, redacted headers, indented JSON body)
    before tokunseba rewrote it; a plain sentence for flows it did not rewrite."""

    name = "tokunseba-original"
    syntax_highlight = "yaml"

    def prettify(self, data: bytes, metadata: contentviews.Metadata) -> str:
        f = metadata.flow
        md = getattr(f, "metadata", None) or {}
        rec = md.get(RECORD_KEY)
        body = md.get(ORIGINAL_KEY)
        if body is None and isinstance(rec, dict) and not rec.get("body_changed"):
            body = data.decode("utf-8", "replace")  # only the URL/headers changed: the body is the client's
        return original_view_text(rec if isinstance(rec, dict) else None, body,
                                  is_request=not isinstance(metadata.http_message, http.Response),
                                  truncated=isinstance(rec, dict) and not rec.get("body_exact", True))

    def render_priority(self, data: bytes, metadata: contentviews.Metadata) -> float:
        return -1


contentviews.add(OriginalRequestView)
