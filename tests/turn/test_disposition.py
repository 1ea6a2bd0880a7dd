"""The response hook's decision as a table (turn/disposition.py): one row per case, with the
reason; every branch of the hook is a row. And a whole reply's translation as a value."""

from __future__ import annotations

import json

import pytest

from tokunseba.states import Do
from tokunseba.turn.disposition import Disposition, dispose, failure_message, translate_whole_reply
from tokunseba.errors import TranslationError

# (mark, mode, action, status, has_pump, broken, shape) -> (do, message, record_error, strict), why the row is there
ROWS = [
    # the relay made the reply: the upstream reset or cut the exchange
    (("upstream-broke", "translate-stream", "translate", 502, True, "upstream connection broke: reset", None),
     (Do.ANSWER_BROKEN, "upstream connection broke: reset", False, False), "relay mark on a translated stream"),
    (("upstream-broke", "raw-stream", "retarget", 502, True, None, None),
     (Do.ANSWER_BROKEN, None, False, False), "relay mark, no reason known: the reply's own text says it"),
    (("error", "translate-whole", "translate", 502, False, None, None),
     (Do.ANSWER_BROKEN, None, False, False), "any relay mark but connect-failed is a break"),
    (("upstream-broke", "leave", "pass", 502, False, "cut", None),
     (Do.ANSWER_BROKEN, "cut", False, False), "a turn failed over to its own host went through the relay too"),
    # the relay saw the exchange break, the reply is unmarked
    ((None, "translate-whole", "translate", 200, False, "upstream connection broke", None),
     (Do.ANSWER_BROKEN, "upstream connection broke", False, False), "broken whole translated reply: never 'not JSON'"),
    ((None, "leave", "retarget", 200, False, "upstream connection broke", None),
     (Do.ANSWER_BROKEN, "upstream connection broke", False, False), "broken whole retargeted reply"),
    ((None, "translate-stream", "translate", 200, True, "upstream connection broke", None),
     (Do.RELAY, None, False, False), "a broken stream: its pump has said it (error event)"),
    ((None, "raw-stream", "retarget", 200, True, "upstream connection broke", None),
     (Do.RELAY, None, False, False), "a broken relayed raw stream: its pump has said it"),
    # the relay could not connect
    (("connect-failed", "leave", "translate", 502, False, None, None),
     (Do.ANSWER_UNREACHABLE, None, False, False), "endpoint unreachable (no failover left)"),
    (("connect-failed", "leave", "retarget", 502, False, "ignored", None),
     (Do.ANSWER_UNREACHABLE, None, False, False), "connect-failed wins over a break"),
    # a translated whole reply
    ((None, "translate-whole", "translate", 200, False, None, None),
     (Do.TRANSLATE_WHOLE, None, False, False), "translated whole reply"),
    ((None, "translate-whole", "translate", 429, False, None, None),
     (Do.TRANSLATE_WHOLE, None, True, False), "translated error reply: recorded, then its envelope translated"),
    # the other shape than asked for
    ((None, "shape-error", "translate", 200, False, None, "upstream sent a stream where a whole reply was due"),
     (Do.ANSWER_SHAPE, "upstream sent a stream where a whole reply was due", False, False), "shape error, translated"),
    ((None, "shape-error", "retarget", 200, False, None, "upstream sent a whole reply (x) where a stream was due"),
     (Do.ANSWER_SHAPE, "upstream sent a whole reply (x) where a stream was due", False, False), "shape error, retarget"),
    # a whole reply passed on in the client's own protocol
    ((None, "leave", "pass", 200, False, None, None),
     (Do.JUDGE_WHOLE, None, False, False), "pass-through whole reply: judged for usage; a problem is only noted"),
    ((None, "leave", "retarget", 200, False, None, None),
     (Do.JUDGE_WHOLE, None, False, True), "retargeted whole reply: HTML or cut JSON is answered as an error"),
    ((None, None, "pass", 200, False, None, None),
     (Do.JUDGE_WHOLE, None, False, False), "no mode chosen (already buffered): still judged"),
    ((None, None, "retarget", 204, False, None, None),
     (Do.JUDGE_WHOLE, None, False, False), "no mode chosen, retarget: judged, not strict"),
    # a retargeted endpoint's error
    ((None, "leave", "retarget", 500, False, None, None),
     (Do.RETARGET_ERROR, None, True, False), "retarget error: recorded, re-enveloped if not JSON"),
    ((None, "leave", "retarget", 404, False, None, None),
     (Do.RETARGET_ERROR, None, True, False), "retarget 4xx alike"),
    # an error reply with no mode
    ((None, None, "pass", 503, False, None, None),
     (Do.RECORD_ERROR, None, True, False), "no mode (buffered), an error: recorded"),
    ((None, None, "translate", 500, False, None, None),
     (Do.RECORD_ERROR, None, True, False), "no mode, translate action, an error: recorded"),
    # nothing to do
    ((None, None, "respond", 400, False, None, None),
     (Do.RELAY, None, False, False), "a local answer (refused): already recorded"),
    ((None, None, "respond", 200, False, None, None),
     (Do.RELAY, None, False, False), "a local answer"),
    ((None, "leave", "pass", 500, False, None, None),
     (Do.RELAY, None, False, False), "pass-through error reply goes on as it came (its own host's envelope)"),
    ((None, "raw-stream", "pass", 200, True, None, None),
     (Do.RELAY, None, False, False), "pass-through stream: the pump judges it"),
    ((None, "raw-stream", "retarget", 200, True, None, None),
     (Do.RELAY, None, False, False), "retargeted stream: the pump judges it"),
    ((None, "raw-stream", "pass", 500, True, None, None),
     (Do.RELAY, None, False, False), "an SSE error reply passed through"),
    ((None, "translate-stream", "translate", 200, True, None, None),
     (Do.RELAY, None, False, False), "translated stream: the pump did the work"),
    ((None, "failed", "translate", 502, False, None, None),
     (Do.RELAY, None, False, False), "responseheaders failed and installed its error stream"),
]


@pytest.mark.parametrize("given,want,why", ROWS, ids=[r[2] for r in ROWS])
def test_dispose_table(given, want, why):
    mark, mode, action, status, has_pump, broken, shape = given
    d = dispose(mark=mark, mode=mode, action=action, status=status, has_pump=has_pump, broken=broken, shape=shape)
    assert (d.do, d.message, d.record_error, d.strict) == want, why
    assert isinstance(d, Disposition) and d.why


def test_disposition_is_frozen():
    d = dispose(mark=None, mode=None, action="respond", status=200, has_pump=False)
    with pytest.raises(Exception):
        d.do = Do.ANSWER_BROKEN  # type: ignore[misc]


def test_every_kind_has_a_row():
    kinds = set(Do)  # every value of states.Do
    assert kinds == {w[0] for _, w, _ in ROWS}


# ---- a whole reply's translation as a value (no exception read back) ----


def _turn(target: str = "openai"):
    from tokunseba.protocols.detect import detect
    from tokunseba.turn.plan import Turn

    det = detect("api.anthropic.com", "/v1/messages", "POST")
    return Turn(request_id="tk-1", started_at=0.0, detected=det, host="api.anthropic.com", path="/v1/messages",
                client_protocol="anthropic", requested_model="m", stream=False, original_body=b"{}",
                action="translate", outcome="translated", target_protocol=target)


CHAT = {"id": "c", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}


def test_whole_reply_translated():
    done = translate_whole_reply(_turn(), 200, json.dumps(CHAT).encode())
    assert done.failure is None and done.status == 200 and done.report is not None
    assert json.loads(done.body)["type"] == "message"


def test_whole_reply_untranslatable_keeps_the_usage():
    bad = dict(CHAT, choices="not a list")
    done = translate_whole_reply(_turn(), 200, json.dumps(bad).encode())
    assert done.failure is not None and done.status == 502
    assert done.usage is not None and done.usage.reported == CHAT["usage"]


def test_whole_reply_not_json_fails_without_usage():
    done = translate_whole_reply(_turn(), 200, b"<html>")
    assert done.failure is not None and done.usage is None


def test_failure_message():
    assert failure_message(TranslationError(502, "tokunseba: x")) == "tokunseba: x"
    assert failure_message(ValueError("boom")) == "tokunseba: could not translate the reply: boom"
