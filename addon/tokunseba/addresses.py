"""Plain checks of addresses and URLs that the proxy and the CLI both make (no I/O, no
tokunseba import): whether a peer is this machine's loopback (who may have turns routed:
turn/access.py; `tokunseba run`'s listen address), whether an endpoint's URL is on this machine
(pricing/: such an endpoint costs 0 unless priced), and whether a URL can be an OTLP/HTTP
collector's (proxy/otel_spans.py; `tokunseba run --otlp-endpoint`). The CLI imports these
from here, never from the proxy path."""

from __future__ import annotations

import functools
import ipaddress
from urllib.parse import urlsplit


@functools.lru_cache(maxsize=1024)  # per turn, and clients are few: parsed once per address
def is_loopback(host: str | None) -> bool:
    """Whether a peer address is this machine's loopback (IPv4-mapped IPv6 included)."""
    if not host:
        return False
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def is_local_url(url: str | None) -> bool:
    """Whether a URL's host is this machine: a loopback address, or ``localhost``."""
    if not url:
        return False
    try:
        host = urlsplit(url if "//" in url else f"//{url}").hostname
    except ValueError:
        return False
    if not host:
        return False
    return host == "localhost" or host.endswith(".localhost") or is_loopback(host)


def collector_problem(url: str) -> str | None:
    """Why ``url`` is not an OTLP/HTTP collector's URL (one line), or None."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises on a bad port)
    except ValueError as e:
        return f"{url!r} is not a URL ({e})"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{url!r} is not an http:// or https:// URL of an OTLP/HTTP collector (e.g. http://127.0.0.1:4318)"
    return None
