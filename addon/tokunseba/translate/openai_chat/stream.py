"""OpenAI Chat Completions streams <-> neutral events (docs/dev/protocols.md B.5, B.7, E.5).

``ChatDecoder`` reads ``chat.completion.chunk`` events from OpenAI and the OpenAI-compatible
servers (llama.cpp, llama_cpp.server, vLLM, Ollama) with their quirks: ids and names repeated
in every tool delta, whole calls in one chunk, ``null`` fields, usage on the finish chunk or in
a trailing ``choices: []`` chunk, reasoning in ``reasoning_content`` / ``reasoning``.
``ChatEncoder`` writes the canonical Chat stream a client expects: a role chunk, deltas, a
finish chunk, the usage chunk when asked for, ``data: [DONE]``.
"""

from __future__ import annotations

from typing import Any

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ... import jsonc
from ...neutral import UpstreamError, error_from_obj, error_type_for_status
from ...protocols import is_context_window
from ...neutral import odd_id, synth_tool_id
from ...neutral import ReplyReport, note_once
from ...neutral import FREEFORM_PARAM
from ...neutral import Usage
from ...protocols import openai_chat as po
from ...sse import KEEPALIVE_COMMENT, SSEEvent, encode_event
from ...neutral import (
    EARLY_END,
    NAMELESS_CALL,
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

NO_FINISH = "upstream ended the stream without a finish_reason"
# delta keys that carry reasoning text, in order of preference (vLLM once sent both, equal)
REASONING_KEYS = ("reasoning_content", "reasoning")
# delta keys the decoder reads; any other non-empty one is recorded as dropped
DELTA_KEYS_READ = frozenset({"role", "content", "refusal", "tool_calls", "function_call", *REASONING_KEYS})
# choice keys the decoder reads; any other non-empty one (logprobs...) is recorded as dropped
CHOICE_KEYS_READ = frozenset({"index", "delta", "finish_reason", "stop_reason"})
CHOICE_KEYS_SEEN = CHOICE_KEYS_READ | {"logprobs"}  # logprobs: null on every real OpenAI chunk
EMPTY: tuple[Any, ...] = (None, "", [], {})


# Reply fields whose value is not the documented type: dropped and recorded (as absent ones
# are treated), never raised on. Read where the value is read; the check runs only when the
# type is wrong.
ODD_DROPPED = (
    ("id", "the completion id is a string; any other value names nothing (ids.odd_id; one is minted where needed)"),
    ("choices[0].message.tool_calls", "a list of calls; any other value carries no call"),
    ("choices[0].delta.tool_calls", "the same in a chunk"),
    ("choices[0].delta.tool_calls[].function", "an object; any other value carries no name nor arguments (as in a whole reply)"),
    # choices that is not a list: the stream ends with a 502 error event (no choice can be read)
    # finish_reason: any non-string is an unknown finish_reason (end_turn, warned: stop_from_finish)
)


def stop_from_finish(finish: str | None, warnings: list[str]) -> str:
    """Neutral stop reason for a finish_reason; an unknown one ends the turn, with a warning."""
    stop = po.FINISH_TO_STOP.get(finish) if type(finish) is str else None
    if stop is None:
        note_once(warnings, f"unknown finish_reason {finish!r} taken as end_turn")
        return "end_turn"
    return stop



# a streamed custom call's input as the arguments of its function (neutral/tools.py): the JSON
# text of {"input": <input>}, its string written as the input arrives (each piece escaped on its
# own: JSON escapes one character at a time, so any split gives the same text)
FREEFORM_OPEN = '{"' + FREEFORM_PARAM + '":"'
FREEFORM_CLOSE = '"}'


def _custom_as_function(custom: dict[str, Any]) -> dict[str, Any]:
    """A custom call's delta as a function delta: its name, its input piece as arguments text."""
    piece = custom.get("input")
    return {"name": custom.get("name"), "arguments": jsonc.dumps(piece)[1:-1] if type(piece) is str and piece else None}


@dataclass(slots=True)
class _Call:
    """One streamed Chat tool call as its fragments arrive (ChatDecoder)."""

    pos: int  # its place in the chunk that first carried it (the recorded path)
    seq: int  # its order among the stream's calls (a synthesised id's number)
    id: str | None = None
    name: str | None = None
    held: list[str] = field(default_factory=list)  # argument pieces held until it opens
    n: int | None = None  # its neutral block index once open
    custom: bool = False  # a custom (freeform) call: its input streams as the encoding's arguments


class ChatDecoder:
    """Chat chunks -> neutral events.

    Tool fragments are keyed by the Chat tool ``index``. A server may spread one call's
    ``id``, ``name`` and arguments over several chunks in any order (the id with empty
    arguments first and the name in the next chunk, the name first, ...): a call's tool block
    opens (closing the open one) once its id and its name are both known, what every client
    protocol needs to open a call; until then only that call's argument fragments are held,
    text and other calls go on. Later fragments are argument pieces for its block (a server
    may interleave parallel calls' fragments, so a tool block is stopped only at the finish,
    after every block it opened before); a repeated ``id``/``name`` is ignored. At the finish a named call still without an id opens with a
    synthesised one (recorded ``id_synthesized``); a call that never got a name ends the
    stream with a 502 error event (never a nameless call). The end (block stop + MessageStop) is held after
    ``finish_reason`` until the usage arrives, ``[DONE]`` or the end of the body, so usage
    rides on the stop and arguments sent after ``finish_reason`` still reach their block."""

    def __init__(self, report: ReplyReport) -> None:
        self.report = report
        self.usage: Usage | None = None  # the latest usage the upstream reported
        self._id: str | None = None
        self._started = False
        self._next = 0  # next neutral block index
        self._open: int | None = None  # neutral index of the open block
        self._open_kind: str | None = None  # "text" | "thinking" | "tool_use"
        self._calls: dict[object, _Call] = {}  # Chat tool key -> the call
        self._calls_to_stop: list[int] = []  # tool blocks another block followed: stopped at the finish
        self._last_call: _Call | None = None
        self._finish: str | None = None
        self._stop_sequence: str | None = None
        self._ended = False

    def on_event(self, ev: SSEEvent) -> list[Event]:
        data = ev.data
        if not data:
            return []
        if data[0] == "[" and data.strip() == "[DONE]":
            return self._done()
        try:
            d = jsonc.loads(data)
        except jsonc.JSONDecodeError as e:
            return self._error(StreamError(502, "api_error", f"upstream sent a chunk that is not valid JSON ({e})"))
        if not isinstance(d, dict):
            return self._error(StreamError(502, "api_error", "upstream sent a chunk that is not a JSON object"))
        if d.get("error") or d.get("object") == "error":
            return self._upstream_error(d)
        out: list[Event] = []
        if not self._started:
            self._started = True
            mid = d.get("id")
            if mid is not None and type(mid) is not str:
                odd_id("id", self.report.dropped)
                mid = None
            self._id = mid
            out.append(MessageStart(self._id, d.get("model")))
        u = d.get("usage")
        if isinstance(u, dict):
            self.usage = Usage(po.COUNTING_NAME, u)  # a total, not an increment: the latest wins
        if self._ended:
            if isinstance(u, dict) and self.usage is not None:
                out.append(UsageUpdate(self.usage))
            return out
        choices = d.get("choices") or ()
        if choices.__class__ is not list and choices != ():
            return self._error(StreamError(502, "api_error", "upstream sent a chunk whose choices is not a list"))
        for ch in choices:
            if not isinstance(ch, dict) or ch.get("index", 0) != 0:
                note_once(self.report.warnings, "ignored choices with index != 0 (n > 1 has no counterpart)")
                continue
            if not ch.keys() <= CHOICE_KEYS_SEEN or ch.get("logprobs"):  # fast path: nothing left behind
                self._left_behind(ch, CHOICE_KEYS_READ, "choices[0]")
            delta = ch.get("delta")
            if delta and isinstance(delta, dict):
                self._delta(delta, out)
            fr = ch.get("finish_reason")
            if fr:
                self._finish = fr
                sr = ch.get("stop_reason")  # vLLM: the matched stop string
                if fr == "stop" and isinstance(sr, str) and sr:
                    self._stop_sequence = sr
        if self._finish is not None and isinstance(u, dict):
            self._end(out)
        return out

    def close(self) -> list[Event]:
        if self._ended:
            return []
        if self._finish is not None:
            out: list[Event] = []
            self._end(out)
            return out
        return self._error(StreamError(500, "api_error", EARLY_END))

    # ---- internals ----
    def _delta(self, delta: dict[str, Any], out: list[Event]) -> None:
        c = delta.get("content")
        if len(delta) == 1:  # the usual chunks: a piece of text, or tool-call fragments, alone
            if c and type(c) is str:
                if self._open_kind == "text":
                    out.append(BlockDelta(self._open, c))  # type: ignore[arg-type]
                else:
                    self._text("text", c, out)
                return
            tcs = delta.get("tool_calls")
            if tcs and type(tcs) is list:
                for pos, tc in enumerate(tcs):
                    if isinstance(tc, dict):
                        self._tool(tc, pos, out)
                return
        if not delta.keys() <= DELTA_KEYS_READ:  # thinking_blocks, audio...
            self._left_behind(delta, DELTA_KEYS_READ, "choices[0].delta")
        if "reasoning_content" in delta or "reasoning" in delta:  # REASONING_KEYS, tested the fast way
            self._reasoning(delta, out)
        if c:
            if isinstance(c, str):
                self._text("text", c, out)
            else:
                note_once(self.report.dropped, "choices[0].delta.content(non-string)")
        rf = delta.get("refusal")
        if rf and isinstance(rf, str):
            self._text("text", rf, out)  # a refusal is text to the other side (E.2, lossy)
        tcs = delta.get("tool_calls")
        if tcs and tcs.__class__ is not list:
            note_once(self.report.dropped, "choices[0].delta.tool_calls")  # ODD_DROPPED
            tcs = None
        if tcs:
            for pos, tc in enumerate(tcs):
                if isinstance(tc, dict):
                    self._tool(tc, pos, out)
        elif delta.get("function_call"):  # deprecated, alone (llama_cpp.server sends it beside tool_calls)
            note_once(self.report.dropped, "choices[0].delta.function_call")

    def _reasoning(self, delta: dict[str, Any], out: list[Event]) -> None:
        for key in REASONING_KEYS:
            r = delta.get(key)
            if r and isinstance(r, str):
                self._text("thinking", r, out, f"choices[0].delta.{key}")
                return
            if r:  # reasoning as an object ({"text": ...} / {"signature": ...}): not carried
                note_once(self.report.dropped, f"choices[0].delta.{key}")

    def _left_behind(self, obj: dict[str, Any], read: frozenset[str], path: str) -> None:
        """Record every non-empty key of ``obj`` the decoder does not read."""
        for k, v in obj.items():
            if k not in read and v not in EMPTY:
                note_once(self.report.dropped, f"{path}.{k}")

    def _close(self, out: list[Event]) -> None:
        if self._open is not None:
            if self._open_kind == "tool_use":  # its arguments may still come: stopped at the finish
                self._calls_to_stop.append(self._open)
            else:
                out.append(BlockStop(self._open))
            self._open = self._open_kind = None

    def _begin(self, start: BlockStart, kind: str, out: list[Event]) -> None:
        self._close(out)
        out.append(start)
        self._open, self._open_kind = start.index, kind

    def _text(self, kind: str, text: str, out: list[Event], source: str | None = None) -> None:
        if self._open_kind != kind:
            n = self._next
            self._next += 1
            raw = {"source": source} if source else None
            self._begin(BlockStart(n, kind, raw=raw), kind, out)  # type: ignore[arg-type]
        out.append(BlockDelta(self._open, text))  # type: ignore[arg-type]

    def _tool(self, tc: dict[str, Any], pos: int, out: list[Event]) -> None:
        fn = tc.get("function") or {}
        if fn.__class__ is not dict:
            note_once(self.report.dropped, "choices[0].delta.tool_calls[].function")  # ODD_DROPPED
            fn = {}
        custom = tc.get("custom") if not fn else None
        if custom.__class__ is dict:  # a custom (freeform) call: OpenAI's own Chat API
            fn = _custom_as_function(custom)
        tid = tc.get("id")
        key = tc.get("index")
        call: _Call | None
        if isinstance(key, int):
            call = self._calls.get(key)
        elif tid:  # no index (old Ollama): by id
            key = ("id", tid)
            call = self._calls.get(key)
        elif fn.get("name"):  # neither, but a name of its own: a new call (Ollama-style)
            key = None
            call = None
        else:  # neither: a continuation of the latest call
            call = self._last_call
        if call is None:
            seq = len(self._calls)
            call = _Call(pos, seq, custom=custom.__class__ is dict)
            self._calls[key if key is not None else ("n", seq)] = call
        self._last_call = call
        args = fn.get("arguments")
        if args and not isinstance(args, str):  # some servers send the object itself
            args = jsonc.dumps(args)
        if call.n is not None:  # open: a piece of its arguments
            if args:
                out.append(BlockDelta(call.n, args))
            return
        if tid and not call.id:
            call.id = tid
        name = fn.get("name")
        if name and type(name) is str and not call.name:
            call.name = name
        if args:
            call.held.append(args)
        if call.id and call.name:
            self._open_call(call, out)

    def _open_call(self, call: "_Call", out: list[Event]) -> None:
        """Open a call's tool block and pass on the argument pieces held for it."""
        n = call.n = self._next
        self._next += 1
        self._begin(BlockStart(n, "tool_use", id=call.id, name=call.name), "tool_use", out)
        if call.custom:
            out.append(BlockDelta(n, FREEFORM_OPEN))
        for piece in call.held:
            out.append(BlockDelta(n, piece))
        call.held = []

    def _open_held(self, out: list[Event]) -> bool:
        """At the finish: open the calls still held (a named one without an id gets a
        synthesised id, recorded); False when one never got a name."""
        for call in self._calls.values():
            if call.n is not None:
                continue
            if not call.name:
                return False
            if not call.id:
                call.id = synth_tool_id(self._id, call.seq)
                note_once(self.report.warnings, f"id_synthesized: choices[0].delta.tool_calls[{call.pos}].id")
            self._open_call(call, out)
        return True

    def _end(self, out: list[Event]) -> None:
        self._ended = True
        if not self._open_held(out):
            out.append(StreamError(502, "api_error", NAMELESS_CALL))
            return
        out.extend(BlockDelta(c.n, FREEFORM_CLOSE) for c in self._calls.values() if c.custom and c.n is not None)
        self._close(out)
        out.extend(BlockStop(n) for n in self._calls_to_stop)
        stop = stop_from_finish(self._finish, self.report.warnings)
        seq = self._stop_sequence
        out.append(MessageStop("stop_sequence" if seq else stop, seq, self.usage))

    def _done(self) -> list[Event]:
        if self._ended:
            return []
        if self._finish is None:
            return self._error(StreamError(502, "api_error", NO_FINISH))
        out: list[Event] = []
        self._end(out)
        return out

    def _upstream_error(self, d: dict[str, Any]) -> list[Event]:
        err = error_from_obj(500, d, status_from_code=True)
        code = po.CONTEXT_LENGTH_CODE if is_context_window(err) else err.code
        return self._error(StreamError(err.status, error_type_for_status(err.status), err.message, code))

    def _error(self, err: StreamError) -> list[Event]:
        self._ended = True
        return [err]


class ChatEncoder:
    """Neutral events -> Chat ``chat.completion.chunk`` SSE bytes for a client."""

    def __init__(self, report: ReplyReport, *, include_usage: bool = True, created: int | None = None) -> None:
        self.report = report
        self.include_usage = include_usage
        self.created = int(time.time()) if created is None else created
        self.finished = False
        self.client_usage: dict[str, Any] | None = None
        self._base: dict[str, Any] = {}
        self._kind: dict[int, str] = {}  # neutral index -> "text" | "tool" for emitted blocks
        self._tool_of: dict[int, int] = {}  # neutral index -> Chat tool index (running counter)
        self._tools = 0
        self._started = False

    def encode(self, ev: Event) -> bytes:
        if self.finished:
            return b""
        return self._HANDLERS[type(ev)](self, ev)

    def _chunk(self, choice_delta: dict[str, Any], finish: str | None = None) -> bytes:
        chunk = dict(self._base)
        chunk["choices"] = [{"index": 0, "delta": choice_delta, "finish_reason": finish}]
        if self.include_usage:
            chunk["usage"] = None  # OpenAI sends "usage": null on every chunk but the last
        return encode_event(jsonc.dumpb(chunk))

    def _message_start(self, ev: MessageStart) -> bytes:
        if self._started:
            return b""
        self._started = True
        self._base = {"id": ev.id, "object": "chat.completion.chunk", "created": self.created, "model": ev.model}
        return self._chunk({"role": "assistant", "content": ""})

    def _block_start(self, ev: BlockStart) -> bytes:
        if ev.kind == "text":
            self._kind[ev.index] = "text"
            return b""
        if ev.kind == "tool_use":
            k = self._tools
            self._tools += 1
            self._kind[ev.index] = "tool"
            self._tool_of[ev.index] = k
            # id and name only in the first fragment of each index (docs/dev/pitfalls.md 5)
            return self._chunk({"tool_calls": [{"index": k, "id": ev.id, "type": "function",
                                                "function": {"name": ev.name, "arguments": ""}}]})
        if ev.kind == "thinking":  # shown where Chat has an unsigned place for it (never a signature)
            self._kind[ev.index] = "thinking"
            return b""
        raw = ev.raw or {}
        note_once(self.report.dropped, raw.get("source") or f"content[].{raw.get('type') or ev.kind}")
        return b""

    def _block_delta(self, ev: BlockDelta) -> bytes:
        kind = self._kind.get(ev.index)
        if kind == "text":
            return self._chunk({"content": ev.text})
        if kind == "thinking":
            return self._chunk({"reasoning_content": ev.text})
        if kind == "tool":
            return self._chunk({"tool_calls": [{"index": self._tool_of[ev.index], "function": {"arguments": ev.text}}]})
        return b""  # a dropped block

    def _nothing(self, ev: Event) -> bytes:
        return b""

    def _signature(self, ev: Event) -> bytes:
        if isinstance(ev, BlockSignature) and ev.signature and self._kind.get(ev.index) == "thinking":
            note_once(self.report.dropped, "content[].thinking.signature")  # bound to its provider (kept for it)
        return b""

    def _message_stop(self, ev: MessageStop) -> bytes:
        stop = ev.stop_reason
        if self._tools and stop in ("end_turn", None):
            stop = "tool_use"  # derived from what was emitted (docs/dev/pitfalls.md 7)
        finish = po.STOP_TO_FINISH.get(stop or "")
        if finish is None:
            note_once(self.report.warnings, f"unknown stop_reason {stop!r} sent as finish_reason 'stop'")
            finish = "stop"
        if ev.stop_sequence:
            note_once(self.report.dropped, "stop_sequence")
        out = self._chunk({}, finish)
        if ev.usage is not None:
            self.client_usage = po.COUNTING.write(ev.usage)
            if self.include_usage:
                chunk = dict(self._base)
                chunk["choices"] = []
                chunk["usage"] = self.client_usage
                out += encode_event(jsonc.dumpb(chunk))
        self.finished = True
        self.report.stop_reason, self.report.completed = stop, True
        return out + po.DONE

    def _stream_error(self, ev: StreamError) -> bytes:
        _, etype, code, message = po.from_upstream_error(UpstreamError(ev.status, ev.message, ev.type, ev.code))
        self.finished = True
        self.report.errors.append(message)
        return po.sse_error(etype, message, code)

    _HANDLERS: dict[type, Callable[["ChatEncoder", Any], bytes]] = {  # each handler takes its own event class
        MessageStart: _message_start,
        BlockStart: _block_start,
        BlockDelta: _block_delta,
        BlockSignature: _signature,
        BlockStop: _nothing,
        MessageStop: _message_stop,
        StreamError: _stream_error,
        UsageUpdate: _nothing,
        KeepAlive: lambda self, ev: KEEPALIVE_COMMENT,  # an SSE comment: the SDKs' parsers skip it
    }
