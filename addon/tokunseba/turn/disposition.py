"""What the ``response`` hook does with a reply that reached mitmproxy: one pure decision.

Contract: ``dispose`` reads plain values of the flow's state (the relay's mark on the reply,
how ``responseheaders`` chose to treat it, the turn's action, the upstream's status, whether
a stream callable was installed, whether the relay saw the exchange break, the shape problem
``responseheaders`` found) and returns a ``Disposition`` naming what the hook does; the hook
(proxy/mitm.py) then does the I/O that answer names. ``translate_whole_reply`` translates a
buffered reply and says how it went as a value (``WholeReply``): a reply that could not be
translated carries the usage its upstream reported, and no exception is read back. No
mitmproxy, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import TranslationError
from ..neutral import Usage
from .plan import Turn
from .reply import Counted, count_reply, translate_whole
from .outcome import usage_of
from ..states import Action, Do, ReplyMode

CONNECT_FAILED = "connect-failed"  # the relay's mark on the reply it made when it could not connect (proxy/relay.py)


@dataclass(frozen=True)
class Disposition:
    """What the ``response`` hook does, and why (``why`` is for people: tests, logs)."""

    do: Do  # what the hook does (states.Do)
    why: str
    message: str | None = None  # the error's text when the flow's state knows it (None: the reply's own text)
    record_error: bool = False  # record the upstream's error reply (``upstream_error``) before anything else
    strict: bool = False  # JUDGE_WHOLE: a problem the judgement finds answers the client with a 502


# the answers that carry nothing of the flow's own: made once (a reply hook makes none)
_UNREACHABLE = Disposition(Do.ANSWER_UNREACHABLE, "the relay could not connect to the endpoint")
_TRANSLATE = Disposition(Do.TRANSLATE_WHOLE, "a translated turn's whole reply")
_TRANSLATE_ERROR = Disposition(Do.TRANSLATE_WHOLE, "a translated turn's whole reply (an error)", record_error=True)
_JUDGE = Disposition(Do.JUDGE_WHOLE, "a whole reply passed on in the client's protocol")
_JUDGE_STRICT = Disposition(Do.JUDGE_WHOLE, "a whole reply passed on in the client's protocol (retargeted: a problem "
                            "is an error)", strict=True)
_RETARGET_ERROR = Disposition(Do.RETARGET_ERROR, "a retargeted endpoint's error reply", record_error=True)
_RECORD_ERROR = Disposition(Do.RECORD_ERROR, "an error reply no mode was chosen for", record_error=True)
_RELAY = Disposition(Do.RELAY, "the reply goes on as it is")


def dispose(*, mark: str | None, mode: ReplyMode | None, action: Action, status: int, has_pump: bool,
            broken: str | None = None, shape: str | None = None) -> Disposition:
    """What to do with one reply.

    ``mark``: the relay's mark on a reply it made itself (only read for a routed turn: the
    caller passes None otherwise); ``mode``: ``FlowState.mode`` (turn/reply.py ``response_mode``, or
    SHAPE_ERROR / FAILED from ``responseheaders``; None when that hook chose none);
    ``action``: ``Turn.action``; ``status``: the reply's status; ``has_pump``: a stream
    callable carries the reply; ``broken``: why the relay saw the exchange break (not a
    refused connect), or None; ``shape``: the shape problem ``responseheaders`` found (mode
    SHAPE_ERROR)."""
    if mark is not None:
        if mark == CONNECT_FAILED:
            return _UNREACHABLE
        return Disposition(Do.ANSWER_BROKEN, "the relay made this reply: the upstream reset or cut the exchange",
                           message=broken)
    if broken and mode in (ReplyMode.TRANSLATE_WHOLE, ReplyMode.LEAVE):
        return Disposition(Do.ANSWER_BROKEN, "the relay saw the exchange break before the whole reply", message=broken)
    if mode == ReplyMode.TRANSLATE_WHOLE:
        return _TRANSLATE_ERROR if status >= 400 else _TRANSLATE
    if mode == ReplyMode.SHAPE_ERROR:
        return Disposition(Do.ANSWER_SHAPE, "a routed turn's reply in the other shape than the client asked for",
                           message=shape)
    if not has_pump and action in (Action.PASS, Action.RETARGET) and status < 400:
        return _JUDGE_STRICT if mode == ReplyMode.LEAVE and action == Action.RETARGET else _JUDGE
    if mode == ReplyMode.LEAVE and action == Action.RETARGET and status >= 400:
        return _RETARGET_ERROR
    if mode is None and action != Action.RESPOND and status >= 400:
        return _RECORD_ERROR
    return _RELAY


@dataclass(frozen=True)
class WholeReply:
    """A buffered reply translated for the client (``failure`` None), or why it could not be:
    ``failure`` is the message for the client (502), ``usage`` what the upstream reported all
    the same, and ``unexpected`` says the cause was not a TranslationError (to be logged)."""

    status: int
    headers: dict[str, str]
    body: bytes
    report: Any = None  # translate.ReplyTranslation (None for an error reply)
    failure: str | None = None
    usage: Usage | None = None
    unexpected: BaseException | None = None
    counted: Counted | None = None  # a count answered by the endpoint's own counter (recorded: ``counted``)


def translate_whole_reply(turn: Turn, status: int, raw: bytes) -> WholeReply:
    """turn/reply.py ``translate_whole`` as a value: never raises for a reply it cannot translate."""
    try:
        if turn.counter is not None and status < 400:
            st, headers, body, counted = count_reply(turn, status, raw)
            return WholeReply(st, headers, body, counted=counted)
        st, headers, body, rep = translate_whole(turn, status, raw)
    except Exception as e:
        # the reply could not be translated: its usage still happened, as reported
        usage = usage_of(turn.target_protocol or "", raw) if status < 400 else None
        if isinstance(e, TranslationError):
            return WholeReply(502, {}, b"", failure=e.message, usage=usage)
        return WholeReply(502, {}, b"", failure=f"tokunseba: could not translate the reply: {e}", usage=usage,
                          unexpected=e)
    return WholeReply(st, headers, body, rep)


def failure_message(e: BaseException) -> str:
    """The client's 502 message for an exception the ``response`` hook caught."""
    return e.message if isinstance(e, TranslationError) else f"tokunseba: could not translate the reply: {e}"
