"""The cross-pair properties of tests/test_pair_properties.py, over the six pairs with Gemini
(issue 11): a generated reply rendered by the upstream's own encoder, translated, and read
back with the client's own decoder keeps every tool id byte for byte, every name, argument
object and text, invents no block and drops nothing; any split gives the same bytes; the
whole reply and the stream agree (stop reason, usage sent to the client)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tests.test_pair_properties import (
    CREATED,
    SETTINGS,
    THREE,
    expected,
    read_stream,
    read_whole,
    replies,
    upstream_stream,
    upstream_whole,
    view,
)
from tokunseba import translate as tr

GEMINI_PAIRS = [("gemini", c) for c in THREE] + [(u, "gemini") for u in THREE]


def test_the_six_pairs_with_gemini_translate():
    assert all(tr.pair_refusal(u, c) is None for u, c in GEMINI_PAIRS)


@SETTINGS
@given(replies(), st.sampled_from(GEMINI_PAIRS), st.data())
def test_streams_with_gemini_keep_everything_in_any_split(reply, pair, data):
    blocks, usage = reply
    upstream, client = pair
    raw = upstream_stream(upstream, blocks, usage)
    t = tr.stream(upstream, client, created=CREATED)
    out = t.feed(raw) + t.close()
    assert t.report.completed and not t.report.errors and not t.report.dropped
    assert view(read_stream(client, out)) == expected(blocks)
    cuts = sorted(data.draw(st.lists(st.integers(1, max(1, len(raw) - 1)), max_size=6, unique=True)))
    t2 = tr.stream(upstream, client, created=CREATED)
    parts, last = [], 0
    for c in cuts:
        parts.append(t2.feed(raw[last:c]))
        last = c
    assert b"".join(parts) + t2.feed(raw[last:]) + t2.close() == out


@SETTINGS
@given(replies(), st.sampled_from(GEMINI_PAIRS))
def test_whole_replies_with_gemini_keep_everything_and_agree_with_the_stream(reply, pair):
    blocks, usage = reply
    upstream, client = pair
    rep = tr.reply(upstream, client, upstream_whole(upstream, blocks, usage), created=CREATED)
    assert not rep.dropped
    assert view(read_whole(client, rep.body)) == expected(blocks)
    t = tr.stream(upstream, client, created=CREATED)
    t.feed(upstream_stream(upstream, blocks, usage))
    t.close()
    assert (t.report.stop_reason, t.client_usage) == (rep.stop_reason, rep.client_usage)
    assert (rep.usage is None) == (usage is None)
