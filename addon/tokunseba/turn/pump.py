"""The per-flow stream callable (mitmproxy's ``flow.response.stream``) of a routed or
passed-on streamed reply, and what it tells about how the stream ended.

Pure: no mitmproxy, no I/O; proxy/mitm.py installs a ``Pump`` from the ``responseheaders`` hook
and reads ``Pump.outcome`` / ``Pump.completed`` when the flow ends.
"""

from __future__ import annotations

import logging
import time

from ..encoding import Decoding, is_identity
from .outcome import Outcome
from ..credentials import KNOWN_SECRETS, StreamRedactor
from ..ledger import MAX_STORED_BODY  # a kept stream is cut where the ledger cuts a body
from ..sse import SSEDecoder, SSETooLarge
from .stream_watch import StreamWatch, error_event, last_event_end
from .plan import Turn
from .reply import stream_translator
from ..states import Action

log = logging.getLogger("tokunseba")



class Pump:
    """The per-flow stream callable: joins output into one chunk per call, never returns
    b"" mid-stream, and turns any exception into an error event in the client's protocol.
    A translated stream is decoded from its content-encoding before the translator sees it
    (the client gets it identity-encoded); a raw one goes on as it came. A retargeted (raw,
    relayed) stream goes on whole events at a time: when its upstream breaks or it ends
    without its terminal event, the unfinished event is dropped and an error event in the
    client's protocol ends it; an event its client could not read (not JSON) or one larger
    than the SSE cap ends it at once the same way, and is never passed on."""

    def __init__(self, turn: Turn, translator=None, content_encoding: str | None = None, target=None, *,
                 keep: bool = False) -> None:
        self.turn, self.t = turn, translator
        self.target = target  # the relay's record of this flow's upstream (relay.Target), if relayed
        # relayed raw stream: bytes after the last complete event wait for the event's end
        self.hold: bytearray | None = bytearray() if target is not None and translator is None else None
        self.failed = False
        self.cut_short: str | None = None  # why a relayed raw stream was ended early (an unreadable event)
        self.first_byte: float | None = None
        # raw pass-through / retarget: usage and completeness read on the side
        self.watch = StreamWatch(turn.client_protocol, content_encoding) if translator is None else None
        # translated: undo the upstream's content-encoding first (raises UnsupportedEncoding)
        self.inflate = Decoding(content_encoding) if translator is not None and not is_identity(content_encoding) \
            else None
        # keep: --ledger-bodies, or a shadowed turn (its reply is compared with the shadow's)
        self.kept: bytearray | None = bytearray() if keep else None
        # an endpoint key the upstream echoes back is redacted by value (credentials.py)
        self.redactor = StreamRedactor(KNOWN_SECRETS.values) if turn.key_injected and KNOWN_SECRETS else None

    @classmethod
    def of(cls, turn: Turn, *, content_encoding: str | None = None, keep: bool = False) -> Pump:
        """The pump of ``turn``'s stream as the turn planned it: translated event by event
        (turn/reply.py ``stream_translator``) when it translates, else passed on and watched."""
        translator = stream_translator(turn) if turn.action == Action.TRANSLATE else None
        return cls(turn, translator, content_encoding, keep=keep)

    def error_end(self, why: str) -> bytes:
        """What ends the client's stream with ``why`` when its carrier broke: the translator's
        error event, else one in the client's protocol (its facts' ``stream_error``)."""
        return self.t.fail(why) if self.t is not None else error_event(self.turn.client_protocol, why)

    def __call__(self, data: bytes):
        try:
            if self.failed:
                return []
            if self.t is None:  # raw pass-through: bytes unchanged; timestamps and usage read on the side
                chunks = self._redacted(self._raw(data), final=not data)
                for c in chunks:
                    self._keep(c)  # what the client got
                return chunks
            if self.inflate is not None:
                out = self.t.feed(self.inflate.feed(data)) if data else self.t.feed(self.inflate.close()) + self.t.close()
            else:
                out = self.t.feed(data) if data else self.t.close()
        except Exception as e:  # mitmproxy would drop the chunk silently
            if isinstance(e, SSETooLarge):
                log.warning("tokunseba: %s: turn %s ended", e, self.turn.request_id)
                why = f"tokunseba: {e}"
            else:
                log.exception("tokunseba: stream translation failed")
                why = f"tokunseba: stream translation failed: {e}"
            self.failed = True
            try:
                out = self.t.fail(why)
            except Exception:
                out = b""
        out = b"".join(self._redacted([out] if out else [], final=not data or self.failed))
        if out:
            self._mark_first_byte()
            self._keep(out)
            return [out]
        return []

    @property
    def completed(self) -> bool:
        """Whether the client already had the reply's terminal event (translated or passed on)."""
        if self.t is not None:
            return self.t.report.completed
        return self.watch is not None and self.watch.completed and self.watch.error is None

    @property
    def told_end(self) -> bool:
        """Whether the client already had the stream's last event: its terminal event, or (a
        translated stream) the error event that ended it."""
        return self.completed or (self.t is not None and self.t.finished)

    def outcome(self, status: int | None) -> Outcome:
        """How the stream ended: a translated one by its translator's report (not clean
        without its terminal event, or with errors); a passed-on one by its watch (judged
        only under a status below 400)."""
        kept = bytes(self.kept) if self.kept is not None else None
        if self.t is not None:
            rpt = self.t.report
            problem = None
            if rpt.errors or not rpt.completed:
                problem = self.turn.error or "; ".join(rpt.errors) or "the translated stream did not complete"
            return Outcome(status, rpt.usage, self.t.client_usage,
                           {"stop_reason": rpt.stop_reason, "dropped": rpt.dropped, "warnings": rpt.warnings,
                            "errors": rpt.errors, "completed": rpt.completed,
                            **({"converted": rpt.converted} if rpt.converted else {})},
                           problem=problem, first_byte=self.first_byte, kept=kept, model=rpt.model)
        assert self.watch is not None  # raw: watched
        usage = self.watch.usage
        problem = self.cut_short or (self.watch.verdict() if status is not None and status < 400 else None)
        return Outcome(status, usage, usage.reported if usage else None, problem=problem,
                       first_byte=self.first_byte, kept=kept, model=self.watch.model)

    def _redacted(self, chunks: list[bytes], *, final: bool) -> list[bytes]:
        if self.redactor is None:
            return chunks
        out = b"".join(self.redactor.feed(c) for c in chunks) + (self.redactor.close() if final else b"")
        return [out] if out else []

    def _mark_first_byte(self) -> None:
        if self.first_byte is None:
            self.first_byte = time.time()

    def _keep(self, out: bytes) -> None:
        if self.kept is not None and len(self.kept) < MAX_STORED_BODY:
            self.kept += out[: MAX_STORED_BODY - len(self.kept)]

    def _raw(self, data: bytes) -> list[bytes]:
        try:  # the side channel must never cost the client a byte
            assert self.watch is not None  # raw: watched
            if data:
                self._mark_first_byte()
                self.watch.feed(data)
            else:
                self.watch.close()
        except Exception:
            log.exception("tokunseba: stream watch failed")
        out = self._whole_events(data) if self.hold is not None else data
        return [out] if out else []

    def _whole_events(self, data: bytes) -> bytes:
        """Relayed raw stream: the complete events so far; at the end, the rest, or (the
        upstream broke, or ended without its terminal event) an error event instead."""
        hold = self.hold
        assert hold is not None  # relayed raw: held
        if data:
            hold += data
            end = last_event_end(hold)
            # an event the client could not read, or one past the cap, ends the stream here: the
            # complete events of this chunk go with it (which came before the bad one is not known)
            why = self.watch.fatal if self.watch is not None else None
            if why is None and len(hold) - end > SSEDecoder.max_event_bytes:  # unjudged streams too
                why = str(SSETooLarge(SSEDecoder.max_event_bytes))
            if why is None:
                out = bytes(hold[:end])
                del hold[:end]
                return out
            self.failed, self.cut_short = True, why
            hold.clear()
            return self.error_end(f"tokunseba: {why}")
        broken = self.target.broken if self.target is not None else None
        why = str(broken) if broken is not None else None  # a Broken reads as its message (turn/failover.py)
        verdict = self.watch.verdict() if self.watch is not None else None
        if why is None and verdict is not None and self.watch is not None and self.watch.error is None:
            why = verdict  # an upstream error event already reached the client as it came
        if why is None:
            out = bytes(hold)
        else:
            self.failed = True
            out = self.error_end(f"tokunseba: {why}")
        hold.clear()
        return out
