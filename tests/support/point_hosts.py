"""A test-only mitmproxy script: where the provider hosts are, as the proxy sees them.

``TK_TEST_POINT="api.anthropic.com=127.0.0.1:40123;…"`` makes every flow to a listed host
connect to the given loopback address instead (its Host header, SNI-less URL and client
side are unchanged), as if that name resolved there: a machine on which the provider hosts
cannot be reached, without leaving loopback. ``api.anthropic.com=http://127.0.0.1:40123``
also speaks plain HTTP there (a scripted provider: tests/support/upstream.py). Loaded with
``-s`` before tokunseba's addon; ``requestheaders`` runs before tokunseba's ``request`` hook."""

from __future__ import annotations

import os


def _table() -> dict[str, tuple[str, int, str | None]]:
    out = {}
    for item in filter(None, os.environ.get("TK_TEST_POINT", "").split(";")):
        name, _, addr = item.partition("=")
        scheme = "http" if addr.startswith("http://") else None
        host, _, port = addr.removeprefix("http://").rpartition(":")
        out[name.lower()] = (host, int(port), scheme)
    return out


TABLE = _table()


def requestheaders(flow) -> None:
    to = TABLE.get(flow.request.host.lower())
    if to is not None:
        flow.request.data.host, flow.request.data.port = to[:2]  # the connection's target; headers untouched
        if to[2]:
            flow.request.data.scheme = to[2].encode()
