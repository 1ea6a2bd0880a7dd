"""Translation between provider protocols: the codec registry and the public API.

Protocol names used everywhere: ``anthropic`` (Messages), ``openai`` (Chat Completions),
``openai-responses`` (Responses API), ``gemini``.

Every protocol contributes one codec (``translate/<protocol>/``: request, reply and stream
decoders and encoders over the neutral model in ``tokunseba.neutral``); any pair is the
client's decoder + the target's encoder, so N protocols cost 2N parts and which pairs
translate is derived from ``CODECS`` below. A protocol's codec is registered with its facts, in
one call: ``protocols.register(facts, codec)``, made by the protocol's plugin (a built-in's is
its facts module's ``register_protocols``, named in the entry-point group ``tokunseba.protocols``,
which names its codec as ``"tokunseba.translate.<name>:CODEC"``: imported on first use).

    from tokunseba import translate
    translate.PROTOCOLS                  # anthropic, openai, openai-responses, gemini (protocols.NAMES)
    translate.CODECS                     # protocol -> its codec (protocols.CODECS, typed)
    translate.pairs()                    # {(client, target): None | "why refused"}
    translate.request(client, target, body, **endpoint_options) -> RequestTranslation
    translate.reply(upstream, client, body, *, created=None) -> ReplyTranslation
    translate.stream(upstream, client, *, include_usage=True, created=None) -> StreamTranslator
    translate.error(upstream, client, status, body) -> (status, bytes)

``endpoint_options`` are an endpoint's rule keys: ``model``, ``max_tokens``,
``max_tokens_field``, ``system_role``, ``stop`` (and ``endpoint``, its name, for the record).
"""

from __future__ import annotations

from typing import Any, cast

import time
from collections.abc import Callable

from .. import protocols
from ..errors import TranslationError, UntranslatableReply
from ..neutral import Capped, Conversation, RequestTranslation
from ..neutral import told_stop
from ..neutral import apply_endpoint as apply_effort
from ..neutral import NAMELESS_CALL
from ..neutral import parse_error_body
from ..neutral import Message
from ..neutral import JSON_OBJECT, JSON_SCHEMA
from ..neutral import ReplyReport
from ..neutral import ClientTools
from . import fieldtable as ft
from .codec import Codec, ReplyTranslation
from .openai_chat.request import MAX_TOKENS_FIELDS, SYSTEM_ROLES
from .streaming import StreamTranslator

__all__ = ["PROTOCOLS", "CODECS", "register", "unregister", "pairs", "pair_refusal", "request", "reply", "stream", "error",
           "RequestTranslation", "ReplyTranslation", "StreamTranslator", "TranslationError", "parse_body",
           "MAX_TOKENS_FIELDS", "SYSTEM_ROLES"]

# The protocols tokunseba knows: a live view of the protocol registry (protocols/__init__.py)
PROTOCOLS = protocols.NAMES

# The registered codecs (the registry's own table, typed): a pair translates when both of its
# protocols have one.
CODECS = cast(dict[str, Codec], protocols.CODECS)
register = protocols.register  # the one seam: register(facts, codec)
unregister = protocols.unregister
_known = dict.get  # a codec as registered (a Codec, or the "module:attr" the registry imports on first use)


parse_body = ft.parse_body


def pairs() -> dict[tuple[str, str], str | None]:
    """Every (client, target) pair of ``PROTOCOLS``: None when a turn can go (same protocol:
    pass-through or retarget; else both codecs registered), else why not."""
    return {(c, t): pair_refusal(c, t) for c in PROTOCOLS for t in PROTOCOLS}


def pair_refusal(client: str, target: str) -> str | None:
    """None when a turn of ``client`` protocol can go to a ``target`` endpoint, else why not:
    a protocol without a registered codec is refused."""
    if client == target or (client in CODECS and target in CODECS):
        return None
    return f"no translator from {client} to {target}"


def _codecs(source: str, dest: str, what: str) -> tuple[Codec, Codec]:
    if source == dest or source not in CODECS or dest not in CODECS:
        raise ValueError(f"no {what} translator from {source!r} to {dest!r}"
                         + (f": {pair_refusal(source, dest)}" if source != dest else " (same protocol)"))
    return CODECS[source], CODECS[dest]


def request(client: str, target: str, body: dict[str, Any], *, model: str | None = None, max_tokens: int | None = None,
            max_tokens_field: str = "max_completion_tokens", system_role: str = "system",
            stop: tuple[str, ...] | list[str] | None = None, endpoint: str | None = None,
            path: str | None = None, effort: str | None = None, max_effort: str | None = None,
            restore: Callable[[Conversation], object] | None = None, cache: str = "off",
            native_custom_tools: bool = False) -> RequestTranslation:
    """A ``client`` protocol request body as a ``target`` protocol body: ``.body``,
    ``.dropped`` (the client's JSON paths), ``.plumbing``, ``.converted``, ``.warnings``.
    Raises ``TranslationError``: ``InvalidRequest`` (400) for a malformed body, ``Refused``
    when the target cannot carry the turn without inventing. The input is never mutated.
    ``path``: the client's request path, for a protocol whose model and stream flag travel in
    the URL (Gemini); a target of that kind gets no model in its body (the caller puts it in
    the URL). ``restore``: called with the decoded (neutral) conversation before it is encoded,
    to put back the provider state this endpoint and model produced (reasoning/state.py); what
    it returns is the translation's ``state_report``. ``cache``: the endpoint's ``cache`` key;
    ``auto`` places cache breakpoints on the stable prefix where the target takes them
    (``Codec.place_cache``), recorded as plumbing; elsewhere a warning says none were placed.
    ``native_custom_tools``: a Chat target takes the client's freeform tools as its own custom
    tools (routing.endpoints)."""
    dec, enc = _codecs(client, target, "request")
    conv = dec.decode_request(body, path=path or "") if dec.url_carries_model else dec.decode_request(body)
    state_report = restore(conv) if restore is not None else None
    apply_effort(conv, effort, max_effort, endpoint)  # the endpoint's effort / max_effort (neutral/effort.py)
    try:
        rt = enc.encode_request(conv, max_tokens=max_tokens, max_tokens_field=max_tokens_field,
                                system_role=system_role, endpoint=endpoint,
                                native_custom_tools=native_custom_tools)
    except TranslationError as e:
        raise type(e)(e.status, conv.client_message(e.message)) from None
    # the decoder's records (client paths already), then the encoder's (named in the client's paths)
    rt.dropped = conv.dropped + [conv.client_path(p) for p in rt.dropped] if rt.dropped else conv.dropped
    rt.plumbing = conv.plumbing + rt.plumbing if rt.plumbing else conv.plumbing
    rt.converted = conv.converted + [conv.client_message(c) for c in rt.converted] if rt.converted else conv.converted
    rt.warnings = conv.warnings + [conv.client_message(w) for w in rt.warnings] if rt.warnings else conv.warnings
    rt.state_report = state_report
    rt.client_tools = conv.client_tools
    if not enc.url_carries_model:
        rt.body = ft.finish_model(rt, rt.body, model)
    if stop and (stops := _stops_for(conv, rt, list(stop), endpoint)):
        _add_endpoint_stops(rt, enc, stops, endpoint)
    if cache != "off":
        _cache_breakpoints(conv, rt, dec, enc, cache)
    return rt


def _client_breakpoints(conv: Conversation, marker: str) -> list[int]:
    """The neutral messages holding the client's own cache breakpoints (``marker`` in the drops
    its decoder recorded): for each, the last message decoded from the closest client path."""
    marks = [p[: -len(marker) - 1] for p in conv.dropped if p.endswith("." + marker)]
    if not marks:
        return []
    paths = [conv.client_path(f"messages[{i}]") for i in range(len(conv.body.get("messages") or ()))]
    out: set[int] = set()
    for mark in marks:
        best = max(((len(cp), i) for i, cp in enumerate(paths)
                    if mark == cp or mark.startswith((cp + ".", cp + "["))), default=None)
        if best is not None:
            out.add(best[1])
    return sorted(out)


def _cache_breakpoints(conv: Conversation, rt: RequestTranslation, dec: Codec, enc: Codec, cache: str) -> None:
    """The endpoint's ``cache``: ``breakpoints`` carries the client's own breakpoints where the
    target marks messages (Chat: prompt_cache_breakpoint); ``auto`` also places them on the
    stable prefix (``Codec.place_cache``). Each recorded as plumbing; billing, never content."""
    if enc.carry_cache is not None and dec.cache_marker is not None and len(rt.body.get("messages") or ()) == len(
            conv.body.get("messages") or ()):  # the target's messages are the neutral ones, one for one
        if marked := _client_breakpoints(conv, dec.cache_marker):
            rt.plumbing += [f"{p} (the client's {dec.cache_marker})" for p in enc.carry_cache(rt.body, marked)]
    if cache == "auto":
        if enc.place_cache is not None:
            rt.plumbing += [f"{p} (cache: auto)" for p in enc.place_cache(rt.body)]
        else:
            rt.warnings.append(f"cache: auto: {enc.protocol} takes no cache breakpoints; none placed")


def _stops_for(conv: Conversation, rt: RequestTranslation, stops: list[str], endpoint: str | None) -> list[str]:
    """The endpoint's stop strings this turn takes: none when it asks for JSON (neutral/output_format.py) and
    its target carries that format (recorded). A server that constrains the answer ends it with the object;
    a stop string would cut it: "\n\n" between its tokens, "<|im_end|>" written inside a string (both seen
    on the real llama-server with the shipped local endpoint's stops)."""
    fmt = conv.body.get("response_format")
    if (type(fmt) is not dict or fmt.get("type") not in (JSON_OBJECT, JSON_SCHEMA)
            or conv.client_path("response_format") in rt.dropped):
        return stops
    name = f"endpoint {endpoint}" if endpoint else "endpoint"
    rt.warnings.append(f"{name} stop strings {stops!r} not added: this turn asks for JSON, which they would cut "
                       "(the object's end ends the answer)")
    return []


def _add_endpoint_stops(rt: RequestTranslation, enc: Codec, stops: list[str], endpoint: str | None) -> None:
    """The endpoint's own stop strings (rules ``stop:``), after the client's, at most 4 in
    all: plumbing the server needs to end a turn, recorded as such."""
    name = f"endpoint {endpoint}" if endpoint else "endpoint"
    field = enc.stop_field
    if field is None:
        rt.warnings.append(f"{name} stop strings {stops!r} not added: {enc.protocol} has no stop sequences")
        return
    *parents, key = field.split(".")  # a dotted field lives in a sub-object (Gemini's generationConfig)
    container = rt.body
    for p in parents:
        container = container.setdefault(p, {})
    have = container.get(key)
    current = [have] if isinstance(have, str) else list(have or [])
    added = [s for s in stops if s not in current][: max(0, 4 - len(current))]
    if not added:
        return
    container[key] = current + added
    rt.plumbing.append(f"{field} += {added!r} ({name})")
    skipped = [s for s in stops if s not in current and s not in added]
    if skipped:
        rt.warnings.append(f"{name} stop strings {skipped!r} not added: 4 stop strings at most")


def reply(upstream: str, client: str, body: bytes, *, created: int | None = None,
          client_tools: ClientTools | None = None, capped: Capped | None = None) -> ReplyTranslation:
    """A whole upstream reply (2xx) -> the client protocol's reply: decode -> ``Message`` ->
    encode. ``created``: the Chat ``created`` / Responses ``created_at`` timestamp (now when
    not given); ``client_tools``: the request translation's ``client_tools`` (calls of those
    tools go back in the client's own shape); ``capped``: its ``capped`` (a reply that then
    stops on the endpoint's cap is told ``end_turn``, recorded in ``converted``, while its
    ``stop_reason`` stays the endpoint's: neutral/endpoint_cap.py). Raises ``TranslationError`` (502) when the reply
    cannot be translated."""
    dec, enc = _known(CODECS, upstream), _known(CODECS, client)  # plain dict reads: per turn
    if type(dec) is not Codec or type(enc) is not Codec or upstream == client:
        dec, enc = _codecs(upstream, client, "reply")  # a codec named, not imported yet; or raises: no such pair
    created = int(time.time()) if created is None else created
    report = ReplyReport(client_tools=client_tools) if client_tools else ReplyReport()
    decode = dec.decode_message
    msg = decode(body, report) if decode is not None else Message.collect(dec.decode_reply(body, report))
    for b in msg.blocks:
        if not b.name and b.kind == "tool_use":  # never a call the client cannot run (as in a stream)
            raise UntranslatableReply(502, NAMELESS_CALL)
    if capped is None:  # (told_stop leaves the stop reason alone without a cap: not called per reply)
        out, client_usage = enc.encode_reply(msg, report, created)
    else:
        out, client_usage = _capped_reply(msg, report, created, enc, capped)
    return ReplyTranslation(out, msg.usage, client_usage, report.stop_reason, report.dropped, report.warnings, msg,
                            report.converted)


def _capped_reply(msg: Message, report: ReplyReport, created: int, enc: Codec,
                  capped: Capped) -> tuple[bytes, dict[str, Any] | None]:
    """``encode_reply`` of a reply whose request the endpoint's cap limited: told ``end_turn``
    when that cap ended it without a tool call (neutral/endpoint_cap.py); the message and the
    report keep the endpoint's own stop reason (the ledger's)."""
    stopped = msg.stop_reason
    calls = any(b.kind == "tool_use" for b in msg.blocks)
    msg.stop_reason = told_stop(stopped, capped, calls=calls, converted=report.converted)
    out = enc.encode_reply(msg, report, created)
    if msg.stop_reason != stopped:  # told end_turn: the ledger keeps the endpoint's own stop reason
        msg.stop_reason = report.stop_reason = stopped
    return out


def stream(upstream: str, client: str, *, include_usage: bool = True, created: int | None = None,
           client_tools: ClientTools | None = None, capped: Capped | None = None) -> StreamTranslator:
    """A translator from an ``upstream`` protocol's stream to a ``client`` protocol's stream.
    ``include_usage``: whether a Chat client asked for ``stream_options.include_usage``;
    ``created``: the ``created`` timestamp of Chat chunks (``created_at`` of a Responses stream);
    ``client_tools``, ``capped``: as for ``reply``."""
    dec, enc = _codecs(upstream, client, "stream")
    report = ReplyReport(client_tools=client_tools or None)
    return StreamTranslator(dec.stream_decoder(report), enc.stream_encoder(report, include_usage, created), report,
                            capped)


def error(upstream: str, client: str, status: int, body: bytes) -> tuple[int, bytes]:
    """An upstream error reply (status >= 400, any body) -> (status, body) in the client's
    protocol, keeping the upstream's message text. Same protocol: byte-identical."""
    if upstream == client:
        return status, body  # docs/dev/architecture.md rule 8
    _, enc = _codecs(upstream, client, "error")
    return enc.encode_error(parse_error_body(status, body))
