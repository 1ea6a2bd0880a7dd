"""How a turn came in, and what a base-URL (reverse) listener may forward (issue 30).

`tokunseba run` listens two ways in one mitmproxy: the HTTPS proxy (clients send CONNECT and
trust mitmproxy's CA) and one plain-HTTP loopback listener per provider host, each a
mitmproxy reverse proxy to that host (``--mode reverse:https://api.anthropic.com@PORT``), for
clients pointed at a base URL. mitmproxy sets a reverse flow's target (scheme, host, port)
from its listener and rewrites its ``Host`` to that host before any hook runs, so such a flow
reaches the same hooks, detection, rules, translation, failover and ledger as a proxied flow
to the same host.

Contract (plain values, no mitmproxy; proxy/route.py reads the flow's ``proxy_mode``):

- ``Arrival(listener)``: how one flow came in (``listener``: the base-URL listener's provider
  host; None: through the HTTPS proxy); its ``via``, one of ``PROXY`` / ``BASE_URL``: the values
  of ``Turn.via`` and the ledger's ``via`` column.
- ``Arrival.client(user_agent, protocol)``: the client's name as the console line and mitmweb
  show it (turn/console_line.py ``client_name``), marked when it came by a base URL
  (``client_label``).
- ``Arrival.misdirected(host, path)``: a listener forwards only to its own provider
  host. A request whose host (its ``Host`` header, as detection reads it) is another one
  (only possible with mitmproxy's ``keep_host_header``) is answered 421 in the client's
  protocol, never forwarded: otherwise detection would take it for the other host's turn
  while mitmproxy sent it, with the client's key, to the listener's host.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..protocols import guess
from .. import protocols
from .console_line import client_name
from .plan import LocalResponse

PROXY = "proxy"  # came through the HTTPS proxy (CONNECT, mitmproxy's CA)
BASE_URL = "base_url"  # came to a reverse listener the client's base URL points at

MISDIRECTED = 421  # RFC 9110: the request was directed at a server that will not answer for that host


def _bare(host: str) -> str:
    h = host.strip().lower().rstrip(".")
    if h.startswith("["):  # [::1]:8080
        return h[1:].split("]", 1)[0]
    return h.rsplit(":", 1)[0] if h.count(":") == 1 else h


@dataclass(frozen=True, slots=True)
class Arrival:
    """How one flow came in: to the base-URL listener of ``listener`` (its provider host), or
    through the HTTPS proxy (None)."""

    listener: str | None = None

    @property
    def via(self) -> str:
        return PROXY if self.listener is None else BASE_URL

    def client(self, user_agent: str | None, protocol: str) -> str:
        """The client's name on the console line and in mitmweb (from its User-Agent, else its
        protocol), marked when it came by a base URL."""
        return client_label(client_name(user_agent, protocol), self.via)

    def misdirected(self, host: str, path: str) -> LocalResponse | None:
        """None when ``host`` is the listener's own provider host (or the flow came through the
        proxy); else the 421 the client gets."""
        listener = self.listener
        if listener is None or _bare(host) == _bare(listener):
            return None
        return LocalResponse.error(guess(path) or protocols.FALLBACK, MISDIRECTED,
                                   f"tokunseba: this base URL forwards only to {listener}; the request named "
                                   f"{_bare(host) or 'no host'}, so it was not sent anywhere", "invalid_request_error")


def client_label(name: str, via: str) -> str:
    """The client's name on the console line and in mitmweb: marked when it came by a base URL."""
    return f"{name} (base URL)" if via == BASE_URL else name
