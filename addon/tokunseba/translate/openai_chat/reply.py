"""Whole Chat Completions replies: the decoder (a ``chat.completion`` body -> neutral events)
and the encoder (a neutral ``Message`` -> a ``chat.completion`` body) (docs/dev/protocols.md B.2, E.2-E.4).

The decoder yields the events the stream decoder yields for the same reply, so a whole
reply and the same reply streamed end in the same object. Whatever a client protocol
cannot carry is recorded by its JSON path: choice and message keys not read (reasoning,
audio, logprobs...), content parts that are not text, a deprecated ``function_call``.
The encoder writes the message's text as one string, tool calls with their ids and
argument strings verbatim, the finish reason mapped (E.3) and usage converted only where
definitions differ (E.4); reasoning, thinking and other blocks are dropped and recorded.
"""

from __future__ import annotations

from typing import Any

from ... import jsonc
from ...errors import UntranslatableReply
from ...neutral import NAMELESS_CALL, Event
from ...neutral import Block, Message
from ...neutral import ReplyReport, note_once
from ...neutral import freeform_arguments
from ...neutral import Usage
from ...protocols import openai_chat as po
from ..codec import parse_reply
from ...neutral import odd_id, synth_tool_id
from .stream import REASONING_KEYS, stop_from_finish

# what becomes of each key of choices[0].message: "read" keys are decoded below; any other
# key with a non-empty value is dropped (recorded)
MESSAGE_KEYS_READ = frozenset({"role", "content", "tool_calls", "refusal"})
# nothing to carry; "function_call" is llama_cpp.server's legacy duplicate of tool_calls
MESSAGE_KEYS_IGNORED = frozenset({"name", "function_call"})
MESSAGE_KEYS_KNOWN = MESSAGE_KEYS_READ | MESSAGE_KEYS_IGNORED
CHOICE_KEYS_READ = frozenset({"index", "message", "finish_reason", "stop_reason"})
CHOICE_KEYS_SEEN = CHOICE_KEYS_READ | {"logprobs"}  # logprobs: null on every real OpenAI reply
EMPTY: tuple[Any, ...] = (None, "", [], {})


def chat_choice(doc: dict[str, Any], dropped: list[str], warnings: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The first choice of a whole Chat reply and its message, recording what no client
    protocol carries; a reply with no choices is a 502 (with the upstream's error if any)."""
    choices = doc.get("choices")
    if not choices or not isinstance(choices, list) or not isinstance(choices[0], dict):
        if doc.get("error"):
            raise UntranslatableReply(502, f"upstream error: {jsonc.dumps(doc['error'])}")
        raise UntranslatableReply(502, "the upstream's Chat reply has no choices")
    if len(choices) > 1:
        note_once(warnings, "ignored choices with index != 0 (n > 1 has no counterpart)")
    choice = choices[0]
    # OpenAI's usual other key is logprobs, null: the scan only when another key or a value is there
    if not choice.keys() <= CHOICE_KEYS_SEEN or choice.get("logprobs") not in EMPTY:
        for k, v in choice.items():  # in the reply's order
            if k not in CHOICE_KEYS_READ and v not in EMPTY:
                note_once(dropped, f"choices[0].{k}")
    msg = _o if isinstance(_o := choice.get("message"), dict) else {}
    if not msg.keys() <= MESSAGE_KEYS_KNOWN:
        for k, v in msg.items():
            if k not in MESSAGE_KEYS_KNOWN and v not in EMPTY:
                note_once(dropped, f"choices[0].message.{k}")  # reasoning_content, reasoning, audio...
    if msg.get("function_call") and not msg.get("tool_calls"):
        note_once(dropped, "choices[0].message.function_call")  # deprecated, no tool id to carry
    return choice, msg


def _text(msg: dict[str, Any], dropped: list[str]) -> str:
    """The message's text: a string, or the text of its text parts; every other part is
    recorded as dropped (an image, an unknown part type)."""
    content = msg.get("content")
    if isinstance(content, list):
        texts = []
        for i, part in enumerate(content):
            if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
                texts.append(part["text"])
            else:
                note_once(dropped, f"choices[0].message.content[{i}]")
        content = "".join(texts)
    text = content if isinstance(content, str) else ""
    refusal = msg.get("refusal")  # a refusal is text to the other side (E.2, lossy), as in a stream
    return text + (refusal if isinstance(refusal, str) else "")


def decode_message(body: bytes, report: ReplyReport) -> Message:
    """The neutral message of a whole Chat reply: what ``Message.collect`` makes of the events
    the stream decoder yields for the same reply, built straight (no event objects)."""
    doc = parse_reply(body, "Chat")
    choice, msg = chat_choice(doc, report.dropped, report.warnings)
    mid = doc.get("id")
    if mid is not None and type(mid) is not str:
        odd_id("id", report.dropped)
        mid = None
    m = Message(mid, doc.get("model"))
    blocks = m.blocks
    if "reasoning_content" in msg or "reasoning" in msg:  # REASONING_KEYS, tested the fast way
        for key in REASONING_KEYS:  # recorded as dropped above; an unsigned thinking block here
            r = msg.get(key)
            if r and isinstance(r, str):
                blocks.append(Block("thinking", None, None, r, None, {"source": f"choices[0].message.{key}"}))
                break
    content = msg.get("content")
    text = content if type(content) is str and "refusal" not in msg else _text(msg, report.dropped)
    if text:
        blocks.append(Block("text", None, None, text))
    tool_calls = msg.get("tool_calls")
    if tool_calls and type(tool_calls) is not list:
        note_once(report.dropped, "choices[0].message.tool_calls")  # ODD_DROPPED
        tool_calls = None
    if tool_calls:
        for pos, tc in enumerate(tool_calls):
            if not isinstance(tc, dict):
                note_once(report.dropped, f"choices[0].message.tool_calls[{pos}]")
                continue
            fn = _o if isinstance(_o := tc.get("function"), dict) else {}
            custom = tc.get("custom") if not fn else None
            if isinstance(custom, dict):  # a custom (freeform) call: its input as the encoding's arguments
                given = custom.get("input")
                fn = {"name": custom.get("name"), "arguments": freeform_arguments(given) if isinstance(given, str) else ""}
            tid = tc.get("id")
            if not tid:
                tid = synth_tool_id(mid, pos)
                note_once(report.warnings, f"id_synthesized: choices[0].message.tool_calls[{pos}].id")
            name = fn.get("name")
            if not name or type(name) is not str:  # never a nameless call (as its stream: NAMELESS_CALL)
                raise UntranslatableReply(502, f"{NAMELESS_CALL} (choices[0].message.tool_calls[{pos}].function.name)")
            args = fn.get("arguments")
            if args is not None and not isinstance(args, str):  # some servers send the object itself
                args = jsonc.dumps(args)
            blocks.append(Block("tool_use", tid, name, args or ""))
    finish = choice.get("finish_reason")
    stop = po.FINISH_TO_STOP.get(finish) if type(finish) is str else None
    if stop is None:
        stop = stop_from_finish(finish, report.warnings)
    seq = _o if finish == "stop" and isinstance(_o := choice.get("stop_reason"), str) else None
    if seq:
        stop = "stop_sequence"  # vLLM names the matched stop string
    u = doc.get("usage")
    m.stop_reason, m.stop_sequence, m.stopped = stop, seq or None, True
    if isinstance(u, dict):
        m.usage = Usage(po.COUNTING_NAME, u)
    return m


def decode(body: bytes, report: ReplyReport) -> list[Event]:
    """The neutral events of a whole Chat reply (the message's, one delta per block)."""
    return decode_message(body, report).events()


def encode(msg: Message, report: ReplyReport, created: int) -> tuple[bytes, dict[str, Any] | None]:
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[dict[str, Any]] = []
    for b in msg.blocks:
        if b.kind == "text":
            texts.append(b.text)
        elif b.kind == "thinking":  # shown as reasoning_content (unsigned; a signature stays behind)
            if b.text:
                thoughts.append(b.text)
            if b.signature:
                note_once(report.dropped, "content[].thinking.signature")
        elif b.kind == "tool_use":
            calls.append({"id": b.id, "type": "function",
                          "function": {"name": b.name or "", "arguments": b.text or "{}"}})
        else:  # thinking, server tools...: no Chat counterpart
            raw = b.raw or {}
            note_once(report.dropped, raw.get("source") or f"content[].{raw.get('type') or b.kind}")
    stop = msg.stop_reason
    if calls and stop in ("end_turn", None):
        stop = "tool_use"  # derived from what is there (docs/dev/pitfalls.md 7)
    finish = po.STOP_TO_FINISH.get(stop or "")
    if finish is None:
        note_once(report.warnings, f"unknown stop_reason {stop!r} sent as finish_reason 'stop'")
        finish = "stop"
    if msg.stop_sequence:
        note_once(report.dropped, "stop_sequence")
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts or not calls else None}
    if thoughts:
        message["reasoning_content"] = "".join(thoughts)
    if calls:
        message["tool_calls"] = calls
    client_usage = po.COUNTING.write(msg.usage) if msg.usage else None
    out: dict[str, Any] = {"id": msg.id, "object": "chat.completion", "created": created, "model": msg.model,
                 "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}]}
    if client_usage is not None:
        out["usage"] = client_usage
    report.stop_reason, report.completed = stop, True
    return jsonc.dumpb(out), client_usage

