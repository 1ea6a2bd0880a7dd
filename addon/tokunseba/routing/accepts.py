"""What an endpoint takes in a turn (endpoint key ``accepts``), and why a turn is refused there.

Contract: ``default_accepts(protocol, host)`` is what an endpoint takes when its rules say
nothing: its protocol's provider API (``protocols.<name>`` ``accepts``: every API here takes
images, documents and its own provider-run tools), except an endpoint on loopback, which is
a local server (llama-server, vLLM, Ollama...) and takes text only unless it says more.
``content_refusal`` says why a turn cannot go to an endpoint (None: it can); the rules treat
that exactly as a pair with no translator (docs/dev/architecture.md rule 4): the route is refused
before anything is sent (``route_refused``) and evaluation goes on with the next route.

| kind | a turn has it when | refused at an endpoint when |
|---|---|---|
| text | always | never: every endpoint takes text |
| images | an image block anywhere, tool results included | ``images`` is not in its accepts (the model would answer without seeing it) |
| documents | a document block anywhere (PDF, text file; Gemini: non-image data) | ``documents`` is not in its accepts (sent as a part it cannot read, or dropped: the model answers without it) |
| server_tools | it relies on a provider-run tool (Claude Code's WebSearch: web_search alone, or forced by tool_choice) | ``server_tools`` is not in its accepts, or it speaks another protocol: no translation carries a provider-run tool (another provider's search never runs; the model would "do 0 searches") |

A provider-run tool offered beside the client's own tools (Codex's ``web_search`` on every
turn) is not relied on: it is left behind and recorded as before, the turn goes on.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from .. import protocols

KINDS = ("text", "images", "documents", "server_tools")
LOCAL = ("text",)  # an endpoint on loopback, unless it says more
_SAID = {"images": "images", "documents": "documents", "server_tools": "provider-run tools"}


def is_loopback(host: str) -> bool:
    """``host`` is this machine (localhost, 127.0.0.0/8, ::1)."""
    h = host.lower().rstrip(".").strip("[]")
    if h == "localhost" or h.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


def default_accepts(protocol: str, host: str) -> tuple[str, ...]:
    """What an endpoint of ``protocol`` at ``host`` takes when its rules say no ``accepts``."""
    if is_loopback(host):
        return LOCAL
    facts = protocols.find(protocol)
    return facts.accepts if facts is not None else LOCAL


def accepts_problem(value: Sequence[str] | None) -> str | None:
    """Why ``value`` cannot be an endpoint's ``accepts`` (None: it can)."""
    if value is None:
        return None
    bad = [v for v in value if v not in KINDS]
    if bad:
        return f"accepts: unknown kind {bad[0]!r} (expected some of: {', '.join(KINDS)})"
    if "text" not in value:
        return "accepts must include text (every endpoint takes text; list what it takes beside it)"
    return None


def content_refusal(client: str, *, images: bool, documents: bool, server_tools: Sequence[str],
                    endpoint: str, protocol: str, takes: Sequence[str], said: bool) -> str | None:
    """Why a turn of ``client`` with this content cannot go to the endpoint (None: it can).
    ``said``: the endpoint's accepts is in its rules (else its default, named as such)."""
    missing = [k for k, has in (("images", images), ("documents", documents),
                                ("server_tools", bool(server_tools))) if has and k not in takes]
    whose = f"endpoint {endpoint} takes {', '.join(takes)}" + (
        "" if said else " (a local server unless it says accepts: …)" if tuple(takes) == LOCAL else "")
    if missing:
        what = " and ".join(_SAID[k] for k in missing)
        tools = f" ({', '.join(server_tools)})" if "server_tools" in missing else ""
        return f"the turn has {what}{tools}; {whose}"
    if server_tools and protocol != client:
        return (f"the turn relies on provider-run tools ({', '.join(server_tools)}), which run only at an endpoint "
                f"of its own protocol ({client}); no translation to {protocol} carries them")
    return None
