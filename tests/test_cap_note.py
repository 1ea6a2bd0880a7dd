"""The console line when the endpoint's own cap ended a reply (turn/cap_note.py), from what
the real Chat request codec records when it caps a client's max_tokens."""

from __future__ import annotations

import json

from tokunseba import translate
from tokunseba.turn.cap_note import cap_line

TURN = {"model": "claude-opus-4-8", "max_tokens": 64000, "messages": [{"role": "user", "content": "hi"}]}


def _converted(body: dict, cap: int | None) -> list[str]:
    return translate.request("anthropic", "openai", body, model="m", max_tokens=cap).converted


def test_the_endpoints_cap_ending_the_reply_is_said_with_both_numbers():
    line = cap_line(request_id="tk-1", endpoint="local", converted=_converted(TURN, 512),
                    details={"stop_reason": "max_tokens"}, original=json.dumps(TURN).encode())
    assert line == ("tokunseba: tk-1 the reply was cut by endpoint local's cap (max_tokens 512; the client asked "
                    "for 64000), not by the client's own limit: its client may send continuation turns. Give the "
                    "endpoint stop strings that end its turns, or raise its max_tokens")


def test_no_line_when_the_reply_ended_otherwise_or_the_cap_was_the_clients():
    capped = _converted(TURN, 512)
    assert cap_line(request_id="tk-1", endpoint="local", converted=capped, details={"stop_reason": "end_turn"},
                    original=json.dumps(TURN).encode()) is None
    small = {**TURN, "max_tokens": 100}  # under the cap: the client's own limit ended it
    assert cap_line(request_id="tk-1", endpoint="local", converted=_converted(small, 512),
                    details={"stop_reason": "max_tokens"}, original=json.dumps(small).encode()) is None
    assert cap_line(request_id="tk-1", endpoint="local", converted=None, details={"stop_reason": "max_tokens"},
                    original=None) is None


def test_an_unreadable_original_still_says_the_cap():
    line = cap_line(request_id="tk-2", endpoint="e", converted=_converted(TURN, 8), details={"stop_reason": "max_tokens"},
                    original=b"not json")
    assert line is not None and "(max_tokens 8)" in line
