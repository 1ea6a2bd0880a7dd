"""Whole Gemini replies (``generateContent``): the decoder (a ``GenerateContentResponse``
-> neutral events) and the encoder (a neutral ``Message`` -> a ``GenerateContentResponse``)
(docs/dev/architecture.md §3, docs/dev/protocols.md D.2).

A whole reply is its stream collected: ``decode`` runs the stream decoder over the one
object (or over each element of the JSON array ``streamGenerateContent`` without ``alt=sse``
returns); ``encode`` writes, straight from the message, what the stream encoder's chunks for the message
merged the way a client merges them (tests/support/gemini_chunks.py: adjacent text parts of the same kind
joined, function calls whole, the last finishReason and usageMetadata) would be. So a whole
reply and the same reply streamed are one thing, which the tests check.
"""

from __future__ import annotations

from typing import Any

from ... import jsonc
from ...errors import UntranslatableReply
from ...neutral import error_from_obj
from ...neutral import BlockKind, Event, StreamError
from ...neutral import Block, Message
from ...neutral import ReplyReport, note_once
from ...neutral import Usage
from ...protocols import gemini as pg
from .ids import synth_call_id
from .stream import (
    CANDIDATE,
    CANDIDATE_KEYS,
    NO_FINISH,
    OTHER_CANDIDATES,
    PART_KEYS,
    PARTS,
    RESPONSE_KEYS,
    GeminiDecoder,
    call_args,
    prompt_block_reason,
    stop_for_finish,
)

# the tables' keys as sets (a superset test is a C-level pass; the tables stay the one place)
_RESPONSE_KEYS, _CANDIDATE_KEYS, _PART_KEYS = frozenset(RESPONSE_KEYS), frozenset(CANDIDATE_KEYS), frozenset(PART_KEYS)
_SIGNATURE_DROPPED = f"{PARTS}.thoughtSignature"
_ID_SYNTHESIZED = f"id_synthesized: {PARTS}.functionCall.id"
_THOUGHT_SOURCE = f"{PARTS}.thought"


def decode_message(body: bytes, report: ReplyReport) -> Message:
    """The neutral message of a whole Gemini reply: what ``Message.collect`` makes of the stream
    decoder's events for it; a 502 ``UntranslatableReply`` when it is not one, or when it ends in
    an error (a broken function call, an error object). One object (``generateContent``) is read
    straight (``_one_object``); a JSON array (``streamGenerateContent`` without ``alt=sse``)
    goes through the stream decoder, chunk by chunk."""
    try:
        doc = jsonc.loads(body)
    except jsonc.JSONDecodeError as e:
        raise UntranslatableReply(502, f"the upstream's Gemini reply is not valid JSON ({e})") from None
    if isinstance(doc, dict):
        return _one_object(doc, report)
    dec = GeminiDecoder(report)
    events: list[Event] = []
    for obj in doc if isinstance(doc, list) else [doc]:
        if not isinstance(obj, dict):
            raise UntranslatableReply(502, "the upstream's Gemini reply is not a JSON object")
        events.extend(dec.on_object(obj))
    events.extend(dec.close())
    for ev in events:
        if isinstance(ev, StreamError):
            raise UntranslatableReply(502, ev.message)
    return Message.collect(events)


def decode(body: bytes, report: ReplyReport) -> list[Event]:
    """The neutral events of a whole Gemini reply (the message's, one delta per block)."""
    return decode_message(body, report).events()


def _one_object(d: dict[str, Any], report: ReplyReport) -> Message:
    """One ``GenerateContentResponse`` as a message: what ``GeminiDecoder.on_object`` and
    ``close`` yield for it, collected (the same tables, the same records in the same order)."""
    if d.get("error"):
        raise UntranslatableReply(502, error_from_obj(pg.stream_error_status(d), d).message)
    dropped, warnings = report.dropped, report.warnings
    u = d.get("usageMetadata")
    rid, model = d.get("responseId"), d.get("modelVersion")
    rid = rid if isinstance(rid, str) else None
    m = Message(rid, model if isinstance(model, str) else None)
    if not _RESPONSE_KEYS.issuperset(d):  # (a C-level test: the scan only when a key is unknown)
        for key in d:
            if key not in RESPONSE_KEYS:
                note_once(dropped, key)
    pf = d.get("promptFeedback")
    finish = None if pf is None else prompt_block_reason(pf, dropped)
    finished: dict[str, Any] | None = None  # the candidate that gave the finishReason
    calls = 0
    cands = d.get("candidates")
    if isinstance(cands, list):
        for pos, cand in enumerate(cands):
            if not isinstance(cand, dict) or cand.get("index", 0) != 0 or pos > 0:
                note_once(warnings, OTHER_CANDIDATES)
                continue
            calls = _candidate_blocks(cand, m.blocks, rid, calls, report)
            fr = cand.get("finishReason")
            if isinstance(fr, str) and fr:
                finish, finished = fr, cand
    if finish is None:
        raise UntranslatableReply(502, NO_FINISH)
    stop = stop_for_finish(finish, warnings)
    if stop is None:  # an error finish: its finishMessage says why
        fm = finished.get("finishMessage") if finished is not None else None
        detail = f": {fm}" if isinstance(fm, str) and fm else ""
        raise UntranslatableReply(502, f"upstream ended the turn with finishReason {finish}{detail}")
    m.stop_reason = "tool_use" if stop == "end_turn" and calls else stop
    m.stopped = True
    if isinstance(u, dict) and u:
        m.usage = Usage(pg.COUNTING_NAME, u)
    return m


def _candidate_blocks(cand: dict[str, Any], blocks: list[Block], rid: str | None, calls: int,
                      report: ReplyReport) -> int:
    """The first candidate's parts appended to ``blocks`` (adjacent text or thinking parts of one
    kind joined, each function call whole); its unknown keys noted. The calls counted so far,
    with this candidate's."""
    dropped = report.dropped
    if not _CANDIDATE_KEYS.issuperset(cand):
        for key in cand:
            if key not in CANDIDATE_KEYS and cand[key] not in (None, [], {}):
                note_once(dropped, f"{CANDIDATE}.{key}")
    content = cand.get("content")
    parts = content.get("parts") if isinstance(content, dict) else None
    if not isinstance(parts, list):
        return calls
    open_block: Block | None = None  # the open text or thinking block
    for part in parts:
        if not isinstance(part, dict):
            continue
        if not _PART_KEYS.issuperset(part):
            for key in part:
                if key not in PART_KEYS:
                    note_once(dropped, f"{PARTS}.{key}")
        sig = None
        if "thoughtSignature" in part:  # the client cannot carry it
            note_once(dropped, _SIGNATURE_DROPPED)
            sig = _o if isinstance(_o := part["thoughtSignature"], str) and _o else None
        fc = part.get("functionCall")
        if isinstance(fc, dict):  # a tool_use block, whole; its signature rides on it
            open_block = None
            blocks.append(_call_block(fc, sig, rid, calls, report.warnings))
            calls += 1
            continue
        text = part.get("text")
        if isinstance(text, str) and text:
            kind: BlockKind = "thinking" if part.get("thought") is True else "text"
            if open_block is not None and open_block.kind == kind:
                open_block.text += text
            else:
                open_block = Block(kind, None, None, text, None,
                                   {"source": _THOUGHT_SOURCE} if kind == "thinking" else None)
                blocks.append(open_block)
        if sig is not None and open_block is not None and open_block.kind == "text":
            open_block.signature = (open_block.signature or "") + sig  # kept for this endpoint
    return calls


def _call_block(fc: dict[str, Any], sig: str | None, rid: str | None, calls: int, warnings: list[str]) -> Block:
    """A ``functionCall`` part as a whole tool_use block (an id synthesized when it has none:
    the reply's ``calls``-th call)."""
    cid = fc.get("id")
    if not isinstance(cid, str) or not cid:
        cid = synth_call_id(rid, calls)
        note_once(warnings, _ID_SYNTHESIZED)
    name = fc.get("name")
    if not isinstance(name, str) or not name:
        note_once(warnings, "a function call arrived without a name")
        name = ""
    args = fc.get("args")
    return Block("tool_use", cid, name, "" if args is None else jsonc.dumps(args), sig)


def encode(msg: Message, report: ReplyReport, created: int) -> tuple[bytes, dict[str, Any] | None]:
    """A whole ``GenerateContentResponse`` for a neutral message (``created`` has no Gemini
    field). Arguments that are not a JSON object are a 502, never a string (docs/dev/protocols.md D.3.7).

    Written straight from the message, it is what a client's merge (tests/support/gemini_chunks.py)
    makes of the stream encoder's chunks for the message's events (tests/translate/gemini/test_stream.py checks that they agree): one
    part per text or thinking block, adjacent ones of the same kind joined, each call whole in
    block order; the finish and usage of the last chunk; keys in the order the merge gives."""
    parts, broken = _parts(msg, report.dropped)
    dropped = report.dropped
    err = msg.error
    if err is not None or broken is not None:  # the stream's error chunk is the whole reply
        message = err.message if err is not None else broken
        report.errors.append(message)  # type: ignore[arg-type]
        raise UntranslatableReply(502, message or "the upstream reply cannot be carried to Gemini")
    stop = msg.stop_reason
    finish = pg.STOP_TO_FINISH.get(stop or "")
    if finish is None:
        note_once(report.warnings, f"unknown stop_reason {stop!r} sent as finishReason 'STOP'")
        finish = "STOP"
    if msg.stop_sequence:
        note_once(dropped, "stop_sequence")
    usage = pg.COUNTING.write(msg.usage) if msg.usage is not None else None
    report.stop_reason, report.completed = stop, True
    out: dict[str, Any] = {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": finish,
                                           "index": 0}]}
    if usage is not None and not parts:  # the finish chunk came first: its keys lead
        out["usageMetadata"] = usage
    if msg.model:
        out["modelVersion"] = msg.model
    if msg.id:
        out["responseId"] = msg.id
    if usage is not None and parts:
        out["usageMetadata"] = usage
    return jsonc.dumpb(out), usage


def _parts(msg: Message, dropped: list[str]) -> tuple[list[dict[str, Any]], str | None]:
    """The reply's parts for a message's blocks (one per text or thinking block, adjacent ones of
    the same kind joined, each call whole, in block order; other blocks noted as dropped), and
    the error of the first call whose arguments are not a JSON object (None when none)."""
    parts: list[dict[str, Any]] = []
    last: dict[str, Any] | None = None  # the last part, when it is a text or thinking part
    broken: str | None = None  # the first call whose arguments are not an object (its error)
    for b in msg.blocks:
        kind = b.kind
        if kind == "text" or kind == "thinking":
            if kind == "thinking" and b.signature:
                note_once(dropped, "content[].thinking.signature")
            text = b.text
            if not text:
                continue  # no delta, no chunk
            thought = kind == "thinking"
            if last is not None and bool(last.get("thought")) == thought:
                last["text"] += text
            else:
                last = {"text": text, "thought": True} if thought else {"text": text}
                parts.append(last)
        elif kind == "tool_use":
            args = call_args([b.text])
            name = b.name or ""
            if args is None:
                if broken is None:
                    broken = f"upstream sent arguments for {name!r} that are not a JSON object"
                continue
            fc: dict[str, Any] = {"name": name, "args": args}
            if b.id:
                fc["id"] = b.id
            parts.append({"functionCall": fc})
            last = None
        else:
            raw = b.raw or {}
            note_once(dropped, raw.get("source") or f"content[].{raw.get('type') or kind}")
    return parts, broken
