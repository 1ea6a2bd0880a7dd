"""A turn's reply stage as one object the adapter drives (proxy/reply.py): from the reply's
headers to what the ``response`` and ``error`` hooks do with it. Pure: it reads plain values
of the reply (status, content type, body) and answers with values; the I/O stays in the adapter.

- ``mode(status, content_type)``: how the reply is handled (turn/reply.py ``response_mode``),
  SHAPE_ERROR when a routed turn's 2xx reply is in the other shape than the client asked for
  (turn/outcome.py ``shape_problem``: ``shape`` says what);
- ``pump(mode, ...)``: a stream's pump (turn/pump.py: passed on and watched, or translated
  event by event), None for a whole reply;
- ``dispose(...)``: what the ``response`` hook does (turn/disposition.py ``dispose``);
- ``translate_whole(status, raw)``: a buffered reply translated, as a value
  (turn/disposition.py ``translate_whole_reply``); ``retarget_error(status, body)``: a
  retargeted endpoint's error reply the client could not read, in its envelope (turn/reply.py);
- ``failure_message(e)`` / ``upstream_failure(msg)``: what the client and the ledger are told
  of an exception the hook caught, and of mitmproxy's error text for a failed upstream.
"""

from __future__ import annotations

from typing import Any

from ..states import ReplyMode
from .disposition import Disposition, WholeReply, dispose, failure_message, translate_whole_reply
from .outcome import shape_problem, upstream_failure
from .plan import LocalResponse, Turn
from .pump import Pump
from .reply import response_mode, retarget_error


class Replying:
    """One turn's reply on its way back (``turn``: the turn it answers)."""

    __slots__ = ("turn",)

    def __init__(self, turn: Turn) -> None:
        self.turn = turn

    def mode(self, status: int, content_type: str) -> ReplyMode:
        """How the adapter handles the reply (SHAPE_ERROR: buffered, the ``response`` hook
        answers with the error)."""
        if self.shape(status, content_type):
            return ReplyMode.SHAPE_ERROR
        return response_mode(self.turn, status, content_type)

    def shape(self, status: int, content_type: str) -> str | None:
        """What the client would choke on in a routed turn's 2xx reply of the other shape."""
        return shape_problem(self.turn, status, content_type)

    def pump(self, mode: ReplyMode, *, content_encoding: str | None, target: Any = None,
             keep: bool = False) -> Pump | None:
        """A stream's pump (``target``: the relay's record of the flow's upstream, for a stream
        passed on), None for a reply of any other mode."""
        if mode == ReplyMode.RAW_STREAM:
            return Pump(self.turn, content_encoding=content_encoding, target=target, keep=keep)
        if mode == ReplyMode.TRANSLATE_STREAM:
            return Pump.of(self.turn, content_encoding=content_encoding, keep=keep)  # the turn translates
        return None

    def dispose(self, *, mark: str | None, mode: ReplyMode | None, status: int, has_pump: bool,
                broken: str | None = None, shape: str | None = None) -> Disposition:
        return dispose(mark=mark, mode=mode, action=self.turn.action, status=status, has_pump=has_pump,
                       broken=broken, shape=shape)

    def translate_whole(self, status: int, raw: bytes) -> WholeReply:
        return translate_whole_reply(self.turn, status, raw)

    def retarget_error(self, status: int, body: bytes) -> LocalResponse | None:
        return retarget_error(self.turn, status, body)

    @staticmethod
    def failure_message(e: BaseException) -> str:
        return failure_message(e)

    @staticmethod
    def upstream_failure(msg: str) -> str:
        return upstream_failure(msg)
