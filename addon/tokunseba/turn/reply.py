"""A turn's reply, as the turn planned it: how the adapter treats it (``response_mode``: pass
the bytes on, translate the stream event by event, translate the whole reply, leave it), the
stream translator (``stream_translator``), a whole reply translated (``translate_whole``, a
token count included: ``count_reply``) and a retargeted endpoint's unreadable error said
again in the client's envelope (``retarget_error``). Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import jsonc, protocols, translate
from ..errors import TranslationError
from ..neutral import Capped
from ..neutral import parse_error_body
from ..neutral import ClientTools
from ..states import Action, ReplyMode
from .plan import LocalResponse, Turn

def response_mode(turn: Turn, status: int, content_type: str) -> ReplyMode:
    """How the adapter treats a reply: RAW_STREAM (pass bytes on as they come),
    TRANSLATE_STREAM, TRANSLATE_WHOLE (buffer, then translate_whole), or LEAVE."""
    is_sse = content_type.split(";")[0].strip().lower() == "text/event-stream"
    if turn.action != Action.TRANSLATE:
        return ReplyMode.RAW_STREAM if is_sse else ReplyMode.LEAVE
    if status >= 400:
        return ReplyMode.TRANSLATE_WHOLE
    if is_sse:
        return ReplyMode.TRANSLATE_STREAM
    return ReplyMode.TRANSLATE_WHOLE


def retarget_error(turn: Turn, status: int, body: bytes) -> LocalResponse | None:
    """A retargeted endpoint's error reply (status >= 400) the client could not read as its
    protocol's error (an empty body, an HTML page, text: not a JSON object), said again in the
    client's own envelope with the same status and the upstream's text (docs/dev/architecture.md rule 6);
    None when it is JSON, which goes on byte for byte (rule 8)."""
    try:
        if isinstance(jsonc.loads(body), dict):
            return None
    except Exception:
        pass
    err = parse_error_body(status, body)
    return turn.client_error(status, err.message)


def _target(turn: Turn) -> str:
    """The protocol of the endpoint a translated turn went to."""
    assert turn.target_protocol is not None
    return turn.target_protocol


def _client_tools(turn: Turn) -> ClientTools | None:
    """The client's tools behind neutral names, from the turn's request translation."""
    return turn.translation.client_tools if turn.translation is not None else None


def _capped(turn: Turn) -> Capped | None:
    """The endpoint's cap in place of the client's limit, from the turn's request translation: a
    reply that stops on it is told end_turn (neutral/endpoint_cap.py)."""
    return turn.translation.capped if turn.translation is not None else None


def stream_translator(turn: Turn) -> translate.StreamTranslator:
    t = translate.stream(_target(turn), turn.client_protocol, include_usage=turn.include_usage,
                         created=int(turn.started_at), client_tools=_client_tools(turn), capped=_capped(turn))
    t.tap = turn.capture.on if turn.capture is not None else None  # the reply's provider state, as it passes
    return t


def _with_hint(body: bytes, hint: str) -> bytes:
    """An error body (every protocol's envelope has error.message) with ``hint`` after its message."""
    try:
        doc = jsonc.loads(body)
        doc["error"]["message"] = f"{doc['error']['message']} {hint}"
        return jsonc.dumpb(doc)
    except Exception:  # not the envelope expected: as it was
        return body


@dataclass(frozen=True)
class Counted:
    """A count answered by an endpoint's own counter: what the ledger records (event ``counted``)."""

    tokens: int
    counter: str  # the counter that answered: "Gemini countTokens"
    endpoint: str

    def record(self) -> dict[str, Any]:
        return {"input_tokens": self.tokens, "counter": self.counter, "endpoint": self.endpoint}


def count_reply(turn: Turn, status: int, body: bytes) -> tuple[int, dict[str, str], bytes, Counted]:
    """A counter's 2xx reply (``turn.counter``) -> the client's own count reply with its number.
    Raises TranslationError (the client's 502) when the reply carries no count: never estimated."""
    assert turn.counter is not None and turn.endpoint is not None
    try:
        doc = jsonc.loads(body)
    except Exception:
        doc = None
    n = turn.counter.read(doc)
    if n is None:
        raise TranslationError(502, f"tokunseba: the {turn.counter.name} counter of endpoint {turn.endpoint.name} "
                                    "replied without a token count; tokunseba does not estimate one")
    mine = protocols.get(turn.client_protocol).counter
    assert mine is not None  # a count kind is one of a protocol with a counter
    return (status, {"content-type": "application/json"}, jsonc.dumpb(mine.answer(n)),
            Counted(n, turn.counter.name, turn.endpoint.name))


def translate_whole(turn: Turn, status: int, body: bytes) -> tuple[int, dict[str, str], bytes, Any]:
    """A buffered upstream reply -> (status, headers to set, body, ReplyTranslation|None)."""
    if turn.counter is not None and status < 400:
        st, headers, out, _ = count_reply(turn, status, body)
        return st, headers, out, None
    if turn.counter is not None and _target(turn) == turn.client_protocol and turn.endpoint is not None:
        # the client's own counter, borrowed from a server of another protocol (count_tokens: <protocol>):
        # its error said in the client's envelope, naming the endpoint (it may not serve that route at all)
        err = parse_error_body(status, body)
        return status, {"content-type": "application/json"}, turn.client_error(
            status, f"tokunseba: the {turn.counter.name} route of endpoint {turn.endpoint.name} (count_tokens: "
                    f"{turn.endpoint.count_tokens}) answered {status}: {err.message}").body, None
    if status >= 400:
        st, out = translate.error(_target(turn), turn.client_protocol, status, body)
        if turn.translation is not None and turn.endpoint is not None and (
                hint := refusal_hint(_target(turn), turn.translation.body, turn.endpoint.name, status, body)):
            out = _with_hint(out, hint)
        return st, {"content-type": "application/json"}, out, None
    rep = translate.reply(_target(turn), turn.client_protocol, body, created=int(turn.started_at),
                          client_tools=_client_tools(turn), capped=_capped(turn))
    if turn.capture is not None and rep.message is not None:
        turn.capture.message(rep.message)
    return status, {"content-type": "application/json"}, rep.body, rep


_EFFORT_WORDS = (b"reasoning", b"thinking", b"effort")


def sent_effort(protocol: str, body: dict[str, Any]) -> bool:
    """Whether a translated request carries an effort, in its protocol's own spelling (its facts'
    ``effort_fields``)."""
    for path in protocols.get(protocol).effort_fields:
        node: Any = body
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if node:
            return True
    return False


def refusal_hint(protocol: str, sent: dict[str, Any], endpoint: str, status: int, upstream_body: bytes) -> str | None:
    """When an endpoint answers 400 about reasoning to a translated request (in ``protocol``) that
    carried an effort, what to do about it (said after the upstream's own words, never instead)."""
    if status != 400 or not sent_effort(protocol, sent):
        return None
    low = upstream_body[:4096].lower()
    if not any(w in low for w in _EFFORT_WORDS):
        return None
    return (f"(tokunseba carried the client's reasoning effort to endpoint {endpoint}, which refused it: "
            f"`effort: omit` or `max_effort:` on that endpoint in the rules)")
