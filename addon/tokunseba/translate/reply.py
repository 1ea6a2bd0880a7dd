"""Whole (non-streamed) replies: Chat Completions <-> Anthropic Messages (protocols.md E.2-E.4).

Each direction keeps its field decisions in one table: what is mapped, and what is dropped
(recorded by JSON path). Ids, tool-call ids and the model name travel as they are; usage is
converted only where definitions differ (E.4) and missing fields stay absent. A reply that
cannot be translated raises ``TranslationError(502, …)``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from .. import jsonc
from ..errors import TranslationError
from ..protocols import anthropic as pa
from ..protocols import openai_chat as po
from .anthropic_stream import note_once
from .chat_stream import stop_from_finish, synth_tool_id
from .usage import ANTHROPIC, OPENAI, Usage

__all__ = ["ReplyTranslation", "translate_reply"]


@dataclass
class ReplyTranslation:
    body: bytes
    usage: Usage | None  # the upstream's usage as reported (None: none)
    client_usage: dict | None  # the usage object the client was sent (None: none reported)
    stop_reason: str | None  # neutral (Anthropic-named) stop reason
    dropped: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


# ---- Chat -> Anthropic: what becomes of each key of choices[0].message ----
# "mapped" keys are read below; any other key with a non-empty value is dropped (recorded).
CHAT_MESSAGE_MAPPED = frozenset({"role", "content", "tool_calls", "refusal"})
# nothing to carry; "function_call" is llama_cpp.server's legacy duplicate of tool_calls
CHAT_MESSAGE_IGNORED = frozenset({"name", "function_call"})
CHAT_CHOICE_MAPPED = frozenset({"index", "message", "finish_reason", "stop_reason"})

# ---- Anthropic -> Chat: what becomes of each content block type / top-level key ----
ANTHROPIC_BLOCKS_MAPPED = frozenset({"text", "tool_use"})  # everything else: dropped
ANTHROPIC_TOP_DROPPED = ("stop_details", "container")  # recorded when non-null


def _parse(body: bytes, what: str) -> dict:
    try:
        doc = jsonc.loads(body)
    except jsonc.JSONDecodeError as e:
        raise TranslationError(502, f"the upstream's {what} reply is not valid JSON ({e})", kind="api_error") from None
    if not isinstance(doc, dict):
        raise TranslationError(502, f"the upstream's {what} reply is not a JSON object", kind="api_error")
    return doc


def _tool_input(tc_id: str, name: str | None, args: object) -> dict:
    """Chat ``arguments`` (a JSON string) -> Anthropic ``input`` (an object); "" means {}."""
    if args is None or args == "":
        return {}
    if isinstance(args, dict):
        return args
    if isinstance(args, str):
        try:
            value = jsonc.loads(args)
        except jsonc.JSONDecodeError as e:
            raise TranslationError(
                502, f"the upstream's tool call {tc_id!r} ({name}) has arguments that are not valid JSON ({e}); "
                f"an Anthropic tool_use needs an object input", kind="api_error") from None
        if isinstance(value, dict):
            return value
    raise TranslationError(
        502, f"the upstream's tool call {tc_id!r} ({name}) has arguments that are not a JSON object; "
        f"an Anthropic tool_use needs an object input", kind="api_error")


EMPTY = (None, "", [], {})


def chat_choice(doc: dict, dropped: list[str], warnings: list[str]) -> tuple[dict, dict]:
    """The first choice of a whole Chat reply and its message, recording what no client
    protocol carries; a reply with no choices is a 502 (with the upstream's error if any)."""
    choices = doc.get("choices")
    if not choices or not isinstance(choices, list) or not isinstance(choices[0], dict):
        if doc.get("error"):
            raise TranslationError(502, f"upstream error: {jsonc.dumps(doc['error'])}", kind="api_error")
        raise TranslationError(502, "the upstream's Chat reply has no choices", kind="api_error")
    if len(choices) > 1:
        note_once(warnings, "ignored choices with index != 0 (n > 1 has no counterpart)")
    choice = choices[0]
    for k, v in choice.items():
        if k not in CHAT_CHOICE_MAPPED and v not in EMPTY:
            note_once(dropped, f"choices[0].{k}")
    msg = choice.get("message") if isinstance(choice.get("message"), dict) else {}
    for k, v in msg.items():
        if k not in CHAT_MESSAGE_MAPPED and k not in CHAT_MESSAGE_IGNORED and v not in EMPTY:
            note_once(dropped, f"choices[0].message.{k}")  # reasoning_content, reasoning, audio...
    if msg.get("function_call") and not msg.get("tool_calls"):
        note_once(dropped, "choices[0].message.function_call")  # deprecated, no tool id to carry
    return choice, msg


def chat_tool_call_id(doc: dict, tc: dict, pos: int, warnings: list[str]) -> str:
    """A whole Chat reply's tool-call id as it came; synthesised deterministically (and
    recorded) only when the upstream sent none."""
    tid = tc.get("id")
    if not tid:
        tid = synth_tool_id(doc.get("id"), pos)
        note_once(warnings, f"id_synthesized: choices[0].message.tool_calls[{pos}].id")
    return tid


def chat_to_anthropic(doc: dict) -> ReplyTranslation:
    dropped: list[str] = []
    warnings: list[str] = []
    choice, msg = chat_choice(doc, dropped, warnings)

    content: list[dict] = []
    text = msg.get("content")
    if isinstance(text, list):  # some servers answer with text parts
        text = "".join(p.get("text") or "" for p in text if isinstance(p, dict) and p.get("type") == "text")
    if isinstance(text, str) and text:
        content.append({"type": "text", "text": text})
    refusal = msg.get("refusal")
    if isinstance(refusal, str) and refusal:
        content.append({"type": "text", "text": refusal})  # E.2: a refusal becomes text (lossy)
    for pos, tc in enumerate(msg.get("tool_calls") or ()):
        if not isinstance(tc, dict):
            continue
        fn = tc.get("function") or {}
        tid = chat_tool_call_id(doc, tc, pos, warnings)
        problem = pa.tool_id_problem(tid)
        if problem:
            raise TranslationError(502, problem, kind="api_error")
        name = fn.get("name") or ""
        content.append({"type": "tool_use", "id": tid, "name": name, "input": _tool_input(tid, name, fn.get("arguments"))})

    finish = choice.get("finish_reason")
    stop = stop_from_finish(finish, warnings)
    stop_seq = choice.get("stop_reason") if finish == "stop" and isinstance(choice.get("stop_reason"), str) else None
    if stop_seq:
        stop = "stop_sequence"  # vLLM names the matched stop string
    if stop == "end_turn" and any(b["type"] == "tool_use" for b in content):
        stop = "tool_use"  # derived from what is there (pitfalls 7)
    u = doc.get("usage")
    usage = Usage(OPENAI, u) if isinstance(u, dict) else None
    client_usage = usage.to_anthropic() if usage else None
    out = {"id": doc.get("id"), "type": "message", "role": "assistant", "model": doc.get("model"),
           "content": content, "stop_reason": stop, "stop_sequence": stop_seq, "usage": client_usage or {}}
    return ReplyTranslation(jsonc.dumpb(out), usage, client_usage, stop, dropped, warnings)


def anthropic_to_chat(doc: dict, created: int) -> ReplyTranslation:
    dropped: list[str] = []
    warnings: list[str] = []
    if doc.get("type") == "error":
        raise TranslationError(502, f"upstream error: {jsonc.dumps(doc.get('error'))}", kind="api_error")
    blocks = doc.get("content")
    if not isinstance(blocks, list):
        raise TranslationError(502, "the upstream's Anthropic reply has no content list", kind="api_error")
    texts: list[str] = []
    tool_calls: list[dict] = []
    for b in blocks:
        t = b.get("type") if isinstance(b, dict) else None
        if t not in ANTHROPIC_BLOCKS_MAPPED:
            note_once(dropped, f"content[].{t}")  # thinking, redacted_thinking, server tools...
        elif t == "text":
            texts.append(b.get("text") or "")
            if b.get("citations"):
                note_once(dropped, "content[].citations")
        else:
            tool_calls.append({"id": b.get("id"), "type": "function",
                               "function": {"name": b.get("name"), "arguments": jsonc.dumps(b.get("input") or {})}})
    for k in ANTHROPIC_TOP_DROPPED:
        if doc.get(k) is not None:
            note_once(dropped, k)
    stop = doc.get("stop_reason")
    if tool_calls and stop in ("end_turn", None):
        stop = "tool_use"
    finish = po.STOP_TO_FINISH.get(stop or "")
    if finish is None:
        note_once(warnings, f"unknown stop_reason {stop!r} sent as finish_reason 'stop'")
        finish = "stop"
    if doc.get("stop_sequence"):
        note_once(dropped, "stop_sequence")
    message: dict = {"role": "assistant", "content": "".join(texts) if texts or not tool_calls else None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    u = doc.get("usage")
    usage = Usage(ANTHROPIC, u) if isinstance(u, dict) and u else None
    client_usage = usage.to_openai() if usage else None
    out: dict = {"id": doc.get("id"), "object": "chat.completion", "created": created, "model": doc.get("model"),
                 "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}]}
    if client_usage is not None:
        out["usage"] = client_usage
    return ReplyTranslation(jsonc.dumpb(out), usage, client_usage, stop, dropped, warnings)


def translate_reply(upstream: str, client: str, body: bytes, *, created: int | None = None) -> ReplyTranslation:
    """A whole upstream reply (2xx) -> the client protocol's reply. ``created`` is the Chat
    ``created`` / Responses ``created_at`` timestamp (now when not given)."""
    if (upstream, client) == (po.PROTOCOL, pa.PROTOCOL):
        return chat_to_anthropic(_parse(body, "Chat"))
    if (upstream, client) == (pa.PROTOCOL, po.PROTOCOL):
        return anthropic_to_chat(_parse(body, "Anthropic"), int(time.time()) if created is None else created)
    if client == "openai-responses" and upstream in (po.PROTOCOL, pa.PROTOCOL):
        from .responses_reply import to_responses  # imports this module

        return to_responses(upstream, body, created=int(time.time()) if created is None else created)
    raise ValueError(f"no reply translator from {upstream!r} to {client!r}")
