"""A Responses WebSocket connection's transcript (pure): what each response of the connection
continues, so a turn can be carried whole wherever its route sends it.

Codex continues a session with ``previous_response_id`` and only the new input items. The
provider knows the responses it produced; an endpoint a turn is routed to knows none, and the
provider knows none of the ones tokunseba made. So the connection keeps, per response id, the
conversation through that response (its input items, then its output items):

- ``conversation(doc)``: the whole input of a ``response.create`` message (the items through
  its previous response, then its own), or None when it names a response not kept here;
- ``for_provider(doc)``: the message as it may go to the provider: None (untouched, byte for
  byte) unless it continues a response tokunseba made, then the whole conversation with no
  ``previous_response_id`` (the provider never produced that response);
- ``https_body(doc, conversation)``: the body the same turn has over HTTPS (streamed, the
  message's own fields dropped), the conversation as its input when it is known;
- ``answered(...)``: a response ended, its output kept (``ours``: made by tokunseba).
``Reply`` collects one response's id and output items from its events. At most
``MAX_RESPONSES`` responses are kept (the oldest go first).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from ..protocols import openai_responses as p_responses

MAX_RESPONSES = 64  # a session continues its last response: a few are plenty
PREVIOUS = "previous_response_id"


class Transcript:
    __slots__ = ("_items", "_ours")

    def __init__(self) -> None:
        self._items: OrderedDict[str, list[Any]] = OrderedDict()
        self._ours: set[str] = set()

    def __len__(self) -> int:
        return len(self._items)

    def ours(self, response_id: str) -> bool:
        return response_id in self._ours

    def conversation(self, doc: dict[str, Any]) -> list[Any] | None:
        """The whole input the message stands for; None when its previous response is unknown."""
        own = doc.get("input")
        items = own if isinstance(own, list) else ([{"role": "user", "content": own}] if isinstance(own, str) else [])
        prev = doc.get(PREVIOUS)
        if prev is None:
            return list(items)
        before = self._items.get(prev) if isinstance(prev, str) else None
        return None if before is None else [*before, *items]

    def for_provider(self, doc: dict[str, Any]) -> dict[str, Any] | None:
        """None: the message goes to the provider untouched; else the message to send instead
        (it continues a response tokunseba made: the whole conversation, no previous id)."""
        prev = doc.get(PREVIOUS)
        if not isinstance(prev, str) or prev not in self._ours:
            return None
        whole = self.conversation(doc)
        out = {k: v for k, v in doc.items() if k != PREVIOUS}
        out["input"] = whole if whole is not None else doc.get("input", [])
        return out

    def answered(self, response_id: str | None, conversation: list[Any] | None, output: list[Any], *,
                 ours: bool) -> None:
        """A response ended: the conversation through it kept (not when its input was unknown)."""
        if not response_id or conversation is None:
            return
        self._items[response_id] = [*conversation, *output]
        self._items.move_to_end(response_id)
        if ours:
            self._ours.add(response_id)
        while len(self._items) > MAX_RESPONSES:
            old, _ = self._items.popitem(last=False)
            self._ours.discard(old)


def https_body(doc: dict[str, Any], conversation: list[Any] | None) -> dict[str, Any]:
    """The turn's body as an HTTPS POST would carry it: streamed, without the message's own
    fields; with the whole conversation as its input when it is known (then no previous id)."""
    body = {k: v for k, v in doc.items() if k not in p_responses.WS_ONLY_FIELDS}
    if conversation is not None:
        body.pop(PREVIOUS, None)
        body["input"] = conversation
    body["stream"] = True
    return body


class Reply:
    """One response's id and output items, from its events (server messages, or the events
    tokunseba writes into the client's WebSocket for a routed turn)."""

    __slots__ = ("response_id", "output", "_done")

    def __init__(self) -> None:
        self.response_id: str | None = None
        self.output: list[Any] = []
        self._done: list[Any] = []  # output_item.done items, in order

    def on(self, doc: dict[str, Any] | None) -> None:
        if not isinstance(doc, dict):
            return
        t = doc.get("type")
        r = doc.get("response")
        if isinstance(r, dict) and isinstance(r.get("id"), str):
            self.response_id = r["id"]
        if t == "response.output_item.done" and isinstance(doc.get("item"), dict):
            self._done.append(doc["item"])
            self.output = list(self._done)
        elif t in p_responses.WS_TERMINAL_EVENTS and isinstance(r, dict) and isinstance(r.get("output"), list) \
                and r["output"]:
            self.output = list(r["output"])
