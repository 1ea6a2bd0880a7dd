"""What a translation reports besides its output: drops, plumbing, conversions, warnings.

Every codec records here, in the client's own JSON paths (docs/dev/architecture.md rule 1):
- ``dropped``: input left behind (never faked);
- ``plumbing``: output added only to carry what the client asked for;
- ``warnings``: lossy but legal choices (a stop reason taken as another, an id minted...);
- ``converted`` (replies): what the client was told in place of what the upstream said, with
  why (neutral/endpoint_cap.py: a reply the endpoint's cap ended, told ``end_turn``).
A ``ReplyReport`` (of a whole reply's translation or of a stream translator) also carries
what the ledger needs: usage as reported, stop reason, errors, whether the reply completed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .tools import ClientTools
from .usage import Usage


def note_once(items: list[str], item: str) -> None:
    """Record a drop or warning once (reports list each kind once, not per event)."""
    if item not in items:
        items.append(item)


@dataclass(slots=True)
class ReplyReport:
    """What translating one reply (whole or streamed) reports: drops, warnings and what the
    ledger needs."""

    usage: Usage | None = None
    stop_reason: str | None = None
    dropped: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    converted: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    completed: bool = False
    model: str | None = None  # the model the upstream's reply named (its start), None when it named none
    # context, not a record: the client's tools behind neutral function names (neutral/tools.py),
    # from its request's translation; the client's encoder gives those calls back in their shape
    client_tools: ClientTools | None = None

    def __init__(self, usage: Usage | None = None, stop_reason: str | None = None, dropped: list[str] | None = None,
                 warnings: list[str] | None = None, converted: list[str] | None = None, errors: list[str] | None = None,
                 completed: bool = False, model: str | None = None, client_tools: ClientTools | None = None) -> None:
        # written out (the dataclass keeps it): one per reply, and list literals cost less than
        # the generated one's default_factory calls
        self.usage = usage
        self.stop_reason = stop_reason
        self.dropped = [] if dropped is None else dropped
        self.warnings = [] if warnings is None else warnings
        self.converted = [] if converted is None else converted
        self.errors = [] if errors is None else errors
        self.completed = completed
        self.model = model
        self.client_tools = client_tools
