"""A reply the endpoint's own cap ended, as its client is told it (issue 41).

A route's endpoint may cap a turn's output (``max_tokens`` in its config): the request then
carries the endpoint's cap in place of the client's larger limit, or of none when the client
named none (``Capped``, recorded by the request codecs). A reply that then runs to that cap
ends ``max_tokens`` at the endpoint, but the client's own limit was never reached, and the
clients read ``max_tokens`` as "my limit cut you off, go on": Claude Code sends continuation
turns into the same cap until it fails ("Claude's response exceeded the 64000 output token
maximum", docs/dev/clients.md "A reply cut by the endpoint's cap" has the measurements).

So the client is told ``end_turn`` (``told_stop``): the turn ended before its own limit, as it
did. Never invented: the conversion is recorded in the reply's report (``converted``: the stop
reason the endpoint gave, what the client was told, and why), the ledger keeps the endpoint's
own ``max_tokens`` and marks the turn ``capped`` (outcomes.py), and the console says it
(turn/cap_note.py). Not converted, and told as it is: a reply holding a tool call (its
arguments may be the part the cap cut: the client must not run it as if whole), and a cap the
client's own limit was (no ``Capped``).

Pure: no I/O.
"""

from __future__ import annotations

from .conversation import Capped
from .report import note_once

CUT = "max_tokens"  # the neutral stop reason of a reply run to the output limit
TOLD = "end_turn"  # what the client is told instead, when that limit was the endpoint's


def limit_text(capped: Capped) -> str:
    """What the client asked for, as the notes say it."""
    return f"the client asked for {capped.asked}" if capped.asked is not None else "the client named no limit"


def told_stop(stop_reason: str | None, capped: Capped | None, *, calls: bool, converted: list[str]) -> str | None:
    """The stop reason the client is told for a reply that stopped on ``stop_reason`` (neutral):
    ``end_turn`` for one the endpoint's cap ended (``capped``) with no tool call in it (``calls``),
    the conversion noted once in ``converted``; else ``stop_reason`` unchanged."""
    if capped is None or stop_reason != CUT or calls:
        return stop_reason
    note_once(converted, f"stop_reason {CUT} -> {TOLD} (the endpoint's cap, max_tokens {capped.cap}, ended the reply; "
                         f"{limit_text(capped)})")
    return TOLD
