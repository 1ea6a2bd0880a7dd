"""The addon's options, as data, and the readers of the ones that need reading.

Contract: ``OPTIONS`` lists every ``tokunseba_*`` option (name, type, default, help, choices)
in the order mitmproxy shows them; each part of the adapter loads its own (``named``). The readers
(``keepalive_seconds``, ``provider_hosts_of``) turn an option's value into what the proxy
uses, or raise ``ValueError`` with the one-line message the user sees (the adapter says it
as mitmproxy's OptionsError). ``stamp`` identifies one version of the rules file. Plain
Python: no mitmproxy; ``stamp`` stats a file.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .. import protocols
from ..reasoning import DEFAULT_MAX_ENTRIES
from ..sse import DEFAULT_MAX_EVENT_BYTES


@dataclass(frozen=True)
class Option:
    name: str
    type: Any
    default: Any
    help: str
    choices: tuple[str, ...] | None = None


OPTIONS: tuple[Option, ...] = (
    Option("tokunseba_rules", str, "", "Rules YAML file (empty: no routes, everything passes through)."),
    Option("tokunseba_ledger", str, "", "Ledger: a SQLite path or a postgresql:// URL (empty: "
           "$TOKUNSEBA_LEDGER, else $TOKUNSEBA_HOME/ledger.db)."),
    Option("tokunseba_instance", str, "", "This proxy's name on its turns in the ledger (empty: user@host)."),
    # a str: mitmproxy's --set cannot parse a float option
    Option("tokunseba_budget_lease_s", str, "120",
           "Seconds a budget's hold lives without its proxy renewing it (the proxy renews its own every third of "
           "that): the holds of a proxy killed mid-turn are charged at their declared amount once it runs out, by "
           "any proxy on the ledger."),
    Option("tokunseba_otlp_endpoint", str, "", "OTLP/HTTP collector for one span per turn (empty: "
           "$OTEL_EXPORTER_OTLP_ENDPOINT; neither: no spans)."),
    Option("tokunseba_otlp_bodies", bool, False, "Also put the request and reply text in the spans."),
    Option("tokunseba_ledger_bodies", bool, False, "Store request/response bodies in the ledger."),
    Option("tokunseba_probe_timeout_ms", int, 1500,
           "Connect timeout for endpoints, in ms (a routed turn's connection is opened before it is "
           "committed to its route; one that fails marks the endpoint down for a back-off)."),
    Option("tokunseba_connect_timeout_ms", int, 10000,
           "Connect timeout for a provider host a turn passes through to, in ms: a host that cannot "
           "be reached (no name, refused, TLS error, this timeout) gets the client an error in its "
           "own protocol naming the host (504 on a timeout, else 502). 0: not checked (mitmproxy "
           "answers such a turn with its own HTML 502 page)."),
    Option("tokunseba_console", str, "all",
           "all: mitmproxy's own lines as usual, plus tokunseba's one line per provider turn; turns: "
           "mitmproxy's per-connection lines (client/server connect, disconnect) left out, so the "
           "console shows tokunseba's line per turn and warnings (tokunseba run's default; -v: all).",
           choices=("all", "turns")),
    Option("tokunseba_max_event_bytes", int, DEFAULT_MAX_EVENT_BYTES,
           "Largest SSE event (or line) read from an upstream, in bytes; a bigger one ends the turn "
           "with an error in the client's protocol."),
    # a str: mitmproxy's --set cannot parse a float option
    Option("tokunseba_keepalive_s", str, "10",
           "Seconds (decimals allowed) an upstream SSE reply may be silent before tokunseba sends "
           "the client a keep-alive (again every as many seconds), so its read timeout does not "
           "fire; 0: never."),
    Option("tokunseba_allow_remote_clients", bool, False,
           "Route turns (and spend endpoint keys) for clients that are not on loopback, even "
           "without proxyauth. Off: such turns get an error in the client's protocol."),
    Option("tokunseba_shadow_concurrency", int, 2,
           "At most this many shadow turns in flight; more are skipped (recorded shadow_skipped)."),
    Option("tokunseba_shadow_timeout_s", int, 120, "A shadow turn gets no more than this many seconds."),
    Option("tokunseba_reasoning_store", str, "",
           "Where translated replies' provider state (reasoning_content, signed thinking, "
           "thoughtSignatures) is kept for the next turns of their tool loop: empty = reasoning.db "
           "beside the ledger; a path; 'memory' (this process only); 'off' (none kept)."),
    Option("tokunseba_reasoning_retention_h", int, 168,
           "Hours a piece of provider state is kept (older is never restored, and is deleted)."),
    Option("tokunseba_reasoning_max", int, DEFAULT_MAX_ENTRIES,
           "At most this many tool calls' (or replies') provider state kept; the oldest go first."),
    Option("tokunseba_provider_hosts", Sequence[str], [],
           "More hosts to treat as provider APIs, as HOST[:PORT]=PROTOCOL (e.g. llm.internal=openai)."),
)


def named(names: Iterable[str]) -> list[Option]:
    """The options of ``names``, in ``OPTIONS``' order: what one part of the proxy loads (each
    part owns its options; proxy/mitm.py checks that together they load every one)."""
    wanted = set(names)
    return [o for o in OPTIONS if o.name in wanted]


def lease_seconds(value: str) -> float:
    """The tokunseba_budget_lease_s option as seconds (more than 0)."""
    try:
        s = float(value)
    except (TypeError, ValueError):
        s = -1.0
    if not s > 0 or s == float("inf"):
        raise ValueError(f"tokunseba_budget_lease_s: {value!r} is not a number of seconds more than 0")
    return s


def keepalive_seconds(value: str) -> float:
    """The tokunseba_keepalive_s option as seconds (0: no keep-alives)."""
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        raise ValueError(f"tokunseba_keepalive_s: {value!r} is not a number of seconds (0 or more; "
                         "0: no keep-alives)")
    return seconds


def provider_hosts_of(items: Iterable[str]) -> dict[str, str]:
    """The tokunseba_provider_hosts option as ``HOST[:PORT]`` (lower-case) -> protocol."""
    hosts = {}
    for item in items:
        name, sep, proto = item.rpartition("=")
        if not sep or not name or proto not in protocols.NAMES:
            raise ValueError(f"tokunseba_provider_hosts: {item!r} is not HOST[:PORT]=PROTOCOL with PROTOCOL in "
                             f"{', '.join(protocols.NAMES)}")
        hosts[name.lower()] = proto
    return hosts


def stamp(path: str | None) -> tuple[int, int, int] | None:
    """What identifies one version of a file: change time, size and inode."""
    try:
        st = os.stat(path) if path else None
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino) if st else None
