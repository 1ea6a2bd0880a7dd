"""One Responses WebSocket connection's turns (pure): the one object the adapter
(proxy/websocket.py) drives for the connection, over its transcript (turn/ws_transcript.py) and
the planning of one message (turn/ws_plan.py).

- ``plan(doc, ...)``: a ``response.create`` message's ``Planning`` (None: not a provider turn;
  the rules decide as for the same body over HTTPS) and its whole conversation (None: its
  previous response is not known here);
- ``carrier(turn, ...)``: where the planned turn goes (a ``Carrier``);
- ``conversation(doc)``: the message's whole input (None: its previous response is unknown);
  ``for_provider(doc)``: the message to send the provider instead (None: the message goes
  untouched);
- ``answered(reply, conversation, ours=...)``: a response ended (its id and output collected by
  a ``Reply``), the conversation through it kept (``ours``: made by tokunseba).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..reasoning import Keeper
from ..routing import EndpointHealth, Rules
from .failover import Capacity
from .plan import Turn
from .planner import Planning
from .ws_plan import Carrier, carrier, plan_message
from .ws_transcript import Reply, Transcript


class SocketTurns:
    """A Responses WebSocket connection's turns: planned, carried, their responses kept."""

    __slots__ = ("transcript",)

    def __init__(self) -> None:
        self.transcript = Transcript()

    def plan(self, doc: dict[str, Any], *, host: str, port: int, path: str, headers: Any, rules: Rules,
             health: EndpointHealth, capacity: Capacity, provider_hosts: Mapping[str, str], keeper: Keeper | None,
             earned: Any = None, quota: Any = None) -> tuple[Planning | None, list | None]:
        """The message's planning and its whole conversation (turn/ws_plan.py ``plan_message``)."""
        return plan_message(doc, self.transcript, host=host, port=port, path=path, headers=headers, rules=rules,
                            health=health, capacity=capacity, provider_hosts=provider_hosts, keeper=keeper,
                            earned=earned, quota=quota)

    @staticmethod
    def carrier(turn: Turn, *, conversation_known: bool, endpoint_websocket: bool = True) -> Carrier:
        """Where the planned turn goes (turn/ws_plan.py ``carrier``)."""
        return carrier(turn, conversation_known=conversation_known, endpoint_websocket=endpoint_websocket)

    def conversation(self, doc: dict[str, Any]) -> list[Any] | None:
        return self.transcript.conversation(doc)

    def for_provider(self, doc: dict[str, Any]) -> dict[str, Any] | None:
        return self.transcript.for_provider(doc)

    def answered(self, reply: Reply, conversation: list[Any] | None, *, ours: bool) -> None:
        self.transcript.answered(reply.response_id, conversation, reply.output, ours=ours)
