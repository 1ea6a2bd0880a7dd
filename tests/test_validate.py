"""Checking a request against what its protocol forbids (validate.py): on any odd JSON body it
names a problem or none, and never raises."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from tokunseba.protocols import REGISTRY
from tokunseba.validate import first_problem


JSONISH = st.recursive(st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(["", "x", "toolu_1", "c1"]),
                       lambda kids: st.lists(kids, max_size=4) | st.dictionaries(
                           st.sampled_from(["messages", "input", "content", "type", "role", "id", "tool_use_id",
                                            "tool_call_id", "call_id", "tool_calls", "max_tokens",
                                            "max_output_tokens", "previous_response_id", "tool_use", "tool_result",
                                            "function_call", "function_call_output", "tool"]), kids, max_size=5),
                       max_leaves=30)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(sorted(p.name for p in REGISTRY.values() if p.checks)), st.dictionaries(st.sampled_from(["messages", "input", "max_tokens",
                                                                         "max_output_tokens", "max_completion_tokens"]),
                                                        JSONISH, max_size=4))
def test_validation_never_raises_on_odd_bodies(protocol, body):
    problem = first_problem(protocol, body)
    assert problem is None or (isinstance(problem[0], str) and isinstance(problem[1], str))
