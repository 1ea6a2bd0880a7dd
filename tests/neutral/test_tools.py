"""Codex's freeform tools as a declared two-way encoding (neutral/tools.py): a freeform input wrapped
as JSON arguments comes back as it went, and the streamed input is decoded as the JSON string
arrives — the deltas join to the input whatever the split, no wrapper fragment leaking."""

from __future__ import annotations

import json

from hypothesis import given, HealthCheck, settings, strategies as st

from tokunseba.neutral.tools import freeform_arguments, freeform_input, FreeformInputStream

from tests.support.codex_patch import JS

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(st.text(max_size=60), st.data())
def test_the_input_stream_decodes_at_every_split(text, data):
    args = data.draw(st.sampled_from([freeform_arguments(text), json.dumps({"input": text}),
                                      json.dumps({"input": text}, indent=2)]))
    assert freeform_input(args) == text
    cuts = sorted(data.draw(st.lists(st.integers(1, max(1, len(args) - 1)), max_size=10, unique=True)))
    s, got, last = FreeformInputStream(), [], 0
    for c in [*cuts, len(args)]:
        got.append(s.feed(args[last:c]))
        last = c
    assert "".join(got) == text and not s.failed


def test_the_input_stream_at_every_single_split_point():
    args = freeform_arguments(JS)
    for cut in range(len(args) + 1):
        s = FreeformInputStream()
        assert s.feed(args[:cut]) + s.feed(args[cut:]) == JS, cut
