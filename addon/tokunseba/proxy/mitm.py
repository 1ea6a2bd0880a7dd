"""The mitmproxy adapter: the only module that imports mitmproxy (design.md §3).

Hooks stay a few lines each and delegate to the pure core (turn.py). Fail closed: any
exception while handling a provider call answers the client with an error in its own
protocol; a translated turn never falls through to the original host.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import ssl
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence

from mitmproxy import command, contentviews, ctx, exceptions, http
from mitmproxy.hooks import UpdateHook
from mitmproxy.net.http.http1 import connection_close

from .. import protocols
from .access import may_spend_keys, refuse_remote_client
from .relay import MARK as RELAY_MARK
from .relay import PREFIX as RELAY_PREFIX
from .relay import Relay
from .relay import Replan, UpstreamConn
from .attempts import Attempted, Chain, attempt_body, attempt_headers, attempt_url, may_fail_over, next_turn
from .capacity import Capacity, Slot
from .console_line import client_name, turn_line
from .endpoint_startup import endpoints_in_use, unreachable_line
from ..routing.endpoints import Endpoint, EndpointHealth
from .failover import Failure, retry_hint
from ..errors import TranslationError
from ..ledger.store import Ledger, default_instance, instance_id, take_password
from . import otel_spans
from .flowstate import FlowState, Shown
from ..ledger.writer import LedgerWriter
from .outcome import Outcome, shape_problem, upstream_failure, usage_of
from .provider_reach import Reach, answer_unreachable, describe, say_endpoint_unreachable
from .pump import MAX_STORED_BODY, Pump, reply_completed
from ..reasoning.store import DEFAULT_MAX_ENTRIES, Keeper, open_keeper
from ..routing.rules import Rules, RulesError, load_rules
from ..shadow.turns import should_shadow
from ..shadow.scope import shadowable
from ..shadow.sender import ShadowJob, ShadowSender
from ..protocols.detect import guess, provider_hosts
from ..credentials import (
    KNOWN_SECRETS,
    REDACTED,
    RedactingFilter,
    endpoint_keys,
    is_credential_header,
    redact_query,
)
from ..sse import DEFAULT_MAX_EVENT_BYTES, set_max_event_bytes
from ..turn import (
    REQUEST_ID_HEADER,
    SSE_CONTENT_TYPE,
    LocalResponse,
    Turn,
    apply_header_changes,
    build_turn,
    client_error,
    decide_request,
    prepare_request,
    response_mode,
    retarget_error,
    stream_translator,
    translate_whole,
    websocket_refusal,
)
from ..webview.view import (
    MARKS,
    RECORD_KEY,
    error_message,
    final_comment,
    final_mark,
    original_record,
    original_view_text,
    secrets_of,
    web_outcome,
)
from ..webview.redact import redact_header_value, redact_values

log = logging.getLogger("tokunseba")
for _logger in (log, logging.getLogger("tokunseba.ledger"), logging.getLogger("tokunseba.relay")):
    _logger.addFilter(RedactingFilter())  # keys never reach the logs, whatever a message quotes

ORIGINAL_KEY = "tokunseba.original_request"
CLIENT_KEY = "tokunseba.client"  # the client's name on the console line (proxy/console_line.py)
MAX_ORIGINAL = 4 * 1024 * 1024
RULES_POLL_S = 1.0
MAX_REPLAYABLE = 1024  # rewritten flows whose client request (URL, headers) is kept in memory for replay


def _keepalive_seconds(value: str) -> float:
    """The tokunseba_keepalive_s option as seconds (0: no keep-alives), or a one-line error."""
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        raise exceptions.OptionsError(f"tokunseba_keepalive_s: {value!r} is not a number of seconds (0 or more; "
                                      "0: no keep-alives)")
    return seconds


class Tokunseba:
    def __init__(self) -> None:
        self.rules: Rules = load_rules(None)
        self.ledger: LedgerWriter | None = None
        self.store_bodies = False  # tokunseba_ledger_bodies (_open_ledger)
        self.access: tuple[bool, bool] | None = None  # (proxyauth set, tokunseba_allow_remote_clients), as _plan read them
        self.flows: dict[str, FlowState] = {}  # flow id -> its state, while in flight
        self.health = EndpointHealth()  # passive: a failed connect marks an endpoint down for a back-off
        self.capacity = Capacity()  # cooldowns (retry-after) and max_concurrency slots, across reloads
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
        # request id -> the records of its start, until queued in the loop's next step (_ledger_start)
        self.unstarted: dict[str, Callable[[], None]] = {}
        self.keeper: Keeper | None = None  # provider state of translated tool loops (reasoning/store.py)

    # ---- options ----
    def load(self, loader) -> None:
        loader.add_option("tokunseba_rules", str, "", "Rules YAML file (empty: no routes, everything passes through).")
        loader.add_option("tokunseba_ledger", str, "", "Ledger: a SQLite path or a postgresql:// URL (empty: "
                          "$TOKUNSEBA_LEDGER, else $TOKUNSEBA_HOME/ledger.db).")
        loader.add_option("tokunseba_instance", str, "", "This proxy's name on its turns in the ledger (empty: user@host).")
        loader.add_option("tokunseba_otlp_endpoint", str, "", "OTLP/HTTP collector for one span per turn (empty: "
                          "$OTEL_EXPORTER_OTLP_ENDPOINT; neither: no spans).")
        loader.add_option("tokunseba_otlp_bodies", bool, False, "Also put the request and reply text in the spans.")
        loader.add_option("tokunseba_ledger_bodies", bool, False, "Store request/response bodies in the ledger.")
        loader.add_option("tokunseba_probe_timeout_ms", int, 1500,
                          "Connect timeout for endpoints, in ms (a routed turn's connection is opened before it is "
                          "committed to its route; one that fails marks the endpoint down for a back-off).")
        loader.add_option("tokunseba_connect_timeout_ms", int, 10000,
                          "Connect timeout for a provider host a turn passes through to, in ms: a host that cannot "
                          "be reached (no name, refused, TLS error, this timeout) gets the client an error in its "
                          "own protocol naming the host (504 on a timeout, else 502). 0: not checked (mitmproxy "
                          "answers such a turn with its own HTML 502 page).")
        loader.add_option("tokunseba_console", str, "all",
                          "all: mitmproxy's own lines as usual, plus tokunseba's one line per provider turn; turns: "
                          "mitmproxy's per-connection lines (client/server connect, disconnect) left out, so the "
                          "console shows tokunseba's line per turn and warnings (tokunseba run's default; -v: all).",
                          choices=("all", "turns"))
        loader.add_option("tokunseba_max_event_bytes", int, DEFAULT_MAX_EVENT_BYTES,
                          "Largest SSE event (or line) read from an upstream, in bytes; a bigger one ends the turn "
                          "with an error in the client's protocol.")
        # a str: mitmproxy's --set cannot parse a float option
        loader.add_option("tokunseba_keepalive_s", str, "10",
                          "Seconds (decimals allowed) an upstream SSE reply may be silent before tokunseba sends "
                          "the client a keep-alive (again every as many seconds), so its read timeout does not "
                          "fire; 0: never.")
        loader.add_option("tokunseba_allow_remote_clients", bool, False,
                          "Route turns (and spend endpoint keys) for clients that are not on loopback, even "
                          "without proxyauth. Off: such turns get an error in the client's protocol.")
        loader.add_option("tokunseba_shadow_concurrency", int, 2,
                          "At most this many shadow turns in flight; more are skipped (recorded shadow_skipped).")
        loader.add_option("tokunseba_shadow_timeout_s", int, 120, "A shadow turn gets no more than this many seconds.")
        loader.add_option("tokunseba_reasoning_store", str, "",
                          "Where translated replies' provider state (reasoning_content, signed thinking, "
                          "thoughtSignatures) is kept for the next turns of their tool loop: empty = reasoning.db "
                          "beside the ledger; a path; 'memory' (this process only); 'off' (none kept).")
        loader.add_option("tokunseba_reasoning_retention_h", int, 168,
                          "Hours a piece of provider state is kept (older is never restored, and is deleted).")
        loader.add_option("tokunseba_reasoning_max", int, DEFAULT_MAX_ENTRIES,
                          "At most this many tool calls' (or replies') provider state kept; the oldest go first.")
        loader.add_option("tokunseba_provider_hosts", Sequence[str], [],
                          "More hosts to treat as provider APIs, as HOST[:PORT]=PROTOCOL (e.g. llm.internal=openai).")

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
            self.relay.keepalive_s = _keepalive_seconds(ctx.options.tokunseba_keepalive_s)
        if "tokunseba_provider_hosts" in updated:
            hosts = {}
            for item in ctx.options.tokunseba_provider_hosts:
                name, sep, proto = item.rpartition("=")
                if not sep or not name or proto not in protocols.NAMES:
                    raise exceptions.OptionsError(
                        f"tokunseba_provider_hosts: {item!r} is not HOST[:PORT]=PROTOCOL with PROTOCOL in {', '.join(protocols.NAMES)}")
                hosts[name.lower()] = proto
            self.provider_hosts = hosts
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
            self._start_all()
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
        before = _stamp(path)
        self.rules = load_rules(path)
        KNOWN_SECRETS.set(endpoint_keys(self.rules.endpoints.values(), os.environ))
        # a file still being written when read is read again at the next poll
        self.rules_stamp = before if _stamp(path) == before else None
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
        self.relay.set_ssl_context(_upstream_ssl_context())
        self.reach_ssl = _upstream_ssl_context()
        if any(str(m).startswith("upstream:") for m in ctx.options.mode):
            log.warning("tokunseba: routed turns reach their endpoints directly, not through the upstream proxy")
        await self.relay.start()
        self._soon_check_endpoints()
        web = getattr(ctx.master, "app", None)  # mitmweb's tornado application (mitmdump has none)
        transforms = getattr(web, "transforms", None)
        if isinstance(transforms, list):  # mitmweb: tornado is loaded (mitmdump never imports it)
            from ..webview.style import CommentColumnStyle

            if CommentColumnStyle not in transforms:
                transforms.insert(0, CommentColumnStyle)  # before gzip: it styles the page as written
        self.shadows = ShadowSender(lambda: self.ledger, concurrency=ctx.options.tokunseba_shadow_concurrency,
                                    timeout_s=ctx.options.tokunseba_shadow_timeout_s, env=os.environ,
                                    ssl_context=_upstream_ssl_context())

    def done(self) -> None:
        self.relay.stop()
        if self.keeper is not None:
            self.keeper.store.close()
        if self.shadows is not None:
            for t in list(self.shadows.tasks):
                t.cancel()
        if self.ledger is not None:
            self._start_all()
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
                turn, conn, slot, prep = planned
                if turn.action == "pass" and turn.local is None:
                    await self._check_reach(flow, turn)
                origin = (turn.host, flow.request.port)  # the client's (pretty) host, before _apply retargets it
                self._maybe_shadow(self._apply(flow, turn, conn, slot, prep), origin)
        except Exception as e:
            log.exception("tokunseba: request hook failed")
            state = self.flows.get(flow.id) or (FlowState(turn) if turn is not None else None)
            if state is not None:
                t = state.turn
                t.action, t.outcome, t.error = "respond", "error", str(e)
                self._respond(flow, t.client_error(500, f"tokunseba internal error: {e}", "api_error"))
                self._show_client_url(flow, state)
                self._present(flow, state, "error", 500)
            elif _looks_like_provider_call(flow, self.provider_hosts):  # never let a half-handled provider call leak out
                self._respond(flow, client_error(_guess_protocol(flow), 500, f"tokunseba internal error: {e}", "api_error"))

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
                mode = "shape-error"  # buffered (not streamed): the response hook answers with the error
            state.mode = mode
            keep = self.store_bodies or state.shadowed
            if mode == "raw-stream":
                target = self.relay.targets.get(state.relay_token or "")
                pump = Pump(turn, content_encoding=r.headers.get("content-encoding"), target=target, keep=keep)
            elif mode == "translate-stream":
                pump = Pump(turn, stream_translator(turn), content_encoding=r.headers.get("content-encoding"),
                            keep=keep)
                _prepare_stream_headers(flow, SSE_CONTENT_TYPE)
            else:
                return
            state.pump = pump
            r.stream = pump
        except Exception as e:
            log.exception("tokunseba: responseheaders hook failed")
            if turn.action == "translate":
                state.mode = "failed"
                turn.outcome, turn.error = "error", str(e)
                msg = client_error(turn.client_protocol, 502, f"tokunseba internal error: {e}", "api_error").body
                flow.response.status_code = 502
                _prepare_stream_headers(flow, "application/json")
                sent = []
                flow.response.stream = lambda b: [] if sent else (sent.append(1) or [msg])

    def response(self, flow: http.HTTPFlow) -> None:
        state = self.flows.pop(flow.id, None)
        if state is None:
            return
        turn, mode = state.turn, state.mode
        broken = self._relay_done(state)
        self._show_client_url(flow, state)
        if turn.action == "pass":
            self.reach.answered(flow.request.host, flow.request.port)
        try:
            r = flow.response
            rep = whole = None
            # relay-made (a turn that failed over to its own host went through the relay too)
            mark = r.headers.get(RELAY_MARK) if turn.action in ("translate", "retarget") or state.chain else None
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
                    usage = usage_of(turn.target_protocol, raw) if upstream_status < 400 else None
                    raise _WholeReplyFailed(usage)
                r.status_code = status
                r.headers.pop("content-encoding", None)
                for k, v in headers.items():
                    r.headers[k] = v
                r.content = body
            elif mode == "shape-error":
                why = shape_problem(turn, r.status_code, r.headers.get("content-type", ""))
                self._event(turn, "upstream_error", {"status": r.status_code, "message": why})
                self._respond(flow, turn.client_error(502, f"tokunseba: {why}", "api_error"))
                r = flow.response
                turn.outcome, turn.error = "error", why
            elif state.pump is None and turn.action in ("pass", "retarget") and r.status_code < 400:
                # a whole reply passed on: judged (parsed) once, here, for its usage and shape
                whole = Outcome.of_whole(turn.client_protocol, r.status_code, r.headers.get("content-type"),
                                         r.get_content(strict=False) or b"")
                if mode == "leave" and turn.action == "retarget" and whole.problem is not None:
                    why = whole.problem  # HTML or cut JSON where the client's JSON was due
                    self._event(turn, "upstream_error", {"status": r.status_code, "message": why})
                    self._respond(flow, turn.client_error(502, f"tokunseba: {why}", "api_error"))
                    r = flow.response
                    turn.outcome, turn.error = "error", why
                    whole = None
            elif mode == "leave" and turn.action == "retarget" and r.status_code >= 400:
                raw = r.get_content(strict=False) or b""
                self._event(turn, "upstream_error", {"status": r.status_code, "message": _snippet(raw)})
                if (said := retarget_error(turn, r.status_code, raw)) is not None:  # empty or HTML: the client's envelope
                    self._respond(flow, said)
                    r = flow.response
            elif mode is None and turn.action != "respond" and r.status_code >= 400:
                self._event(turn, "upstream_error", {"status": r.status_code, "message": _snippet(r.get_content(strict=False))})
            _redact_whole_reply(r, turn)
            _keep_client_close(r, state)
            self._complete(flow, state, self._reply_outcome(flow, state, r.status_code, rep, whole), defer=True)
        except Exception as e:
            cause = e.__context__ if isinstance(e, _WholeReplyFailed) else e
            if not isinstance(cause, TranslationError):
                log.exception("tokunseba: response hook failed")
            msg = cause.message if isinstance(cause, TranslationError) else f"tokunseba: could not translate the reply: {cause}"
            err = turn.client_error(502, msg, "api_error")
            self._respond(flow, err)
            _keep_client_close(flow.response, state)
            turn.outcome, turn.error = "error", msg
            self._complete(flow, state, Outcome(err.status, usage=e.usage if isinstance(e, _WholeReplyFailed) else None),
                           defer=True)

    def error(self, flow: http.HTTPFlow) -> None:
        state = self.flows.pop(flow.id, None)
        if state is None:
            return
        turn = state.turn
        broken = self._relay_done(state)
        self._show_client_url(flow, state)
        if turn.action == "pass" and flow.response is None:
            self.reach.forget(flow.request.host, flow.request.port)  # the next turn checks it again
        try:
            msg = flow.error.msg if flow.error else "unknown error"
            if _client_went_away(msg) and reply_completed(state.pump) and flow.response is not None:
                # the client hung up after the reply's terminal event (Codex resets its HTTP/2 stream
                # as soon as it has response.completed): the turn is complete
                self._event(turn, "client_closed", {"message": msg, "after": "completion"})
                self._complete(flow, state, self._reply_outcome(flow, state, flow.response.status_code))
                return
            if _client_went_away(msg):  # Esc in Claude Code: the user's choice, not an upstream failure
                self._event(turn, "client_cancelled", {"message": msg})
                turn.outcome = "cancelled"
                turn.error = msg
            else:
                turn.error = broken or upstream_failure(msg)
                self._event(turn, "upstream_error", {"status": None, "message": turn.error})
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
                               extra_hosts=self._extra_for(host, port))
        if prep is None:
            return None
        prep.keeper = self.keeper
        decision, conn, slot = None, None, None
        if prep.req is not None:
            full: set[str] = set()  # endpoints found full (after their queue_s) for this turn
            available = self._available(full)
            for _ in range(2 * len(self.rules.endpoints) + 1):  # each round rules out one more endpoint
                decision = decide_request(self.rules, prep, available)
                ep = decision.endpoint if decision.action == "route" else None
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
        turn = build_turn(self.rules, prep, decision, env=os.environ)
        say_endpoint_unreachable(turn, self.health.down())
        peer = flow.client_conn.peername[0] if flow.client_conn.peername else None
        if self.access is None:  # read once per change (configure), not twice a turn
            self.access = bool(_option("proxyauth", "")), bool(_option("tokunseba_allow_remote_clients", False))
        proxyauth, allow_remote = self.access
        refuse_remote_client(turn, peer, proxyauth=proxyauth, allow_remote=allow_remote)
        turn.may_shadow = may_spend_keys(peer, proxyauth=proxyauth, allow_remote=allow_remote)
        if slot is not None and (turn.local is not None or turn.endpoint is not decision.endpoint):
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
        timeout_ms = ctx.options.tokunseba_connect_timeout_ms
        if timeout_ms <= 0 or any(str(m).startswith("upstream:") for m in ctx.options.mode):
            return
        req = flow.request
        bad = await self.reach.check(req.host, req.port, tls=req.scheme == "https", ssl_context=self.reach_ssl,
                                     timeout=timeout_ms / 1000)
        if bad is not None:
            answer_unreachable(turn, bad, asked=turn.host)  # its console line says why (_console)

    def _extra_for(self, host: str, port: int) -> dict[str, str] | None:
        """The tokunseba_provider_hosts entry for this host, as detect() takes it."""
        if not self.provider_hosts:
            return None
        proto = self.provider_hosts.get(f"{host}:{port}".lower()) or self.provider_hosts.get(host.lower())
        return {host: proto} if proto else None

    def _apply(self, flow: http.HTTPFlow, turn: Turn, conn: UpstreamConn | None = None, slot: Slot | None = None,
               prep=None) -> FlowState:
        state = self.flows[flow.id] = FlowState(turn, slot=slot, attempt_at=time.monotonic())
        flow.metadata["tokunseba.request_id"] = turn.request_id
        if turn.action == "translate" or turn.body is not None:
            flow.metadata[ORIGINAL_KEY] = turn.original_body[:MAX_ORIGINAL].decode("utf-8", "replace")
        self._ledger_start(turn)
        req = flow.request
        state.client_close = req.http_version.startswith("HTTP/1") and connection_close(req.http_version, req.headers)
        flow.metadata[CLIENT_KEY] = client_name(req.headers.get("user-agent"), turn.client_protocol)
        client_url, client_headers = req.url, req.headers.copy()
        state.shown = Shown(client_url, client_target=_target_of(req))
        flow.comment = f"{turn.request_id} · {turn.summary()}"  # the id first: ~comment tk-… finds the turn
        flow.marked = MARKS.get(turn.outcome, "")
        if turn.local is None:
            if prep is not None and turn.action in ("translate", "retarget"):
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
        if turn.action in ("translate", "retarget") and turn.url:  # every routed turn goes through the relay
            if not self.relay.port:  # the relay starts in running(); be sure in odd embeddings
                raise RuntimeError("the tokunseba relay is not running")
            # some clients read a comment line as JSON (Gemini CLI): their unchanged stream gets no keep-alive
            keepalive = turn.action == "translate" or protocols.get(turn.client_protocol).passthrough_keepalive
            ep = turn.endpoint
            replan = (lambda failure, headers: self._failover(flow, state, failure, headers)) if state.chain else None
            token, _ = self.relay.register(turn.url, conn, keepalive=keepalive, replan=replan,
                                            first_byte_s=ep.first_byte_timeout_s if ep else None,
                                            protocol=turn.target_protocol)
            state.relay_token = token
            _point_at(req, "http", "127.0.0.1", self.relay.port, f"{RELAY_PREFIX}{token}")
        elif turn.url:
            req.url = turn.url
        if turn.keep_headers is not None:  # one pass over the raw fields (a name lookup scans them all)
            gone = apply_header_changes(_header_names(req.headers), turn)
            if gone:  # as ``headers.pop(name)``: every field of that name, in any case
                raw = {n.encode("utf-8", "surrogateescape").lower() for n in gone}
                req.headers.fields = tuple(f for f in req.headers.fields if f[0].lower() not in raw)
        for k, v in turn.set_headers.items():
            req.headers[k] = v
        if turn.body is not None:
            req.content = turn.body

    async def _failover(self, flow: http.HTTPFlow, state: FlowState, failure: Failure,
                        headers: list[tuple[str, str]]) -> Replan | None:
        """The relay's call when an attempt failed before any byte reached the client: note
        it (cooldown from its retry-after hint, else the passive back-off; its slot freed; the
        attempt recorded), then plan the next one (attempts.next_turn), or None."""
        turn, chain = state.turn, state.chain
        ep = turn.endpoint if turn.action != "pass" else None
        route = turn.decision.route.name if turn.decision and turn.decision.route else None
        tried = Attempted(route, ep.name if ep else None, failure.kind, failure.status, failure.why,
                          (time.monotonic() - state.attempt_at) * 1000)
        if ep is not None:
            hint = retry_hint(headers, time.time()) if failure.kind == "status" else None
            if hint is not None:
                tried.cooled_s = self.capacity.cool(ep, hint[0], f"HTTP {failure.status}, {hint[1]}")
            # no hint: the passive back-off, so later turns go to the next route at once (a route
            # that says on_failure: error keeps asking its endpoint; an unreachable one backs off as before)
            if tried.cooled_s or failure.kind == "context_window":
                pass  # a context window is this turn's size, not the endpoint's health
            elif failure.kind == "unreachable":
                tried.backoff_s = self.health.failed(ep, failure.why)
            elif may_fail_over(turn):
                tried.backoff_s = self.capacity.back_off(ep, failure.short())
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
                if nxt is None or nxt.action == "pass":
                    break
                slot = await self._slot(nxt.endpoint, full)
                if slot is not None:
                    break
                nxt = None
        where = f"{tried.endpoint or 'the original host'}" + (f" (route {route})" if route else "")
        log.warning(f"tokunseba: {turn.request_id}: {where} failed: {failure.why}"
                    + (f"; cooled for {tried.cooled_s:g} s" if tried.cooled_s else "")
                    + (f"; next: {nxt.endpoint.name if nxt.endpoint and nxt.action != 'pass' else 'the original host'}"
                       if nxt is not None else "; no next route: the client gets this failure"))
        self._event(turn, "attempt_failed", {**tried.record(),
                                             "next": None if nxt is None else (
                                                 nxt.endpoint.name if nxt.action != "pass" else "original host")})
        if nxt is None:
            chain.gave_up = True
            return None
        state.turn, state.slot, state.attempt_at = nxt, slot, time.monotonic()
        nxt.failed_over = chain.text(nxt.endpoint.name if nxt.action != "pass" else None)
        if nxt.decision is not None:
            chain.trace += nxt.decision.trace
        if self.ledger is not None:
            d = nxt.decision
            self.ledger.update_turn(nxt.request_id, rule=d.route.name if d and d.route else None,
                                    endpoint=nxt.endpoint.name if nxt.endpoint and nxt.action != "pass" else None,
                                    target_protocol=nxt.target_protocol, model_used=nxt.model_used or nxt.requested_model,
                                    trace=chain.trace)
            for kind, data in nxt.events:
                self.ledger.event(nxt.request_id, kind, data)
        rec = flow.metadata.get(RECORD_KEY)
        if isinstance(rec, dict):
            rec.update(endpoint=nxt.endpoint.name if nxt.endpoint and nxt.action != "pass" else None,
                       endpoint_url=nxt.url, target_protocol=nxt.target_protocol)
        ep = nxt.endpoint if nxt.action != "pass" else None
        return Replan(attempt_url(nxt, chain), attempt_headers(nxt, chain), attempt_body(nxt, chain),
                      first_byte_s=ep.first_byte_timeout_s if ep else None,
                      protocol=nxt.target_protocol or nxt.client_protocol,
                      keepalive=nxt.action == "translate" or protocols.get(nxt.client_protocol).passthrough_keepalive)

    def _maybe_shadow(self, state: FlowState, origin: tuple[str, int]) -> None:
        """A route with `shadow:` also sends this turn to its shadow endpoint, in the
        background: scheduled here, it never delays the client's turn (shadow/sender.py). A
        failure here is logged and costs the client nothing."""
        turn = state.turn
        route = turn.decision.route if turn.decision else None
        if (route is None or route.shadow is None or self.shadows is None or turn.local is not None
                or not turn.may_shadow  # a shadow spends the shadow endpoint's key: loopback or opt-in only
                or not shadowable(turn.client_protocol, turn.detected.kind)
                or not should_shadow(route.shadow_sample, random.random())):
            return
        try:
            job = ShadowJob(turn.request_id, route.name, self.rules.endpoints[route.shadow], turn.client_protocol,
                            turn.detected.kind, turn.original_body, *origin)
            if self.shadows.submit(job):
                state.shadowed = True
        except Exception:
            log.exception("tokunseba: could not schedule the shadow of %s", turn.request_id)

    def _shadow_primary_done(self, state: FlowState, status: int | None, body: bytes | None) -> None:
        """Hand the reply the client got to the shadow waiting to compare with it (once)."""
        if not state.shadowed:
            return
        state.shadowed = False
        turn = state.turn
        error = turn.error if status is None or turn.outcome in ("error", "cancelled") else None
        self.shadows.primary_done(turn.request_id, status, body or b"", error)

    # ---- mitmweb: what a user sees of the turn ----
    def _record_original(self, flow: http.HTTPFlow, state: FlowState, client_url: str,
                         client_headers: http.Headers) -> None:
        """Keep the client's request line and headers (redacted) in the flow's metadata, the
        real ones in memory for a replay, and the key values the comment must not show."""
        req, turn = flow.request, state.turn
        body_changed = turn.body is not None
        rewritten = turn.local is None and (req.url != client_url or req.headers != client_headers or body_changed)
        exact = len(turn.original_body) <= MAX_ORIGINAL and _is_utf8(turn.original_body)
        flow.metadata[RECORD_KEY] = {
            **original_record(method=req.method, url=client_url, headers=client_headers.items(multi=True),
                              rewritten=rewritten, endpoint=turn.endpoint.name if turn.endpoint else None,
                              endpoint_url=turn.url, target_protocol=turn.target_protocol),
            "client_protocol": turn.client_protocol, "body_changed": body_changed, "body_exact": exact}
        shown = state.shown
        shown.secrets = secrets_of([*client_headers.items(multi=True), *req.headers.items(multi=True)],
                                   [client_url, turn.url])
        shown.added_keys = [k for k in turn.set_headers if is_credential_header(k)] if turn.local is None else []
        flow.comment = redact_values(flow.comment, shown.secrets)
        if rewritten:
            self.replayable[flow.id] = (client_url, client_headers)
            while len(self.replayable) > MAX_REPLAYABLE:
                self.replayable.popitem(last=False)

    def _show_client_url(self, flow: http.HTTPFlow, state: FlowState) -> None:
        """Once the request has left: the flow shows the URL the client asked for (the comment
        and the tokunseba-original view name the endpoint the turn really went to), and the
        endpoint key tokunseba added is redacted in the flow (mitmweb, saved flow files)."""
        shown = state.shown
        try:
            if shown is None:
                return
            if shown.client_target is not None:
                _set_target(flow.request, shown.client_target)
            elif shown.client_url and flow.request.url != shown.client_url:
                flow.request.url = shown.client_url
            for name in shown.added_keys:
                if name in flow.request.headers:
                    flow.request.headers[name] = redact_header_value(name, flow.request.headers[name])
        except Exception:
            log.exception("tokunseba: could not restore the client's URL on the flow")

    def _present(self, flow: http.HTTPFlow, state: FlowState, ledger_outcome: str | None, status: int | None) -> None:
        """The turn has ended: its mark and comment state the outcome as the ledger counts it."""
        turn, shown, state.shown = state.turn, state.shown, None
        try:
            error = turn.error
            if error is None and status is not None and status >= 400 and flow.response is not None \
                    and flow.response.raw_content is not None:
                error = error_message(flow.response.get_content(strict=False))
            outcome = web_outcome(ledger_outcome, status, error)
            plumbing = (turn.translation.plumbing if turn.translation else []) + turn.plumbing_headers
            flow.marked = final_mark(outcome)
            flow.comment = final_comment(turn.summary(), request_id=turn.request_id, outcome=outcome, status=status,
                                         error=error,
                                         plumbing=plumbing, endpoint_url=turn.url,
                                         secrets=shown.secrets if shown else ())
            if ctx.master.addons.get("view") is not None:  # mitmweb pushes the change to open pages
                ctx.master.addons.trigger(UpdateHook([flow]))  # (mitmdump has no view: nothing to update)
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
            self._respond(flow, client_error(rec.get("client_protocol") or _guess_protocol(flow), 400, msg,
                                             "invalid_request_error"))
            flow.marked, flow.comment = MARKS["refused"], msg
            return False
        url, headers = kept
        flow.request.headers = headers.copy()
        flow.request.url = url
        if rec.get("body_changed"):
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
            self._event(turn, "upstream_error", {"status": None, "message": target.broken})
            return target.broken
        return None

    def _console(self, flow: http.HTTPFlow, turn: Turn, outcome: str, status: int | None, usage, now: float) -> None:
        """The turn's one console line (proxy/console_line.py): what happened to it, as recorded."""
        try:
            d = turn.decision
            log.info(turn_line(request_id=turn.request_id, client=flow.metadata.get(CLIENT_KEY) or turn.client_protocol,
                               model=turn.requested_model, route=d.route.name if d and d.route else None,
                               to=(turn.endpoint.name if turn.endpoint else turn.host)
                               + (f" (failed over: {turn.failed_over})" if turn.failed_over else ""),
                               outcome=outcome, status=status,
                               usage=usage.reported if usage else None, seconds=now - turn.started_at,
                               error=turn.error if outcome in ("error", "refused", "cancelled") else None))
        except Exception:
            log.exception("tokunseba: could not write the turn's console line")

    def _respond(self, flow: http.HTTPFlow, lr: LocalResponse) -> None:
        flow.response = http.Response.make(lr.status, lr.body, lr.headers)

    def _ledger_start(self, turn: Turn) -> None:
        """Record the turn's start, decision and first events, as known now, once the request
        hook has returned (``_soon``): mitmproxy sends the request on in the same step, so the
        writer is handed these records while the upstream works, not before the request left.
        Nothing of this turn is recorded before them (FIFO: every later record of the turn
        comes from a later loop step)."""
        ledger = self.ledger
        if ledger is None:
            return
        d = turn.decision
        rid, started_at = turn.request_id, turn.started_at
        start = dict(started_at=started_at, client_protocol=turn.client_protocol, host=turn.host, path=turn.path,
                     requested_model=turn.requested_model, stream=turn.stream)
        # the outcome stays NULL (open) until the turn ends: _complete writes it
        decided = dict(rule=d.route.name if d and d.route else None,
                       endpoint=turn.endpoint.name if turn.endpoint else None, target_protocol=turn.target_protocol,
                       model_used=turn.model_used or turn.requested_model, trace=d.trace if d else [],
                       error=turn.error, **({"request_body": turn.original_body} if self.store_bodies else {}),
                       **turn.who.ledger_fields())
        events = list(turn.events)

        def record() -> None:
            ledger.start_turn(rid, **start)
            ledger.update_turn(rid, **decided)
            for kind, data in events:
                ledger.event(rid, kind, data, ts=started_at)

        self.unstarted[rid] = record
        _soon(lambda: self._started(rid))

    def _start_all(self) -> None:
        for rid in list(self.unstarted):
            self._started(rid)

    def _started(self, request_id: str) -> None:
        """Queue the turn's start records now if they still wait (``_ledger_start``): every
        other record of a turn goes through here first, so none can precede its start."""
        record = self.unstarted.pop(request_id, None)
        if record is not None:
            record()

    def _event(self, turn: Turn, kind: str, data: dict) -> None:
        if self.ledger is not None:
            self._started(turn.request_id)
            self.ledger.event(turn.request_id, kind, data)

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
        elif rep is not None:
            out = Outcome.of_reply(status, rep)
        elif whole is not None:
            out = whole
        elif turn.action in ("pass", "retarget") and flow.response is not None and status is not None and status < 400:
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
        mitmproxy has handed those bytes to the client's connection (``_after_sent``)."""
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
        self._shadow_primary_done(state, status, body)
        outcome = "error" if failed and turn.outcome != "refused" else turn.outcome
        if turn.capture is not None and turn.capture.kept:  # kept as the reply's stop passed (reasoning/store.py)
            self._event(turn, "state_kept", {"keys": turn.capture.kept, "endpoint": turn.capture.endpoint,
                                             "model": turn.capture.model})
        self._present(flow, state, outcome, status)
        self._console(flow, turn, outcome, status, usage, now)
        if self.spans is not None:  # the client's own headers (a rewritten request no longer has its traceparent)
            chain, headers = state.chain, self.replayable.get(flow.id, (None, flow.request.headers))[1]
            self.spans.turn_done(turn, outcome=outcome, status=status, usage=usage, details=details, end=now,
                                 response_model=out.model,
                                 attempts=len(chain.failed) + (not chain.gave_up) if chain and chain.failed else None,
                                 traceparent=headers.get("traceparent"), tracestate=headers.get("tracestate"),
                                 response_body=_client_body(flow, out) if self.spans.bodies else None)
        if self.ledger is None:
            return
        latency = round((now - turn.started_at) * 1000, 3)
        ttfb = round((fb - turn.started_at) * 1000, 3) if fb else None
        fields = dict(status=status, latency_ms=latency, ttfb_ms=ttfb,
                      usage_reported=usage.reported if usage else None, usage_protocol=usage.counting if usage else None,
                      usage_client=out.client_usage, outcome=outcome)
        if turn.error:
            fields["error"] = turn.error
        chain = state.chain
        if chain is not None and chain.failed and chain.gave_up:  # the last failed attempt is what the client got
            fields["attempts"] = [a.record() for a in chain.failed]
        elif chain is not None and chain.failed:  # the attempts, the last one the attempt the client got
            d = turn.decision
            last = {"route": d.route.name if d and d.route else None,
                    "endpoint": turn.endpoint.name if turn.endpoint and turn.action != "pass" else None,
                    "kind": "answered", "status": status, "why": turn.error,
                    "ms": round((time.monotonic() - state.attempt_at) * 1000, 3)}
            fields["attempts"] = [a.record() for a in chain.failed] + [last]
        if self.store_bodies and body is not None:
            fields["response_body"] = body[:MAX_STORED_BODY]
        done = {"status": status, "latency_ms": latency, "ttfb_ms": ttfb,
                "usage": usage.reported if usage else None, "usage_client": out.client_usage, **details}
        ledger, rid = self.ledger, turn.request_id

        def record() -> None:
            self._started(rid)
            ledger.update_turn(rid, **fields)
            ledger.event(rid, "completed", done)

        if defer:
            _after_sent(flow, record)
        else:
            record()


def _target_of(req: http.Request) -> tuple:
    """Where a request goes, as mitmproxy holds it: scheme, host, port, path, authority and
    the Host header (``_set_target`` puts it back exactly)."""
    d = req.data
    return d.scheme, d.host, d.port, d.path, d.authority, d.headers.get("host")


def _set_target(req: http.Request, target: tuple) -> None:
    """Put back what ``_target_of`` read, without mitmproxy's URL parse (per turn, the
    ``url`` setter parses and rewrites the Host header twice)."""
    d = req.data
    d.scheme, d.host, d.port, d.path, d.authority, host = target
    if host is not None:
        d.headers["host"] = host
    elif "host" in d.headers:
        del d.headers["host"]


def _point_at(req: http.Request, scheme: str, host: str, port: int, path: str) -> None:
    """``req.url = scheme://host:port/path`` for a loopback host (the relay) without
    mitmproxy's URL parse: the same fields, Host header and authority as the setter makes."""
    d = req.data
    default = port == (443 if scheme == "https" else 80)
    hostport = host if default else f"{host}:{port}"
    d.scheme, d.host, d.port, d.path = scheme.encode(), host, port, path.encode()
    if "host" in d.headers:
        d.headers["host"] = hostport
    if d.authority:
        d.authority = hostport.encode()


def _client_body(flow: http.HTTPFlow, out: Outcome) -> bytes | None:
    """The reply the client got: the stream as kept, or the whole reply; None when neither."""
    if out.kept is not None:
        return out.kept
    if flow.response is not None and flow.response.raw_content is not None:
        return flow.response.get_content(strict=False)
    return None


def _soon(fn) -> None:
    """Run ``fn`` in the event loop's next step (at once outside a running loop); a failure
    is logged, never raised into mitmproxy."""
    def run() -> None:
        try:
            fn()
        except Exception:
            log.exception("tokunseba: recording a turn's start failed")

    try:
        asyncio.get_running_loop().call_soon(run)
    except RuntimeError:
        run()


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
            if "tokunseba.request_id" not in flow.metadata and not _is_provider_host(req, self.main.provider_hosts):
                return
            fields = req.headers.fields
            if any(is_credential_header(_field_name(k)) for k, _ in fields):  # one pass over the raw fields
                req.headers.fields = tuple((k, REDACTED_BYTES) if is_credential_header(_field_name(k)) else (k, v)
                                           for k, v in fields)
            if "?" in req.path:
                req.path = redact_query(req.path)
            elif KNOWN_SECRETS:
                req.path = KNOWN_SECRETS.redact_text(req.path)
        except Exception:
            log.exception("tokunseba: redacting the flow for display failed")


REDACTED_BYTES = REDACTED.encode()


def _field_name(raw: bytes) -> str:
    """A raw header field's name as mitmproxy's ``Headers`` gives it (``keys()``, ``pop``)."""
    return raw.decode("utf-8", "surrogateescape")


def _header_names(headers: http.Headers) -> dict[str, None]:
    """The header names, each once, in order: ``headers.keys()`` without its lookup per name."""
    return dict.fromkeys(_field_name(k) for k, _ in headers.fields)


def _is_provider_host(req: http.Request, extra_hosts: dict[str, str]) -> bool:
    host = req.pretty_host.lower()
    return host in provider_hosts() or host in extra_hosts or f"{host}:{req.port}" in extra_hosts


def _keep_client_close(r: http.Response, state: FlowState) -> None:
    """A client that asked for ``Connection: close`` gets it: mitmproxy closes the client's
    connection after a reply when the request or the reply says so, and a rewritten request
    no longer carries the client's hop-by-hop headers (a client reading to EOF would wait)."""
    if state.client_close and r.headers.get("connection", "").lower() != "close":
        r.headers["connection"] = "close"


def _looks_like_provider_call(flow: http.HTTPFlow, extra_hosts: dict[str, str]) -> bool:
    """Planning failed before detection: is this a provider call we must not let through?"""
    if not _is_provider_host(flow.request, extra_hosts):
        return False
    return flow.request.method == "POST" and guess(flow.request.path) is not None


def _guess_protocol(flow: http.HTTPFlow) -> str:
    """The client's protocol by its path (OpenAI Chat's envelope when the path says none)."""
    return guess(flow.request.path) or protocols.FALLBACK


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


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


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
