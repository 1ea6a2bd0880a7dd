"""The cost of a turn at its end (pricing/), for the console line and the OTel span: the same
facts the ledger records, priced as the CLI prices them at read time — the endpoint the turn
was routed to (its name, its URL), else the host it passed through to; the model used, else
the one asked for; usage as reported; the user's table from the rules file. Pure.
"""

from __future__ import annotations

from ..neutral import Usage
from ..pricing import Cost, Price, billed_of, cost_of, endpoint_of
from ..states import Action
from .plan import Turn


def turn_cost(turn: Turn, usage: Usage | None, prices: list[Price]) -> Cost:
    routed = turn.endpoint is not None and turn.action != Action.PASS
    return cost_of(model=turn.model_used or turn.requested_model,
                   endpoint=turn.endpoint.name if routed and turn.endpoint else endpoint_of({"host": turn.host}),
                   url=turn.endpoint.url if routed and turn.endpoint else f"https://{turn.host}" if turn.host else None,
                   billed=billed_of(usage.counting, usage.reported) if usage is not None else None,
                   at=turn.started_at, table=prices)
