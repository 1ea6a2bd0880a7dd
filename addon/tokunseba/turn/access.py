"""Who may have a turn routed: never an open proxy that spends the user's keys (issue 8, item 1).

A turn routed to another host carries the endpoint's own key (``key_env``) and may reach
loopback-only model servers. mitmproxy's ``block_global`` only refuses *public* source
addresses, so a neighbour on the LAN could otherwise use both. Such a turn is therefore
answered with an error in the client's protocol (and recorded) unless the client is on
loopback, or the user opted in: mitmproxy's ``proxyauth`` is set (clients authenticate), or
the addon option ``tokunseba_allow_remote_clients`` is true.

Turns that stay with the host the client asked for (pass-through, same-host retarget) carry
the client's own credentials only and are left to mitmproxy's own access rules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..addresses import is_loopback
from ..states import Action

if TYPE_CHECKING:  # a type only
    from .plan import Turn


def may_spend_keys(peer_host: str | None, *, proxyauth: bool, allow_remote: bool) -> bool:
    """Whether this client's turns may use endpoint keys: routed turns and shadows alike."""
    return is_loopback(peer_host) or proxyauth or allow_remote


def refuse_remote_client(turn: Turn, peer_host: str | None, *, proxyauth: bool, allow_remote: bool) -> bool:
    """Turn a routed-elsewhere turn from a non-loopback client without opt-in into a local
    403 in the client's protocol. True when it did."""
    if turn.keep_headers is None or turn.local is not None:  # not leaving for another host
        return False
    if may_spend_keys(peer_host, proxyauth=proxyauth, allow_remote=allow_remote):
        return False
    why = (f"client {peer_host or '?'} is not on loopback: tokunseba does not route its turns to endpoints "
           "(nor spend their keys) unless the proxy requires authentication (proxyauth) or "
           "tokunseba_allow_remote_clients is set")
    turn.action, turn.outcome, turn.error = Action.RESPOND, "refused", why
    turn.set_headers.clear()
    turn.key_injected = False
    turn.events.append(("remote_client_refused", {"peer": peer_host, "reason": why}))
    turn.local = turn.client_error(403, f"tokunseba: {why}", "permission_error")
    return True
