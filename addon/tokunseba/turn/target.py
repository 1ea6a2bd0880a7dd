"""Where a request goes, and which requests are provider calls, as mitmproxy holds them.

Contract: functions over a request's fields (mitmproxy's ``Request`` and ``Headers`` are
passed in, read and written by attribute; this module never imports mitmproxy). The
target helpers move a request between the client's URL and the relay's without mitmproxy's
URL parse (per turn, its ``url`` setter parses and rewrites the Host header twice);
``aim`` applies a planned turn to its request in one call.
No I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .plan import Turn, apply_header_changes

Target = tuple[Any, Any, Any, Any, Any, Any]  # scheme, host, port, path, authority, Host header


def target_of(req: Any) -> Target:
    """Where a request goes, as mitmproxy holds it: scheme, host, port, path, authority and
    the Host header (``set_target`` puts it back exactly)."""
    d = req.data
    return d.scheme, d.host, d.port, d.path, d.authority, d.headers.get("host")


def set_target(req: Any, target: Target) -> None:
    """Put back what ``target_of`` read, without mitmproxy's URL parse."""
    d = req.data
    d.scheme, d.host, d.port, d.path, d.authority, host = target
    _put_host(d.headers, host, add=True)


def point_at(req: Any, scheme: str, host: str, port: int, path: str) -> None:
    """``req.url = scheme://host:port/path`` for a loopback host (the relay) without
    mitmproxy's URL parse: the same fields, Host header and authority as the setter makes."""
    d = req.data
    default = port == (443 if scheme == "https" else 80)
    hostport = host if default else f"{host}:{port}"
    d.scheme, d.host, d.port, d.path = scheme.encode(), host, port, path.encode()
    _put_host(d.headers, hostport, add=False)
    if d.authority:
        d.authority = hostport.encode()


def _put_host(headers: Any, value: str | None, *, add: bool) -> None:
    """``headers["host"] = value`` (``del`` when None; nothing when absent and not ``add``) in
    one pass over the raw fields, as mitmproxy's ``Headers`` would set it: the first Host
    field keeps its place and takes the value, the others go, a new one goes last."""
    raw = value.encode("utf-8", "surrogateescape") if value is not None else None
    out, found = [], False
    for k, v in headers.fields:
        if k.lower() == b"host":
            if raw is not None and not found:
                out.append((k, raw))
            found = True
            continue
        out.append((k, v))
    if not found:
        if raw is None or not add:
            return
        out.append((b"host", raw))
    headers.fields = tuple(out)


def set_headers(headers: Any, values: Mapping[str, str]) -> None:
    """``headers[name] = value`` for each item, in one pass over the raw fields, as mitmproxy's
    ``Headers`` sets them one by one: a field of that name (any case) keeps its name and place
    and takes the value, other fields of that name go, a name not there is added last."""
    if not values:
        return
    pending: dict[bytes, tuple[bytes, bytes]] = {}
    for k, v in values.items():
        name = k.encode("utf-8", "surrogateescape")
        low = name.lower()
        pending[low] = (pending[low][0] if low in pending else name, v.encode("utf-8", "surrogateescape"))
    out, seen = [], set()
    for k, v in headers.fields:
        low = k.lower()
        if low in pending:
            if low not in seen:
                out.append((k, pending[low][1]))
                seen.add(low)
            continue
        out.append((k, v))
    out.extend(kv for low, kv in pending.items() if low not in seen)
    headers.fields = tuple(out)


def field_name(raw: bytes) -> str:
    """A raw header field's name as mitmproxy's ``Headers`` gives it (``keys()``, ``pop``)."""
    return raw.decode("utf-8", "surrogateescape")


def header_names(headers: Any) -> dict[str, None]:
    """The header names, each once, in order: ``headers.keys()`` without its lookup per name."""
    return dict.fromkeys(field_name(k) for k, _ in headers.fields)


def leaves_as_sent(turn: Turn) -> bool:
    """Whether ``aim`` leaves the request exactly as the client sent it (URL, headers and body):
    a turn passed on as it came (a routed turn has a ``url``: the relay's is put on it)."""
    return not turn.url and turn.keep_headers is None and not turn.set_headers and turn.body is None


def aim(req: Any, turn: Turn, relay: tuple[int, str] | None) -> None:
    """Apply the turn's plan to the request, in one call: point it where the turn goes (through
    the relay on loopback, ``relay`` = its port and path, for a routed turn; else ``turn.url``
    when it moves), leave behind the headers the plan does not keep (every field of each
    name, in any case, in one pass over the raw fields), set the plan's own headers (the
    endpoint's key), and put the translated body."""
    if relay is not None:
        point_at(req, "http", "127.0.0.1", relay[0], relay[1])
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
