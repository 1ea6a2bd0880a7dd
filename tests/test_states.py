"""The states of a turn as types (states.py): each member equals, formats and encodes as the string
used before it existed, so the ledger, the logs and the tests read the same text."""

from __future__ import annotations

import json
from enum import StrEnum

import pytest

from tokunseba import states
from tokunseba.states import Action, Decided, Do, ReplyMode

ENUMS = [Decided, Action, ReplyMode, Do]


@pytest.mark.parametrize("enum", ENUMS, ids=[e.__name__ for e in ENUMS])
def test_a_member_is_its_string(enum):
    assert issubclass(enum, StrEnum)
    for member in enum:
        assert member == member.value and f"{member}" == member.value and str(member) == member.value
        assert json.dumps(member) == json.dumps(member.value)
        assert enum(member.value) is member  # read back from the ledger's text


@pytest.mark.parametrize("enum", ENUMS, ids=[e.__name__ for e in ENUMS])
def test_values_are_unique_within_each_state(enum):
    values = [m.value for m in enum]
    assert len(values) == len(set(values)) == len(enum.__members__)


def test_the_words_the_ledger_and_logs_have_always_used():
    assert [*map(str, Decided)] == ["pass", "route", "error"]
    assert [*map(str, Action)] == ["pass", "retarget", "translate", "respond"]
    assert ReplyMode.RAW_STREAM == "raw-stream" and ReplyMode.TRANSLATE_WHOLE == "translate-whole"
    assert Do.RELAY == "relay" and Do.ANSWER_BROKEN == "answer-broken"


def test_pure_no_tokunseba_import():
    source = states.__loader__.get_source(states.__name__)
    assert "from ." not in source and "import tokunseba" not in source
