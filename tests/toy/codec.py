"""Toy Chat's codec (see facts.py for the wire format): requests both ways, whole replies
both ways, streams both ways, errors. Text only: a turn with tools is refused, never faked.
Registered only by tests/suites/test_toy_protocol.py (``protocols.register(FACTS, CODEC)``)."""

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

from . import facts as tf


# ---- requests ----

def decode_request(body: dict) -> Conversation:
    """Toy -> neutral (Chat-shaped); anything else it carries is recorded as dropped."""
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        raise InvalidRequest(400, "messages: required")
    if body.get("tools"):
        raise Refused(400, "tools: the toy codec carries text only")
    conv = Conversation(body={"model": body.get("model"), "messages": [
        {"role": m.get("role"), "content": m.get("content")} for m in body["messages"] if isinstance(m, dict)]})
    if isinstance(body.get("max_tokens"), int):
        conv.body["max_completion_tokens"] = body["max_tokens"]
    if body.get("stream"):
        conv.body["stream"] = True
    conv.dropped += [k for k in body if k not in ("model", "messages", "max_tokens", "stream")]
    return conv


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    if any(isinstance(p, dict) and p.get("type") not in ("text", None) for p in parts):
        raise Refused(400, "content: the toy codec carries text only")
    return "".join(p.get("text") or "" for p in parts if isinstance(p, dict))


def encode_request(conv: Conversation, *, max_tokens: int | None = None, **_: object) -> RequestTranslation:
    """Neutral -> toy."""
    n = conv.body
    if n.get("tools"):
        raise Refused(400, "tools: the toy codec carries text only")
    rt = RequestTranslation(body={"messages": [{"role": m.get("role"), "content": _text(m.get("content"))}
                                               for m in n.get("messages") or ()]})
    if n.get("model") is not None:
        rt.body["model"] = n["model"]
    limit = n.get("max_completion_tokens", n.get("max_tokens", max_tokens))
    if limit is not None:
        rt.body["max_tokens"] = limit
    if n.get("stream"):
        rt.body["stream"] = True
    rt.dropped += [k for k in n if k not in ("model", "messages", "max_completion_tokens", "max_tokens", "stream",
                                             "stream_options")]
    return rt


# ---- whole replies ----

def decode_reply(body: bytes, report: ReplyReport) -> list[Event]:
    doc = parse_reply(body, "toy")
    text = "".join(p.get("text") or "" for p in (doc.get("message") or {}).get("content") or ()
                   if isinstance(p, dict) and p.get("type") == "text")
    u = doc.get("usage")
    usage = Usage(tf.FACTS.usage_counting, u) if isinstance(u, dict) else None
    return [MessageStart(doc.get("id"), doc.get("model")), BlockStart(0, "text"), BlockDelta(0, text), BlockStop(0),
            MessageStop(tf.FINISH_TO_STOP.get(doc.get("finish_reason") or "", "end_turn"), None, usage)]


def _usage_for_client(usage: Usage | None) -> dict | None:
    if usage is None:
        return None
    a = usage.to("anthropic")  # the toy counts as Anthropic does
    return {k: a[k] for k in ("input_tokens", "output_tokens") if k in a}


def encode_reply(msg: Message, report: ReplyReport, created: int) -> tuple[bytes, dict | None]:
    if msg.error is not None:
        raise UntranslatableReply(502, msg.error.message)
    text = "".join(b.text for b in msg.blocks if b.kind == "text")
    if any(b.kind == "tool_use" for b in msg.blocks):
        raise UntranslatableReply(502, "the toy protocol has no tool calls")
    usage = _usage_for_client(msg.usage)
    doc: dict[str, Any] = {"id": msg.id or "toy-1", "model": msg.model,
                           "message": {"role": "assistant", "content": [{"type": "text", "text": text}]},
                           "finish_reason": tf.STOP_TO_FINISH.get(msg.stop_reason or "", "COMPLETE")}
    if usage is not None:
        doc["usage"] = usage
    report.stop_reason, report.usage, report.completed = msg.stop_reason, msg.usage, True
    return json.dumps(doc).encode(), usage


# ---- streams ----

class ToyDecoder:
    def __init__(self, report: ReplyReport) -> None:
        self.report = report
        self.usage: Usage | None = None
        self._open = False
        self._stopped = False

    def on_event(self, ev: SSEEvent) -> list[Event]:
        try:
            d = json.loads(ev.data)
        except ValueError:
            return [StreamError(502, "api_error", "the toy stream sent an event that is not JSON")]
        kind = d.get("type") or ev.event
        if kind == "message-start":
            return [MessageStart(d.get("id"), d.get("model"))]
        if kind == "content-delta":
            out: list[Event] = [] if self._open else [BlockStart(0, "text")]
            self._open = True
            return out + [BlockDelta(0, d.get("text") or "")]
        if kind == "message-end":
            u = d.get("usage")
            self.usage = Usage(tf.FACTS.usage_counting, u) if isinstance(u, dict) else None
            self._stopped = True
            out = [BlockStop(0)] if self._open else []
            return out + [MessageStop(tf.FINISH_TO_STOP.get(d.get("finish_reason") or "", "end_turn"), None,
                                      self.usage)]
        if kind == "error":
            return [StreamError(500, "api_error", d.get("message") or "toy upstream error")]
        return []

    def close(self) -> list[Event]:
        return [] if self._stopped else [StreamError(502, "api_error", EARLY_END)]


class ToyEncoder:
    def __init__(self, report: ReplyReport, include_usage: bool, created: int | None) -> None:
        self.report = report
        self.finished = False
        self.client_usage: dict | None = None

    def encode(self, ev: Event) -> bytes:
        if self.finished:
            return b""
        if isinstance(ev, MessageStart):
            return encode_event(json.dumps({"type": "message-start", "id": ev.id or "toy-1"}), "message-start")
        if isinstance(ev, BlockDelta):
            return encode_event(json.dumps({"type": "content-delta", "text": ev.text}), "content-delta")
        if isinstance(ev, BlockStart) and ev.kind == "tool_use":
            raise UntranslatableReply(502, "the toy protocol has no tool calls")
        if isinstance(ev, MessageStop):
            self.finished = True
            self.client_usage = _usage_for_client(ev.usage)
            self.report.stop_reason, self.report.usage, self.report.completed = ev.stop_reason, ev.usage, True
            end: dict[str, Any] = {"type": "message-end",
                                   "finish_reason": tf.STOP_TO_FINISH.get(ev.stop_reason or "", "COMPLETE")}
            if self.client_usage is not None:
                end["usage"] = self.client_usage
            return encode_event(json.dumps(end), "message-end")
        if isinstance(ev, StreamError):
            self.finished = True
            self.report.errors.append(ev.message)
            return tf.sse_error(ev.message)
        if isinstance(ev, KeepAlive):
            return b": keep-alive\n\n"
        if isinstance(ev, UsageUpdate):
            self.report.usage = ev.usage
        return b""  # block boundaries, signatures: nothing on the toy wire


def encode_error(err: UpstreamError) -> tuple[int, bytes]:
    return err.status, tf.error_body(err.status, err.message, error_type_for_status(err.status))


CODEC = Codec(
    protocol=tf.NAME,
    decode_request=decode_request,
    encode_request=encode_request,
    decode_reply=decode_reply,
    encode_reply=encode_reply,
    stream_decoder=ToyDecoder,
    stream_encoder=ToyEncoder,
    encode_error=encode_error,
    stop_field=None,
    refused_leaving=("tools (the toy carries text only)",),
    refused_arriving=("tool calls (the toy carries text only)",),
)
