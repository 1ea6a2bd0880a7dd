"""Function-call ids minted where Gemini sent none (translate/gemini/ids.py): from the reply's
responseId and the call's position, the same reply always giving the same ids, each within every
protocol's id grammar."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from tokunseba.translate.gemini.ids import synth_call_id

GRAMMAR = re.compile(r"^[a-zA-Z0-9_-]+$")


def test_made_from_the_response_id_and_the_position():
    assert synth_call_id("abc-DEF_1", 0) == "call_abc-DEF_1_0"
    assert synth_call_id("r/1.2", 3) == "call_r_1_2_3"
    assert synth_call_id(None, 1) == synth_call_id("", 1) == "call_gemini_1"


@given(st.one_of(st.none(), st.text(max_size=30)), st.integers(min_value=0, max_value=500))
def test_deterministic_and_in_the_grammar(response_id, n):
    cid = synth_call_id(response_id, n)
    assert cid == synth_call_id(response_id, n) and GRAMMAR.match(cid)


def test_calls_of_one_reply_are_distinct():
    assert len({synth_call_id("resp", n) for n in range(10)}) == 10
