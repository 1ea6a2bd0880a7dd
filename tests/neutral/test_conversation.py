"""A request in neutral form (neutral/conversation.py): a decoded ``Conversation`` maps each neutral
part's path back to the client's own path — messages, tool calls, tools, the longest recorded
prefix — so an encoder's drops and refusals are named in the client's paths; identity for a client
that speaks the neutral vocabulary itself."""

from __future__ import annotations

import pytest

from tokunseba import translate
from tokunseba.errors import Refused
from tokunseba.neutral.conversation import Capped, Conversation, RequestTranslation


def decoded() -> Conversation:
    """A Responses-like client: its input items became neutral messages in another order."""
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    sys_msg = {"role": "system", "content": "S"}
    user = {"role": "user", "content": "hi"}
    asst = {"role": "assistant", "content": None, "tool_calls": [call]}
    tool = {"type": "function", "function": {"name": "f"}}
    c = Conversation({"model": "m", "messages": [sys_msg, user, asst], "tools": [tool]})
    c.source(sys_msg, "instructions")
    c.source(user, "input[0]")
    c.source(asst, "input[1]")
    c.source(call, "input[1]")
    c.source(tool, "tools[3]")
    c.finish_origin()
    return c


def test_neutral_paths_map_to_the_clients():
    c = decoded()
    assert c.client_path("messages[0]") == "instructions"
    assert c.client_path("messages[1].content[0].image_url") == "input[0].content[0].image_url"  # longest prefix
    assert c.client_path("messages[2].tool_calls[0].function.arguments") == "input[1].function.arguments"
    assert c.client_path("tools[0].function.name") == "tools[3].function.name"
    assert c.client_path("max_completion_tokens") == "max_completion_tokens"  # nothing recorded: as it is


def test_an_encoders_message_is_said_in_the_clients_path():
    c = decoded()
    assert c.client_message("messages[2].tool_calls[0].id: refused (bad id)") == "input[1].id: refused (bad id)"
    assert c.client_message("tools[0] -> dropped") == "tools[3] -> dropped"
    assert c.client_message("no path here") == "no path here"


def test_a_replaced_part_keeps_its_clients_path():
    c = Conversation({"model": "m", "messages": []})
    old = {"role": "user", "content": "x"}
    c.source(old, "contents[4]")
    new = c.replace_part(old, {"role": "user", "content": "x (restored)"})
    c.body["messages"].append(new)
    c.finish_origin()
    assert c.source_path(new) == "contents[4]" and c.client_path("messages[0].content") == "contents[4].content"
    assert c.replace_part({"x": 1}, {"y": 2}) == {"y": 2}  # a part never recorded: nothing carried


def test_a_client_in_the_neutral_vocabulary_keeps_its_paths():
    c = Conversation({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    c.finish_origin()
    assert c.client_path("messages[0].content") == "messages[0].content"
    assert c.client_message("messages[0].content: bad") == "messages[0].content: bad"


def test_a_translation_records_its_report_apart_per_request():
    a, b = RequestTranslation({}), RequestTranslation({})
    a.dropped.append("x")
    assert b.dropped == [] and b.client_wants_usage and b.capped is None
    assert Capped(asked=None, cap=512) == Capped(None, 512)


def test_a_real_decode_names_a_refusal_in_the_clients_path():
    """Through the codecs: a Responses client's bad call id is refused in its own path."""
    body = {"model": "m", "input": [{"type": "message", "role": "user", "content": "go"},
                                    {"type": "function_call", "call_id": "bad id", "name": "f", "arguments": "{}"},
                                    {"type": "function_call_output", "call_id": "bad id", "output": "x"}]}
    with pytest.raises(Refused) as e:
        translate.request("openai-responses", "anthropic", body, max_tokens=10)
    assert e.value.message.startswith("input[1]"), e.value.message
