"""OpenAI Responses streams <-> neutral events (docs/dev/protocols.md C.3, E.5).

``ResponsesDecoder`` reads a Responses upstream's events: ``response.created`` starts the
message, each output item is a block (``message`` -> text, ``function_call`` -> tool_use
with ``call_id`` byte for byte, ``reasoning`` -> unsigned thinking, anything else -> other),
text / refusal / argument deltas are block deltas (an item that arrives whole in
``output_item.done`` gives its content there), ``response.completed`` / ``.incomplete``
stop with the status mapped (protocols/openai_responses.py) and usage as reported,
``response.failed`` and ``error`` are errors.

``ResponsesEncoder`` writes what Codex and the openai SDK's ``responses.stream()`` helper need
(docs/dev/clients.md §3.5, §4): ``response.created`` + ``response.in_progress``, then per output item
``output_item.added`` / content events / ``output_item.done`` with the complete item, then
``response.completed`` with the full snapshot and usage; every event has its ``event:`` line,
its ``type`` and a ``sequence_number`` counting from 0.

Mapping of the neutral blocks: text -> a ``message`` item with one ``output_text`` part;
tool_use -> a ``function_call`` item whose ``call_id`` is the tool id byte for byte (never
blank: docs/dev/pitfalls.md 9) and whose argument fragments go out verbatim — or, for a tool the client's
request declared freeform or in a namespace (``ReplyReport.client_tools``, neutral/tools.py),
a ``custom_tool_call`` whose input is decoded from the ``{"input": ...}`` arguments as they
arrive (``response.custom_tool_call_input.delta``; arguments of any other shape go back raw,
recorded ``unwrap_failed``), or a ``function_call`` with its namespace and name as declared
(``call_item``); thinking and other blocks are
dropped and recorded (an unsigned local reasoning summary is no OpenAI reasoning item, and no
``encrypted_content`` is ever invented).

Protocol plumbing the client requires, minted deterministically (not recorded as synthesis):
item ids ``msg_<upstream id>_<output index>`` / ``fc_<upstream id>_<output index>`` (the
upstream id reduced to ``[A-Za-z0-9_-]``). The response id is the upstream's message id as it
is; only when the upstream gave none is ``resp_tk_<created>`` minted (recorded as
``id_synthesized: response.id``), since Codex cannot parse a completion without an id.

Two choices the protocol forces:
- A Chat upstream may interleave the argument fragments of parallel calls, so a call's block
  can receive fragments after it was closed. The completion events of a ``function_call``
  (``function_call_arguments.done`` + ``output_item.done``) are therefore held until the next
  text block or the end of the message; everything else goes out at once (docs/dev/architecture.md rule 5).
  An empty argument string is completed as ``"{}"`` (docs/dev/protocols.md A.6: "" means no arguments).
- ``max_tokens`` / ``refusal`` end in ``response.completed`` with status ``incomplete`` and
  ``incomplete_details`` (Codex has no branch for ``response.incomplete``), with a warning.
"""

from __future__ import annotations

from typing import Any

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ... import jsonc
from ...neutral import UpstreamError, error_type_for_status
from ...protocols import is_context_window
from ...neutral import odd_id, safe
from ...neutral import ReplyReport, note_once
from ...neutral import ClientTool, FreeformInputStream, freeform_input
from ...neutral import Usage
from ...protocols import openai_chat as po
from ...protocols import openai_responses as pr
from ...sse import KEEPALIVE_COMMENT, SSEEvent
from ...sse import encode_event
from ...neutral import (
    EARLY_END,
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

__all__ = ["ResponsesEncoder", "ResponsesDecoder", "EMPTY_ARGUMENTS", "item_id", "message_item",
           "function_call_item", "call_item", "call_kind", "client_tool", "response_id", "response_snapshot", "responses_usage", "status_for_stop",
           "failed_code"]

ITEM_PREFIX = {"message": "msg", "function_call": "fc", "custom_tool_call": "ctc"}
EMPTY_ARGUMENTS = "{}"


# ---- the Responses shapes, shared with the whole-reply encoder (reply.py) ----

def item_id(kind: str, message_id: str | None, output_index: int, safe_id: str | None = None) -> str:
    """The deterministic id of output item ``output_index`` (protocol plumbing); ``safe_id``:
    ``safe(message_id)`` when the caller has it already."""
    return f"{ITEM_PREFIX[kind]}_{safe(message_id) if safe_id is None else safe_id}_{output_index}"


def message_item(iid: str, text: str, status: str = "completed") -> dict[str, Any]:
    content = [{"type": "output_text", "annotations": [], "text": text}] if status == "completed" else []
    return {"id": iid, "type": "message", "status": status, "content": content, "role": "assistant"}


def function_call_item(iid: str, call_id: str, name: str, arguments: str, status: str = "completed") -> dict[str, Any]:
    return {"id": iid, "type": "function_call", "status": status, "arguments": arguments, "call_id": call_id,
            "name": name}


def client_tool(report: ReplyReport, name: str | None) -> ClientTool | None:
    """The client's tool behind a neutral call's name, when the client's request declared it
    in a shape of its own (a freeform or namespaced tool: neutral/tools.py)."""
    tools = report.client_tools
    return tools.get(name) if tools and name else None


def call_kind(tool: ClientTool | None) -> str:
    """The output item kind of a call of ``tool`` (client_tool): a freeform one's, or a function call."""
    return "custom_tool_call" if tool is not None and tool.freeform else "function_call"


def unwrapped_input(tool: ClientTool, arguments: str, warnings: list[str]) -> str:
    """A freeform call's input from its function's arguments: exactly ``{"input": <string>}``
    gives that string; anything else is handed back raw (recorded ``unwrap_failed``): Codex
    then tells the model why its call failed. Never guessed."""
    text = freeform_input(arguments)
    if text is None:
        note_once(warnings, f"unwrap_failed: {tool.name}: the arguments were not exactly "
                            "{\"input\": <string>}; the model's raw argument text sent as the input")
        return arguments
    return text


def call_item(iid: str, call_id: str, name: str, arguments: str, tool: ClientTool | None,
              warnings: list[str], status: str = "completed") -> dict[str, Any]:
    """The output item of a tool call: a ``function_call``, or, for a tool the client declared
    in its own shape, its freeform ``custom_tool_call`` / its namespaced call (the namespace
    and name as declared: Codex routes a call by that pair)."""
    if status == "completed":
        arguments = arguments or EMPTY_ARGUMENTS  # "" means no arguments (docs/dev/protocols.md A.6)
    if tool is None:
        return function_call_item(iid, call_id, name, arguments, status)
    ns = {"namespace": tool.namespace} if tool.namespace else {}
    if tool.freeform:
        text = unwrapped_input(tool, arguments, warnings) if status == "completed" else arguments
        return {"id": iid, "type": "custom_tool_call", "status": status, "call_id": call_id, **ns, "name": tool.name,
                "input": text}
    return {"id": iid, "type": "function_call", "status": status, "arguments": arguments,
            "call_id": call_id, **ns, "name": tool.name}


def response_id(message_id: str | None, created: int, warnings: list[str]) -> str:
    """The upstream's message id as it is; minted (and recorded) only when there is none."""
    if message_id:
        return message_id
    note_once(warnings, "id_synthesized: response.id")
    return f"resp_tk_{created}"


def response_snapshot(rid: str, created_at: int, status: str, model: str | None, output: list[dict[str, Any]],
                      **extra: object) -> dict[str, Any]:
    return {"id": rid, "object": "response", "created_at": created_at, "status": status, "model": model,
            "output": output, **extra}


def responses_usage(usage: Usage | None, warnings: list[str]) -> dict[str, Any] | None:
    """The Responses usage object for an upstream's usage (E.4: Chat semantics, input includes
    cached tokens; total = input + output is arithmetic). None when nothing was reported, or
    when input or output is missing: Codex fails to parse a usage without all three ints, and
    a zero would be a number nobody measured (the ledger keeps what was reported)."""
    if usage is None:
        return None
    if (plain := usage.plain()) is not None:  # input and output alone: as below, sooner
        return {"input_tokens": plain[0], "output_tokens": plain[1], "total_tokens": plain[0] + plain[1]}
    f = usage.tokens()  # (common_fields' numbers, without its second plain() and its dict)
    inp, outp = f["input"], f["output"]
    if inp is None or outp is None:
        note_once(warnings, "usage lacking input or output tokens sent as null (Codex needs both)")
        return None
    out: dict[str, Any] = {"input_tokens": inp}
    if (cr := f["cache_read"]) is not None:  # Codex requires cached_tokens whenever the details object is there
        details = {"cached_tokens": cr}
        if (cw := f["cache_write"]) is not None:
            details["cache_write_tokens"] = cw
        out["input_tokens_details"] = details
    out["output_tokens"] = outp
    if (rs := f["reasoning"]) is not None:
        out["output_tokens_details"] = {"reasoning_tokens": rs}
    out["total_tokens"] = inp + outp
    return out


def status_for_stop(stop: str | None, warnings: list[str]) -> tuple[str, dict[str, Any] | None]:
    """(status, incomplete_details) for a neutral stop reason; unknown ones complete, warned."""
    status, reason = pr.STOP_TO_STATUS.get(stop or "", (None, None))
    if status is None:
        note_once(warnings, f"unknown stop_reason {stop!r} sent as status 'completed'")
        return "completed", None
    return status, ({"reason": reason} if reason else None)


def failed_code(err: UpstreamError, status: int) -> str:
    """``response.failed`` error code: context overflow, a code Codex acts on, by status, or
    ``server_error``."""
    if is_context_window(err):
        return po.CONTEXT_LENGTH_CODE
    if err.code in pr.CODEX_ERROR_CODES:
        return err.code
    return po.ERROR_CODES.get(status) or "server_error"


# ---- the encoder ----

@dataclass(slots=True, eq=False)  # compared by identity
class _Item:
    kind: str  # "message" | "function_call" | "custom_tool_call"
    out: int  # output_index
    id: str
    call_id: str = ""
    name: str = ""  # the neutral (upstream's) tool name
    parts: list[str] = field(default_factory=list)  # text / argument fragments
    done: bool = False
    delta_fields: bytes = b""  # the bytes of a delta event between its sequence number and its text
    tool: ClientTool | None = None  # the client's own tool behind the name (freeform, namespaced)
    freeform: FreeformInputStream | None = None  # a freeform call's input, decoded as it arrives


# the hot path of every stream: a delta event's bytes, as _ev would write
# {"type": t, "sequence_number": n, "item_id": ..., "output_index": ..., ["content_index": 0,]
#  "delta": text[, "logprobs": []]}, written directly from these pieces (same bytes)
_DELTA_TYPE = {"message": "response.output_text.delta", "function_call": "response.function_call_arguments.delta",
               "custom_tool_call": "response.custom_tool_call_input.delta"}
_DELTA_HEAD = {kind: b'event: %s\ndata: {"type":"%s","sequence_number":' % (t.encode(), t.encode())
               for kind, t in _DELTA_TYPE.items()}
_DELTA_TAIL = {"message": b',"logprobs":[]}\n\n', "function_call": b"}\n\n", "custom_tool_call": b"}\n\n"}
_CALLS = ("function_call", "custom_tool_call")


def _delta_fields(it: _Item) -> bytes:
    head = b',"item_id":' + jsonc.dumpb(it.id) + b',"output_index":' + str(it.out).encode()
    return head + (b',"content_index":0,"delta":' if it.kind == "message" else b',"delta":')


class ResponsesEncoder:
    """Neutral events -> Responses SSE bytes for a client. Exposes ``finished`` (a terminal
    event was sent) and ``client_usage`` (the usage object sent, None when none)."""

    def __init__(self, report: ReplyReport, *, created: int | None = None) -> None:
        self.report = report
        self.created = int(time.time()) if created is None else created
        self.finished = False
        self.client_usage: dict[str, Any] | None = None
        self._rid = ""
        self._model: str | None = None
        self._mid: str | None = None  # upstream message id (item ids are minted from it)
        self._seq = 0
        self._items: dict[int, _Item] = {}  # neutral index -> emitted item
        self._held: list[_Item] = []  # function calls whose completion is held
        self._output: dict[int, dict[str, Any]] = {}  # output_index -> completed item
        self._tool = False
        self._started = False

    def encode(self, ev: Event) -> bytes:
        if self.finished:
            return b""
        return self._HANDLERS[type(ev)](self, ev)

    # ---- wire ----
    def _ev(self, etype: str, **fields: object) -> bytes:
        obj = {"type": etype, "sequence_number": self._seq, **fields}
        self._seq += 1
        return encode_event(jsonc.dumpb(obj), etype)

    def _snapshot(self, status: str, **extra: object) -> dict[str, Any]:
        output = [self._output[i] for i in sorted(self._output)]
        return response_snapshot(self._rid, self.created, status, self._model, output, **extra)

    def _start(self, rid: str | None, model: str | None) -> bytes:
        self._started = True
        self._mid, self._model = rid, model
        self._rid = response_id(rid, self.created, self.report.warnings)
        snap = self._snapshot("in_progress")
        return self._ev("response.created", response=snap) + self._ev("response.in_progress", response=snap)

    # ---- handlers ----
    def _message_start(self, ev: MessageStart) -> bytes:
        return b"" if self._started else self._start(ev.id, ev.model)

    def _block_start(self, ev: BlockStart) -> bytes:
        if ev.kind == "text":
            head = self._flush_held()
            it = self._new_item(ev.index, "message")
            return (head
                    + self._ev("response.output_item.added", output_index=it.out,
                               item=message_item(it.id, "", "in_progress"))
                    + self._ev("response.content_part.added", item_id=it.id, output_index=it.out, content_index=0,
                               part={"type": "output_text", "annotations": [], "text": ""}))
        if ev.kind == "tool_use":
            tool = client_tool(self.report, ev.name)
            it = self._new_item(ev.index, call_kind(tool))
            it.call_id, it.name, it.tool = ev.id or "", ev.name or "", tool
            if not it.call_id:  # decoders synthesize missing ids; a blank call_id hangs Codex (docs/dev/pitfalls.md 9)
                return self._stream_error(StreamError(502, "api_error", "the upstream's tool call has no id"))
            if it.kind == "custom_tool_call":
                it.freeform = FreeformInputStream()
            self._tool = True
            return self._ev("response.output_item.added", output_index=it.out,
                            item=call_item(it.id, it.call_id, it.name, "", tool, self.report.warnings, "in_progress"))
        raw = ev.raw or {}
        note_once(self.report.dropped, raw.get("source") or f"content[].{raw.get('type') or ev.kind}")
        return b""

    def _new_item(self, index: int, kind: str) -> _Item:
        out = len(self._items)
        it = _Item(kind, out, item_id(kind, self._mid, out))
        self._items[index] = it
        return it

    def _block_delta(self, ev: BlockDelta) -> bytes:
        it = self._items.get(ev.index)
        if it is None or not ev.text:
            return b""  # a dropped block
        if it.done:  # e.g. a call's fragment after a later text block: the item already went out whole
            return self._stream_error(StreamError(
                502, "api_error", f"the upstream sent content for output item {it.id} after it was completed"))
        it.parts.append(ev.text)
        text = ev.text
        if it.freeform is not None:  # the input as the JSON string of {"input": ...} arrives, decoded
            text = it.freeform.feed(text)
            if not text:
                return b""
        if not it.delta_fields:
            it.delta_fields = _delta_fields(it)
        seq = self._seq
        self._seq = seq + 1
        return b"".join((_DELTA_HEAD[it.kind], str(seq).encode(), it.delta_fields, jsonc.dumpb(text),
                         _DELTA_TAIL[it.kind]))

    def _block_stop(self, ev: BlockStop) -> bytes:
        it = self._items.get(ev.index)
        if it is None or it.done or it in self._held:
            return b""
        if it.kind in _CALLS:
            self._held.append(it)  # fragments of interleaved parallel calls may still come
            return b""
        return self._complete(it)

    def _complete(self, it: _Item) -> bytes:
        it.done = True
        joined = "".join(it.parts)
        if it.kind == "message":
            part = {"type": "output_text", "annotations": [], "text": joined}
            item = message_item(it.id, joined)
            self._output[it.out] = item
            return (self._ev("response.output_text.done", item_id=it.id, output_index=it.out, content_index=0,
                             text=joined, logprobs=[])
                    + self._ev("response.content_part.done", item_id=it.id, output_index=it.out, content_index=0,
                               part=part)
                    + self._ev("response.output_item.done", output_index=it.out, item=item))
        item = call_item(it.id, it.call_id, it.name, joined, it.tool, self.report.warnings)
        self._output[it.out] = item
        if it.kind == "custom_tool_call":
            return (self._ev("response.custom_tool_call_input.done", item_id=it.id, output_index=it.out,
                             input=item["input"])
                    + self._ev("response.output_item.done", output_index=it.out, item=item))
        return (self._ev("response.function_call_arguments.done", item_id=it.id, output_index=it.out,
                         arguments=item["arguments"])
                + self._ev("response.output_item.done", output_index=it.out, item=item))

    def _flush_held(self) -> bytes:
        held, self._held = self._held, []
        return b"".join(self._complete(it) for it in held)

    def _message_stop(self, ev: MessageStop) -> bytes:
        head = b"" if self._started else self._start(None, None)
        # the held calls, and any block the decoder never stopped, complete here in output order
        self._held = sorted((it for it in self._items.values() if not it.done), key=lambda it: it.out)
        out = head + self._flush_held()
        rep = self.report
        stop = ev.stop_reason
        if self._tool and stop in ("end_turn", None):
            stop = "tool_use"  # derived from what was emitted (docs/dev/pitfalls.md 7)
        status, incomplete = status_for_stop(stop, rep.warnings)
        if incomplete:
            note_once(rep.warnings, f"stop_reason {stop!r} sent as response.completed with status 'incomplete' "
                                    f"(Codex has no response.incomplete branch)")
        if ev.stop_sequence:
            note_once(rep.dropped, "stop_sequence")
        self.client_usage = responses_usage(ev.usage, rep.warnings)
        extra: dict[str, Any] = {"incomplete_details": incomplete} if incomplete else {}
        snap = self._snapshot(status, **extra, usage=self.client_usage)
        self.finished = True
        rep.stop_reason, rep.completed = stop, True
        return out + self._ev("response.completed", response=snap)

    def _stream_error(self, ev: StreamError) -> bytes:
        head = b"" if self._started else self._start(None, None)
        err = UpstreamError(ev.status, ev.message, ev.type, ev.code)
        status = po.STATUS_FROM_OTHERS.get(ev.status, ev.status)
        snap = self._snapshot("failed", error={"code": failed_code(err, status), "message": ev.message})
        self.finished = True
        self.report.errors.append(ev.message)
        return head + self._ev("response.failed", response=snap)

    def _nothing(self, ev: Event) -> bytes:
        return b""  # signatures (thinking is dropped); usage after the end (the report has it)

    _HANDLERS: dict[type, Callable[["ResponsesEncoder", Any], bytes]] = {  # each handler takes its own event class
        MessageStart: _message_start,
        BlockStart: _block_start,
        BlockDelta: _block_delta,
        BlockSignature: _nothing,
        BlockStop: _block_stop,
        MessageStop: _message_stop,
        StreamError: _stream_error,
        UsageUpdate: _nothing,
        KeepAlive: lambda self, ev: KEEPALIVE_COMMENT,  # an SSE comment: the SDKs' parsers skip it
    }


# ---- the decoder ----

def stop_from_response(resp: dict[str, Any], warnings: list[str]) -> str:
    """Neutral stop reason of a finished response snapshot (a function call makes it tool_use
    in every encoder)."""
    status = resp.get("status")
    if status == "incomplete":
        details = _o if isinstance(_o := resp.get("incomplete_details"), dict) else {}
        stop = pr.INCOMPLETE_TO_STOP.get(details.get("reason") or "")
        if stop is None:
            note_once(warnings, f"unknown incomplete reason {details.get('reason')!r} taken as max_tokens")
            return "max_tokens"
        return stop
    if status not in ("completed", None):
        note_once(warnings, f"unknown response status {status!r} taken as end_turn")
    return "end_turn"


# Output-item fields whose value is not the documented type: dropped and recorded (as an
# unknown part is), never raised on; checked where the value is read.
ODD_DROPPED = (
    ("output[].content", "a message item's list of parts; any other value carries no part"),
    ("output[].content[].text", "an output_text part's string; any other value carries no text"),
    ("output[].content[].refusal", "a refusal part's string; any other value carries no text"),
    # output (the whole reply's item list) that is not a list: a 502 (reply.py), nothing to carry
    # a stream event's output_index that is a list or an object: the stream ends with a 502 error
    # event (it names no item; an event that is not JSON ends it the same way)
)
UNHASHABLE = (list, dict)  # JSON values that cannot be an output_index key


def item_text(item: dict[str, Any], dropped: list[str]) -> str:
    """A message item's text (output_text and refusal parts joined); annotations recorded."""
    texts = []
    content = item.get("content") or ()
    if type(content) is not list and content != ():
        note_once(dropped, "output[].content")  # ODD_DROPPED
        content = ()
    for part in content:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "output_text":
            text = part.get("text") or ""
            if type(text) is not str:
                note_once(dropped, "output[].content[].text")  # ODD_DROPPED
                text = ""
            texts.append(text)
            if part.get("annotations"):
                note_once(dropped, "output[].content[].annotations")
        elif part.get("type") == "refusal":
            text = part.get("refusal") or ""
            if type(text) is not str:
                note_once(dropped, "output[].content[].refusal")  # ODD_DROPPED
                text = ""
            texts.append(text)
        else:
            note_once(dropped, f"output[].content[].{part.get('type')}")
    return "".join(texts)


def item_kind(item: dict[str, Any]) -> tuple[BlockKind, str | None, str | None, dict[str, Any] | None]:
    """The neutral block an output item opens: (kind, tool id, name, raw)."""
    itype = item.get("type")
    if itype == "message":
        return "text", None, None, None
    if itype == "function_call":
        return "tool_use", item.get("call_id"), item.get("name"), None
    if itype == "reasoning":  # encrypted / summarised reasoning: bound to its provider (kept for it alone:
        # reasoning/state.py reads raw["item"], which the stream decoder completes at the item's done event)
        return "thinking", None, None, {"source": "output[].reasoning", "item": item}
    return "other", None, None, {"type": itype, "source": f"output[].{itype}"}


def item_block(n: int, item: dict[str, Any]) -> BlockStart:
    """The neutral block an output item opens, as the event that opens it."""
    kind, tool_id, name, raw = item_kind(item)
    return BlockStart(n, kind, tool_id, name, None, raw)


def item_content(item: dict[str, Any], dropped: list[str]) -> str:
    """The content of a whole output item: a message's text, a call's argument string."""
    itype = item.get("type")
    if itype == "message":
        return item_text(item, dropped)
    if itype == "function_call":
        args = item.get("arguments")
        return args if isinstance(args, str) else ""
    return ""


def response_error(resp_or_err: dict[str, Any]) -> StreamError:
    """A ``response.failed`` snapshot's error, or an ``error`` event, as a neutral error."""
    err = _o if isinstance(_o := resp_or_err.get("error"), dict) else resp_or_err
    code = err.get("code") if isinstance(err.get("code"), str) else None
    status = pr.CODE_STATUS.get(code or "", 500)
    return StreamError(status, error_type_for_status(status), err.get("message") or "upstream error", code)


class ResponsesDecoder:
    """Responses SSE events -> neutral events."""

    def __init__(self, report: ReplyReport) -> None:
        self.report = report
        self.usage: Usage | None = None
        self._index: dict[object, int] = {}  # output_index -> neutral index
        self._fed: set[int] = set()  # neutral blocks that received deltas
        self._open: set[int] = set()
        self._reasoning: dict[int, dict[str, Any]] = {}  # neutral index -> the raw of a reasoning item's block
        self._started = False
        self._ended = False

    def on_event(self, ev: SSEEvent) -> list[Event]:
        if not ev.data or self._ended:
            return []
        try:
            d = jsonc.loads(ev.data)
        except jsonc.JSONDecodeError as e:
            return self._end([StreamError(502, "api_error", f"upstream sent an event that is not valid JSON ({e})")])
        if not isinstance(d, dict):
            return self._end([StreamError(502, "api_error", "upstream sent an event that is not a JSON object")])
        kind = d.get("type") or ev.event
        handler = self._HANDLERS.get(kind if isinstance(kind, str) else "")
        if handler is None:
            return []  # in_progress, content_part.*, *.done, reasoning summaries: nothing new
        return handler(self, d)

    def close(self) -> list[Event]:
        if self._ended:
            return []
        return self._end([StreamError(500, "api_error", EARLY_END)])

    def _odd_index(self) -> list[Event]:
        """The error that ends a stream whose event's output_index is a list or an object
        (it names no item: ODD_DROPPED), as for an event that is not JSON."""
        return self._end([StreamError(502, "api_error", "upstream sent an event whose output_index is not a number")])

    def _end(self, out: list[Event]) -> list[Event]:
        self._ended = True
        return out

    def _start(self, resp: dict[str, Any]) -> list[Event]:
        if self._started:
            return []
        self._started = True
        rid = resp.get("id")
        if rid is not None and type(rid) is not str:
            odd_id("id", self.report.dropped)
            rid = None
        return [MessageStart(rid, resp.get("model"))]

    def _created(self, d: dict[str, Any]) -> list[Event]:
        resp = _o if isinstance(_o := d.get("response"), dict) else {}
        return self._start(resp)

    def _item_added(self, d: dict[str, Any]) -> list[Event]:
        item = _o if isinstance(_o := d.get("item"), dict) else {}
        out = self._start({})
        n = len(self._index)
        index = d.get("output_index", n)
        if index.__class__ in UNHASHABLE:
            return out + self._odd_index()
        self._index[index] = n
        self._open.add(n)
        block = item_block(n, item)
        if block.raw is not None and "item" in block.raw:
            self._reasoning[n] = block.raw
        return out + [block]

    def _delta(self, d: dict[str, Any]) -> list[Event]:
        index = d.get("output_index")
        if index.__class__ in UNHASHABLE:
            return self._odd_index()
        n = self._index.get(index)
        text = d.get("delta")
        if n is None or not isinstance(text, str) or not text:
            return []
        self._fed.add(n)
        return [BlockDelta(n, text)]

    def _item_done(self, d: dict[str, Any]) -> list[Event]:
        item = _o if isinstance(_o := d.get("item"), dict) else {}
        out: list[Event] = []
        index = d.get("output_index")
        if index.__class__ in UNHASHABLE:
            return self._odd_index()
        n = self._index.get(index)
        if n is None:  # an item that never announced itself: whole, here
            out += self._item_added(d)
            n = self._index[d.get("output_index", len(self._index) - 1)]
        if n not in self._open:
            return out
        if item.get("type") == "reasoning" and (raw := self._reasoning.get(n)) is not None:
            raw["item"] = item  # whole now (encrypted_content, summary): the same raw its BlockStart carried
        if n not in self._fed and (text := item_content(item, self.report.dropped)):
            out.append(BlockDelta(n, text))
        elif item.get("type") == "message":
            item_text(item, self.report.dropped)  # record annotations
        self._open.discard(n)
        return out + [BlockStop(n)]

    def _completed(self, d: dict[str, Any]) -> list[Event]:
        resp = _o if isinstance(_o := d.get("response"), dict) else {}
        out = self._start(resp)
        out += [BlockStop(n) for n in sorted(self._open)]
        self._open.clear()
        u = resp.get("usage")
        if isinstance(u, dict):
            self.usage = Usage(po.COUNTING_NAME, u)
        out.append(MessageStop(stop_from_response(resp, self.report.warnings), None, self.usage))
        return self._end(out)

    def _failed(self, d: dict[str, Any]) -> list[Event]:
        resp = _o if isinstance(_o := d.get("response"), dict) else {}
        u = resp.get("usage")
        if isinstance(u, dict):
            self.usage = Usage(po.COUNTING_NAME, u)
        return self._end([response_error(resp)])

    def _error(self, d: dict[str, Any]) -> list[Event]:
        return self._end([response_error(d)])

    _HANDLERS: dict[str, Callable[["ResponsesDecoder", dict[str, Any]], list[Event]]] = {
        "response.created": _created,
        "response.output_item.added": _item_added,
        "response.output_text.delta": _delta,
        "response.refusal.delta": _delta,
        "response.function_call_arguments.delta": _delta,
        "response.output_item.done": _item_done,
        "response.completed": _completed,
        "response.incomplete": _completed,
        "response.failed": _failed,
        "error": _error,
    }
