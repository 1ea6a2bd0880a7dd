"""The facts of one reply, read from its bytes: what shadow turns and replays compare.

``reply_facts(protocol, body)`` reads a whole JSON reply or an SSE stream (recognised by
its first bytes) of the Anthropic Messages, OpenAI Chat Completions or OpenAI Responses
protocol, and returns ``Facts``: stop reason (neutral, Anthropic-named), the text, the tool
calls in order (name, arguments as parsed JSON when they parse, else the raw string) and
the usage object exactly as reported (None when none was). Nothing is estimated: a field
the reply did not carry stays None. An error reply or error event sets ``error``.

It reads; it never translates. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from . import jsonc
from .protocols import openai_chat as po
from .sse import SSEDecoder, SSEEvent

# how each protocol counts usage (translate/usage.py): Responses shares Chat's semantics
USAGE_COUNTING = {"anthropic": "anthropic", "openai": "openai", "openai-responses": "openai"}
# Responses `incomplete_details.reason` -> neutral stop reason
INCOMPLETE_TO_STOP = {"max_output_tokens": "max_tokens", "content_filter": "refusal"}


@dataclass
class Facts:
    stop_reason: str | None = None
    text: str = ""
    tool_calls: list[dict] = field(default_factory=list)  # {"id", "name", "arguments"}
    usage: dict | None = None  # as reported
    usage_protocol: str | None = None  # how that usage counts ("anthropic" | "openai")
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
    counting = USAGE_COUNTING.get(protocol)
    if counting is None:
        return Facts(error=f"tokunseba cannot read {protocol} replies for comparison")
    if status is not None and status >= 400:
        return Facts(error=f"HTTP {status}: {body[:300].decode('utf-8', 'replace')}")
    try:
        if _is_sse(body):
            dec = SSEDecoder()
            events = dec.feed(body) + dec.close()
            f = STREAM_READERS[protocol](events)
        else:
            doc = jsonc.loads(body)
            f = WHOLE_READERS[protocol](_d(doc)) if isinstance(doc, dict) else Facts(error="reply is not a JSON object")
    except (jsonc.JSONDecodeError, UnicodeDecodeError) as e:
        return Facts(error=f"reply is not valid JSON ({e})")
    if f.usage is not None:
        f.usage_protocol = counting
    return f


# ---------------------------------------------------------------- whole replies


def _anthropic_whole(doc: dict) -> Facts:
    if doc.get("type") == "error":
        return Facts(error=jsonc.dumps(doc.get("error")))
    f = Facts(stop_reason=doc.get("stop_reason"))
    for b in doc.get("content") or ():
        b = _d(b)
        if b.get("type") == "text":
            f.text += b.get("text") or ""
        elif b.get("type") == "tool_use":
            f.tool_calls.append({"id": b.get("id"), "name": b.get("name"), "arguments": b.get("input")})
    f.usage = doc["usage"] if isinstance(doc.get("usage"), dict) and doc["usage"] else None
    return f


def _chat_whole(doc: dict) -> Facts:
    if doc.get("error"):
        return Facts(error=jsonc.dumps(doc["error"]))
    choice = _d((doc.get("choices") or [{}])[0])
    msg = _d(choice.get("message"))
    content = msg.get("content")
    if isinstance(content, list):
        content = "".join(_d(p).get("text") or "" for p in content)
    f = Facts(stop_reason=_chat_stop(choice.get("finish_reason")), text=content or "")
    for tc in msg.get("tool_calls") or ():
        fn = _d(_d(tc).get("function"))
        f.tool_calls.append({"id": tc.get("id"), "name": fn.get("name"), "arguments": _args(fn.get("arguments"))})
    f.usage = doc["usage"] if isinstance(doc.get("usage"), dict) else None
    return f


def _chat_stop(finish: Any) -> str | None:
    return po.FINISH_TO_STOP.get(finish, finish) if isinstance(finish, str) else None


def _responses_whole(doc: dict) -> Facts:
    if doc.get("error"):
        return Facts(error=jsonc.dumps(doc["error"]))
    f = Facts()
    for item in doc.get("output") or ():
        item = _d(item)
        if item.get("type") == "message":
            f.text += "".join(_d(p).get("text") or "" for p in item.get("content") or ()
                              if _d(p).get("type") == "output_text")
        elif item.get("type") == "function_call":
            f.tool_calls.append({"id": item.get("call_id"), "name": item.get("name"),
                                 "arguments": _args(item.get("arguments"))})
    status = doc.get("status")
    if status == "completed":
        f.stop_reason = "tool_use" if f.tool_calls else "end_turn"
    elif status == "incomplete":
        reason = _d(doc.get("incomplete_details")).get("reason")
        f.stop_reason = INCOMPLETE_TO_STOP.get(reason, reason)
    f.usage = doc["usage"] if isinstance(doc.get("usage"), dict) else None
    return f


WHOLE_READERS = {"anthropic": _anthropic_whole, "openai": _chat_whole, "openai-responses": _responses_whole}


# ---------------------------------------------------------------- streams


def _json_events(events: list[SSEEvent]) -> list[tuple[str | None, dict]]:
    out = []
    for e in events:
        if e.data.strip() == "[DONE]" or not e.data.strip():
            continue
        try:
            doc = jsonc.loads(e.data)
        except jsonc.JSONDecodeError:
            continue
        if isinstance(doc, dict):
            out.append((e.event, doc))
    return out


def _anthropic_stream(events: list[SSEEvent]) -> Facts:
    f = Facts()
    blocks: dict[int, dict] = {}
    usage: dict = {}
    for name, doc in _json_events(events):
        kind = doc.get("type") or name
        if kind == "message_start":
            usage.update({k: v for k, v in _d(_d(doc.get("message")).get("usage")).items() if v is not None})
        elif kind == "content_block_start":
            blocks[doc.get("index")] = {**_d(doc.get("content_block")), "partial": ""}
        elif kind == "content_block_delta":
            b, delta = blocks.get(doc.get("index")), _d(doc.get("delta"))
            if b is None:
                continue
            if delta.get("type") == "text_delta":
                b["text"] = (b.get("text") or "") + (delta.get("text") or "")
            elif delta.get("type") == "input_json_delta":
                b["partial"] += delta.get("partial_json") or ""
        elif kind == "message_delta":
            f.stop_reason = _d(doc.get("delta")).get("stop_reason") or f.stop_reason
            usage.update({k: v for k, v in _d(doc.get("usage")).items() if v is not None})  # cumulative
        elif kind == "error":
            f.error = jsonc.dumps(doc.get("error"))
    for _, b in sorted(blocks.items(), key=lambda kv: kv[0] if isinstance(kv[0], int) else -1):
        if b.get("type") == "text":
            f.text += b.get("text") or ""
        elif b.get("type") == "tool_use":
            args = _args(b["partial"]) if b["partial"] else b.get("input")
            f.tool_calls.append({"id": b.get("id"), "name": b.get("name"), "arguments": args})
    f.usage = usage or None
    return f


def _chat_stream(events: list[SSEEvent]) -> Facts:
    f = Facts()
    calls: dict[int, dict] = {}
    for _, doc in _json_events(events):
        if doc.get("error"):
            f.error = jsonc.dumps(doc["error"])
            continue
        if isinstance(doc.get("usage"), dict):
            f.usage = doc["usage"]
        for ch in doc.get("choices") or ():
            ch = _d(ch)
            if ch.get("index", 0) != 0:
                continue
            delta = _d(ch.get("delta"))
            if isinstance(delta.get("content"), str):
                f.text += delta["content"]
            for tc in delta.get("tool_calls") or ():
                tc = _d(tc)
                c = calls.setdefault(tc.get("index", 0), {"id": None, "name": None, "arguments": ""})
                fn = _d(tc.get("function"))
                c["id"] = c["id"] or tc.get("id")
                c["name"] = c["name"] or fn.get("name")
                c["arguments"] += fn.get("arguments") or ""
            if ch.get("finish_reason"):
                f.stop_reason = _chat_stop(ch["finish_reason"])
    f.tool_calls = [{**c, "arguments": _args(c["arguments"])} for _, c in sorted(calls.items())]
    return f


def _responses_stream(events: list[SSEEvent]) -> Facts:
    """The terminal event carries the whole response object."""
    for name, doc in reversed(_json_events(events)):
        kind = doc.get("type") or name
        if kind in ("response.completed", "response.incomplete", "response.failed"):
            return _responses_whole(_d(doc.get("response")))
        if kind == "error":
            return Facts(error=jsonc.dumps(doc))
    return Facts(error="the stream ended without a terminal response event")


STREAM_READERS = {"anthropic": _anthropic_stream, "openai": _chat_stream, "openai-responses": _responses_stream}
