"""Identifiers minted as protocol plumbing (neutral/ids.py): deterministic, within every protocol's id
grammar, made from what the upstream sent; a non-string id recorded as dropped, once."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from tokunseba.neutral.ids import odd_id, safe, synth_tool_id

GRAMMAR = re.compile(r"^[a-zA-Z0-9_-]+$")


def test_safe_keeps_a_safe_text_and_replaces_the_rest():
    assert safe("msg_01ABC-x") == "msg_01ABC-x"
    assert safe("chatcmpl.9 z/é") == "chatcmpl_9_z__"
    assert safe(None) == safe("") == "tk"


@given(st.one_of(st.none(), st.text(max_size=40)), st.integers(min_value=0, max_value=1000))
def test_a_minted_tool_id_is_deterministic_and_in_every_protocols_grammar(message_id, n):
    tid = synth_tool_id(message_id, n)
    assert tid == synth_tool_id(message_id, n) and GRAMMAR.match(tid)
    assert tid.startswith("call_") and tid.endswith(f"_{n}")


def test_calls_of_one_reply_get_distinct_ids():
    assert len({synth_tool_id("msg_1", n) for n in range(5)}) == 5


def test_an_odd_id_is_recorded_as_dropped_once():
    dropped: list[str] = []
    odd_id("id", dropped)
    odd_id("id", dropped)
    odd_id("choices[0].message.tool_calls[1].id", dropped)
    assert dropped == ["id", "choices[0].message.tool_calls[1].id"]
