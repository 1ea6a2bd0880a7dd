"""The console's one line when the endpoint's own cap, not the client's, ended a reply.

A route's endpoint may cap what a client asks for (``max_tokens: 512`` in its config): the
request then carries the cap, and the request codec records it, typed, as the translation's
``capped`` (neutral/conversation.py ``Capped``: what the client asked, the cap; the converted
entry ``max_tokens -> max_tokens (capped at 512)`` says it for the ledger). When the reply
then stops on that cap (neutral stop reason ``max_tokens``), the client is told so truthfully
— and Claude Code, which asked for 32000 or more, answers with continuation turns and then
fails ("Claude's response exceeded the … output token maximum"). This line says why, on the
proxy's console:

    tokunseba: tk-… the reply was cut by endpoint local's cap (max_tokens 512; the client asked for 64000), not by the client's own limit: its client may send continuation turns. Give the endpoint stop strings that end its turns, or raise its max_tokens

Pure: no mitmproxy, no I/O. ``cap_line`` returns None when the cap did not end the reply.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..neutral import Capped


def cap_line(*, request_id: str, endpoint: str | None, capped: Capped | None, details: Mapping | None) -> str | None:
    """The line (module docstring) when the reply stopped on ``max_tokens`` and the request
    carried the endpoint's cap in place of a larger number the client asked for; else None."""
    if capped is None or not details or details.get("stop_reason") != "max_tokens":
        return None
    return (f"tokunseba: {request_id} the reply was cut by endpoint {endpoint or '?'}'s cap "
            f"(max_tokens {capped.cap}; the client asked for {capped.asked}), not by the client's own limit: its "
            "client may send continuation turns. Give the endpoint stop strings that end its turns, or raise its "
            "max_tokens")
