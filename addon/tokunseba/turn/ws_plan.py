"""One ``response.create`` message of a Responses WebSocket, planned as a turn (pure): the
request it stands for, and how the turn is carried once the rules have decided.

- ``message_request``: the message as the HTTPS request it stands for (what
  turn/planner.py ``Planning.of`` reads), its body the turn's as an HTTPS POST would carry it
  (turn/ws_transcript.py ``https_body``: the whole conversation when the transcript knows it),
  kept both as bytes (its size, its retry key and its record read them) and as the JSON
  object they were dumped from (``doc``);
- ``plan_message``: the ``Planning`` of that request (the rules decide as for the same body
  over HTTPS), with the whole conversation (None: its previous response is not known here).
  The body is not parsed again: the planning reads the object it was dumped from (the same
  value: a message's JSON dumps and loads back unchanged; no planning step changes its
  request), which over a long session saves parsing the whole conversation on every turn;
- ``carrier``: where the planned turn goes — ``PROVIDER`` (the message goes on over the
  provider's WebSocket), ``ENDPOINT_WS`` (retargeted to a Responses endpoint: over its own
  WebSocket, unless it is known to have none), ``HTTPS`` (translated, or retargeted to an
  endpoint without one), ``HERE`` (answered here: refused, an error, or a routed turn whose
  conversation cannot be carried whole).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from .. import jsonc
from ..reasoning import Keeper
from ..routing import EndpointHealth, Rules
from ..states import Action
from .failover import Capacity
from .plan import Turn
from .planner import Planning
from .ws_transcript import Transcript, https_body



class Carrier(StrEnum):
    """Where a planned turn goes (recorded as its ``websocket`` event's ``carried``)."""

    PROVIDER = "provider websocket"  # the message goes on over the provider's WebSocket
    ENDPOINT_WS = "endpoint websocket"  # retargeted to a Responses endpoint, over its own WebSocket
    HTTPS = "https"  # translated, or retargeted to an endpoint without a WebSocket
    HERE = "here"  # answered here: refused, an error, or a conversation that cannot be carried whole


PROVIDER, ENDPOINT_WS, HTTPS, HERE = Carrier.PROVIDER, Carrier.ENDPOINT_WS, Carrier.HTTPS, Carrier.HERE


@dataclass
class MessageRequest:
    """A ``response.create`` message read as the HTTPS request it stands for."""

    pretty_host: str
    port: int
    path: str
    headers: Any  # the upgrade's headers (mitmproxy's Headers, or anything with items(multi=True))
    body: bytes
    doc: dict[str, Any]  # the JSON object ``body`` was dumped from
    method: str = "POST"

    def get_content(self, strict: bool = False) -> bytes:
        return self.body


def message_request(doc: dict[str, Any], transcript: Transcript, *, host: str, port: int, path: str,
                    headers: Any) -> tuple[MessageRequest, list | None]:
    conversation = transcript.conversation(doc)
    whole = https_body(doc, conversation)
    return MessageRequest(host, port, path, headers, jsonc.dumpb(whole), whole), conversation


def plan_message(doc: dict[str, Any], transcript: Transcript, *, host: str, port: int, path: str, headers: Any,
                 rules: Rules, health: EndpointHealth, capacity: Capacity, provider_hosts: Mapping[str, str],
                 keeper: Keeper | None, earned: Any = None, quota: Any = None) -> tuple[Planning | None, list | None]:
    """The planning of the message's turn (None: not a provider turn) and its whole conversation
    (``earned``: the proxy's earned routes, ``quota``: its board of subscription windows, as an
    HTTPS turn's planning reads them)."""
    req, conversation = message_request(doc, transcript, host=host, port=port, path=path, headers=headers)
    return Planning.of(req, rules=rules, health=health, capacity=capacity, provider_hosts=provider_hosts,
                       keeper=keeper, earned=earned, quota=quota, parsed=req.doc), conversation


def carrier(turn: Turn, *, conversation_known: bool, endpoint_websocket: bool = True) -> Carrier:
    """Where the planned turn goes (``endpoint_websocket``: False once the endpoint answered an
    upgrade with no WebSocket)."""
    if turn.local is not None or turn.action == Action.RESPOND:
        return HERE
    if turn.action == Action.PASS:
        return PROVIDER
    if not conversation_known:
        return HERE
    if turn.action == Action.RETARGET and endpoint_websocket:
        return ENDPOINT_WS
    return HTTPS
