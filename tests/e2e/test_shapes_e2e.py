"""Shape checks through a real mitmdump: a routed turn answered in the other shape than the
client asked for (a stream for a whole request, whole JSON for a stream request) reaches the
official SDK as an error in its own protocol, never as an AttributeError or a silent empty
stream, and is recorded as an error; the next turn works."""

from __future__ import annotations

import anthropic
import openai
import pytest

from .test_crash_e2e import ant_text_stream
from .test_ledger_truth_e2e import finished_row
from .test_proxy_e2e import ant_client, chat_reply, chat_text_stream, oai_client
from tests.support.upstream import Reply

pytestmark = pytest.mark.e2e

ANT_REPLY = {"id": "msg_shape", "type": "message", "role": "assistant", "model": "m",
             "content": [{"type": "text", "text": "whole"}], "stop_reason": "end_turn", "stop_sequence": None,
             "usage": {"input_tokens": 1, "output_tokens": 1}}
HI = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("model,upstream", [("claude-shape", "oai"), ("retarget-shape", "ant")])
def test_a_stream_where_a_whole_reply_was_due(client_env, upstreams, model, upstream):
    up = upstreams[upstream]
    up.script(Reply.sse(chat_text_stream("chatcmpl-shape") if upstream == "oai" else ant_text_stream(2)))
    with pytest.raises(anthropic.APIStatusError) as ei:
        ant_client().messages.create(model=model, max_tokens=10, messages=HI)
    assert ei.value.status_code == 502
    assert ei.value.body["error"]["message"] == "tokunseba: upstream sent a stream where a whole reply was due"
    row = finished_row(client_env, ei.value.response.headers["x-tokunseba-request-id"])
    assert row["outcome"] == "error" and row["status"] == 502


@pytest.mark.parametrize("model,upstream", [("claude-shape", "oai"), ("retarget-shape", "ant")])
def test_whole_json_where_a_stream_was_due(client_env, upstreams, model, upstream):
    up = upstreams[upstream]
    up.script(Reply.json(chat_reply("chatcmpl-shape-w") if upstream == "oai" else ANT_REPLY))
    with pytest.raises(anthropic.APIStatusError) as ei:
        with ant_client().messages.stream(model=model, max_tokens=10, messages=HI) as s:
            s.get_final_message()
    assert ei.value.status_code == 502 and "where a stream was due" in ei.value.body["error"]["message"]
    row = finished_row(client_env, ei.value.response.headers["x-tokunseba-request-id"])
    assert row["outcome"] == "error" and "where a stream was due" in row["error"]
    up.script(Reply.sse(chat_text_stream("chatcmpl-next") if upstream == "oai" else ant_text_stream(2)))
    with ant_client().messages.stream(model=model, max_tokens=10, messages=HI) as s:
        assert s.get_final_message().stop_reason == "end_turn"


def test_openai_stream_answered_whole_is_an_openai_error(client_env, upstreams):
    """The openai SDK's iterator would have ended silently with no text: now it raises."""
    upstreams["ant"].script(Reply.json(ANT_REPLY))
    with pytest.raises(openai.APIStatusError) as ei:
        for _ in oai_client().chat.completions.create(model="gpt-shape", messages=HI, stream=True):
            pass
    assert ei.value.status_code == 502 and "where a stream was due" in ei.value.body["message"]
