"""What joins the Gemini codec (translate.gemini) to the other protocols' whole replies and
errors, until every protocol has its own whole-reply codec over ``neutral.message`` and the
codec registry (issue 9): then this module goes.

- ``translate_request``: a request of a pair with Gemini, through the neutral (Chat-shaped)
  request and the existing Chat-side translators;
- ``translate_reply`` / ``translate_error``: every pair, Gemini's through here, the others
  passed on to translate.reply / translate.errors;
- ``reply_events``: an Anthropic or Chat whole reply as the neutral events its stream decoder
  would give (so the Gemini reply encoder can write it);
- ``chat_reply_of``: neutral events as a Chat whole reply, for the existing Chat ->
  Anthropic / Responses reply translators (the Gemini reply decoder feeds it).
"""

from __future__ import annotations

import time

from .. import jsonc
from ..errors import TranslationError
from ..protocols import anthropic as pa
from ..protocols import openai_chat as po
from .anthropic_stream import BLOCK_KINDS, note_once
from .chat_stream import REASONING_KEYS, stop_from_finish
from .errors import to_anthropic, to_openai
from .errors import translate_error as _other_error
from .events import BlockDelta, BlockStart, BlockStop, Event, MessageStart, MessageStop, StreamError, StreamReport
from .gemini import request as gemini_request
from .gemini.errors import gemini_error, parse_gemini_error
from .gemini.reply import ReplyError, decode_reply, encode_reply
from .reply import ReplyTranslation, _parse, chat_choice, chat_to_anthropic, chat_tool_call_id
from .reply import translate_reply as _other_reply
from .request import RequestTranslation, anthropic_to_chat, check_chat_options
from .request import chat_to_anthropic as chat_to_anthropic_request
from .responses_reply import to_responses
from .responses_request import responses_to_chat
from .usage import ANTHROPIC, OPENAI, Usage

GEMINI = "gemini"


def _anthropic_events(doc: dict, dropped: list[str], warnings: list[str]) -> list[Event]:
    if doc.get("type") == "error" or not isinstance(doc.get("content"), list):
        raise TranslationError(502, f"the upstream's Anthropic reply has no content: {jsonc.dumps(doc)[:500]}",
                               kind="api_error")
    u = doc.get("usage")
    usage = Usage(ANTHROPIC, u) if isinstance(u, dict) and u else None
    out: list[Event] = [MessageStart(doc.get("id"), doc.get("model"))]
    for n, b in enumerate(doc["content"]):
        b = b if isinstance(b, dict) else {}
        kind = BLOCK_KINDS.get(b.get("type"), "other")
        if kind == "text":
            out.append(BlockStart(n, "text"))
            text = b.get("text")
            if b.get("citations"):
                note_once(dropped, "content[].citations")
        elif kind == "tool_use":
            out.append(BlockStart(n, "tool_use", id=b.get("id"), name=b.get("name")))
            text = jsonc.dumps(b["input"]) if b.get("input") is not None else None
        elif kind == "thinking":
            out.append(BlockStart(n, "thinking", signature=b.get("signature") or "", raw=b))
            text = b.get("thinking")
        else:
            out.append(BlockStart(n, kind, raw=b))
            text = None
        if text:
            out.append(BlockDelta(n, text))
        out.append(BlockStop(n))
    for key in ("stop_details", "container"):
        if doc.get(key) is not None:
            note_once(dropped, key)
    out.append(MessageStop(doc.get("stop_reason"), doc.get("stop_sequence"), usage))
    return out


def _chat_events(doc: dict, dropped: list[str], warnings: list[str]) -> list[Event]:
    choice, msg = chat_choice(doc, [], warnings)
    out: list[Event] = [MessageStart(doc.get("id"), doc.get("model"))]
    n = 0
    for key in REASONING_KEYS:
        r = msg.get(key)
        if isinstance(r, str) and r:
            out += [BlockStart(n, "thinking", raw={"source": f"choices[0].message.{key}"}), BlockDelta(n, r),
                    BlockStop(n)]
            n += 1
            break
    for k, v in msg.items():
        if k not in ("role", "content", "tool_calls", "refusal", "name", "function_call", *REASONING_KEYS) \
                and v not in (None, "", [], {}):
            note_once(dropped, f"choices[0].message.{k}")
    for k, v in choice.items():
        if k not in ("index", "message", "finish_reason", "stop_reason") and v not in (None, "", [], {}):
            note_once(dropped, f"choices[0].{k}")
    text = msg.get("content")
    if isinstance(text, list):
        text = "".join(p.get("text") or "" for p in text if isinstance(p, dict) and p.get("type") == "text")
    for t in (text, msg.get("refusal")):
        if isinstance(t, str) and t:
            out += [BlockStart(n, "text"), BlockDelta(n, t), BlockStop(n)]
            n += 1
    for pos, tc in enumerate(msg.get("tool_calls") or ()):
        if not isinstance(tc, dict):
            continue
        fn = tc.get("function") or {}
        args = fn.get("arguments")
        if args is not None and not isinstance(args, str):
            args = jsonc.dumps(args)
        out.append(BlockStart(n, "tool_use", id=chat_tool_call_id(doc, tc, pos, warnings), name=fn.get("name") or ""))
        if args:
            out.append(BlockDelta(n, args))
        out.append(BlockStop(n))
        n += 1
    u = doc.get("usage")
    finish = choice.get("finish_reason")
    seq = choice.get("stop_reason") if finish == "stop" and isinstance(choice.get("stop_reason"), str) else None
    stop = "stop_sequence" if seq else stop_from_finish(finish, warnings)
    out.append(MessageStop(stop, seq, Usage(OPENAI, u) if isinstance(u, dict) else None))
    return out


def reply_events(upstream: str, doc: dict, dropped: list[str], warnings: list[str]) -> list[Event]:
    """The neutral events of an Anthropic (``anthropic``) or Chat (``openai``) whole reply."""
    if upstream == "anthropic":
        return _anthropic_events(doc, dropped, warnings)
    if upstream == po.PROTOCOL:
        return _chat_events(doc, dropped, warnings)
    raise ValueError(f"no whole-reply decoder for {upstream!r} here")


def chat_reply_of(events: list[Event], dropped: list[str]) -> dict:
    """Neutral events (a whole reply) as a Chat ``chat.completion`` (usage in Chat terms,
    converted from what was reported; thinking dropped and recorded in the source's path, as
    the other whole-reply translators do). An error event raises ``TranslationError``."""
    mid = model = stop = None
    usage: Usage | None = None
    kinds: dict[int, str] = {}
    texts: dict[int, str] = {}
    calls: dict[int, dict] = {}
    order: list[int] = []
    for ev in events:
        if isinstance(ev, MessageStart):
            mid, model = ev.id, ev.model
        elif isinstance(ev, BlockStart):
            kinds[ev.index] = ev.kind
            order.append(ev.index)
            if ev.kind not in ("text", "tool_use"):
                raw = ev.raw or {}
                note_once(dropped, raw.get("source") or f"content[].{raw.get('type') or ev.kind}")
            if ev.kind == "tool_use":
                calls[ev.index] = {"id": ev.id, "type": "function", "function": {"name": ev.name or "", "arguments": ""}}
        elif isinstance(ev, BlockDelta):
            if kinds.get(ev.index) == "tool_use":
                calls[ev.index]["function"]["arguments"] += ev.text
            elif kinds.get(ev.index) == "text":
                texts[ev.index] = texts.get(ev.index, "") + ev.text
        elif isinstance(ev, MessageStop):
            stop, usage = ev.stop_reason, ev.usage or usage
        elif isinstance(ev, StreamError):
            raise TranslationError(ev.status if ev.status >= 400 else 502, ev.message, kind=ev.type)
    message: dict = {"role": "assistant",
                     "content": "".join(texts[i] for i in order if i in texts) or (None if calls else "")}
    if calls:
        message["tool_calls"] = [calls[i] for i in order if i in calls]
    doc: dict = {"id": mid, "object": "chat.completion", "model": model,
                 "choices": [{"index": 0, "message": message, "finish_reason": po.STOP_TO_FINISH.get(stop or "", "stop")}]}
    if usage is not None:
        doc["usage"] = usage.to_openai()
    return doc


def _from_gemini(client: str, body: bytes, created: int) -> ReplyTranslation:
    report = StreamReport()
    try:
        events, dec = decode_reply(body, report)
    except ReplyError as e:
        raise TranslationError(502, str(e), kind="api_error") from None
    doc = chat_reply_of(events, report.dropped)
    if client == po.PROTOCOL:
        doc = {**doc, "created": created}
        doc["choices"][0]["logprobs"] = None
        rep = ReplyTranslation(jsonc.dumpb(doc), None, doc.get("usage"), None)
        rep.stop_reason = "tool_use" if doc["choices"][0]["message"].get("tool_calls") else None
    elif client == "anthropic":
        rep = chat_to_anthropic(doc)
        if dec.usage is not None:  # converted from what Gemini reported, as the stream does
            out = jsonc.loads(rep.body)
            out["usage"] = rep.client_usage = dec.usage.to_anthropic()
            rep.body = jsonc.dumpb(out)
    else:
        rep = to_responses(po.PROTOCOL, jsonc.dumpb(doc), created=created)
    stop = next((ev for ev in events if isinstance(ev, MessageStop)), None)
    rep.stop_reason = stop.stop_reason if stop else rep.stop_reason
    rep.usage = dec.usage  # as Gemini reported it
    rep.dropped = report.dropped + [d for d in rep.dropped if d not in report.dropped]
    rep.warnings = report.warnings + [w for w in rep.warnings if w not in report.warnings]
    return rep


def _to_gemini(upstream: str, body: bytes) -> ReplyTranslation:
    doc = _parse(body, "Anthropic" if upstream == "anthropic" else "Chat")
    report = StreamReport()
    events = reply_events(upstream, doc, report.dropped, report.warnings)
    out, enc = encode_reply(events, report)
    if "error" in out:
        raise TranslationError(502, out["error"].get("message") or "upstream reply not translatable", kind="api_error")
    stop = next((ev for ev in events if isinstance(ev, MessageStop)), None)
    return ReplyTranslation(jsonc.dumpb(out), stop.usage if stop else None, enc.client_usage, report.stop_reason,
                            report.dropped, report.warnings)


def translate_reply(upstream: str, client: str, body: bytes, *, created: int | None = None) -> ReplyTranslation:
    """A whole upstream reply (2xx) -> the client protocol's reply, for every translatable pair."""
    created = int(time.time()) if created is None else created
    if upstream == GEMINI and client != GEMINI:
        return _from_gemini(client, body, created)
    if client == GEMINI and upstream in ("anthropic", po.PROTOCOL):
        return _to_gemini(upstream, body)
    return _other_reply(upstream, client, body, created=created)


def translate_error(upstream: str, client: str, status: int, body: bytes) -> tuple[int, bytes]:
    """An upstream error reply -> (status, body) in the client's protocol, for every pair."""
    if upstream == client:
        return status, body  # same protocol: byte-identical (design.md rule 8)
    if client == GEMINI:
        return gemini_error(status, body)
    if upstream == GEMINI:  # Google's envelope read (context overflow marked), the client's written
        err = parse_gemini_error(status, body)
        if client == "anthropic":
            st, etype, message = to_anthropic(err)
            return st, pa.error_body(st, message, etype)
        st, etype, code, message = to_openai(err)  # Chat and Responses share the envelope
        return st, po.error_body(st, message, etype, code)
    return _other_error(upstream, client, status, body)


# ---- requests ------------------------------------------------------------------------


def _client_path(origin: dict[str, str], path: str) -> str:
    """A neutral path in the Gemini client's own terms: the longest recorded prefix replaced."""
    best = ""
    for p in origin:
        if len(p) > len(best) and (path == p or path.startswith(p + ".") or path.startswith(p + "[")):
            best = p
    return origin[best] + path[len(best):] if best else path


def _chat_target(neutral: dict, rt: RequestTranslation, *, system_role: str, max_tokens_field: str,
                 max_tokens_cap: int | None) -> None:
    """What a Chat endpoint asks of a neutral request (as anthropic_to_chat does for its own)."""
    check_chat_options(system_role, max_tokens_field)
    out = dict(neutral)
    if system_role != "system":
        out["messages"] = [{**m, "role": system_role} if m.get("role") == "system" else m for m in out["messages"]]
    n = out.pop("max_completion_tokens", None)
    if n is not None:
        if max_tokens_cap is not None and n > max_tokens_cap:
            n = max_tokens_cap
            rt.converted.append(f"generationConfig.maxOutputTokens -> {max_tokens_field} (capped at {n})")
        out[max_tokens_field] = n
    if out.get("stream"):
        out["stream_options"] = {"include_usage": True}
        rt.plumbing.append("stream_options.include_usage")
    stop = out.get("stop")
    if isinstance(stop, list) and len(stop) > 4:
        out["stop"] = stop[:4]
        rt.dropped.extend(f"generationConfig.stopSequences[{i}]" for i in range(4, len(stop)))
    rt.body = out


def translate_request(src: str, dst: str, req: dict, *, model: str | None, path_model: str | None, stream: bool,
                      system_role: str = "system", max_tokens_field: str = "max_completion_tokens",
                      max_tokens: int | None = None) -> RequestTranslation:
    """A request of a pair with Gemini: Gemini -> neutral -> the target, or the client's
    protocol -> neutral (Chat) -> Gemini. ``path_model``: the model in a Gemini client's URL."""
    if src == GEMINI:
        dec = gemini_request.decode(req, model=model or path_model, stream=stream)
        if dst == "anthropic":
            tr = chat_to_anthropic_request(dec.body, default_max_tokens=max_tokens)
        elif dst == po.PROTOCOL:
            tr = RequestTranslation(body={})
            _chat_target(dec.body, tr, system_role=system_role, max_tokens_field=max_tokens_field,
                         max_tokens_cap=max_tokens)
        else:
            raise TranslationError(400, f"tokunseba: no translator from {src} to {dst}", kind="refused")
        tr.dropped = dec.dropped + [_client_path(dec.origin, p) for p in tr.dropped if p not in dec.dropped]
        tr.converted = dec.converted + tr.converted
        tr.plumbing = dec.plumbing + tr.plumbing
        tr.warnings = dec.warnings + tr.warnings
        return tr
    if dst != GEMINI:
        raise ValueError(f"not a pair with Gemini: {src} -> {dst}")
    if src == "anthropic":
        first = anthropic_to_chat(req, model=model)
    elif src == "openai-responses":
        first = responses_to_chat(req, model=model)
    elif src == po.PROTOCOL:
        first = RequestTranslation(body=dict(req, model=model) if model else req)
    else:
        raise TranslationError(400, f"tokunseba: no translator from {src} to {dst}", kind="refused")
    enc = gemini_request.encode(first.body, max_tokens=max_tokens)
    return RequestTranslation(body=enc.body, dropped=first.dropped + enc.dropped, plumbing=enc.plumbing,
                              converted=first.converted + enc.converted, warnings=first.warnings + enc.warnings)
