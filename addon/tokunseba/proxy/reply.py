"""The reply part: a turn's reply on its way back to the client, from its headers to its end.

- ``headers_in`` (the ``responseheaders`` hook): the reply's mode (turn/replying.py
  ``Replying.mode``), and for a stream its pump (turn/pump.py: translated event by event, or
  passed on and watched);
- ``reply_in`` (the ``response`` hook): the relay's target released, then one pure decision
  (``Replying.dispose``: turn/disposition.py) and the I/O it names (``handlers``: one method per ``Do``), then
  the turn recorded (record.py ``complete``);
- ``failed`` (the ``error`` hook): the client went away, or the upstream broke.

Owns ``tokunseba_max_event_bytes`` (the largest SSE event a stream may carry). Fail closed: a
reply that cannot be made is a 502 in the client's protocol, recorded with the usage reported.
"""

from __future__ import annotations

from collections.abc import Callable

from mitmproxy import ctx, exceptions, http

from ..errors import TranslationError
from ..outcomes import TurnOutcome
from ..protocols import REQUEST_ID_HEADER
from ..sse import CONTENT_TYPE as SSE_CONTENT_TYPE, set_max_event_bytes
from ..states import Action, Do, ReplyMode
from ..turn import Broken
from ..turn import Disposition, Replying
from ..turn import FlowState
from ..turn import Told
from ..turn import Outcome
from ..turn import Turn
from ..turn import show_client_url
from .core import Core, Part, keep_client_close, log, note_windows, redact_whole_reply, respond
from .provider_limits import EVENT as LIMITS_EVENT, limit_headers
from .record import Record
from .relay import MARK as RELAY_MARK

KEYS = {"tokunseba_max_event_bytes"}


class Reply(Part):
    KEYS = KEYS  # the options this part owns

    def __init__(self, core: Core, record: Record) -> None:
        self.core, self.record = core, record
        self.handlers: dict[Do, Callable[[http.HTTPFlow, FlowState, Disposition], tuple | None]] = {
            Do.ANSWER_BROKEN: self._broken, Do.ANSWER_UNREACHABLE: self._unreachable,
            Do.TRANSLATE_WHOLE: self._translate_whole, Do.ANSWER_SHAPE: self._shape,
            Do.JUDGE_WHOLE: self._judge_whole, Do.RETARGET_ERROR: self._retarget_error,
        }  # RECORD_ERROR, RELAY: nothing more to do

    def configure(self, updated: set[str]) -> None:
        if "tokunseba_max_event_bytes" in updated:
            try:
                set_max_event_bytes(ctx.options.tokunseba_max_event_bytes)
            except ValueError as e:
                raise exceptions.OptionsError(f"tokunseba_max_event_bytes: {e}") from None

    # ---- responseheaders
    def headers_in(self, flow: http.HTTPFlow) -> None:
        state = self.core.flows.get(flow.id)
        if state is None or flow.response is None:
            return
        state.settle()  # what the request hook left for after the request, if the loop has not run it yet
        turn, r = state.turn, flow.response
        if turn.local is None:  # a provider's reply (not one made here): its windows
            chain = state.chain
            note_windows(self.core, turn, lambda: chain.attempt_headers(turn) if chain else flow.request.headers.fields,
                         r.headers.fields)
        try:
            if pairs := limit_headers(r.headers.items(multi=True)):  # read before anything is set on it
                sent_to = turn.endpoint.host if turn.endpoint is not None and turn.action != Action.PASS else turn.host
                self.core.recorder.event(turn, LIMITS_EVENT, {"host": sent_to, "headers": pairs})
            r.headers[REQUEST_ID_HEADER] = turn.request_id
            keep_client_close(r, state)
            if r.raw_content is not None:  # answered locally, or already buffered
                return
            replying = Replying(turn)
            # SHAPE_ERROR: buffered (not streamed), the response hook answers with the error
            state.mode = mode = replying.mode(r.status_code, r.headers.get("content-type", ""))
            keep = self.core.recorder.store_bodies or state.shadowed
            target = self.core.relay.targets.get(state.relay_token or "") if mode == ReplyMode.RAW_STREAM else None
            pump = replying.pump(mode, content_encoding=r.headers.get("content-encoding"), target=target, keep=keep)
            if pump is None:
                return
            if mode == ReplyMode.TRANSLATE_STREAM:
                _prepare_stream_headers(flow, SSE_CONTENT_TYPE)
            state.pump = pump
            r.stream = pump
        except Exception as e:
            log.exception("tokunseba: responseheaders hook failed")
            if turn.action == Action.TRANSLATE:
                _say_failed(flow, state, e)

    # ---- response
    def reply_in(self, flow: http.HTTPFlow) -> None:
        state = self.core.flows.pop(flow.id, None)
        if state is None:
            return
        state.settle()
        broken = self._relay_done(flow, state, answered=True)
        try:
            if state.chain is not None and state.chain.told is not None and state.pump is None:
                self._tell(flow, state, state.chain.told)
                return
            r, turn = flow.response, state.turn
            assert r is not None  # the response hook has one
            # relay-made (a turn that failed over to its own host went through the relay too)
            mark = r.headers.get(RELAY_MARK) if turn.action in (Action.TRANSLATE, Action.RETARGET) or state.chain else None
            replying = Replying(turn)
            d = replying.dispose(mark=mark, mode=state.mode, status=r.status_code, has_pump=state.pump is not None,
                                 broken=broken.message if broken is not None else None,
                                 shape=replying.shape(r.status_code, r.headers.get("content-type", ""))
                                 if state.mode == ReplyMode.SHAPE_ERROR else None)
            self._carry_out(flow, state, d)
        except Exception as e:
            if not isinstance(e, TranslationError):
                log.exception("tokunseba: response hook failed")
            self._fail_reply(flow, state, Replying.failure_message(e), None)

    def _carry_out(self, flow: http.HTTPFlow, state: FlowState, d: Disposition) -> None:
        """The I/O a ``Disposition`` names (turn/disposition.py), then the turn's record."""
        r = flow.response
        assert r is not None
        if d.record_error:
            self.core.recorder.event(state.turn, "upstream_error", {"status": r.status_code,
                                                                    "message": _snippet(r.get_content(strict=False))})
        handler = self.handlers.get(d.do)
        done = handler(flow, state, d) if handler is not None else (None, None)
        if done is None:  # answered and recorded already
            return
        rep, whole = done
        r = flow.response
        assert r is not None
        redact_whole_reply(r, state.turn)
        keep_client_close(r, state)
        self.record.complete(flow, state, _reply_outcome(flow, state, r.status_code, rep, whole), defer=True)

    def _broken(self, flow: http.HTTPFlow, state: FlowState, d: Disposition) -> tuple:
        """Reset or truncated before the reply was whole: said as such, never "not valid JSON"."""
        assert flow.response is not None
        _answer_error(flow, state.turn, d.message or flow.response.get_text(strict=False) or "upstream connection broke")
        return None, None

    def _unreachable(self, flow: http.HTTPFlow, state: FlowState, d: Disposition) -> tuple:
        assert flow.response is not None
        turn, msg = state.turn, flow.response.get_text(strict=False) or "connection failed"
        ep = turn.endpoint.name if turn.endpoint and turn.action != Action.PASS else turn.host
        self.core.recorder.event(turn, "endpoint_unreachable", {"endpoint": ep, "message": msg,
                                                                "url": turn.endpoint.url if turn.endpoint else None})
        turn.error = msg
        respond(flow, turn.client_error(502, f"tokunseba: endpoint {ep} is unreachable: {msg}", "api_error"))
        return None, None

    def _translate_whole(self, flow: http.HTTPFlow, state: FlowState, d: Disposition) -> tuple | None:
        r, turn = flow.response, state.turn
        assert r is not None
        done = Replying(turn).translate_whole(r.status_code, r.get_content(strict=False) or b"")
        if done.failure is not None:
            if done.unexpected is not None:
                log.error("tokunseba: response hook failed", exc_info=done.unexpected)
            self._fail_reply(flow, state, done.failure, done.usage)
            return None
        r.status_code = done.status
        r.headers.pop("content-encoding", None)
        for k, v in done.headers.items():
            r.headers[k] = v
        r.content = done.body
        if done.counted is not None:  # a count, not a turn's usage: recorded with the counter that answered
            self.core.recorder.event(turn, "counted", done.counted.record())
        return done.report, None

    def _shape(self, flow: http.HTTPFlow, state: FlowState, d: Disposition) -> tuple:
        assert flow.response is not None
        self.core.recorder.event(state.turn, "upstream_error", {"status": flow.response.status_code, "message": d.message})
        _answer_error(flow, state.turn, d.message or "upstream reply in the wrong shape")
        return None, None

    def _judge_whole(self, flow: http.HTTPFlow, state: FlowState, d: Disposition) -> tuple:
        """A whole reply passed on: judged (parsed) once, here, for its usage and shape."""
        r, turn = flow.response, state.turn
        assert r is not None
        whole: Outcome | None = Outcome.of_whole(turn.client_protocol, r.status_code, r.headers.get("content-type"),
                                                 r.get_content(strict=False) or b"")
        if d.strict and whole is not None and whole.problem is not None:  # HTML or cut JSON where JSON was due
            self.core.recorder.event(turn, "upstream_error", {"status": r.status_code, "message": whole.problem})
            _answer_error(flow, turn, whole.problem)
            whole = None
        return None, whole

    def _retarget_error(self, flow: http.HTTPFlow, state: FlowState, d: Disposition) -> tuple:
        r = flow.response
        assert r is not None
        said = Replying(state.turn).retarget_error(r.status_code, r.get_content(strict=False) or b"")
        if said is not None:  # empty or HTML: the client's envelope
            respond(flow, said)
        return None, None

    def _tell(self, flow: http.HTTPFlow, state: FlowState, told: Told) -> None:
        """Every attempt failed: the client gets the failure that says most (turn/last_word.py)."""
        turn = state.turn
        r = respond(flow, told.reply)
        keep_client_close(r, state)
        turn.outcome, turn.error = "error", told.message
        turn.failed_over = state.chain.failed_text() if state.chain else turn.failed_over
        self.core.recorder.event(turn, "failover_answer", told.record())
        self.record.complete(flow, state, Outcome(r.status_code), defer=True)

    def _fail_reply(self, flow: http.HTTPFlow, state: FlowState, msg: str, usage) -> None:
        """The reply could not be made: the client gets a 502 saying so, recorded with the usage
        the upstream reported all the same (a whole reply that could not be translated)."""
        turn = state.turn
        err = turn.client_error(502, msg, "api_error")
        keep_client_close(respond(flow, err), state)
        turn.outcome, turn.error = "error", msg
        self.record.complete(flow, state, Outcome(err.status, usage=usage), defer=True)

    # ---- error
    def failed(self, flow: http.HTTPFlow) -> None:
        state = self.core.flows.pop(flow.id, None)
        if state is None:
            return
        state.settle()
        broken = self._relay_done(flow, state, answered=False)
        try:
            self._end_failed(flow, state, flow.error.msg if flow.error else "unknown error", broken)
        except Exception:
            log.exception("tokunseba: error hook failed")

    def _end_failed(self, flow: http.HTTPFlow, state: FlowState, msg: str, broken: Broken | None) -> None:
        turn, gone = state.turn, _client_went_away(msg)
        if gone and state.pump is not None and state.pump.told_end and flow.response is not None:
            # the client hung up after the reply's terminal event (Codex resets its HTTP/2 stream
            # as soon as it has response.completed), or after the error event that ended it (the
            # SDKs close on it): the turn ended as the client was told
            after = "completion" if state.pump.completed else "error"
            self.core.recorder.event(turn, "client_closed", {"message": msg, "after": after})
            self.record.complete(flow, state, _reply_outcome(flow, state, flow.response.status_code))
            return
        if gone and state.pump is not None and state.pump.cut_short:
            # the stream had been ended with an error event (the pump): the client left after it
            turn.error = state.pump.cut_short
            status = flow.response.status_code if flow.response is not None else None
            self.record.complete(flow, state, _reply_outcome(flow, state, status, failed=True))
            return
        if gone:  # Esc in Claude Code: the user's choice, not an upstream failure
            self.core.recorder.event(turn, "client_cancelled", {"message": msg})
            turn.outcome = "cancelled"
            turn.error = msg
        else:
            turn.error = broken.message if broken is not None else Replying.upstream_failure(msg)
            self.core.recorder.event(turn, "upstream_error", {"status": None, "message": turn.error})
        self.record.complete(flow, state, _reply_outcome(flow, state, None, failed=turn.outcome != TurnOutcome.CANCELLED))

    def _relay_done(self, flow: http.HTTPFlow, state: FlowState, *, answered: bool) -> Broken | None:
        """The flow's attempt has ended (``answered``: with a reply, else with an error): its relay
        target and endpoint slot released, its own host noted as reached or not (a turn passed
        through), the client's URL shown again; why the upstream broke (not a refused
        connect: that marks the endpoint down), if it did."""
        core, turn, token, state.relay_token = self.core, state.turn, state.relay_token, None
        if state.slot is not None:
            state.slot.release()  # the endpoint's slot is free for the next turn (the client left, or the reply ended)
        target = core.relay.finish(token) if token else None
        chain = state.chain
        noted = chain is not None and bool(chain.failed) and chain.failed[-1].kind == "unreachable"
        broke = target.broken if target is not None else None
        if broke is not None and broke.refused and turn.endpoint and not noted:
            core.health.failed(turn.endpoint, broke.message)
        if broke is not None and not broke.refused:
            turn.error = broke.message
            core.recorder.event(turn, "upstream_error", {"status": None, "message": broke.message})
        else:
            broke = None
        show_client_url(flow, state)
        if turn.action == Action.PASS and answered:  # the host answered, unless the relay could not reach it
            lost = noted and chain is not None and chain.gave_up  # (a failed-over turn)
            (core.reach.forget if lost else core.reach.answered)(flow.request.host, flow.request.port)
        elif turn.action == Action.PASS and flow.response is None:
            core.reach.forget(flow.request.host, flow.request.port)  # the next turn checks it again
        return broke


def _answer_error(flow: http.HTTPFlow, turn: Turn, why: str) -> None:
    """The client gets a 502 in its protocol saying ``why``; the turn is an error."""
    respond(flow, turn.client_error(502, f"tokunseba: {why}", "api_error"))
    turn.outcome, turn.error = "error", why


def _reply_outcome(flow: http.HTTPFlow, state: FlowState, status: int | None, rep=None,
                   whole: Outcome | None = None, *, failed: bool = False) -> Outcome:
    """The outcome of the reply the client got, from the path that made it: a stream
    (its pump), a translated whole reply (``rep``), a whole reply passed on in the
    client's own protocol (``whole``, as the response hook judged it; else judged here
    under a status below 400), or a local answer. A stream's pump and a whole reply's
    ``rep`` never meet: the mode decides one or the other."""
    turn, pump = state.turn, state.pump
    if pump is not None:
        out = pump.outcome(status)
    elif rep is not None and status is not None:
        out = Outcome.of_reply(status, rep)
    elif whole is not None:
        out = whole
    elif turn.action in (Action.PASS, Action.RETARGET) and flow.response is not None and status is not None and status < 400:
        out = Outcome.of_whole(turn.client_protocol, status, flow.response.headers.get("content-type"),
                               flow.response.get_content(strict=False) or b"")
    else:
        out = Outcome(status)
    out.failed = failed
    return out


def _say_failed(flow: http.HTTPFlow, state: FlowState, e: Exception) -> None:
    """responseheaders could not set up a translation: the client gets a 502 in its protocol
    instead of the reply, once, whatever comes."""
    turn = state.turn
    assert flow.response is not None
    state.mode = ReplyMode.FAILED
    turn.outcome, turn.error = "error", str(e)
    msg = turn.client_error(502, f"tokunseba internal error: {e}", "api_error").body
    flow.response.status_code = 502
    _prepare_stream_headers(flow, "application/json")
    sent: list[bool] = []

    def once(_: bytes) -> list[bytes]:  # the error, once, whatever comes
        if sent:
            return []
        sent.append(True)
        return [msg]
    flow.response.stream = once


def _prepare_stream_headers(flow: http.HTTPFlow, content_type: str) -> None:
    assert flow.response is not None
    h = flow.response.headers
    h.pop("content-length", None)
    h.pop("content-encoding", None)
    h["content-type"] = content_type
    if flow.request.http_version.startswith("HTTP/1"):
        h["transfer-encoding"] = "chunked"


def _client_went_away(msg: str) -> bool:
    m = msg.lower()
    return "client disconnected" in m or "stream reset by client" in m or "client closed" in m


def _snippet(body: bytes | None, n: int = 500) -> str:
    return (body or b"")[:n].decode("utf-8", "replace")
