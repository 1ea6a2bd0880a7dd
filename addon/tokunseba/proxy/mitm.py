"""The mitmproxy addon: one ``Core`` and the parts chained over it, in the manner of
mitmproxy's ``default_addons()`` (docs/dev/architecture.md §3).

``Tokunseba`` is what ``mitmdump -s addon/tokunseba_addon.py`` loads. Its parts (``parts``):
route.py, reply.py, record.py and web.py, each loading and configuring its own options, called
from Tokunseba's ``load`` / ``configure`` in that order. They are not mitmproxy's ``addons`` of
it: mitmproxy walks an addon's ``addons`` on every hook of every flow (each WebSocket message
twice: its hook and the flow's update), and the parts have no hook of their own. The flow hooks and the
life-cycle hooks are Tokunseba's, a few lines each, calling the parts in a fixed order: the
order is in one place, and a test drives the whole addon as mitmproxy does. Fail closed: any
exception while handling a provider call answers the client with an error in its own
protocol; a translated turn never falls through to the original host.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable

from mitmproxy import command, ctx, http

from ..ledger import LedgerWriter
from ..routing import EndpointHealth, Rules
from ..turn import FlowState
from ..webview import MARKS, ORIGINAL_KEY
from .core import Core, upstream_ssl_context
from .web import quiet_unheard_log_events, unquiet
from .provider_reach import Reach
from .record import Record
from .relay import Relay
from .reply import Reply
from .route import Route
from .web import REDACTED_BYTES, DisplayRedaction, OriginalRequestView, Web
from .websocket import WebSockets

__all__ = ["Tokunseba", "DisplayRedaction", "OriginalRequestView", "MARKS", "ORIGINAL_KEY", "REDACTED_BYTES"]

# The event loop is the proxy's one hot thread; the ledger's writer (and the span exporter) run
# beside it. Python hands the interpreter to a thread that waits for it only after the switch
# interval (5 ms by default): a turn's hooks could wait that long behind the writer building a
# batch. At 0.5 ms the loop gets it back within half a millisecond (scripts/bench/bench_proxy.py:
# the p95 of a passed-through 48.5 KB turn fell from ~2x bare mitmdump's to ~1x).
SWITCH_INTERVAL_S = 0.0005


class Tokunseba:
    def __init__(self) -> None:
        self.core = core = Core()
        self.route, self.record, self.web = Route(core), Record(core), Web(core)
        self.reply = Reply(core, self.record)
        self.websockets = WebSockets(core)  # Responses over WebSocket: each message a turn
        self.parts = (self.route, self.reply, self.record, self.web)  # each loads and configures its own options

    # ---- its parts' options
    def load(self, loader) -> None:
        for part in self.parts:
            part.load(loader)

    def configure(self, updated: set[str]) -> None:
        for part in self.parts:
            part.configure(updated)

    # ---- hooks
    async def request(self, flow: http.HTTPFlow) -> None:
        if flow.response is not None or flow.id in self.core.flows:
            return
        if flow.is_replay != "request" or self.web.replayable(flow):  # mitmweb's Replay: the client's request back
            await self.route.on_request(flow)

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        self.reply.headers_in(flow)

    def response(self, flow: http.HTTPFlow) -> None:
        self.reply.reply_in(flow)

    def error(self, flow: http.HTTPFlow) -> None:
        self.reply.failed(flow)

    def websocket_start(self, flow: http.HTTPFlow) -> None:
        self.websockets.started(flow)

    def websocket_message(self, flow: http.HTTPFlow) -> None:
        self.websockets.message(flow)

    def websocket_end(self, flow: http.HTTPFlow) -> None:
        self.websockets.ended(flow)

    async def running(self) -> None:
        if ctx.options.connection_strategy != "lazy":
            ctx.options.update(connection_strategy="lazy")
        self.core.relay.set_ssl_context(upstream_ssl_context())
        self.core.reach_ssl = upstream_ssl_context()
        await self.route.start()
        self.web.start()
        self.record.start()
        quiet_unheard_log_events(ctx.master)  # the add_log event only when an addon listens (proxy/web.py)
        settle_process()

    def done(self) -> None:
        self.route.stop()
        self.websockets.stop()
        self.core.relay.stop()
        self.record.stop()
        unquiet(ctx.master)
        gc.unfreeze()  # what settle_process froze is the collector's again (an embedding that goes on)

    @command.command("tokunseba.status")
    def status(self) -> str:
        return f"rules={self.rules.source} routes={len(self.rules.routes)} in-flight={len(self.flows)}"

    # ---- what a test or a benchmark reads of the running addon
    @property
    def rules(self) -> Rules:
        return self.core.rules

    @property
    def flows(self) -> dict[str, FlowState]:
        return self.core.flows

    @property
    def relay(self) -> Relay:
        return self.core.relay

    @property
    def reach(self) -> Reach:
        return self.core.reach

    @property
    def health(self) -> EndpointHealth:
        return self.core.health

    @property
    def provider_hosts(self) -> dict[str, str]:
        return self.core.provider_hosts

    @property
    def ledger(self) -> LedgerWriter | None:
        return self.core.ledger

    @property
    def unstarted(self) -> dict[str, Callable[[bool], None]]:
        """Request id -> the records of its start, until queued (proxy/recorder.py START_AFTER_S)."""
        return self.core.recorder.unstarted

    @property
    def rules_checked(self) -> float:
        return self.route.rules_checked

    @rules_checked.setter
    def rules_checked(self, when: float) -> None:
        self.route.rules_checked = when

    def _maybe_reload_rules(self) -> None:
        self.route.maybe_reload_rules()


def settle_process() -> None:
    """Once the proxy runs: the event loop gets the interpreter back quickly from the other
    threads (``SWITCH_INTERVAL_S``), and what start-up made (mitmproxy's and tokunseba's modules,
    the rules, the ledger's connection: about 100,000 objects) leaves the collector's view
    (``gc.freeze``, at once: no collection delays the start; again once the price library is
    loaded, record.py): a full collection then walks only what turns made since, instead of
    stopping a turn for tens of milliseconds every few hundred turns."""
    if sys.getswitchinterval() > SWITCH_INTERVAL_S:
        sys.setswitchinterval(SWITCH_INTERVAL_S)
    gc.freeze()
