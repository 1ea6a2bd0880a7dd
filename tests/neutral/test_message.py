"""A whole reply in neutral form (neutral/message.py): its events collected — deltas joined per
block, signatures appended, the last usage reported kept, an error instead of a stop — and given
back as one event per part, so a whole reply and the same reply streamed are one thing."""

from __future__ import annotations

from tokunseba.neutral.events import (
    BlockDelta, BlockSignature, BlockStart, BlockStop, MessageStart, MessageStop, StreamError, UsageUpdate,
)
from tokunseba.neutral.message import Block, Message
from tokunseba.neutral.usage import Usage

START_USAGE = Usage("anthropic", {"input_tokens": 9, "output_tokens": 1})
FINAL_USAGE = Usage("anthropic", {"input_tokens": 9, "output_tokens": 30})


def streamed() -> list:
    return [MessageStart("msg_1", "claude-x", START_USAGE),
            BlockStart(0, "thinking"), BlockDelta(0, "let me "), BlockDelta(0, "see"), BlockSignature(0, "sig"),
            BlockSignature(0, "ned"), BlockStop(0),
            BlockStart(1, "text"), BlockDelta(1, "Hi"), BlockStop(1),
            BlockStart(2, "tool_use", id="toolu_1", name="Read"), BlockDelta(2, '{"p":'), BlockDelta(2, '"a"}'),
            BlockStop(2), BlockDelta(7, "to no block"),
            MessageStop("tool_use", None, FINAL_USAGE)]


def test_collect_joins_each_blocks_parts():
    m = Message.collect(streamed())
    assert (m.id, m.model, m.stop_reason, m.stopped, m.error) == ("msg_1", "claude-x", "tool_use", True, None)
    assert m.blocks == [Block("thinking", text="let me see", signature="signed"), Block("text", text="Hi"),
                        Block("tool_use", "toolu_1", "Read", '{"p":"a"}')]
    assert m.usage is FINAL_USAGE  # the final, cumulative usage as reported


def test_usage_reported_after_the_stop_wins():
    late = Usage("openai", {"prompt_tokens": 3, "completion_tokens": 1})
    m = Message.collect([MessageStart("c1", "m"), MessageStop("end_turn"), UsageUpdate(late)])
    assert m.usage is late and m.stopped


def test_an_error_instead_of_a_stop():
    err = StreamError(500, "api_error", "upstream ended the stream early")
    m = Message.collect([MessageStart("m1", "x"), BlockStart(0, "text"), BlockDelta(0, "par"), err])
    assert m.error is err and not m.stopped and m.stop_reason is None
    assert m.events()[-1] is err


def test_events_give_the_message_back_one_event_per_part():
    m = Message.collect(streamed())
    evs = m.events()
    assert [type(e).__name__ for e in evs] == ["MessageStart", "BlockStart", "BlockDelta", "BlockStop", "BlockStart",
                                               "BlockDelta", "BlockStop", "BlockStart", "BlockDelta", "BlockStop",
                                               "MessageStop"]
    assert evs[1] == BlockStart(0, "thinking", None, None, "signed", None)
    again = Message.collect(evs)
    assert again.blocks == m.blocks and again.stop_reason == m.stop_reason and again.usage is m.usage


def test_an_empty_block_has_no_delta():
    evs = Message(blocks=[Block("text")], stop_reason="end_turn").events()
    assert [type(e).__name__ for e in evs] == ["MessageStart", "BlockStart", "BlockStop", "MessageStop"]
