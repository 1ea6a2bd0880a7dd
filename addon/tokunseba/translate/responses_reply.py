"""Whole replies and error replies for an OpenAI Responses client (protocols.md C.2, E.2-E.4, E.6).

A Chat Completions or Anthropic Messages reply becomes a Responses ``response`` object built by
the same functions as the stream encoder (responses_stream): the same item ids, output items,
status and usage, so a streamed reply and the same reply whole end in the same object. Text
becomes a ``message`` item, each tool call a ``function_call`` item whose ``call_id`` is the
tool id byte for byte and whose ``arguments`` are the upstream's string verbatim (Anthropic:
``input`` serialized; empty: ``"{}"``); reasoning, thinking and server-tool blocks are dropped
and recorded. An upstream error becomes the OpenAI error envelope, its status mapped as for
Chat clients, the upstream's message and (OpenAI) code kept, a context overflow coded
``context_length_exceeded``.
"""

from __future__ import annotations

from .. import jsonc
from ..errors import TranslationError
from ..protocols import anthropic as pa
from ..protocols import openai_chat as po
from .anthropic_stream import note_once
from .chat_stream import stop_from_finish
from .errors import parse_error_body, to_openai
from .reply import (
    ANTHROPIC_BLOCKS_MAPPED,
    ANTHROPIC_TOP_DROPPED,
    chat_choice,
    chat_tool_call_id,
    ReplyTranslation,
    _parse,
)
from .responses_stream import (
    EMPTY_ARGUMENTS,
    function_call_item,
    item_id,
    message_item,
    response_id,
    response_snapshot,
    responses_usage,
    status_for_stop,
)
from .usage import ANTHROPIC, OPENAI, Usage

__all__ = ["chat_to_responses", "anthropic_to_responses", "to_responses", "responses_error"]


class _Output:
    """Output items in order, with their deterministic ids."""

    def __init__(self, message_id: str | None) -> None:
        self.mid = message_id
        self.items: list[dict] = []

    def text(self, text: str) -> None:
        self.items.append(message_item(item_id("message", self.mid, len(self.items)), text))

    def call(self, call_id: str, name: str, arguments: str) -> None:
        iid = item_id("function_call", self.mid, len(self.items))
        self.items.append(function_call_item(iid, call_id, name, arguments or EMPTY_ARGUMENTS))

    @property
    def has_calls(self) -> bool:
        return any(i["type"] == "function_call" for i in self.items)


def _finish(doc: dict, out: _Output, stop: str | None, usage: Usage | None, created: int,
            dropped: list[str], warnings: list[str]) -> ReplyTranslation:
    if out.has_calls and stop in ("end_turn", None):
        stop = "tool_use"  # derived from what is there (pitfalls 7)
    status, incomplete = status_for_stop(stop, warnings)
    client_usage = responses_usage(usage, warnings)
    extra: dict = {"incomplete_details": incomplete} if incomplete else {}
    rid = response_id(doc.get("id"), created, warnings)
    body = response_snapshot(rid, created, status, doc.get("model"), out.items, **extra, usage=client_usage)
    return ReplyTranslation(jsonc.dumpb(body), usage, client_usage, stop, dropped, warnings)


def chat_to_responses(doc: dict, created: int) -> ReplyTranslation:
    dropped: list[str] = []
    warnings: list[str] = []
    choice, msg = chat_choice(doc, dropped, warnings)

    out = _Output(doc.get("id"))
    text = msg.get("content")
    if isinstance(text, list):  # some servers answer with text parts
        text = "".join(p.get("text") or "" for p in text if isinstance(p, dict) and p.get("type") == "text")
    refusal = msg.get("refusal")
    # a refusal is text (E.2, lossy); a stream carries both in one text block, so one item here too
    joined = "".join(t for t in (text, refusal) if isinstance(t, str))
    if joined:
        out.text(joined)
    for pos, tc in enumerate(msg.get("tool_calls") or ()):
        if not isinstance(tc, dict):
            continue
        fn = tc.get("function") or {}
        tid = chat_tool_call_id(doc, tc, pos, warnings)
        args = fn.get("arguments")
        if args is not None and not isinstance(args, str):  # some servers send the object itself
            args = jsonc.dumps(args)
        out.call(tid, fn.get("name") or "", args or "")

    finish = choice.get("finish_reason")
    stop = stop_from_finish(finish, warnings)
    if finish == "stop" and isinstance(choice.get("stop_reason"), str) and choice["stop_reason"]:
        stop = "stop_sequence"  # vLLM names the matched stop string; Responses has no field for it
        note_once(dropped, "stop_sequence")
    u = doc.get("usage")
    usage = Usage(OPENAI, u) if isinstance(u, dict) else None
    return _finish(doc, out, stop, usage, created, dropped, warnings)


def anthropic_to_responses(doc: dict, created: int) -> ReplyTranslation:
    dropped: list[str] = []
    warnings: list[str] = []
    if doc.get("type") == "error":
        raise TranslationError(502, f"upstream error: {jsonc.dumps(doc.get('error'))}", kind="api_error")
    blocks = doc.get("content")
    if not isinstance(blocks, list):
        raise TranslationError(502, "the upstream's Anthropic reply has no content list", kind="api_error")
    out = _Output(doc.get("id"))
    for b in blocks:
        t = b.get("type") if isinstance(b, dict) else None
        if t not in ANTHROPIC_BLOCKS_MAPPED:
            note_once(dropped, f"content[].{t}")  # thinking, redacted_thinking, server tools...
        elif t == "text":
            out.text(b.get("text") or "")
            if b.get("citations"):
                note_once(dropped, "content[].citations")
        elif not b.get("id"):  # a blank call_id hangs Codex after the call (pitfalls 9)
            raise TranslationError(502, "the upstream's tool_use block has no id", kind="api_error")
        else:
            out.call(b["id"], b.get("name") or "", jsonc.dumps(b.get("input") or {}))
    for k in ANTHROPIC_TOP_DROPPED:
        if doc.get(k) is not None:
            note_once(dropped, k)
    if doc.get("stop_sequence"):
        note_once(dropped, "stop_sequence")
    u = doc.get("usage")
    usage = Usage(ANTHROPIC, u) if isinstance(u, dict) and u else None
    return _finish(doc, out, doc.get("stop_reason"), usage, created, dropped, warnings)


def to_responses(upstream: str, body: bytes, *, created: int) -> ReplyTranslation:
    """A whole upstream reply (2xx) of protocol ``upstream`` -> a Responses ``response``."""
    if upstream == po.PROTOCOL:
        return chat_to_responses(_parse(body, "Chat"), created)
    if upstream == pa.PROTOCOL:
        return anthropic_to_responses(_parse(body, "Anthropic"), created)
    raise ValueError(f"no reply translator from {upstream!r} to 'openai-responses'")


def responses_error(status: int, body: bytes) -> tuple[int, bytes]:
    """An upstream error reply (any protocol, any body) -> (status, OpenAI error envelope)."""
    err = parse_error_body(status, body)
    st, etype, code, message = to_openai(err)
    if code != po.CONTEXT_LENGTH_CODE and err.code:
        code = err.code  # an OpenAI upstream's own code (insufficient_quota...) is what Codex acts on
    return st, po.error_body(st, message, etype, code)
