"""The states of a turn as types (issue 28): what routing decided, what the turn does, how its
reply is handled, and what the ``response`` hook does with that reply.

Each is a ``StrEnum`` whose values are the strings used before it existed: a member equals its
string (``Action.PASS`` is equal to the string ``pass``), formats as it (``f"{Action.PASS}"`` is ``pass``) and is
encoded as it in JSON, so the ledger, the logs and the tests read the same text. Nothing else
compares these states as string literals. Pure: no tokunseba import.
"""

from __future__ import annotations

from enum import StrEnum


class Decided(StrEnum):
    """What routing decided for a turn (``routing.rules.Decision.action``)."""

    PASS = "pass"  # no route took it: pass through untouched (a shadow-only route may have matched)
    ROUTE = "route"  # a route took it: to ``Decision.endpoint``
    ERROR = "error"  # answered with an error (on_refused: error, on_failure: error)


class Action(StrEnum):
    """What a turn does (``turn.Turn.action``)."""

    PASS = "pass"  # to the original host, untouched
    RETARGET = "retarget"  # to another endpoint of the client's own protocol, bytes unchanged
    TRANSLATE = "translate"  # to an endpoint of another protocol, translated both ways
    RESPOND = "respond"  # answered here (refused, an error): nothing is sent


class ReplyMode(StrEnum):
    """How the adapter handles a reply (turn/reply.py ``response_mode``; ``FlowState.mode``)."""

    RAW_STREAM = "raw-stream"  # pass the bytes on as they come
    TRANSLATE_STREAM = "translate-stream"  # translate the stream event by event
    TRANSLATE_WHOLE = "translate-whole"  # buffer the reply, then translate it whole
    LEAVE = "leave"  # a whole reply that goes on as it came
    SHAPE_ERROR = "shape-error"  # a stream where a whole reply was due, or the reverse (from responseheaders)
    FAILED = "failed"  # responseheaders could not set up the translation


class Do(StrEnum):
    """What the ``response`` hook does with a reply (``turn.disposition.Disposition.do``)."""

    ANSWER_BROKEN = "answer-broken"  # 502 in the client's protocol: the upstream broke before the reply was whole
    ANSWER_UNREACHABLE = "answer-unreachable"  # 502 in the client's protocol: the endpoint could not be connected to
    TRANSLATE_WHOLE = "translate-whole"  # translate the buffered reply (an error reply too) into the client's protocol
    ANSWER_SHAPE = "answer-shape"  # 502 in the client's protocol: a stream where a whole reply was due, or the reverse
    JUDGE_WHOLE = "judge-whole"  # a whole reply passed on in the client's protocol: read its usage and shape
    RETARGET_ERROR = "retarget-error"  # a retargeted endpoint's error: recorded, said again in the client's envelope if unreadable
    RECORD_ERROR = "record-error"  # an error reply that goes on as it came: recorded as the upstream's error
    RELAY = "relay"  # nothing to do: the reply goes on as it is (a stream's pump, a local answer, ...)
