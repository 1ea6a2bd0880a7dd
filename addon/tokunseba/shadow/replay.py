"""Replay: re-send a recorded turn to an endpoint, now, and compare with what was recorded.

The turn's request body must be stored (``tokunseba run --ledger-bodies``, or a shadowed
turn, whose shadow row keeps it). The request goes through the same translators as a
routed turn (shadow.build_request: non-streamed, the endpoint's own key, never the
client's), the reply is translated into the client's protocol (shadow.reply_for_client),
and the result is recorded as a ``replay`` row linked to the original request id, with its
status, latency, usage as the endpoint reported it, drops, and the comparison with the
recorded reply. Errors a user can fix are ``ReplayError`` with a one-line message.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

import httpx

from .. import protocols
from ..routing import Endpoint
from ..errors import TranslationError
from ..ledger import Ledger
from ..protocols import detect
from .reply_facts import Facts, reply_facts
from .turns import build_request, compare, reply_for_client
from ..neutral import Usage



class ReplayError(Exception):
    """A replay that cannot be done; ``str(e)`` is one line."""


@dataclass
class Replayed:
    row: dict  # the replay row as recorded (what `explain` shows)
    client_status: int
    client_body: bytes  # the new reply in the client's protocol


def stored_bodies(ledger: Ledger, turn: dict) -> tuple[bytes, bytes | None, str | None]:
    """(request body, recorded reply or None, origin host:port or None) of a recorded turn."""
    request, reply, origin = turn.get("request_body"), turn.get("response_body"), None
    for row in reversed(ledger.shadows(request_id=turn["request_id"], bodies=True)):
        request = request or row.get("request_body")
        reply = reply or row.get("primary_body")
        origin = origin or row.get("origin")
    if not request:
        raise ReplayError(f"turn {turn['request_id']} has no stored request body: replay needs turns recorded with "
                          f"`tokunseba run --ledger-bodies`, or turns of a route with `shadow:`")
    return bytes(request), bytes(reply) if reply else None, origin


def _at_original(ep: Endpoint, turn: dict, origin: str | None) -> bool:
    """Is ``ep`` the provider the client addressed? (A provider API is HTTPS when the port is unknown.)"""
    host, _, port = (origin or "").rpartition(":")
    if host and port.isdigit():
        return ep.same_host(host, int(port))
    return ep.same_host(turn.get("host") or "", 443)


def _recorded_kind(turn: dict) -> str:
    """The request kind a recorded turn was, read from its path by detection (a token count
    is not a turn); "" when its path is not one of its protocol's."""
    client = turn.get("client_protocol") or ""
    facts = protocols.find(client)
    if facts is None:
        return ""
    det = detect("recorded.invalid", turn.get("path") or "", extra_hosts={"recorded.invalid": client})  # any prefix
    return det.kind if det is not None else facts.turn_kind(False)


def replay(ledger: Ledger, turn: dict, ep: Endpoint, env: Mapping[str, str], *, timeout: float) -> Replayed:
    client = turn.get("client_protocol") or ""
    kind = _recorded_kind(turn)
    body, recorded, origin = stored_bodies(ledger, turn)
    try:
        out = build_request(client, kind, body, ep, env)
    except TranslationError as e:
        raise ReplayError(f"cannot replay turn {turn['request_id']} to {ep.name}: {e.message}") from None
    started = time.time()
    t0 = time.monotonic()
    status, raw, error = None, b"", None
    try:
        with httpx.Client(trust_env=False, timeout=timeout) as c:
            r = c.post(out.url, content=out.body, headers=out.headers)
        status, raw = r.status_code, r.content
    except httpx.HTTPError as e:
        error = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
    latency = round((time.monotonic() - t0) * 1000, 3)
    native = reply_facts(ep.protocol, raw, status) if error is None else Facts(error=error)
    client_status, client_body = status or 502, b""
    facts = native
    if error is None:
        assert status is not None  # (an HTTP reply came back)
        try:
            client_status, client_body = reply_for_client(ep.protocol, client, status, raw)
            facts = reply_facts(client, client_body, client_status)
            facts.usage, facts.usage_protocol = native.usage, native.usage_protocol  # usage as reported
        except TranslationError as e:
            error = e.message
            facts = Facts(error=e.message)
    primary = reply_facts(client, recorded, turn.get("status")) if recorded else Facts(error="the recorded reply was not stored")
    usage = Usage(native.usage_protocol, native.usage) if native.usage and native.usage_protocol else None
    row = dict(route=turn.get("rule"), endpoint=ep.name, target_protocol=ep.protocol, model=out.model, origin=origin,
               at_original=int(_at_original(ep, turn, origin)), status=status, latency_ms=latency,
               error=error or facts.error, dropped=out.dropped, facts=facts.to_json(), primary_facts=primary.to_json(),
               comparison=compare(primary, facts))
    ledger.add_shadow(turn["request_id"], "replay", started_at=started, usage=usage, request_body=body,
                      response_body=raw or None, primary_body=recorded, **row)
    return Replayed({"kind": "replay", "request_id": turn["request_id"], **row, "usage_reported": native.usage,
                     "plumbing": out.plumbing}, client_status, client_body)
