"""The facts of one reply, read from its bytes: what shadow turns and replays compare.

``reply_facts(protocol, body)`` reads a whole JSON reply or an SSE stream (recognised by
its first bytes) of any protocol with a codec, by that codec's own decoders (translate.CODECS:
no second parser of any protocol), and returns ``Facts``: stop reason (neutral, Anthropic-named), the text, the tool
calls in order (name, arguments as parsed JSON when they parse, else the raw string) and
the usage object exactly as reported (None when none was). Nothing is estimated: a field
the reply did not carry stays None. An error reply or error event sets ``error``.

It reads; it never translates. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from .. import jsonc
from ..errors import TranslationError
from ..neutral import Event
from ..neutral import Message
from ..neutral import ReplyReport
from ..sse import SSEDecoder
from ..translate import CODECS


@dataclass
class Facts:
    stop_reason: str | None = None
    text: str = ""
    tool_calls: list[dict] = field(default_factory=list)  # {"id", "name", "arguments"}
    usage: dict | None = None  # as reported
    usage_protocol: str | None = None  # how that usage counts ("anthropic" | "openai" | "gemini")
    error: str | None = None

    def to_json(self) -> dict:
        return asdict(self)


def _d(x: Any) -> dict:
    return x if isinstance(x, dict) else {}


def _args(raw: Any) -> Any:
    """Tool arguments as JSON values when they parse (Chat/Responses send a string)."""
    if isinstance(raw, str):
        try:
            return jsonc.loads(raw) if raw.strip() else {}
        except jsonc.JSONDecodeError:
            return raw
    return raw


def _is_sse(body: bytes) -> bool:
    head = body.lstrip()[:16]
    return head.startswith((b"event:", b"data:", b":", b"id:"))


def reply_facts(protocol: str, body: bytes, status: int | None = 200) -> Facts:
    """The facts of a reply of ``protocol`` (whole JSON or SSE)."""
    codec = CODECS.get(protocol)
    if codec is None:
        return Facts(error=f"tokunseba cannot read {protocol} replies for comparison")
    if status is not None and status >= 400:
        return Facts(error=f"HTTP {status}: {body[:300].decode('utf-8', 'replace')}")
    report = ReplyReport()
    try:
        if _is_sse(body):
            sse, dec = SSEDecoder(), codec.stream_decoder(report)
            events: list[Event] = []
            for ev in sse.feed(body) + sse.close():
                events += dec.on_event(ev)
            events += dec.close()
        else:
            events = codec.decode_reply(body, report)
    except TranslationError as e:
        return Facts(error=e.message)
    except (jsonc.JSONDecodeError, UnicodeDecodeError) as e:
        return Facts(error=f"reply is not valid JSON ({e})")
    return _facts(Message.collect(events))


def _facts(msg: Message) -> Facts:
    f = Facts(stop_reason=msg.stop_reason if msg.stopped else None)
    for b in msg.blocks:
        if b.kind == "text":
            f.text += b.text
        elif b.kind == "tool_use":
            f.tool_calls.append({"id": b.id, "name": b.name, "arguments": _args(b.text)})
    if f.tool_calls and f.stop_reason == "end_turn":
        f.stop_reason = "tool_use"  # derived from what is there, as every encoder does (docs/dev/pitfalls.md 7)
    if msg.error is not None:
        f.error = msg.error.message
    if msg.usage is not None and msg.usage.reported:  # {}: nothing reported
        f.usage, f.usage_protocol = msg.usage.reported, msg.usage.counting
    return f
