"""Whole Responses replies: the decoder (a ``response`` body -> neutral events), the encoder
(a neutral ``Message`` -> a ``response`` body) and the error encoder (docs/dev/protocols.md C.2,
E.2-E.4, E.6).

The encoder is built from the same functions as the stream encoder (stream.py): the same
item ids, output items, status and usage, so a streamed reply and the same reply whole end
in the same object. Text becomes a ``message`` item, each tool call a ``function_call``
item whose ``call_id`` is the tool id byte for byte and whose ``arguments`` are the
upstream's string verbatim (empty: ``"{}"``) — or, for a tool the client declared freeform
or in a namespace, its ``custom_tool_call`` / namespaced call (stream.call_item); reasoning, thinking and server-tool blocks
are dropped and recorded. An upstream error becomes the OpenAI error envelope, its status
mapped as for Chat clients, the upstream's message and (OpenAI) code kept, a context
overflow coded ``context_length_exceeded``.
"""

from __future__ import annotations

from typing import Any

from ... import jsonc
from ...errors import UntranslatableReply
from ...neutral import Event
from ...neutral import odd_id, safe
from ...neutral import Block, Message
from ...neutral import ReplyReport, note_once
from ...neutral import Usage
from ...protocols import openai_chat as po
from ..codec import parse_reply
from .stream import (
    call_item,
    call_kind,
    client_tool,
    item_kind,
    item_content,
    item_id,
    message_item,
    response_error,
    response_id,
    response_snapshot,
    responses_usage,
    status_for_stop,
    stop_from_response,
)


def decode_message(body: bytes, report: ReplyReport) -> Message:
    """The neutral message of a whole Responses reply: what ``Message.collect`` makes of the
    events the stream decoder yields for the same reply, built straight (no event objects)."""
    doc = parse_reply(body, "Responses")
    if doc.get("status") == "failed" or (doc.get("error") and not doc.get("output")):
        err = response_error(doc)
        raise UntranslatableReply(502, f"upstream error: {err.message}")
    mid = doc.get("id")
    if mid is not None and type(mid) is not str:
        odd_id("id", report.dropped)
        mid = None
    m = Message(mid, doc.get("model"))
    blocks = m.blocks
    output = doc.get("output") or ()
    if type(output) is not list and output != ():
        raise UntranslatableReply(502, "the upstream's Responses reply has an output that is not a list (output)")
    for item in output:
        item = item if isinstance(item, dict) else {}
        kind, tool_id, name, raw = item_kind(item)
        blocks.append(Block(kind, tool_id, name, item_content(item, report.dropped), None, raw))
    u = doc.get("usage")
    m.stop_reason, m.stopped = stop_from_response(doc, report.warnings), True
    if isinstance(u, dict):
        m.usage = Usage(po.COUNTING_NAME, u)
    return m


def decode(body: bytes, report: ReplyReport) -> list[Event]:
    """The neutral events of a whole Responses reply (the message's, one delta per block)."""
    return decode_message(body, report).events()


def encode(msg: Message, report: ReplyReport, created: int) -> tuple[bytes, dict[str, Any] | None]:
    items: list[dict[str, Any]] = []
    calls = False  # a function_call item is written (the stop reason is derived from it)
    mid = safe(msg.id)  # item ids are minted from it (item_id)
    for b in msg.blocks:
        if b.kind == "text":
            items.append(message_item(item_id("message", msg.id, len(items), mid), b.text))
        elif b.kind == "tool_use":
            if not b.id:  # a blank call_id hangs Codex after the call (docs/dev/pitfalls.md 9)
                raise UntranslatableReply(502, "the upstream's tool call has no id")
            tool = client_tool(report, b.name)
            iid = item_id(call_kind(tool), msg.id, len(items), mid)
            items.append(call_item(iid, b.id, b.name or "", b.text or "", tool, report.warnings))
            calls = True
        else:  # thinking, reasoning, server tools...
            raw = b.raw or {}
            note_once(report.dropped, raw.get("source") or f"content[].{raw.get('type') or b.kind}")
    stop = msg.stop_reason
    if calls and stop in ("end_turn", None):
        stop = "tool_use"  # derived from what is there (docs/dev/pitfalls.md 7)
    status, incomplete = status_for_stop(stop, report.warnings)
    if msg.stop_sequence:
        note_once(report.dropped, "stop_sequence")  # which sequence matched has no field
    client_usage = responses_usage(msg.usage, report.warnings)
    rid = response_id(msg.id, created, report.warnings)
    body = response_snapshot(rid, created, status, msg.model, items)  # + the stream's final extras, in its order
    if incomplete:
        body["incomplete_details"] = incomplete
    body["usage"] = client_usage
    report.stop_reason, report.completed = stop, True
    return jsonc.dumpb(body), client_usage
