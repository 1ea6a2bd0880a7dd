"""A reply the endpoint's own cap ended (neutral/endpoint_cap.py, issue 41): told ``end_turn``, the
conversion noted once; not converted for a reply holding a tool call, for another stop reason, or
when the cap was the client's own limit (no ``Capped``)."""

from __future__ import annotations

import pytest

from tokunseba.neutral.conversation import Capped
from tokunseba.neutral.endpoint_cap import CUT, TOLD, limit_text, told_stop


def test_a_reply_the_endpoints_cap_ended_is_told_end_turn_and_noted_once():
    converted: list[str] = []
    capped = Capped(asked=64000, cap=4096)
    assert told_stop(CUT, capped, calls=False, converted=converted) == TOLD == "end_turn"
    assert told_stop(CUT, capped, calls=False, converted=converted) == TOLD
    assert converted == ["stop_reason max_tokens -> end_turn (the endpoint's cap, max_tokens 4096, ended the reply; "
                         "the client asked for 64000)"]


def test_a_client_that_named_no_limit_is_said_so():
    converted: list[str] = []
    assert told_stop("max_tokens", Capped(asked=None, cap=512), calls=False, converted=converted) == "end_turn"
    assert converted[0].endswith("the client named no limit)")
    assert limit_text(Capped(None, 1)) == "the client named no limit"
    assert limit_text(Capped(10, 1)) == "the client asked for 10"


@pytest.mark.parametrize(("stop", "capped", "calls"), [
    ("max_tokens", None, False),  # the client's own limit: told as it is
    ("max_tokens", Capped(100, 50), True),  # a tool call the cap may have cut: never run as if whole
    ("end_turn", Capped(100, 50), False),
    ("tool_use", Capped(100, 50), True),
    (None, Capped(100, 50), False),
])
def test_told_as_it_is_otherwise(stop, capped, calls):
    converted: list[str] = []
    assert told_stop(stop, capped, calls=calls, converted=converted) == stop
    assert converted == []
