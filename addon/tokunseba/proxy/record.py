"""The record part: where a turn's end is written — the ledger, one span per turn, the shadow
waiting for the reply, the provider state kept, the console line.

Owns the options of what is kept (``tokunseba_ledger``, ``_ledger_bodies``, ``_instance``,
``_otlp_endpoint``, ``_otlp_bodies``, ``_shadow_concurrency``, ``_shadow_timeout_s``,
``_reasoning_store``, ``_reasoning_retention_h``, ``_reasoning_max``) and ``complete``: the
one call that records how a turn ended (reply.py calls it from the reply hooks).
"""

from __future__ import annotations

import gc
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import cast

from mitmproxy import ctx, exceptions, http

from ..ledger import Ledger, LedgerWriter, default_instance, instance_id, take_password
from ..pricing import Cost, warm_library
from ..reasoning import open_keeper
from ..routing import EarnBook
from ..shadow import ShadowSender
from ..outcomes import TurnOutcome
from ..turn import Ending
from ..turn import Chain
from ..turn import FlowState
from ..turn import Outcome
from ..turn import Turn
from ..webview import CLIENT_KEY, error_message
from . import otel_spans
from .core import Core, Part, client_body, log, present_outcome, upstream_ssl_context
from .budgeting import settle
from .recorder import after_sent
from .shadowing import primary_done

LEDGER_KEYS = {"tokunseba_ledger", "tokunseba_ledger_bodies", "tokunseba_instance"}
SPAN_KEYS = {"tokunseba_otlp_endpoint", "tokunseba_otlp_bodies", "tokunseba_instance"}
WARM_AFTER_S = 1.0  # the price library is loaded this long after running: the proxy listens first
SHADOW_KEYS = {"tokunseba_shadow_concurrency", "tokunseba_shadow_timeout_s"}
STORE_KEYS = {"tokunseba_ledger", "tokunseba_reasoning_store", "tokunseba_reasoning_retention_h",
              "tokunseba_reasoning_max"}


class Record(Part):
    KEYS = LEDGER_KEYS | SPAN_KEYS | SHADOW_KEYS | STORE_KEYS  # the options this part owns

    def configure(self, updated: set[str]) -> None:
        if SHADOW_KEYS & updated:
            self._configure_shadows()
        if LEDGER_KEYS & updated:
            self._open_ledger()
        if SPAN_KEYS & updated:
            if self.core.spans is not None:
                self.core.spans.close()
            self.core.spans = otel_spans.from_settings(ctx.options.tokunseba_otlp_endpoint,
                                                       bodies=ctx.options.tokunseba_otlp_bodies,
                                                       instance=ctx.options.tokunseba_instance or default_instance())
        if STORE_KEYS & updated:
            o, core = ctx.options, self.core
            if core.keeper is not None:
                core.keeper.store.close()
            try:
                core.keeper = open_keeper(o.tokunseba_reasoning_store, o.tokunseba_ledger,
                                          retention_h=o.tokunseba_reasoning_retention_h, max_entries=o.tokunseba_reasoning_max)
            except ValueError as e:
                raise exceptions.OptionsError(str(e)) from None

    def _open_ledger(self) -> None:
        """Open the ledger behind its writer thread, as a new owner of turns; turns left open
        by proxies that no longer run become interrupted."""
        core = self.core
        if core.ledger is not None:
            for state in list(core.flows.values()):  # a start the request hook left for the next step
                state.settle()
            core.recorder.start_all()
            core.ledger.close()
            core.ledger = None
        core.recorder.store_bodies = bool(ctx.options.tokunseba_ledger_bodies)
        if (clean := take_password(ctx.options.tokunseba_ledger)) is not None:
            # the password goes to libpq apart from the URL; the option (mitmweb shows it) loses it
            ctx.options.update(tokunseba_ledger=clean)
            return  # configure runs again with it, and opens the ledger
        try:
            led = Ledger(ctx.options.tokunseba_ledger or None, store_bodies=core.recorder.store_bodies)
        except Exception as e:
            raise exceptions.OptionsError(f"tokunseba: cannot open the ledger: {e}") from None
        led.owner = instance_id()
        led.instance = ctx.options.tokunseba_instance or default_instance()
        core.ledger = LedgerWriter(led)
        core.ledger.recover_interrupted()
        # earned routes: folded from the ledger's shadow comparisons (routing/earn.py), read in a
        # thread so that a large ledger never delays the start (a turn that needs them waits)
        core.earned = EarnBook(led.earn_comparisons)
        threading.Thread(target=core.earned.ready, name="tokunseba-earn-book", daemon=True).start()
        try:  # the windows the ledger knows, not yet reset (routing/quota.py QuotaBoard.load): one
            # indexed read of each account's newest rows, on a shared PostgreSQL ledger as on a file
            core.windows.board.load(led.quota_windows(), time.time())
        except Exception as e:
            log.warning(f"tokunseba: could not read the subscription windows the ledger holds: {e}")

    def _configure_shadows(self) -> None:
        o = ctx.options
        if o.tokunseba_shadow_concurrency < 0 or o.tokunseba_shadow_timeout_s <= 0:
            raise exceptions.OptionsError("tokunseba_shadow_concurrency must be 0 or more (0: no shadows) and "
                                          "tokunseba_shadow_timeout_s more than 0")
        if self.core.shadows is not None:  # changed while running (mitmweb's options)
            self.core.shadows.concurrency, self.core.shadows.timeout_s = o.tokunseba_shadow_concurrency, o.tokunseba_shadow_timeout_s

    def start(self) -> None:
        """At ``running``: the shadow sender (the ledger's writer takes its calls, on its own thread);
        the price library imported in a thread (~0.5 s), a second after, so that neither the
        proxy's start (scripts/bench/bench_startup.py) nor a turn's end waits for it."""
        warm = threading.Timer(WARM_AFTER_S, warm_and_freeze)
        warm.daemon, warm.name = True, "tokunseba-prices"
        warm.start()
        core = self.core
        core.shadows = ShadowSender(cast("Callable[[], Ledger | None]", lambda: core.ledger),
                                    concurrency=ctx.options.tokunseba_shadow_concurrency,
                                    timeout_s=ctx.options.tokunseba_shadow_timeout_s, env=os.environ,
                                    ssl_context=upstream_ssl_context(),
                                    observed=lambda *a: core.earned.observe(*a))

    def stop(self) -> None:
        """At ``done``: the store closed, shadows cancelled, open turns interrupted, the ledger and
        the spans closed (after the ledger: a collector that is down may take its 2 s)."""
        core = self.core
        if core.keeper is not None:
            core.keeper.store.close()
        if core.shadows is not None:
            for t in list(core.shadows.tasks):
                t.cancel()
        if core.ledger is not None:
            for state in list(core.flows.values()):  # a start the request hook left for the next step
                state.settle()
            core.recorder.start_all()
            core.ledger.interrupt_own()  # turns still open now will never complete
            core.ledger.close()
            core.ledger = None
        if core.spans is not None:
            core.spans.close()
            core.spans = None

    def complete(self, flow: http.HTTPFlow, state: FlowState, out: Outcome, *, defer: bool = False) -> None:
        """Record how the turn ended: its outcome, status, timings and usage as reported.

        A reply that is not what a clean turn would have sent (a translated stream without
        its terminal event, an upstream error event, a cut or reset; a passed-on stream the
        watch judged broken; a 2xx whole reply that is not JSON) is recorded as an error
        with the reason, whatever its status. With ``defer`` (the ``response`` hook, which
        mitmproxy calls before it writes the reply's last bytes) the console line, the span and the
        record are made once mitmproxy has handed those bytes to the client's connection
        (``recorder.after_sent``): none of them holds the client's reply back."""
        core, turn, status, usage = self.core, state.turn, out.status, out.usage
        if status is not None and status < 400 and turn.endpoint is not None and core.capacity.failures:
            core.capacity.ok(turn.endpoint)  # answered: its failures in a row start again
        now = time.time()
        details = dict(out.details)
        failed = judged_failed(flow, turn, out, details)
        fb = out.first_byte
        if fb is None and flow.response is not None and status is not None:
            fb = now  # whole (buffered) replies: first byte = when the reply left
        body = client_body(flow, out) if state.shadowed or core.recorder.store_bodies else None  # read only when kept
        primary_done(core.shadows, state, status, body)
        ending = Ending.of(turn, failed=failed, details=details)  # error, or capped by the endpoint's cap
        outcome = ending.outcome
        if turn.budget is not None and turn.budget.held:  # its holds become its charges, from usage as reported
            if (settled := settle(core.caps, turn, usage, now, status)) is not None:
                core.recorder.event(turn, "budget_settled", settled)
        if turn.capture is not None and turn.capture.kept:  # kept as the reply's stop passed (reasoning/store.py)
            core.recorder.event(turn, "state_kept", {"keys": turn.capture.kept, "endpoint": turn.capture.endpoint,
                                                     "model": turn.capture.model})
        present_outcome(flow, state, ending, status)
        record = core.recorder.completion(turn, out, outcome=outcome, details=details, now=now, first_byte=fb,
                                          chain=state.chain, attempt_at=state.attempt_at, body=body)

        def told() -> None:  # the console, the spans and the ledger: after the client has its last bytes
            self._told(flow, state, out, ending, now, record)
        if defer:
            after_sent(flow, told)
        else:
            told()

    def _told(self, flow: http.HTTPFlow, state: FlowState, out: Outcome, ending: Ending, now: float,
              record: Callable[[], None] | None) -> None:
        """What is said of a turn once its client has the reply: the console line (and the
        endpoint cap's line), the span, and the ledger's record."""
        core, turn, status, usage = self.core, state.turn, out.status, out.usage
        outcome, details = ending.outcome, dict(ending.details)
        cost = priced(ending, usage, core.prices) if core.spans is not None or log.isEnabledFor(logging.INFO) else None
        console(flow, turn, outcome, status, usage, now, state.chain, cost)
        if said := ending.cap_line():
            log.info(said)  # the endpoint's cap, not the client's, ended the reply (turn/cap_note.py)
        if core.spans is not None:  # the client's own headers (a rewritten request no longer has its traceparent)
            chain, headers = state.chain, core.replayable.get(flow.id, (None, flow.request.headers))[1]
            core.spans.turn_done(turn, outcome=outcome, status=status, usage=usage, details=details, end=now,
                                 response_model=out.model, cost=cost,
                                 attempts=len(chain.failed) + (not chain.gave_up) if chain and chain.failed else None,
                                 traceparent=headers.get("traceparent"), tracestate=headers.get("tracestate"),
                                 response_body=client_body(flow, out) if core.spans.bodies else None)
        if record is not None:
            record()


def warm_and_freeze() -> None:
    """The price library loaded, and what it made left out of the collector's view with the rest
    of start-up's objects (proxy/mitm.py ``settle_process``)."""
    warm_library()
    gc.freeze()


def judged_failed(flow: http.HTTPFlow, turn: Turn, out: Outcome, details: dict) -> bool:
    """Whether the turn ended in error: as the reply's watch judged it, or a problem the relay
    saw (a reset; noted in ``details``, the turn's error when it had none). An error reply's
    message becomes the turn's error, as `stats` counts it an error (ledger._kind)."""
    failed, status = out.failed, out.status
    if out.problem and not failed and turn.outcome not in ("cancelled", "refused"):
        failed = True
        turn.error = turn.error or out.problem  # a reset the relay saw says more than its symptom
        details["problem"] = out.problem
    if turn.error is None and status is not None and status >= 400 and flow.response is not None \
            and flow.response.raw_content is not None and turn.outcome != TurnOutcome.REFUSED:
        # an error reply (the upstream's, translated or not)
        turn.error = error_message(flow.response.get_content(strict=False)) or f"HTTP {status}"
    return failed


def priced(ending: Ending, usage, prices: list) -> Cost | None:
    """The turn's cost (turn/cost.py); None, said once as a warning, if pricing failed: a price
    is never worth a turn."""
    try:
        return ending.cost(usage, prices)
    except Exception as e:  # pragma: no cover (a bug in pricing must not cost the turn)
        log.warning("tokunseba: no cost for turn %s: %s", ending.turn.request_id, e)
        return None


def console(flow: http.HTTPFlow, turn: Turn, outcome: str, status: int | None, usage, now: float,
            chain: Chain | None = None, cost: Cost | None = None) -> None:
    """The turn's one console line (turn/console_line.py): what happened to it, as recorded."""
    if not log.isEnabledFor(logging.INFO):  # built only when log.info would emit it
        return
    try:
        log.info(Ending(turn, outcome).console_line(client=flow.metadata.get(CLIENT_KEY), status=status, usage=usage,
                                                    now=now, chain=chain, cost=cost))
    except Exception:
        log.exception("tokunseba: could not write the turn's console line")
