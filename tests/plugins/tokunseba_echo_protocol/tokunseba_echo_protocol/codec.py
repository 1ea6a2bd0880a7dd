"""Echo Meter's codec over tokunseba's neutral model (see facts.py for the wire format):
requests, whole replies and streams both ways, errors. Text only: a turn with tools is
refused, never faked."""

from __future__ import annotations

import json
from typing import Any

from tokunseba.errors import InvalidRequest, Refused, UntranslatableReply
from tokunseba.neutral.conversation import Conversation, RequestTranslation
from tokunseba.neutral.error import UpstreamError, error_type_for_status
from tokunseba.neutral.events import (EARLY_END, BlockDelta, BlockStart, BlockStop, Event, KeepAlive, MessageStart,
                                      MessageStop, StreamError, UsageUpdate)
from tokunseba.neutral.message import Message
from tokunseba.neutral.report import ReplyReport
from tokunseba.neutral.usage import Usage
from tokunseba.sse import SSEEvent, encode_event
from tokunseba.translate.codec import Codec, parse_reply

from . import facts as ef

SPEAKERS = ("user", "assistant", "system")


# ---- requests ----

def decode_request(body: dict) -> Conversation:
    """Echo -> neutral (Chat-shaped); other keys are recorded as dropped."""
    if not isinstance(body, dict) or not isinstance(body.get("turns"), list):
        raise InvalidRequest(400, "turns: required")
    if body.get("tools"):
        raise Refused(400, "tools: Echo carries text only")
    turns = [t for t in body["turns"] if isinstance(t, dict)]
    for i, t in enumerate(turns):
        if t.get("speaker") not in SPEAKERS or not isinstance(t.get("text"), str):
            raise InvalidRequest(400, f"turns[{i}]: a speaker ({', '.join(SPEAKERS)}) and a text")
    conv = Conversation(body={"model": body.get("model"),
                              "messages": [{"role": t["speaker"], "content": t["text"]} for t in turns]})
    if isinstance(body.get("limit"), int):
        conv.body["max_completion_tokens"] = body["limit"]
    if body.get("stream"):
        conv.body["stream"] = True
    conv.dropped += [k for k in body if k not in ("model", "turns", "limit", "stream")]
    return conv


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    if any(isinstance(p, dict) and p.get("type") not in ("text", None) for p in parts):
        raise Refused(400, "content: Echo carries text only")
    return "".join(p.get("text") or "" for p in parts if isinstance(p, dict))


def encode_request(conv: Conversation, *, max_tokens: int | None = None, **_: object) -> RequestTranslation:
    """Neutral -> Echo."""
    n = conv.body
    if n.get("tools"):
        raise Refused(400, "tools: Echo carries text only")
    turns = []
    for m in n.get("messages") or ():
        role = m.get("role")
        if role not in SPEAKERS:
            raise Refused(400, f"a {role!r} message: Echo has no such speaker")
        turns.append({"speaker": role, "text": _text(m.get("content"))})
    rt = RequestTranslation(body={"turns": turns})
    if n.get("model") is not None:
        rt.body["model"] = n["model"]
    limit = n.get("max_completion_tokens", n.get("max_tokens", max_tokens))
    if limit is not None:
        rt.body["limit"] = limit
    if n.get("stream"):
        rt.body["stream"] = True
    rt.dropped += [k for k in n if k not in ("model", "messages", "max_completion_tokens", "max_tokens", "stream",
                                             "stream_options")]
    return rt


# ---- whole replies ----

def _usage(meter: Any) -> Usage | None:
    return Usage(ef.COUNTING_NAME, meter) if isinstance(meter, dict) and meter else None


def decode_reply(body: bytes, report: ReplyReport) -> list[Event]:
    doc = parse_reply(body, "Echo")
    text = doc.get("text") if isinstance(doc.get("text"), str) else ""
    return [MessageStart(doc.get("id"), doc.get("model")), BlockStart(0, "text"), BlockDelta(0, text), BlockStop(0),
            MessageStop(ef.END_TO_STOP.get(doc.get("end") or "", "end_turn"), None, _usage(doc.get("meter")))]


def encode_reply(msg: Message, report: ReplyReport, created: int) -> tuple[bytes, dict | None]:
    if msg.error is not None:
        raise UntranslatableReply(502, msg.error.message)
    if any(b.kind == "tool_use" for b in msg.blocks):
        raise UntranslatableReply(502, "Echo has no tool calls")
    meter = msg.usage.to(ef.COUNTING) if msg.usage is not None else None
    doc: dict[str, Any] = {"id": msg.id or "echo-1", "model": msg.model,
                           "text": "".join(b.text for b in msg.blocks if b.kind == "text"),
                           "end": ef.STOP_TO_END.get(msg.stop_reason or "", "done")}
    if meter is not None:
        doc["meter"] = meter
    report.stop_reason, report.usage, report.completed = msg.stop_reason, msg.usage, True
    return json.dumps(doc).encode(), meter


# ---- streams ----

class EchoDecoder:
    def __init__(self, report: ReplyReport) -> None:
        self.report = report
        self.usage: Usage | None = None
        self._open = False
        self._ended = False

    def on_event(self, ev: SSEEvent) -> list[Event]:
        try:
            d = json.loads(ev.data)
        except ValueError:
            return [StreamError(502, "api_error", "the Echo stream sent an event that is not JSON")]
        if ev.event == "start":
            return [MessageStart(d.get("id"), d.get("model"))]
        if ev.event == "text":
            out: list[Event] = [] if self._open else [BlockStart(0, "text")]
            self._open = True
            return out + [BlockDelta(0, d.get("text") or "")]
        if ev.event == "end":
            self.usage = _usage(d.get("meter"))
            self._ended = True
            out = [BlockStop(0)] if self._open else []
            return out + [MessageStop(ef.END_TO_STOP.get(d.get("end") or "", "end_turn"), None, self.usage)]
        if ev.event == "error":
            return [StreamError(500, "api_error", d.get("message") or "Echo upstream error")]
        return []

    def close(self) -> list[Event]:
        return [] if self._ended else [StreamError(502, "api_error", EARLY_END)]


class EchoEncoder:
    def __init__(self, report: ReplyReport, include_usage: bool, created: int | None) -> None:
        self.report = report
        self.finished = False
        self.client_usage: dict | None = None

    def encode(self, ev: Event) -> bytes:
        if self.finished:
            return b""
        if isinstance(ev, MessageStart):
            return encode_event(json.dumps({"id": ev.id or "echo-1", "model": ev.model}), "start")
        if isinstance(ev, BlockDelta):
            return encode_event(json.dumps({"text": ev.text}), "text")
        if isinstance(ev, BlockStart) and ev.kind == "tool_use":
            raise UntranslatableReply(502, "Echo has no tool calls")
        if isinstance(ev, MessageStop):
            self.finished = True
            self.client_usage = ev.usage.to(ef.COUNTING) if ev.usage is not None else None
            self.report.stop_reason, self.report.usage, self.report.completed = ev.stop_reason, ev.usage, True
            end: dict[str, Any] = {"end": ef.STOP_TO_END.get(ev.stop_reason or "", "done")}
            if self.client_usage is not None:
                end["meter"] = self.client_usage
            return encode_event(json.dumps(end), "end")
        if isinstance(ev, StreamError):
            self.finished = True
            self.report.errors.append(ev.message)
            return ef.sse_error(ev.message)
        if isinstance(ev, KeepAlive):
            return b": keep-alive\n\n"
        if isinstance(ev, UsageUpdate):
            self.report.usage = ev.usage
        return b""  # block boundaries, signatures: nothing on Echo's wire


def encode_error(err: UpstreamError) -> tuple[int, bytes]:
    return err.status, ef.error_body(err.status, err.message, error_type_for_status(err.status))


CODEC = Codec(
    protocol=ef.NAME,
    decode_request=decode_request,
    encode_request=encode_request,
    decode_reply=decode_reply,
    encode_reply=encode_reply,
    stream_decoder=EchoDecoder,
    stream_encoder=EchoEncoder,
    encode_error=encode_error,
    stop_field=None,
    refused_leaving=("tools (Echo carries text only)",),
    refused_arriving=("tool calls (Echo carries text only)",),
)
