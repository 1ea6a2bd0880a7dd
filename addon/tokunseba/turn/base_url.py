"""How a turn came in, and what a base-URL (reverse) listener may forward (issue 30).

`tokunseba run` listens two ways in one mitmproxy: the HTTPS proxy (clients send CONNECT and
trust mitmproxy's CA) and one plain-HTTP loopback listener per provider host, each a
mitmproxy reverse proxy to that host (``--mode reverse:https://api.anthropic.com@PORT``), for
clients pointed at a base URL. mitmproxy sets a reverse flow's target (scheme, host, port)
from its listener and rewrites its ``Host`` to that host before any hook runs, so such a flow
reaches the same hooks, detection, rules, translation, failover and ledger as a proxied flow
to the same host.

Contract (plain values, no mitmproxy; proxy/route.py reads the flow's ``proxy_mode``):

- ``PROXY`` / ``BASE_URL``: the values of ``Turn.via`` and the ledger's ``via`` column.
- ``misdirected(listener_host, host, path)``: a listener forwards only to its own provider
  host. A request whose host (its ``Host`` header, as detection reads it) is another one
  (only possible with mitmproxy's ``keep_host_header``) is answered 421 in the client's
  protocol, never forwarded: otherwise detection would take it for the other host's turn
  while mitmproxy sent it, with the client's key, to the listener's host.
"""

from __future__ import annotations

from ..protocols import guess
from .. import protocols
from .plan import LocalResponse

PROXY = "proxy"  # came through the HTTPS proxy (CONNECT, mitmproxy's CA)
BASE_URL = "base_url"  # came to a reverse listener the client's base URL points at

MISDIRECTED = 421  # RFC 9110: the request was directed at a server that will not answer for that host


def _bare(host: str) -> str:
    h = host.strip().lower().rstrip(".")
    if h.startswith("["):  # [::1]:8080
        return h[1:].split("]", 1)[0]
    return h.rsplit(":", 1)[0] if h.count(":") == 1 else h


def misdirected(listener_host: str, host: str, path: str) -> LocalResponse | None:
    """None when ``host`` is the listener's own provider host; else the 421 the client gets."""
    if _bare(host) == _bare(listener_host):
        return None
    return LocalResponse.error(guess(path) or protocols.FALLBACK, MISDIRECTED,
                        f"tokunseba: this base URL forwards only to {listener_host}; the request named "
                        f"{_bare(host) or 'no host'}, so it was not sent anywhere", "invalid_request_error")


def client_label(name: str, via: str) -> str:
    """The client's name on the console line and in mitmweb: marked when it came by a base URL."""
    return f"{name} (base URL)" if via == BASE_URL else name
