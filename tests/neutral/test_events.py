"""The neutral events of a reply (neutral/events.py): the vocabulary every codec speaks. Stop reasons
use Anthropic's names, and every stream decoder maps its protocol's own into them (checked on the
recorded streams of every protocol); the events are slotted records; a keep-alive carries nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokunseba import translate
from tokunseba.neutral import events as ev

STREAMS = Path(__file__).resolve().parents[1] / "data" / "streams"
PROTOCOL_OF = {"anthropic": "anthropic", "chat": "openai", "llamacpp": "openai", "ollama": "openai", "vllm": "openai",
               "responses": "openai-responses"}
RECORDED = sorted(p for p in STREAMS.glob("*.sse") if p.name.split("_")[0] in PROTOCOL_OF)


def test_the_stop_reasons_are_anthropics_names():
    assert ev.STOP_REASONS == {"end_turn", "max_tokens", "stop_sequence", "tool_use", "refusal", "pause_turn",
                               "model_context_window_exceeded"}


@pytest.mark.parametrize("path", RECORDED, ids=[p.stem for p in RECORDED])
def test_every_decoder_maps_its_stop_reasons_into_the_vocabulary(path):
    stops = stops_of(path)
    assert all(s is None or s in ev.STOP_REASONS for s in stops), stops


def stops_of(path: Path) -> list:
    upstream = PROTOCOL_OF[path.name.split("_")[0]]
    seen: list = []
    t = translate.stream(upstream, "openai" if upstream == "anthropic" else "anthropic")
    t.tap = seen.append
    t.feed(path.read_bytes())
    t.close()
    return [e.stop_reason for e in seen if isinstance(e, ev.MessageStop)]


def test_the_recordings_reach_the_common_stop_reasons():
    reached = {s for p in RECORDED for s in stops_of(p)}
    assert {"end_turn", "tool_use"} <= reached


def test_events_are_slotted_records_with_their_defaults():
    for cls in (ev.MessageStart, ev.BlockStart, ev.BlockDelta, ev.BlockSignature, ev.BlockStop, ev.MessageStop,
                ev.StreamError, ev.UsageUpdate, ev.KeepAlive):
        assert "__slots__" in vars(cls), cls
    b = ev.BlockStart(0, "text")
    assert (b.id, b.name, b.signature, b.raw) == (None, None, None, None)
    assert ev.MessageStop("end_turn") == ev.MessageStop("end_turn", None, None)
    assert ev.StreamError(502, "api_error", ev.NAMELESS_CALL).code is None


def test_a_keep_alive_carries_nothing():
    assert ev.KEEPALIVE == ev.KeepAlive() and not ev.KeepAlive.__slots__
