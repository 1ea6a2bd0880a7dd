"""The console's one line when the endpoint's own cap, not the client's, ended a reply.

A route's endpoint may cap what a client asks for (``max_tokens: 512`` in its config): the
request then carries the cap, and the translation records it as converted
(``max_tokens -> max_tokens (capped at 512)``). When the reply then stops on that cap
(neutral stop reason ``max_tokens``), the client is told so truthfully — and Claude Code,
which asked for 32000 or more, answers with continuation turns and then fails ("Claude's
response exceeded the … output token maximum"). This line says why, on the proxy's console:

    tokunseba: tk-… the reply was cut by endpoint local's cap (max_tokens 512; the client asked for 64000), not by the client's own limit: its client may send continuation turns. Give the endpoint stop strings that end its turns, or raise its max_tokens

Pure: no mitmproxy, no I/O. ``cap_line`` returns None when the cap did not end the reply.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

CAPPED = re.compile(r"^(?P<path>\S+) -> \S+ \(capped at (?P<cap>\d+)\)$")  # the request codecs' converted entry


def _asked(original: bytes | None, path: str) -> int | None:
    """The number the client asked for at ``path`` (dotted, as the converted entry names it)."""
    try:
        node = json.loads(original or b"")
        for key in path.split("."):
            node = node[key]
    except (ValueError, KeyError, TypeError, IndexError):
        return None
    return node if isinstance(node, int) and not isinstance(node, bool) else None


def cap_line(*, request_id: str, endpoint: str | None, converted: Sequence[str] | None,
             details: Mapping | None, original: bytes | None) -> str | None:
    """The line (module docstring) when the reply stopped on ``max_tokens`` and the request
    carried the endpoint's cap in place of a larger number the client asked for; else None."""
    if not details or details.get("stop_reason") != "max_tokens" or not converted:
        return None
    for entry in converted:
        m = CAPPED.match(entry)
        if m:
            asked = _asked(original, m["path"])
            said = f"; the client asked for {asked}" if asked is not None else ""
            return (f"tokunseba: {request_id} the reply was cut by endpoint {endpoint or '?'}'s cap "
                    f"(max_tokens {m['cap']}{said}), not by the client's own limit: its client may send "
                    "continuation turns. Give the endpoint stop strings that end its turns, or raise its max_tokens")
    return None
