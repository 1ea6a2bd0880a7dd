"""Whole Anthropic Messages replies: the decoder (a ``message`` body -> neutral events) and
the encoder (a neutral ``Message`` -> a ``message`` body) (docs/dev/protocols.md A.2, E.2-E.4).

The decoder yields the events the stream decoder yields for the same reply. The encoder
writes text and tool_use blocks (a tool call's argument string parsed into ``input``; ""
means no arguments), keeps ids byte for byte (an id Anthropic would reject is a 502, never
rewritten), drops and records unsigned thinking and blocks it cannot carry, and sends usage
converted only where definitions differ (``{}`` when nothing was reported, never zeros). A
reply without an id gets one minted (``msg_tk_<created>``), recorded as
``id_synthesized: id``: the Anthropic schema requires a string.
"""

from __future__ import annotations

from typing import Any

from ... import jsonc
from ...errors import UntranslatableReply
from ...neutral import Event
from ...neutral import Block, Message
from ...neutral import odd_id
from ...neutral import ReplyReport, note_once
from ...neutral import Usage
from ...protocols import anthropic as pa
from ..codec import parse_reply
from .stream import BLOCK_KINDS, mint_message_id, odd_stop

TOP_DROPPED = ("stop_details", "container")  # recorded when non-null


def decode_message(body: bytes, report: ReplyReport) -> Message:
    """The neutral message of a whole Anthropic reply: what ``Message.collect`` makes of the
    events the stream decoder yields for the same reply, built straight (no event objects).
    A text or thinking that is not a string is a 502 (no client protocol can carry it)."""
    doc = parse_reply(body, "Anthropic")
    if doc.get("type") == "error":
        raise UntranslatableReply(502, f"upstream error: {jsonc.dumps(doc.get('error'))}")
    content = doc.get("content")
    if not isinstance(content, list):
        raise UntranslatableReply(502, "the upstream's Anthropic reply has no content list")
    mid = doc.get("id")
    if mid is not None and type(mid) is not str:
        odd_id("id", report.dropped)
        mid = None
    m = Message(mid, doc.get("model"))
    blocks = m.blocks
    for b in content:
        b = b if isinstance(b, dict) else {}
        kind = BLOCK_KINDS.get(str(b.get("type")), "other")
        if kind == "text":
            text = b.get("text")
            if b.get("citations"):
                note_once(report.dropped, "content[].citations")
            blocks.append(Block("text", None, None, _string(text, "text")))
        elif kind == "tool_use":
            inp = b.get("input")
            blocks.append(Block("tool_use", b.get("id"), b.get("name"), jsonc.dumps(inp) if inp else ""))
        elif kind == "thinking":
            blocks.append(Block("thinking", None, None, _string(b.get("thinking"), "thinking"),
                                b.get("signature") or "", b))
        else:
            blocks.append(Block(kind, b.get("id"), b.get("name"), "", None, b))
    for k in TOP_DROPPED:
        if doc.get(k) is not None:
            note_once(report.dropped, k)
    u = doc.get("usage")
    stop, seq = doc.get("stop_reason"), doc.get("stop_sequence")
    if (stop is not None and type(stop) is not str) or (seq is not None and type(seq) is not str):
        stop, seq = odd_stop(stop, seq, report.dropped)
    m.stop_reason, m.stop_sequence, m.stopped = stop, seq, True
    if isinstance(u, dict) and u:
        m.usage = Usage(pa.COUNTING_NAME, u)
    return m


def _string(text: object, what: str) -> str:
    """A block's text: a string ("" for none: null, absent, empty)."""
    if type(text) is str:
        return text
    if not text:
        return ""
    raise UntranslatableReply(502, f"the upstream's Anthropic reply has a {what} that is not a string")


def decode(body: bytes, report: ReplyReport) -> list[Event]:
    """The neutral events of a whole Anthropic reply (the message's, one delta per block)."""
    return decode_message(body, report).events()


def _tool_input(tc_id: str | None, name: str | None, args: str) -> dict[str, Any]:
    """A tool call's argument string -> Anthropic ``input`` (an object); "" means {}."""
    if not args:
        return {}
    try:
        value = jsonc.loads_exact(args)
    except jsonc.JSONDecodeError as e:
        raise UntranslatableReply(
            502, f"the upstream's tool call {tc_id!r} ({name}) has arguments that are not valid JSON ({e}); "
            f"an Anthropic tool_use needs an object input") from None
    if not isinstance(value, dict):
        raise UntranslatableReply(
            502, f"the upstream's tool call {tc_id!r} ({name}) has arguments that are not a JSON object; "
            f"an Anthropic tool_use needs an object input")
    return value


def encode(msg: Message, report: ReplyReport, created: int) -> tuple[bytes, dict[str, Any] | None]:
    content: list[dict[str, Any]] = []
    calls = False  # a tool_use block is written (the stop reason is derived from it)
    for b in msg.blocks:
        if b.kind == "text":
            if b.text:
                content.append({"type": "text", "text": b.text})
        elif b.kind == "tool_use":
            problem = pa.tool_id_problem(b.id)
            if problem:
                raise UntranslatableReply(502, problem)
            content.append({"type": "tool_use", "id": b.id, "name": b.name or "",
                            "input": _tool_input(b.id, b.name, b.text)})
            calls = True
        elif b.kind == "thinking" and b.signature is not None:  # signed: an Anthropic upstream's own
            content.append({"type": "thinking", "thinking": b.text, "signature": b.signature})
        else:  # unsigned thinking (docs/dev/pitfalls.md 17, 18), blocks with no counterpart here
            raw = b.raw or {}
            note_once(report.dropped, raw.get("source") or f"content[].{raw.get('type') or b.kind}")
    stop = msg.stop_reason
    if calls and stop in ("end_turn", None):
        stop = "tool_use"  # derived from what is there (docs/dev/pitfalls.md 7)
    client_usage = pa.COUNTING.write(msg.usage) if msg.usage else None
    mid = msg.id or mint_message_id(created, report)
    out = {"id": mid, "type": "message", "role": "assistant", "model": msg.model, "content": content,
           "stop_reason": stop, "stop_sequence": msg.stop_sequence, "usage": client_usage or {}}
    report.stop_reason, report.completed = stop, True
    return jsonc.dumpb(out), client_usage

