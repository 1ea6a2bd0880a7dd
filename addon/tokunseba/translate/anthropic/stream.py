"""Anthropic Messages streams <-> neutral events (docs/dev/protocols.md A.6, E.5).

``AnthropicDecoder`` turns an upstream's SSE events into neutral events; ``AnthropicEncoder``
turns neutral events into the Anthropic SSE a client expects: every event with its
``event:`` line, ``usage`` always present in ``message_start`` and ``message_delta`` and
holding only reported fields, ascending block indexes, a ``content_block_stop`` per block.
Both are sans-IO and keep per-event work to one JSON parse / one JSON dump.
"""

from __future__ import annotations

from typing import Any

import time
from collections.abc import Callable

from ... import jsonc
from ...neutral import UpstreamError, status_for_type
from ...neutral import odd_id
from ...neutral import ReplyReport, note_once
from ...neutral import Usage
from ...protocols import anthropic as pa
from ...sse import KEEPALIVE_COMMENT, SSEEvent, encode_event
from ...neutral import (
    EARLY_END,
    KEEPALIVE,
    BlockDelta,
    BlockKind,
    BlockSignature,
    BlockStart,
    BlockStop,
    Event,
    KeepAlive,
    MessageStart,
    MessageStop,
    StreamError,
    UsageUpdate,
)

# content block type -> neutral block kind ("other" for server-tool blocks and the like)
BLOCK_KINDS: dict[str, BlockKind] = {
    "text": "text",
    "tool_use": "tool_use",
    "thinking": "thinking",
    "redacted_thinking": "redacted_thinking",
}
# delta type -> the field holding its text
DELTA_TEXT: dict[str, str] = {
    "text_delta": "text",
    "input_json_delta": "partial_json",
    "thinking_delta": "thinking",
}
# neutral block kind -> (content block a client sees at start, delta type, delta field)
OUT_BLOCKS: dict[str, tuple[dict[str, Any], str, str]] = {
    "text": ({"type": "text", "text": ""}, "text_delta", "text"),
    "tool_use": ({"type": "tool_use", "input": {}}, "input_json_delta", "partial_json"),
    "thinking": ({"type": "thinking", "thinking": "", "signature": ""}, "thinking_delta", "thinking"),
}



DELTA_HEAD = b'event: content_block_delta\ndata: {"type":"content_block_delta","index":'
# neutral block kind -> the bytes between the index and the delta's text
DELTA_MIDDLE: dict[str, bytes] = {kind: b',"delta":{"type":"%s","%s":' % (d.encode(), f.encode())
                                  for kind, (_, d, f) in OUT_BLOCKS.items()}


class AnthropicDecoder:
    """Anthropic SSE events -> neutral events. Block indexes are re-numbered 0, 1, ... in
    arrival order; usage is cumulative (message_delta overwrites, never adds: docs/dev/pitfalls.md 15)."""

    def __init__(self, report: ReplyReport) -> None:
        self.report = report
        self.usage: Usage | None = None  # the usage as reported so far (merged)
        self._index: dict[object, int] = {}  # upstream block index -> neutral index
        self._next = 0
        self._stop: MessageStop | None = None  # message_delta's stop, sent at message_stop: only then is
        # the stream complete (a stream cut after message_delta must not end cleanly for the client)
        self._ended = False  # message_stop or error seen

    def on_event(self, ev: SSEEvent) -> list[Event]:
        if ev.event == "ping":
            return [KEEPALIVE]
        if not ev.data:
            return []
        try:
            d = jsonc.loads(ev.data)
        except jsonc.JSONDecodeError as e:
            return self._error(f"upstream sent an event that is not valid JSON ({e})")
        if not isinstance(d, dict):
            return self._error("upstream sent an event that is not a JSON object")
        kind = d.get("type") or ev.event
        handler = self._HANDLERS.get(kind if isinstance(kind, str) else "")
        if handler is None:
            note_once(self.report.warnings, f"ignored unknown Anthropic stream event {kind!r}")
            return []
        return handler(self, d)

    def close(self) -> list[Event]:
        if self._ended:
            return []
        self._ended = True
        return [StreamError(500, "api_error", EARLY_END)]

    # ---- handlers ----
    def _message_start(self, d: dict[str, Any]) -> list[Event]:
        m = d.get("message") or {}
        if m.__class__ is not dict:
            return self._odd("message")
        u = m.get("usage")
        self.usage = Usage(pa.COUNTING_NAME, u) if isinstance(u, dict) and u else None  # {}: nothing reported yet
        mid = m.get("id")
        if mid is not None and type(mid) is not str:
            odd_id("id", self.report.dropped)
            mid = None
        return [MessageStart(mid, m.get("model"), self.usage)]

    def _block_start(self, d: dict[str, Any]) -> list[Event]:
        cb = d.get("content_block") or {}
        index = d.get("index")
        if cb.__class__ is not dict or index.__class__ in UNHASHABLE:
            return self._odd("content_block" if cb.__class__ is not dict else "index")
        n = self._next
        self._next += 1
        self._index[index] = n
        kind = BLOCK_KINDS.get(str(cb.get("type")), "other")
        if kind == "text":
            out: list[Event] = [BlockStart(n, "text")]
            first = cb.get("text")
        elif kind == "tool_use":
            out = [BlockStart(n, "tool_use", id=cb.get("id"), name=cb.get("name"))]
            first = jsonc.dumps(cb["input"]) if cb.get("input") else None  # a whole input at start
        elif kind == "thinking":  # signed protocol: "" now, the signature follows in signature_delta
            out = [BlockStart(n, "thinking", signature=cb.get("signature") or "", raw=cb)]
            first = cb.get("thinking")
        else:
            out = [BlockStart(n, kind, id=cb.get("id"), name=cb.get("name"), raw=cb)]
            first = None
        if first:
            if first.__class__ is not str:
                return self._odd(f"content_block.{cb.get('type')}")
            out.append(BlockDelta(n, first))
        return out

    def _block_delta(self, d: dict[str, Any]) -> list[Event]:
        index = d.get("index")
        delta = d.get("delta") or {}
        if delta.__class__ is not dict or index.__class__ in UNHASHABLE:
            return self._odd("delta" if delta.__class__ is not dict else "index")
        n = self._index.get(index)
        dt = delta.get("type")
        if n is None:
            note_once(self.report.warnings, "ignored a content_block_delta for a block that never started")
            return []
        field = DELTA_TEXT.get(dt) if isinstance(dt, str) else None
        if field is not None:
            text = delta.get(field)
            if text and text.__class__ is not str:
                return self._odd(f"delta.{field}")
            return [BlockDelta(n, text)] if text else []
        if dt == "signature_delta":
            return [BlockSignature(n, delta.get("signature") or "")]
        if dt == "citations_delta":
            note_once(self.report.dropped, "content[].citations")
            return []
        note_once(self.report.warnings, f"ignored unknown Anthropic delta {dt!r}")
        return []

    def _block_stop(self, d: dict[str, Any]) -> list[Event]:
        index = d.get("index")
        if index.__class__ in UNHASHABLE:
            return self._odd("index")
        n = self._index.get(index)
        return [] if n is None else [BlockStop(n)]

    def _message_delta(self, d: dict[str, Any]) -> list[Event]:
        delta = d.get("delta") or {}
        if delta.__class__ is not dict:
            return self._odd("delta")
        u = d.get("usage")
        if isinstance(u, dict) and u:  # cumulative: overwrite, never add (docs/dev/pitfalls.md 15)
            self.usage = self.usage.merged(u) if self.usage else Usage(pa.COUNTING_NAME, u)
        for key in ("stop_details", "container"):
            if delta.get(key) is not None:
                note_once(self.report.dropped, key)  # named by their place in a whole message
        stop, seq = delta.get("stop_reason"), delta.get("stop_sequence")
        if (stop is not None and type(stop) is not str) or (seq is not None and type(seq) is not str):
            stop, seq = odd_stop(stop, seq, self.report.dropped)
        self._stop = MessageStop(stop, seq, self.usage)
        return []

    def _message_stop(self, d: dict[str, Any]) -> list[Event]:
        if self._ended:
            return []
        if self._stop is not None:
            self._ended = True
            return [self._stop]
        return self._error("upstream sent message_stop without a message_delta (no stop reason)")

    def _error_event(self, d: dict[str, Any]) -> list[Event]:
        e = _o if isinstance(_o := d.get("error"), dict) else {}
        etype: str = e["type"] if isinstance(e.get("type"), str) else "api_error"
        self._ended = True
        return [StreamError(status_for_type(etype), etype, e.get("message") or "upstream error")]

    def _error(self, message: str) -> list[Event]:
        self._ended = True
        return [StreamError(502, "api_error", message)]

    def _odd(self, path: str) -> list[Event]:
        """The error that ends a stream whose event has a value of the wrong type at ``path``
        (ODD_FIELDS), as for an event that is not JSON."""
        return self._error(f"upstream sent an event whose {path} has a value of the wrong type")

    _HANDLERS: dict[str, Callable[["AnthropicDecoder", dict[str, Any]], list[Event]]] = {
        "message_start": _message_start,
        "content_block_start": _block_start,
        "content_block_delta": _block_delta,
        "content_block_stop": _block_stop,
        "message_delta": _message_delta,
        "message_stop": _message_stop,
        "error": _error_event,
        "ping": lambda self, d: [KEEPALIVE],
    }


# Stop fields of a reply that are not the documented string (or null): each is dropped and
# recorded under its place in a whole message, as an absent one would be (a neutral stop
# reason is a string; an unknown string is kept and each encoder maps it with a warning).
STOP_FIELDS = (
    ("stop_reason", "a string naming why the turn ended; any other value carries no reason"),
    ("stop_sequence", "the matched stop string; any other value matches nothing"),
)


# Stream-event fields whose value of the wrong type ends the stream with a 502 error event (as
# an event that is not JSON does): nothing of the turn can be placed without them.
ODD_FIELDS = (
    ("message", "message_start's message object: the turn's id, model and usage"),
    ("content_block", "content_block_start's block object: the block's kind"),
    ("index", "a block's index must be a JSON scalar to name the block (a list or object names none)"),
    ("delta", "the delta object of content_block_delta / message_delta"),
    ("content_block.text / .thinking, delta.text / .partial_json / .thinking",
     "text that is not a string: no client protocol can carry it (the whole reply is a 502 too)"),
)
UNHASHABLE = (list, dict)  # JSON values that cannot be an index key


def odd_stop(stop: object, seq: object, dropped: list[str]) -> tuple[str | None, str | None]:
    """(stop_reason, stop_sequence) with a value that is not a string dropped and recorded
    (STOP_FIELDS); called on the error path only."""
    values = []
    for (field, _reason), value in zip(STOP_FIELDS, (stop, seq)):
        if value is not None and type(value) is not str:
            note_once(dropped, field)
            value = None
        values.append(value)
    return values[0], values[1]


def _event(name: str, obj: dict[str, Any]) -> bytes:
    return encode_event(jsonc.dumpb(obj), name)


def mint_message_id(created: int, report: ReplyReport) -> str:
    """The id of a reply whose upstream sent none: the Anthropic schema requires a string."""
    note_once(report.warnings, "id_synthesized: id (the upstream sent no message id; Anthropic requires one)")
    return f"msg_tk_{created}"


class AnthropicEncoder:
    """Neutral events -> Anthropic SSE bytes for a client."""

    def __init__(self, report: ReplyReport, *, created: int | None = None) -> None:
        self.report = report
        self.created = int(time.time()) if created is None else created
        self.finished = False  # message_stop or an error was sent: nothing more goes out
        self.client_usage: dict[str, Any] | None = None
        self._out: dict[int, int] = {}  # neutral index -> output index (absent: dropped block)
        self._kind: dict[int, str] = {}  # neutral index -> kind, for emitted blocks
        self._closed: set[int] = set()
        self._open: int | None = None  # neutral index of the open block
        self._next = 0
        self._tool = False  # a tool_use block was emitted
        self._started = False

    def encode(self, ev: Event) -> bytes:
        if self.finished:
            return b""
        return self._HANDLERS[type(ev)](self, ev)

    def _message_start(self, ev: MessageStart) -> bytes:
        if self._started:
            return b""
        self._started = True
        usage = pa.COUNTING.write(ev.usage) if ev.usage else {}  # {}: nothing measured yet, never zeros
        msg: dict[str, Any] = {"id": ev.id or mint_message_id(self.created, self.report), "type": "message", "role": "assistant", "model": ev.model, "content": [],
               "stop_reason": None, "stop_sequence": None, "usage": usage}
        return _event("message_start", {"type": "message_start", "message": msg})

    def _close_open(self) -> bytes:
        n = self._open
        if n is None:
            return b""
        self._open = None
        self._closed.add(n)
        return _event("content_block_stop", {"type": "content_block_stop", "index": self._out[n]})

    def _block_start(self, ev: BlockStart) -> bytes:
        kind = ev.kind
        if kind not in OUT_BLOCKS or (kind == "thinking" and ev.signature is None):
            # unsigned thinking (a Chat model's reasoning) would be echoed back by Claude Code
            # and break the next Anthropic turn: drop it (docs/dev/pitfalls.md 17, 18); so are blocks with
            # no Anthropic-client counterpart here.
            raw = ev.raw or {}
            note_once(self.report.dropped, raw.get("source") or f"content[].{raw.get('type') or kind}")
            return b""
        if kind == "tool_use":
            problem = pa.tool_id_problem(ev.id)
            if problem:
                return self._stream_error(StreamError(502, "api_error", problem))
            block: dict[str, Any] = {"type": "tool_use", "id": ev.id, "name": ev.name or "", "input": {}}
            self._tool = True
        else:
            block = OUT_BLOCKS[kind][0]
        head = self._close_open()
        i = self._next
        self._next += 1
        self._out[ev.index] = i
        self._kind[ev.index] = kind
        self._open = ev.index
        return head + _event("content_block_start", {"type": "content_block_start", "index": i, "content_block": block})

    def _block_delta(self, ev: BlockDelta) -> bytes:
        i = self._out.get(ev.index)
        if i is None:
            return b""  # a dropped block
        if ev.index in self._closed:
            note_once(self.report.warnings, "a delta arrived for a block already closed; sent with that block's index")
        # the hot path of every stream: the bytes _event would write for
        # {"type":"content_block_delta","index":i,"delta":{"type":dtype,field:text}}, written directly
        return b"".join((DELTA_HEAD, str(i).encode(), DELTA_MIDDLE[self._kind[ev.index]], jsonc.dumpb(ev.text),
                         b"}}\n\n"))

    def _block_signature(self, ev: BlockSignature) -> bytes:
        i = self._out.get(ev.index)
        if i is None or self._kind[ev.index] != "thinking":
            return b""
        return _event("content_block_delta", {"type": "content_block_delta", "index": i,
                                              "delta": {"type": "signature_delta", "signature": ev.signature}})

    def _block_stop(self, ev: BlockStop) -> bytes:
        return self._close_open() if ev.index == self._open else b""

    def _message_stop(self, ev: MessageStop) -> bytes:
        out = self._close_open()
        stop = ev.stop_reason
        if self._tool and stop in ("end_turn", None):
            stop = "tool_use"  # derived from what was emitted (docs/dev/pitfalls.md 7)
        usage = pa.COUNTING.write(ev.usage) if ev.usage else None
        self.client_usage = usage
        self.finished = True
        rep = self.report
        rep.stop_reason, rep.completed = stop, True
        delta = {"stop_reason": stop, "stop_sequence": ev.stop_sequence}
        return (out
                + _event("message_delta", {"type": "message_delta", "delta": delta, "usage": usage or {}})
                + _event("message_stop", {"type": "message_stop"}))

    def _stream_error(self, ev: StreamError) -> bytes:
        _, etype, message = pa.from_upstream_error(UpstreamError(ev.status, ev.message, ev.type, ev.code))
        self.finished = True
        self.report.errors.append(message)
        return pa.sse_error(etype, message)

    def _usage_update(self, ev: UsageUpdate) -> bytes:
        return b""  # after message_delta nothing more can carry it; the report has it

    def _keep_alive(self, ev: KeepAlive) -> bytes:
        # a ping, as the API sends it, once message_start is out (the SDKs skip it); before
        # that an SSE comment, so a client that wants message_start first still gets it first
        return pa.SSE_PING if self._started else KEEPALIVE_COMMENT

    _HANDLERS: dict[type, Callable[["AnthropicEncoder", Any], bytes]] = {  # each handler takes its own event class
        MessageStart: _message_start,
        BlockStart: _block_start,
        BlockDelta: _block_delta,
        BlockSignature: _block_signature,
        BlockStop: _block_stop,
        MessageStop: _message_stop,
        StreamError: _stream_error,
        UsageUpdate: _usage_update,
        KeepAlive: _keep_alive,
    }
