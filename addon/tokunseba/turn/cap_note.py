"""A turn whose reply the endpoint's own cap, not the client's limit, ended: the judgement
(``cut_by_cap``), and the console's one line and mitmweb's note that say it.

A route's endpoint may cap what a client asks for (``max_tokens: 512`` in its config), or send
its cap where the client names none: the request codec records it, typed, as the translation's
``capped`` (neutral/conversation.py ``Capped``: what the client asked, if anything, and the
cap; the converted entry ``max_tokens -> max_tokens (capped at 512)``, or the plumbing entry,
says it for the ledger). When the reply then stops on that cap (the upstream's stop reason,
``max_tokens``, as the ledger keeps it), the turn is ``capped`` (outcomes.py: ``log``,
``stats``, mitmweb's mark), the client is told ``end_turn`` where no tool call was cut
(neutral/endpoint_cap.py: told ``max_tokens``, Claude Code answers with continuation turns
into the same cap and then fails), and the console says why:

    tokunseba: tk-… the reply was cut by endpoint local's cap (max_tokens 512; the client asked for 64000), not by the client's own limit: the client was told end_turn. Give the endpoint stop strings that end its turns, or raise its max_tokens

Pure: no mitmproxy, no I/O. ``cap_line`` and ``cap_note`` return None when the cap did not
end the reply.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..neutral import Capped
from ..neutral import CUT, limit_text


def cut_by_cap(capped: Capped | None, details: Mapping | None) -> bool:
    """The reply stopped on ``max_tokens`` (the upstream's stop reason) and the request carried
    the endpoint's cap in place of the client's limit: the turn is ``capped`` (outcomes.py)."""
    return capped is not None and details is not None and details.get("stop_reason") == CUT


def cap_note(*, endpoint: str | None, capped: Capped | None, details: Mapping | None) -> str | None:
    """``cut by endpoint local's cap (max_tokens 512; the client asked for 64000)``: mitmweb's
    comment and the console line say it; None when the cap did not end the reply."""
    if capped is None or not cut_by_cap(capped, details):
        return None
    return f"cut by endpoint {endpoint or '?'}'s cap (max_tokens {capped.cap}; {limit_text(capped)})"


def cap_line(*, request_id: str, endpoint: str | None, capped: Capped | None, details: Mapping | None) -> str | None:
    """The line (module docstring) when the reply stopped on ``max_tokens`` and the request
    carried the endpoint's cap in place of the client's limit; else None. It says what the client
    was told: ``end_turn`` when the stop reason was converted (``details["converted"]``), else
    ``max_tokens`` (a cut tool call), on which a client may send continuation turns."""
    note = cap_note(endpoint=endpoint, capped=capped, details=details)
    if note is None:
        return None
    told = ("the client was told end_turn" if any(str(c).startswith(f"stop_reason {CUT} ->")
                                                   for c in (details or {}).get("converted") or ())
            else "the client was told max_tokens (a tool call was cut) and may send continuation turns")
    return (f"tokunseba: {request_id} the reply was {note}, not by the client's own "
            f"limit: {told}. Give the endpoint stop strings that end its turns, or raise its max_tokens")
