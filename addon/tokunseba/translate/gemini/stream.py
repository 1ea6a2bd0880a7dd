"""Gemini streams <-> neutral events (docs/dev/protocols.md D.2, D.4.4;
docs/dev/clients.md §5.5, §6.2).

``GeminiDecoder`` reads ``streamGenerateContent?alt=sse`` events, each a whole
``GenerateContentResponse``. Gemini has no block boundaries, so the decoder makes them:
consecutive ``text`` parts are one text block, consecutive ``thought`` parts one thinking
block, each ``functionCall`` (always whole) one tool_use block opened and closed at once,
its ``args`` object serialised as the block's argument text. ``usageMetadata`` is a running
total repeated on chunks: the latest reported one wins and a chunk without it never clears
it. The stop is held after ``finishReason`` until a chunk carries usage or the body ends.

``GeminiEncoder`` writes what Gemini CLI's strict parser and the google-genai SDK accept:
``data: <one-line JSON>\\r\\n\\r\\n`` per chunk, no ``event:`` line, no end sentinel; text and
thinking deltas as they come; each function call whole in one chunk with ``args`` an object;
``finishReason`` always on the last chunk, with ``usageMetadata`` converted from what the
upstream reported.

The per-object logic (``GeminiDecoder.on_object``) is shared with whole replies (reply.py).
"""

from __future__ import annotations

from typing import Any

from collections.abc import Callable

from ... import jsonc
from ...neutral import UpstreamError, error_from_obj, error_type_for_status
from ...neutral import (
    BlockDelta,
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
from ...neutral import ReplyReport, note_once
from ...neutral import Usage
from ...protocols import gemini as pg
from ...sse import SSEEvent
from .ids import synth_call_id

EARLY_END = "upstream ended the stream early"
NO_FINISH = "upstream ended the stream without a finishReason"
CANDIDATE = "candidates[0]"
PARTS = f"{CANDIDATE}.content.parts[]"

# top-level keys of a GenerateContentResponse -> what the decoder does with them
RESPONSE_KEYS: dict[str, str] = {
    "candidates": "read: the first candidate is the reply",
    "usageMetadata": "read: usage as reported",
    "responseId": "read: the message id",
    "modelVersion": "read: the model",
    "promptFeedback": "read: blockReason is a refusal; the rest (safetyRatings) dropped",
    "createTime": "ignored: a timestamp, no counterpart",
}
# candidate keys -> what the decoder does with them (anything else: dropped, recorded)
CANDIDATE_KEYS: dict[str, str] = {
    "content": "read: parts become blocks",
    "finishReason": "read: the stop reason (FINISH_TO_STOP)",
    "index": "read: only candidate 0 is carried",
    "finishMessage": "read: the message of an error finish",
}
# part keys -> neutral block (anything else in a part: dropped, recorded)
PART_KEYS: dict[str, str] = {
    "text": "text block (thinking block when thought is true)",
    "thought": "marks a thinking part",
    "functionCall": "tool_use block, whole",
    "thoughtSignature": "on a functionCall: kept with the call for this endpoint (never sent elsewhere); "
                        "elsewhere dropped: it means nothing to another protocol",
}

OTHER_CANDIDATES = "ignored candidates other than the first (candidateCount > 1 has no counterpart)"


def prompt_block_reason(pf: object, dropped: list[str]) -> str | None:
    """A ``promptFeedback``: ``BLOCKED:<blockReason>`` when the prompt was blocked (a refusal,
    docs/dev/protocols.md D.4.4), else None; its other keys (safetyRatings...) are recorded as dropped."""
    if not isinstance(pf, dict):
        return None
    for key in pf:
        if key != "blockReason":
            note_once(dropped, f"promptFeedback.{key}")
    reason = pf.get("blockReason")
    return "BLOCKED:" + reason if isinstance(reason, str) and reason else None


def stop_for_finish(fr: str, warnings: list[str]) -> str | None:
    """The neutral stop reason of a finishReason (``BLOCKED:…``: a blocked prompt); None for a
    finish that is an error (FINISH_ERRORS); an unknown one ends the turn, with a warning."""
    if fr.startswith("BLOCKED:"):
        note_once(warnings, f"prompt blocked by Gemini ({fr[8:]}): a refusal")
        return "refusal"
    if fr in pg.FINISH_ERRORS:
        return None
    stop = pg.FINISH_TO_STOP.get(fr)
    if stop is None:
        note_once(warnings, f"unknown finishReason {fr!r} taken as end_turn")
        return "end_turn"
    return stop


class GeminiDecoder:
    """Gemini ``GenerateContentResponse`` chunks -> neutral events."""

    def __init__(self, report: ReplyReport) -> None:
        self.report = report
        self.usage: Usage | None = None  # the latest usage the upstream reported
        self._id: str | None = None
        self._started = False
        self._next = 0  # next neutral block index
        self._open: int | None = None  # neutral index of the open text/thinking block
        self._open_kind: str | None = None
        self._calls = 0  # function calls seen
        self._finish: str | None = None
        self._finish_message: str | None = None
        self._ended = False

    # ---- input ----
    def on_event(self, ev: SSEEvent) -> list[Event]:
        data = ev.data
        if not data or not data.strip():
            return []
        try:
            d = jsonc.loads(data)
        except jsonc.JSONDecodeError as e:
            return self._error(StreamError(502, "api_error", f"upstream sent a chunk that is not valid JSON ({e})"))
        if not isinstance(d, dict):
            return self._error(StreamError(502, "api_error", "upstream sent a chunk that is not a JSON object"))
        return self.on_object(d)

    def on_object(self, d: dict[str, Any]) -> list[Event]:
        """One ``GenerateContentResponse`` (a stream chunk, or a whole reply)."""
        if d.get("error"):
            err = error_from_obj(pg.stream_error_status(d), d)
            return self._error(StreamError(err.status, error_type_for_status(err.status), err.message, err.code))
        out: list[Event] = []
        u = d.get("usageMetadata")
        if isinstance(u, dict) and u:
            self.usage = Usage(pg.COUNTING_NAME, u)  # a running total, not an increment: the latest wins
        if not self._started:
            self._started = True
            rid, model = d.get("responseId"), d.get("modelVersion")
            self._id = rid if isinstance(rid, str) else None
            out.append(MessageStart(self._id, model if isinstance(model, str) else None, self.usage))
        for key in d:
            if key not in RESPONSE_KEYS:
                note_once(self.report.dropped, key)
        if self._ended:
            if isinstance(u, dict) and u and self.usage is not None:
                out.append(UsageUpdate(self.usage))
            return out
        if (pf := d.get("promptFeedback")) is not None:
            self._prompt_feedback(pf)
        cands = d.get("candidates")
        if isinstance(cands, list):
            for pos, cand in enumerate(cands):
                if not isinstance(cand, dict) or cand.get("index", 0) != 0 or pos > 0:
                    note_once(self.report.warnings, OTHER_CANDIDATES)
                    continue
                self._candidate(cand, out)
        if self._finish is not None and isinstance(u, dict) and u:
            out.extend(self._end())
        return out

    def close(self) -> list[Event]:
        if self._ended:
            return []
        if self._finish is not None:
            return self._end()
        if not self._started:
            return self._error(StreamError(502, "api_error", EARLY_END))
        return self._error(StreamError(502, "api_error", NO_FINISH))

    # ---- internals ----
    def _prompt_feedback(self, pf: object) -> None:
        blocked = prompt_block_reason(pf, self.report.dropped)
        if blocked is not None and self._finish is None:
            self._finish = blocked

    def _candidate(self, cand: dict[str, Any], out: list[Event]) -> None:
        for key in cand:
            if key not in CANDIDATE_KEYS and cand[key] not in (None, [], {}):
                note_once(self.report.dropped, f"{CANDIDATE}.{key}")
        content = cand.get("content")
        parts = content.get("parts") if isinstance(content, dict) else None
        if isinstance(parts, list):
            for part in parts:
                if isinstance(part, dict):
                    self._part(part, out)
        fr = cand.get("finishReason")
        if isinstance(fr, str) and fr:
            self._finish = fr
            fm = cand.get("finishMessage")
            self._finish_message = fm if isinstance(fm, str) else None

    def _part(self, part: dict[str, Any], out: list[Event]) -> None:
        for key in part:
            if key not in PART_KEYS:
                note_once(self.report.dropped, f"{PARTS}.{key}")
        if "thoughtSignature" in part:  # the client cannot carry it
            note_once(self.report.dropped, f"{PARTS}.thoughtSignature")
        fc = part.get("functionCall")
        if isinstance(fc, dict):  # its signature rides on the call (kept for this endpoint: reasoning/state.py)
            sig = part.get("thoughtSignature")
            self._call(fc, out, sig if isinstance(sig, str) and sig else None)
            return
        text = part.get("text")
        if isinstance(text, str) and text:
            self._text("thinking" if part.get("thought") is True else "text", text, out)
        sig = part.get("thoughtSignature")
        if isinstance(sig, str) and sig and self._open is not None and self._open_kind == "text":
            # a reply without calls signs its text (often in a last, empty part): kept for this endpoint
            out.append(BlockSignature(self._open, sig))

    def _text(self, kind: str, text: str, out: list[Event]) -> None:
        if self._open_kind != kind:
            self._close(out)
            n = self._next
            self._next += 1
            raw = {"source": f"{PARTS}.thought"} if kind == "thinking" else None
            out.append(BlockStart(n, kind, raw=raw))  # type: ignore[arg-type]
            self._open, self._open_kind = n, kind
        out.append(BlockDelta(self._open, text))  # type: ignore[arg-type]

    def _call(self, fc: dict[str, Any], out: list[Event], signature: str | None = None) -> None:
        self._close(out)
        n = self._next
        self._next += 1
        cid = fc.get("id")
        if not isinstance(cid, str) or not cid:
            cid = synth_call_id(self._id, self._calls)
            note_once(self.report.warnings, f"id_synthesized: {PARTS}.functionCall.id")
        self._calls += 1
        name = fc.get("name")
        if not isinstance(name, str) or not name:
            note_once(self.report.warnings, "a function call arrived without a name")
            name = ""
        out.append(BlockStart(n, "tool_use", id=cid, name=name, signature=signature))
        args = fc.get("args")
        if args is not None:
            out.append(BlockDelta(n, jsonc.dumps(args)))
        out.append(BlockStop(n))

    def _close(self, out: list[Event]) -> None:
        if self._open is not None:
            out.append(BlockStop(self._open))
            self._open = self._open_kind = None

    def _end(self) -> list[Event]:
        self._ended = True
        out: list[Event] = []
        self._close(out)
        fr = self._finish or ""
        stop = stop_for_finish(fr, self.report.warnings)
        if stop is None:
            detail = f": {self._finish_message}" if self._finish_message else ""
            out.append(StreamError(502, "api_error", f"upstream ended the turn with finishReason {fr}{detail}"))
            return out
        if stop == "end_turn" and self._calls:
            stop = "tool_use"  # Gemini ends a turn with calls in STOP: the calls say it (docs/dev/protocols.md D.2)
        out.append(MessageStop(stop, None, self.usage))
        return out

    def _error(self, err: StreamError) -> list[Event]:
        self._ended = True
        return [err]

def call_args(pieces: list[str]) -> dict[str, Any] | None:
    """A call's argument pieces as an object ("" is no arguments); None when not an object."""
    text = "".join(pieces)
    try:
        args = jsonc.loads_exact(text) if text.strip() else {}
    except jsonc.JSONDecodeError:
        return None
    return args if isinstance(args, dict) else None


class GeminiEncoder:
    """Neutral events -> Gemini SSE bytes for a client."""

    def __init__(self, report: ReplyReport) -> None:
        self.report = report
        self.finished = False
        self.client_usage: dict[str, Any] | None = None
        self._base: dict[str, Any] = {}  # responseId / modelVersion, on every chunk as Google sends them
        self._kind: dict[int, str] = {}  # neutral index -> "text" | "thinking" | "tool_use"
        self._calls: dict[int, tuple[str | None, str, list[str]]] = {}  # calls not sent: id, name, argument pieces
        self._stopped: set[int] = set()  # calls whose block stopped

    def encode(self, ev: Event) -> bytes:
        if self.finished:
            return b""
        return self._HANDLERS[type(ev)](self, ev)

    def _chunk(self, parts: list[dict[str, Any]] | None, finish: str | None = None, usage: dict[str, Any] | None = None) -> bytes:
        cand: dict[str, Any] = {}
        if parts is not None:
            cand["content"] = {"role": "model", "parts": parts}
        if finish is not None:
            cand["finishReason"] = finish
        cand["index"] = 0
        obj: dict[str, Any] = {"candidates": [cand]}
        if usage is not None:
            obj["usageMetadata"] = usage
        obj.update(self._base)
        return self._emit(obj)

    def _emit(self, obj: dict[str, Any]) -> bytes:
        """One chunk out, as SSE bytes (the whole-reply encoder keeps the objects instead)."""
        return pg.sse_event(obj)

    def _message_start(self, ev: MessageStart) -> bytes:
        if ev.model:
            self._base["modelVersion"] = ev.model
        if ev.id:
            self._base["responseId"] = ev.id
        return b""

    def _block_start(self, ev: BlockStart) -> bytes:
        if ev.kind in ("text", "thinking"):
            self._kind[ev.index] = ev.kind
            if ev.kind == "thinking" and ev.signature:
                note_once(self.report.dropped, "content[].thinking.signature")
            return b""
        if ev.kind == "tool_use":
            self._kind[ev.index] = "tool_use"
            self._calls[ev.index] = (ev.id, ev.name or "", [])
            return b""
        raw = ev.raw or {}
        note_once(self.report.dropped, raw.get("source") or f"content[].{raw.get('type') or ev.kind}")
        return b""

    def _block_delta(self, ev: BlockDelta) -> bytes:
        kind = self._kind.get(ev.index)
        if kind == "text":
            return self._chunk([{"text": ev.text}])
        if kind == "thinking":
            return self._chunk([{"text": ev.text, "thought": True}])
        if kind == "tool_use" and ev.index in self._calls:
            self._calls[ev.index][2].append(ev.text)
        return b""

    def _block_signature(self, ev: BlockSignature) -> bytes:
        if self._kind.get(ev.index) == "thinking":
            note_once(self.report.dropped, "content[].thinking.signature")
        return b""

    def _block_stop(self, ev: BlockStop) -> bytes:
        """Calls go out in order, each once its block stopped with whole arguments; a Chat
        upstream may still send pieces of a stopped call (interleaved calls): it waits."""
        if ev.index not in self._calls:
            return b""
        self._stopped.add(ev.index)
        out = b""
        while self._calls:
            first = next(iter(self._calls))
            if first not in self._stopped or call_args(self._calls[first][2]) is None:
                break
            out += self._call(*self._calls.pop(first))
        return out

    def _call(self, cid: str | None, name: str, pieces: list[str]) -> bytes:
        """A function call goes whole, ``args`` an object (docs/dev/protocols.md D.3.7): arguments that do
        not parse as a JSON object are an error, never a string."""
        args = call_args(pieces)
        if args is None:
            return self._stream_error(StreamError(502, "api_error",
                                                  f"upstream sent arguments for {name!r} that are not a JSON object"))
        fc: dict[str, Any] = {"name": name, "args": args}
        if cid:
            fc["id"] = cid
        return self._chunk([{"functionCall": fc}])

    def _message_stop(self, ev: MessageStop) -> bytes:
        out = b"".join(self._call(*self._calls.pop(i)) for i in sorted(self._calls))
        if self.finished:  # a call's arguments were broken: the error went instead
            return out
        stop = ev.stop_reason
        finish = pg.STOP_TO_FINISH.get(stop or "")
        if finish is None:
            note_once(self.report.warnings, f"unknown stop_reason {stop!r} sent as finishReason 'STOP'")
            finish = "STOP"
        if ev.stop_sequence:
            note_once(self.report.dropped, "stop_sequence")
        usage = pg.COUNTING.write(ev.usage) if ev.usage is not None else None
        self.client_usage = usage
        self.finished = True
        self.report.stop_reason, self.report.completed = stop, True
        return out + self._chunk(None, finish, usage)

    def _stream_error(self, ev: StreamError) -> bytes:
        err = UpstreamError(ev.status, ev.message, ev.type, ev.code)
        self.finished = True
        self.report.errors.append(ev.message)
        return self._emit(pg.error_chunk(err))

    def _nothing(self, ev: Event) -> bytes:
        return b""

    _HANDLERS: dict[type, Callable[["GeminiEncoder", Any], bytes]] = {  # each handler takes its own event class
        MessageStart: _message_start,
        BlockStart: _block_start,
        BlockDelta: _block_delta,
        BlockSignature: _block_signature,
        BlockStop: _block_stop,
        MessageStop: _message_stop,
        StreamError: _stream_error,
        UsageUpdate: _nothing,
        KeepAlive: _nothing,  # google-genai reads a comment line as a JSON chunk and fails: no keep-alive
    }
