"""Can a pass-through provider turn's host be reached? Asked before mitmproxy connects to it.

Why: when mitmproxy cannot open a flow's upstream connection (the name does not resolve,
the connection is refused, the TLS handshake fails, nothing answers in time) it answers
the client with its own HTML ``502`` page from its error path, which no addon can replace
(docs/dev/mitmproxy.md §4): the client gets no error in its own protocol, no request id, no host
named. Routed turns go through the relay (proxy/relay.py), which connects before the turn is
committed; a turn passed through to the provider's own host does not. So before such a
turn leaves, the adapter asks ``Reach.check`` for that host, and an ``Unreachable``
answer becomes an error in the client's protocol (``answer_unreachable``), recorded in
the ledger like any other turn.

Contract:
- ``check(host, port, tls=…, ssl_context=…, timeout=…)`` opens a connection as mitmproxy
  would (TCP, then TLS with SNI = host, verified with ``ssl_context``), closes it, and
  returns None when it worked or an ``Unreachable`` saying why. It never raises.
- Cost on the healthy path: a host that answered within ``fresh_s`` seconds (a turn to it
  got a reply: ``answered``; or a check passed) is not checked again; concurrent checks of
  one host share one connect. ``forget`` (a turn to it failed in mitmproxy's error path)
  makes the next turn check again.
- At start (and after a rules reload) the adapter connects once to every endpoint a route
  sends turns to (``endpoints_in_use``). For each one that fails, one warning line
  (``unreachable_line``) names the endpoint, its URL, why, and the consequence for each route
  that uses it, so a mis-set endpoint (a local server started on another port) is said at once
  instead of every easy turn quietly going elsewhere:

    tokunseba: endpoint local (http://127.0.0.1:28431/v1) cannot be reached now: connection refused.
    Until it can: turns of route claude-background go to the next route whose when matches, else
    pass through to their provider. Check it with: tokunseba models --probe --endpoint local
- Pure of mitmproxy; asyncio only.
"""

from __future__ import annotations

import asyncio
import logging
import shlex
import socket
import ssl
import time
from dataclasses import dataclass
from typing import Any

from ..routing import Endpoint, EndpointHealth, OnFailure, Rules, Unmatched
from ..turn import Turn
from ..states import Action

log = logging.getLogger("tokunseba")

FRESH_S = 30.0  # a host that answered this recently is not checked again


@dataclass(frozen=True)
class Unreachable:
    """Why a host could not be reached: ``kind`` is dns | refused | tls | timeout | connect."""

    host: str
    port: int
    kind: str
    reason: str

    @property
    def status(self) -> int:
        """504 Gateway Timeout when nothing answered in time; 502 Bad Gateway otherwise."""
        return 504 if self.kind == "timeout" else 502

    def message(self, asked: str | None = None, request_id: str | None = None) -> str:
        """One line naming the host (as the client asked for it, and where it was sought
        when that differs), the reason, and the turn's request id (clients show the message,
        rarely the headers: ``tokunseba explain ID``)."""
        where = f"{self.host}:{self.port}"
        name = where if not asked or asked in (self.host, where) else f"{asked} (at {where})"
        rid = f" (request {request_id})" if request_id else ""
        return f"tokunseba: cannot reach {name}: {self.reason}; the turn was not sent{rid}"


def describe(exc: BaseException, host: str, port: int, timeout: float) -> Unreachable:
    """An exception from connecting to ``host:port`` as an ``Unreachable`` in plain words."""
    if isinstance(exc, socket.gaierror):
        return Unreachable(host, port, "dns", f"the name does not resolve ({exc.strerror or exc})")
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        return Unreachable(host, port, "timeout", f"no connection within {timeout:g} s")
    if isinstance(exc, ssl.SSLCertVerificationError):
        return Unreachable(host, port, "tls", f"TLS certificate not trusted ({getattr(exc, 'verify_message', None) or exc})")
    if isinstance(exc, ssl.SSLError):
        return Unreachable(host, port, "tls", f"TLS handshake failed ({getattr(exc, 'reason', None) or exc})")
    if isinstance(exc, ConnectionRefusedError):
        return Unreachable(host, port, "refused", "connection refused")
    if isinstance(exc, (ConnectionResetError, ConnectionAbortedError, EOFError)):
        # a server that drops the connection during the TLS handshake
        return Unreachable(host, port, "tls", f"connection closed during the handshake ({exc or type(exc).__name__})")
    if isinstance(exc, UnicodeError):  # idna: an empty or too long label
        return Unreachable(host, port, "dns", f"not a valid host name ({exc})")
    text = str(exc) or type(exc).__name__
    return Unreachable(host, port, "connect", text)


class Reach:
    """Which provider hosts answered lately, and the shared checks of those that did not."""

    def __init__(self, fresh_s: float = FRESH_S) -> None:
        self.fresh_s = fresh_s
        self.answered_at: dict[tuple[str, int], float] = {}
        self.pending: dict[tuple[str, int, bool], asyncio.Future] = {}
        self.checks = 0  # connects made (for tests and benchmarks)

    def answered(self, host: str, port: int) -> None:
        self.answered_at[(host.lower(), port)] = time.monotonic()

    def forget(self, host: str, port: int) -> None:
        self.answered_at.pop((host.lower(), port), None)

    def fresh(self, host: str, port: int) -> bool:
        at = self.answered_at.get((host.lower(), port))
        return at is not None and time.monotonic() - at < self.fresh_s

    async def check(self, host: str, port: int, *, tls: bool, ssl_context: ssl.SSLContext | None,
                    timeout: float) -> Unreachable | None:
        if self.fresh(host, port):
            return None
        key = (host.lower(), port, tls)
        fut = self.pending.get(key)
        if fut is None:
            fut = asyncio.ensure_future(self._connect(host, port, tls, ssl_context, timeout))
            self.pending[key] = fut
            fut.add_done_callback(lambda _f: self.pending.pop(key, None))
        try:
            return await asyncio.shield(fut)
        except Exception as e:  # pragma: no cover - _connect catches its own
            return describe(e, host, port, timeout)

    async def _connect(self, host: str, port: int, tls: bool, ssl_context: ssl.SSLContext | None,
                       timeout: float) -> Unreachable | None:
        self.checks += 1
        try:
            if tls and ssl_context is None:
                ssl_context = ssl.create_default_context()
            _, writer = await asyncio.wait_for(
                asyncio.open_connection(host, port, ssl=ssl_context if tls else None,
                                        server_hostname=host if tls else None), timeout)
        except Exception as e:
            return describe(e, host, port, timeout)
        writer.close()
        self.answered(host, port)
        return None


def answer_unreachable(turn: Turn, bad: Unreachable, asked: str | None = None) -> None:
    """Make ``turn`` answer its client, in the client's protocol, that its host cannot be
    reached (status 502, or 504 on a timeout), recorded as an error with the reason."""
    msg = bad.message(asked, turn.request_id)
    turn.action, turn.outcome, turn.error = Action.RESPOND, "error", msg
    turn.url = None
    turn.local = turn.client_error(bad.status, msg)
    turn.events.append(("upstream_unreachable", {"host": bad.host, "port": bad.port, "kind": bad.kind,
                                                 "message": bad.reason}))


# ---- at start: the endpoints in use that cannot be reached

def endpoints_in_use(rules: Rules) -> list[Endpoint]:
    """The endpoints routes send turns to (``to``, ``shadow``, ``earn``'s candidate), each once, in route order."""
    names: list[str] = []
    for r in rules.routes:
        for name in (r.to, r.shadow, r.earn.to if r.earn is not None else None):
            if name and name not in names and name in rules.endpoints:
                names.append(name)
    return [rules.endpoints[n] for n in names]


def unreachable_line(rules: Rules, ep: Endpoint, why: str, cli: str = "tokunseba") -> str:
    """The warning for an endpoint that cannot be reached: why, and what each route that uses
    it does with its turns meanwhile (``cli``: how to call tokunseba here)."""
    unmatched = ("pass through to their provider" if rules.unmatched == Unmatched.PASS
                 else "are refused (unmatched: refuse)")
    parts = []
    nexts = [r.name for r in rules.routes if r.to == ep.name and r.on_failure == OnFailure.NEXT]
    errors = [r.name for r in rules.routes if r.to == ep.name and r.on_failure == OnFailure.ERROR]
    shadows = [r.name for r in rules.routes if r.shadow == ep.name]
    if nexts:
        parts.append(f"turns of route{'s' if len(nexts) > 1 else ''} {', '.join(nexts)} go to the next route whose "
                     f"when matches, else {unmatched}")
    if errors:
        parts.append(f"turns of route{'s' if len(errors) > 1 else ''} {', '.join(errors)} get an error in their "
                     f"client's protocol (on_failure: error)")
    if shadows:
        parts.append(f"the shadows of route{'s' if len(shadows) > 1 else ''} {', '.join(shadows)} fail (recorded)")
    rules_arg = f" --rules {shlex.quote(rules.source)}" if rules.source and not rules.source.startswith("<") else ""
    return (f"tokunseba: endpoint {ep.name} ({ep.url}) cannot be reached now: {why}. Until it can: "
            f"{'; '.join(parts) or 'no route uses it'}. Check it with: {shlex.quote(cli)} models{rules_arg} "
            f"--probe --endpoint {ep.name}")


async def check_endpoints(rules: Rules, relay: Any, health: EndpointHealth, *, timeout: float, cli: str) -> None:
    """Connect once to every endpoint in use, at once (``relay``: proxy/relay.py's ``Relay``):
    each one that cannot be reached is said in one warning (``unreachable_line``) and starts in
    its back-off (``health``); a connection that worked waits in the relay's pool for the
    first turn. Never raises."""

    async def one(ep: Endpoint) -> None:
        try:
            conn = await relay.connect(ep.url, timeout)
        except Exception as e:
            why = describe(e, ep.host, ep.port, timeout).reason
            health.failed(ep, why)
            log.warning(unreachable_line(rules, ep, why, cli=cli))
            return
        relay.pool.put(conn)

    try:
        await asyncio.gather(*(one(ep) for ep in endpoints_in_use(rules)))
    except Exception:
        log.exception("tokunseba: checking the endpoints at start failed")
