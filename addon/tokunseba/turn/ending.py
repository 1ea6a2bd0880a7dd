"""What is said of a turn once it has ended, as one object the adapter asks (pure): the outcome
it is recorded with, mitmweb's note, mark and comment, the console's lines and its cost.

The adapter (proxy/record.py ``complete``) makes one ``Ending`` per turn (``of``): the turn's
own outcome, ``error`` when its reply failed (a refusal stays refused), ``capped`` when the
endpoint's own cap, not the client's limit, ended a translated reply (turn/cap_note.py; its
``note`` is mitmweb's; ``present``: the flow's mark and comment, turn/presentation.py). Then, once
the client has its last bytes: ``console_line`` (the turn's
one line: turn/console_line.py), ``cap_line`` (the line that says the endpoint's cap ended the
reply), ``cost`` (turn/cost.py: for the line and the span). No mitmproxy, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..neutral import Usage
from ..outcomes import CAPPED, TurnOutcome
from ..pricing import Cost, Price, cost_text
from ..routing import records
from ..states import Action
from .cap_note import cap_line, cap_note
from .console_line import turn_line
from .cost import turn_cost
from .failover import Chain
from .flowstate import FlowState
from .plan import Turn
from .presentation import present


@dataclass(frozen=True)
class Ending:
    turn: Turn
    outcome: str  # as recorded (outcomes.py)
    details: Mapping[str, Any] = field(default_factory=dict)  # the reply's, as recorded (stop reason, conversions)
    note: str | None = None  # mitmweb's note: the endpoint's cap ended the reply

    @classmethod
    def of(cls, turn: Turn, *, failed: bool, details: Mapping[str, Any]) -> Ending:
        """How ``turn`` ended: ``failed``, its reply judged an error; ``details``, the reply's."""
        outcome = "error" if failed and turn.outcome != TurnOutcome.REFUSED else turn.outcome
        note = None
        if outcome == TurnOutcome.TRANSLATED and turn.translation is not None and (note := cap_note(
                endpoint=_endpoint(turn), capped=turn.translation.capped, details=details)):
            outcome = CAPPED  # the endpoint's cap, not the client's limit, ended the reply (outcomes.py)
        return cls(turn, outcome, details, note)

    def present(self, flow: Any, state: FlowState, status: int | None) -> bool:
        """The flow's mark and comment state this outcome as the ledger counts it, with the note
        (turn/presentation.py ``present``; ``flow``: mitmproxy's, written by attribute). False
        when that failed (logged)."""
        return present(flow, state, self.outcome, status, self.note)

    def cap_line(self) -> str | None:
        """The console's line when the endpoint's cap, not the client's, ended the reply; else None."""
        turn = self.turn
        if turn.translation is None:
            return None
        return cap_line(request_id=turn.request_id, endpoint=_endpoint(turn), capped=turn.translation.capped,
                        details=self.details)

    def cost(self, usage: Usage | None, prices: list[Price]) -> Cost:
        """The turn's cost, priced as the CLI prices it (turn/cost.py)."""
        return turn_cost(self.turn, usage, prices)

    def console_line(self, *, client: str | None, status: int | None, usage: Usage | None, now: float,
                     chain: Chain | None = None, cost: Cost | None = None) -> str:
        """The turn's one console line (turn/console_line.py): what happened to it, as recorded.
        ``client``: its name as the flow shows it (else its protocol); ``now``: when it ended."""
        turn = self.turn
        d = turn.decision
        sent = turn.action != Action.RESPOND
        return turn_line(request_id=turn.request_id, client=client or turn.client_protocol,
                         model=turn.requested_model, route=d.route.name if d and d.route else None,
                         to=(turn.endpoint.name if turn.endpoint and (sent or d and d.route) else turn.host)
                         + ("" if sent or d and d.route else " (not sent)")
                         + (f" (failed over: {turn.failed_over})" if turn.failed_over else ""),
                         outcome=self.outcome, status=status,
                         usage=usage.reported if usage else None, seconds=now - turn.started_at,
                         error=turn.error,
                         trace=records(d.trace) if d else None,
                         attempts=[a.record() for a in chain.failed] if chain else None,
                         cost=cost_text(cost) if cost is not None else None)


def _endpoint(turn: Turn) -> str | None:
    return turn.endpoint.name if turn.endpoint else None
