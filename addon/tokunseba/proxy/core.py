"""What the proxy's parts share, below them all: the state of the running proxy (``Core``)
and the few helpers on mitmproxy's flows that more than one part uses.

proxy/mitm.py chains the parts over one ``Core``: route.py (a request planned and applied, a
failed attempt's next one), reply.py (a reply on its way back), record.py (the ledger, spans,
shadows and the provider state store), web.py (what mitmweb and the terminal show). Each part
reads and writes the ``Core``; none holds another's state, and this module imports no part.

``Capacity`` here is turn/failover.py's cooldowns and slots with the one thing that needs the
event loop: waiting up to an endpoint's ``queue_s`` for a slot (``wait``).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from mitmproxy import ctx, http
from mitmproxy.hooks import UpdateHook

from ..budgets import Caps
from ..credentials import KNOWN_SECRETS, RedactingFilter
from ..ledger import LedgerWriter
from ..reasoning import Keeper
from ..pricing import Price
from ..routing import EarnBook, Endpoint, EndpointHealth, Rules, load_rules
from ..shadow import ShadowSender
from ..turn import Capacity as FailoverCapacity
from ..turn import Slot
from ..turn import FlowState
from ..turn import Outcome
from ..turn import LocalResponse, Turn
from ..turn import Ending
from ..protocols import has_windows
from ..turn import WindowWatch
from ..turn import RetryWatch
from . import otel_spans
from .options import named
from .provider_reach import Reach
from .recorder import TurnRecorder
from .relay import Relay

log = logging.getLogger("tokunseba")
for _logger in (log, logging.getLogger("tokunseba.ledger"), logging.getLogger("tokunseba.relay")):
    _logger.addFilter(RedactingFilter())  # keys never reach the logs, whatever a message quotes



class Capacity(FailoverCapacity):
    async def wait(self, ep: Endpoint, timeout: float) -> Slot | None:
        """A slot within ``timeout`` seconds (first come, first served), else None."""
        slot = self.acquire(ep)
        if slot is not None or timeout <= 0:
            return slot
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.queue(ep, fut)
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout)
        except (TimeoutError, asyncio.CancelledError):
            self.give_up(ep, fut)  # a slot handed over in the same instant goes back
            fut.cancel()
            return None
        return Slot(self, ep.name)


class Part:
    """One of the addon's parts over the shared ``Core`` (route, reply, record, web: proxy/mitm.py
    chains them): it owns the options named in ``KEYS`` (mitmproxy calls its ``load`` and
    ``configure``)."""

    KEYS: set[str] = set()

    def __init__(self, core: "Core") -> None:
        self.core = core

    def load(self, loader) -> None:
        for o in named(self.KEYS):
            loader.add_option(o.name, o.type, o.default, o.help, choices=o.choices)


class Core:
    """The running proxy's state, one for all its parts."""

    def __init__(self) -> None:
        self.rules: Rules = load_rules(None)  # route.py loads them (tokunseba_rules) and reloads them
        self.prices: list[Price] = []  # the rules file's prices: (pricing/table.py), loaded with the rules
        self.recorder = TurnRecorder()  # the ledger's writer and each turn's records, in order (proxy/recorder.py)
        self.flows: dict[str, FlowState] = {}  # flow id -> its state, while in flight
        self.health = EndpointHealth()  # passive: a failed connect marks an endpoint down for a back-off
        self.capacity = Capacity()  # cooldowns (retry-after) and max_concurrency slots, across reloads
        self.retries = RetryWatch()  # a request that repeats a recent one of its session (turn/retries.py)
        self.provider_hosts: dict[str, str] = {}
        self.relay = Relay()
        self.reach = Reach()  # pass-through provider hosts: connected to before mitmproxy does (proxy/provider_reach.py)
        self.reach_ssl: ssl.SSLContext | None = None
        self.shadows: ShadowSender | None = None
        self.earned = EarnBook()  # earned routes' strata, folded from the ledger's shadows (routing/earn.py)
        self.spans: otel_spans.TurnSpans | None = None  # one OpenTelemetry span per turn, when a collector is named
        self.keeper: Keeper | None = None  # provider state of translated tool loops (reasoning/store.py)
        self.caps: Caps | None = None  # the rules' spending caps over the ledger (proxy/budgeting.py)
        self.windows = WindowWatch()  # subscription windows seen in replies, per account (turn/quota_seen.py)
        # flow id -> the client's own URL and headers (credentials included) of a rewritten
        # flow, so mitmweb's Replay can send the client's turn through the rules again. Apart
        # from FlowState: a replay comes after the flow ended, so this outlives it (bounded).
        self.replayable: OrderedDict[str, tuple[str, http.Headers]] = OrderedDict()

    @property
    def ledger(self) -> LedgerWriter | None:
        return self.recorder.ledger

    @ledger.setter
    def ledger(self, writer: LedgerWriter | None) -> None:
        self.recorder.ledger = writer


def note_windows(core: Core, turn: Turn, sent: Callable[[], Any], fields: Any) -> None:
    """The subscription windows a reply of ``turn``'s attempt reported (``fields``: its raw header
    fields; ``sent()``: the attempt's request header fields, asked only when there are windows):
    on the board, in the ledger, said on the console when a header was skipped or a threshold a
    rule names crossed (turn/quota_seen.py). Never alters the reply."""
    if not has_windows(fields):  # most replies: one pass over the header names
        return
    try:
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in fields]
        seen = core.windows.reply(turn, sent(), headers, time.time())
    except Exception:
        log.exception("tokunseba: could not read a reply's subscription windows")
        return
    if seen is None:
        return
    for line in seen.lines:
        log.warning(line)
    if seen.event is not None:
        core.recorder.event(turn, *seen.event)
    if seen.rows and core.ledger is not None:
        core.ledger.quota_windows(seen.rows)


def respond(flow: http.HTTPFlow, lr: LocalResponse) -> http.Response:
    """Answer the flow here, with ``lr``."""
    flow.response = r = http.Response.make(lr.status, lr.body, lr.headers)
    return r


def present_outcome(flow: http.HTTPFlow, state: FlowState, ending: Ending, status: int | None) -> None:
    """The turn has ended: its mark and comment say so (turn/ending.py ``Ending.present``), pushed
    to mitmweb's open pages (mitmdump has no view: nothing to update)."""
    if ending.present(flow, state, status) and ctx.master.addons.get("view") is not None:
        try:
            ctx.master.addons.trigger(UpdateHook([flow]))
        except Exception:
            log.exception("tokunseba: could not update the flow's mark and comment")


def keep_client_close(r: http.Response, state: FlowState) -> None:
    """A client that asked for ``Connection: close`` gets it: mitmproxy closes the client's
    connection after a reply when the request or the reply says so, and a rewritten request
    no longer carries the client's hop-by-hop headers (a client reading to EOF would wait)."""
    if state.client_close and r.headers.get("connection", "").lower() != "close":
        r.headers["connection"] = "close"


def client_body(flow: http.HTTPFlow, out: Outcome) -> bytes | None:
    """The reply the client got: the stream as kept, or the whole reply; None when neither."""
    if out.kept is not None:
        return out.kept
    if flow.response is not None and flow.response.raw_content is not None:
        return flow.response.get_content(strict=False)
    return None


def option(name: str, default):
    """An option's value, or ``default`` where the addon defining it is not loaded (proxyauth)."""
    return getattr(ctx.options, name) if name in ctx.options else default


def redact_whole_reply(r: http.Response, turn: Turn) -> None:
    """An endpoint key echoed back in a whole (buffered) reply is redacted by value before the
    client, the ledger or the logs see it (streams: Pump)."""
    if not turn.key_injected or not KNOWN_SECRETS or r.raw_content is None:
        return
    body = r.get_content(strict=False) or b""
    clean = KNOWN_SECRETS.redact_bytes(body)
    if clean != body:
        r.content = clean


def upstream_ssl_context() -> ssl.SSLContext:
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


def upstream_proxy_mode() -> bool:
    """mitmproxy sends through an upstream proxy (``--mode upstream:…``)."""
    return any(str(m).startswith("upstream:") for m in ctx.options.mode)


