"""Refuse what the client's own protocol forbids, before a turn is translated (issue 8, item 6).

The original provider would answer such a request with a 400; a translated endpoint (a local
server) may not check, and answer nonsense. So a turn that is about to be **translated** is
checked against its client protocol's rules (the ``checks`` of its facts in ``protocols/``: one row per rule, with its reason)
and, when one fails, answered with a 400 in the client's error envelope naming the JSON path.

Only translated turns are checked. Pass-through and same-protocol retargets go to a server
that speaks the client's protocol and checks for itself (its own error reaches the client
unchanged), and checking them here would mean a second, possibly stricter, opinion on
traffic tokunseba promises to leave byte-identical.

Only what the protocols surely forbid is refused: a token limit that is not a positive
integer, an empty message list, and a tool result whose id answers no earlier tool call
(Responses: unless ``previous_response_id`` holds the earlier turns server-side).
"""

from __future__ import annotations

from . import protocols
from .protocols import Check, Problem

__all__ = ["Check", "Problem", "checks", "first_problem"]


def checks(protocol: str) -> tuple[Check, ...]:
    """What ``protocol`` forbids in a request (its facts' ``checks``: one row per rule, with its reason)."""
    facts = protocols.find(protocol)
    return facts.checks if facts is not None else ()


def first_problem(protocol: str, body: dict) -> Problem | None:
    """The first thing in ``body`` that ``protocol`` forbids, as (JSON path, what is wrong)."""
    for check in checks(protocol):
        for problem in check.find(body):
            return problem
    return None
