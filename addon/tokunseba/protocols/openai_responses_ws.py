"""Responses over WebSocket, the wire format (a protocol fact; pure, sans-IO): what a message of
Codex's WebSocket session is, and the server's events read from its messages.

Contract:
- ``is_upgrade``: whether a request is Codex's WebSocket upgrade of its Responses turn path;
- ``read_client_message``: a client message is a turn (``response.create``), a warm-up
  (``response.create`` with ``generate: false``: answered by the provider with an empty
  response, never a turn) or something else (left alone);
- ``ServerEvents``: the server's text messages in (whole, or in fragments: ``feed(data,
  end=…)``), one ``ServerEvent`` per message out; what comes out never depends on how a
  message was split into fragments;
- ``as_sse``: one server event as the SSE event an HTTPS reply would have carried (what the
  stream watch and the pump read: turn/pump.py), its JSON on one ``data:`` line; ``is_delta``
  whether a message is a delta, from its first bytes (one C call: the passed-on turn's fast
  path, most of a reply's messages carry nothing its record reads), ``delta_type`` its type;
- ``SseMessages``: SSE bytes in (an HTTPS reply: translated or passed on), the WebSocket
  messages carrying its events out, one per event, in order, whatever the split of the
  bytes (keep-alive comments have no message).
The protocol's facts (message types, terminal events) are in protocols/openai_responses.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .. import jsonc
from . import openai_responses as p_responses
from .detect import detect
from ..sse import SSEDecoder, SSEEvent

TURN, WARMUP, OTHER = "turn", "warmup", "other"


def is_upgrade(*, method: str, host: str, path: str, headers: Iterable[tuple[str, str]],
               extra_hosts: Mapping[str, str] | None = None) -> bool:
    """Whether this is Codex's WebSocket upgrade of its Responses turn path (GET /v1/responses;
    GET /backend-api/codex/responses at the ChatGPT backend) to a Responses host."""
    if method != "GET" or not path.split("?", 1)[0].endswith("/responses"):
        return False
    hdrs = {k.lower(): v for k, v in headers}
    if "websocket" not in hdrs.get("upgrade", "").lower():
        return False
    det = detect(host, path, "POST", extra_hosts)  # the path a POST of the turn would take
    return det is not None and det.protocol == p_responses.PROTOCOL and det.kind == p_responses.FACTS.turn_kinds[1]


@dataclass(frozen=True)
class ClientMessage:
    kind: str  # TURN | WARMUP | OTHER
    doc: dict[str, Any] | None  # the message's JSON object (None: not one)


def read_client_message(payload: bytes) -> ClientMessage:
    """What a client text message is (never raises)."""
    try:
        doc = jsonc.loads(payload)
    except Exception:
        return ClientMessage(OTHER, None)
    if not isinstance(doc, dict) or doc.get("type") != p_responses.WS_CREATE:
        return ClientMessage(OTHER, doc if isinstance(doc, dict) else None)
    if doc.get(p_responses.WS_WARMUP_FIELD) is False:
        return ClientMessage(WARMUP, doc)
    return ClientMessage(TURN, doc)


@dataclass(slots=True)
class ServerEvent:
    type: str | None  # the event's ``type`` (None: not a JSON object with one)
    doc: dict[str, Any] | None
    payload: bytes  # the message's bytes, as the server sent them

    @property
    def terminal(self) -> bool:
        """Whether it ends a response (completed, failed, incomplete, or an ``error``)."""
        return self.type in p_responses.WS_TERMINAL_EVENTS

    def failure(self) -> tuple[int, str] | None:
        """An ``error`` event's status (as it says, else 500) and message; None for any other
        event (a ``response.failed`` is judged as over HTTPS: the stream watch says it)."""
        if self.type != "error" or self.doc is None:
            return None
        st, err = self.doc.get("status"), self.doc.get("error")
        msg = err.get("message") if isinstance(err, dict) else self.doc.get("message")
        return (st if isinstance(st, int) else 500), (msg if isinstance(msg, str) and msg else "upstream error event")

    @property
    def response_id(self) -> str | None:
        r = self.doc.get("response") if self.doc is not None else None
        rid = r.get("id") if isinstance(r, dict) else None
        return rid if isinstance(rid, str) else None


_HEAD = b'{"type":'  # then '"' (compact JSON) or ' "'
_SKIPPED = frozenset(t.encode() for t in p_responses.FACTS.skipped_events)  # deltas: most of a reply
_DELTA_HEADS = tuple(_HEAD + space + b'"' + name + b'"' for name in sorted(_SKIPPED) for space in (b"", b" "))


def is_delta(payload: bytes) -> bool:
    """Whether the message is a delta written the usual way (``type`` first: ``delta_type``),
    read from its first bytes only."""
    return payload.startswith(_DELTA_HEADS)


def delta_type(payload: bytes) -> bytes | None:
    """The type of a delta (the protocol's ``skipped_events``: nothing in it ends a turn, names
    a response or carries usage) written the usual way (``type`` first), read from its first
    bytes; None for any other message."""
    if not payload.startswith(_DELTA_HEADS):  # one C call: most messages of a reply
        return None
    start = payload.index(b'"', len(_HEAD)) + 1
    return payload[start:payload.index(b'"', start)]


def server_event(payload: bytes) -> ServerEvent:
    """The event a server message carries. A delta (the protocol's ``skipped_events``: nothing
    in it ends a turn, names a response or carries usage) written the usual way (``type``
    first) is not parsed here: its type is read from its first bytes, and the stream watch
    checks that its client can read it (turn/stream_watch.py)."""
    name = delta_type(payload)
    if name is not None:
        return ServerEvent(name.decode(), None, payload)
    try:
        doc = jsonc.loads(payload)
    except Exception:
        doc = None
    if not isinstance(doc, dict):
        return ServerEvent(None, None, payload)
    t = doc.get("type")
    return ServerEvent(t if isinstance(t, str) else None, doc, payload)


class ServerEvents:
    """The server's messages in, one event per message out (fragments joined first)."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes, *, end: bool = True) -> list[ServerEvent]:
        """``data``: a fragment of the current message; ``end``: it is the message's last."""
        if not end:
            self._buf += data
            return []
        if self._buf:
            self._buf += data
            data, self._buf = bytes(self._buf), bytearray()
        return [server_event(data)]

    @property
    def pending(self) -> bool:
        """A message begun and not ended."""
        return bool(self._buf)


def as_sse(ev: ServerEvent) -> bytes:
    """The event as SSE (``event: TYPE`` and its JSON on one ``data:`` line). Raw line breaks in
    a JSON text are whitespace (inside strings they are escaped): they become spaces."""
    data = ev.payload.replace(b"\r", b" ").replace(b"\n", b" ")
    head = b"event: " + ev.type.encode() + b"\n" if ev.type else b""
    return head + b"data: " + data + b"\n\n"


class SseMessages:
    """SSE bytes in, one WebSocket message (the event's JSON) per event out."""

    __slots__ = ("_sse",)

    def __init__(self) -> None:
        self._sse = SSEDecoder(comments=True)

    def feed(self, data: bytes) -> list[bytes]:
        return self._messages(self._sse.feed(data)) if data else []

    def close(self) -> list[bytes]:
        return self._messages(self._sse.close())

    @staticmethod
    def _messages(events: list[SSEEvent]) -> list[bytes]:
        return [ev.data.encode() for ev in events if not ev.comment and ev.data]
