"""A reply the endpoint's own cap ended (issue 41): what the real request codecs record when
they cap a client's limit or send the endpoint's where it named none (``Capped``); what the
client is told (neutral/endpoint_cap.py: ``end_turn``, the conversion recorded, the endpoint's
``max_tokens`` kept for the ledger), through the real stream and whole-reply translators of
every client protocol; and the console line and mitmweb headline that say it (turn/cap_note.py,
webview/view.py)."""

from __future__ import annotations

import json

import pytest

from tokunseba import translate
from tokunseba.neutral.conversation import Capped
from tokunseba.turn.cap_note import cap_line, cap_note, cut_by_cap
from tokunseba.webview.view import final_mark, headline

TURN = {"model": "claude-opus-4-8", "max_tokens": 64000, "messages": [{"role": "user", "content": "hi"}]}


def _capped(body: dict, cap: int | None, client: str = "anthropic", target: str = "openai") -> Capped | None:
    return translate.request(client, target, body, model="m", max_tokens=cap).capped


CONVERTED = ["stop_reason max_tokens -> end_turn (the endpoint's cap, max_tokens 512, ended the reply; the client "
             "asked for 64000)"]


def test_the_endpoints_cap_ending_the_reply_is_said_with_both_numbers():
    capped = _capped(TURN, 512)
    line = cap_line(request_id="tk-1", endpoint="local", capped=capped,
                    details={"stop_reason": "max_tokens", "converted": CONVERTED})
    assert line == ("tokunseba: tk-1 the reply was cut by endpoint local's cap (max_tokens 512; the client asked "
                    "for 64000), not by the client's own limit: the client was told end_turn. Give the endpoint stop "
                    "strings that end its turns, or raise its max_tokens")
    # a cut tool call is told as it is (not converted): the line says what that may bring
    told_as_is = cap_line(request_id="tk-1", endpoint="local", capped=capped, details={"stop_reason": "max_tokens"})
    assert told_as_is is not None and "the client was told max_tokens (a tool call was cut) and may send " \
        "continuation turns" in told_as_is
    assert cut_by_cap(capped, {"stop_reason": "max_tokens"})
    assert cap_note(endpoint="local", capped=capped, details={"stop_reason": "max_tokens"}) == \
        "cut by endpoint local's cap (max_tokens 512; the client asked for 64000)"


def test_no_line_when_the_reply_ended_otherwise_or_the_cap_was_the_clients():
    capped = _capped(TURN, 512)
    assert cap_line(request_id="tk-1", endpoint="local", capped=capped, details={"stop_reason": "end_turn"}) is None
    small = {**TURN, "max_tokens": 100}  # under the cap: the client's own limit ended it
    assert _capped(small, 512) is None and _capped(TURN, None) is None
    assert cap_line(request_id="tk-1", endpoint="local", capped=None, details={"stop_reason": "max_tokens"}) is None
    assert not cut_by_cap(None, {"stop_reason": "max_tokens"}) and not cut_by_cap(capped, {"stop_reason": "end_turn"})


@pytest.mark.parametrize(("target", "client", "body"), [
    ("openai", "anthropic", TURN),
    ("openai-responses", "anthropic", TURN),
    ("gemini", "anthropic", TURN),
    ("openai", "openai-responses", {"model": "gpt-5.5", "input": "hi", "max_output_tokens": 64000}),
    ("openai", "gemini", {"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
                          "generationConfig": {"maxOutputTokens": 64000}}),
])
def test_every_capping_codec_records_the_cap_typed_and_in_converted(target, client, body):
    """The typed record and the ledger's text say the same: what the client asked, the cap."""
    rt = translate.request(client, target, body, model="m", max_tokens=512)
    assert rt.capped == Capped(asked=64000, cap=512)
    assert any(c.endswith("(capped at 512)") for c in rt.converted), rt.converted


@pytest.mark.parametrize(("target", "path"), [
    ("openai", ("max_completion_tokens",)),
    ("openai-responses", ("max_output_tokens",)),
    ("gemini", ("generationConfig", "maxOutputTokens")),
    ("anthropic", ("max_tokens",)),
])
def test_a_client_that_names_no_limit_is_sent_the_endpoints(target, path):
    """Gemini CLI names no maxOutputTokens: a base model that does not stop then runs to the
    endpoint's max_tokens, not to the end of its context (issue 31's CI run: 8,588 tokens)."""
    client = "openai" if target != "openai" else "gemini"
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]} if client == "openai" else \
        {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    rt = translate.request(client, target, body, model="m", max_tokens=256)
    node = rt.body
    for key in path:
        node = node[key]
    # the endpoint's cap is the turn's limit: a reply that ends on it was cut by the endpoint, not the client
    assert node == 256 and ".".join(path) in rt.plumbing and rt.capped == Capped(asked=None, cap=256)
    if target != "anthropic":  # which requires one: without the endpoint's, the turn is refused (tested elsewhere)
        bare = translate.request(client, target, body, model="m")  # no endpoint limit: nothing sent
        assert ".".join(path) not in bare.plumbing and path[-1] not in json.dumps(bare.body)


def _chat_stream(finish: str, *, call: bool = False) -> bytes:
    """A Chat upstream's stream (as llama-server sends it) ending ``finish``, with a text or a
    tool call cut short."""
    def chunk(delta, fin=None, usage=None, choices=True):
        obj = {"id": "chatcmpl-cut", "object": "chat.completion.chunk", "created": 1767225600, "model": "gemma",
               "choices": [{"index": 0, "delta": delta, "finish_reason": fin}] if choices else []}
        if usage:
            obj["usage"] = usage
        return b"data: " + json.dumps(obj).encode() + b"\n\n"
    body = chunk({"role": "assistant", "content": ""})
    if call:
        body += chunk({"tool_calls": [{"index": 0, "id": "call_cut1", "type": "function",
                                       "function": {"name": "Bash", "arguments": '{"command": "ls -'}}]})
    else:
        body += chunk({"content": "one two three four"})
    usage = {"prompt_tokens": 20, "completion_tokens": 512, "total_tokens": 532}
    return body + chunk({}, finish) + chunk({}, usage=usage, choices=False) + b"data: [DONE]\n\n"


CHAT_WHOLE = {"id": "chatcmpl-cut", "object": "chat.completion", "created": 1767225600, "model": "gemma",
              "choices": [{"index": 0, "message": {"role": "assistant", "content": "one two three four"},
                           "finish_reason": "length"}],
              "usage": {"prompt_tokens": 20, "completion_tokens": 512, "total_tokens": 532}}

# each client protocol's own words for "the turn ended" and "the output limit cut it"
ENDED = {"anthropic": b'"stop_reason":"end_turn"', "openai": b'"finish_reason":"stop"',
         "openai-responses": b'"status":"completed"', "gemini": b'"finishReason":"STOP"'}
CUT = {"anthropic": b'"stop_reason":"max_tokens"', "openai": b'"finish_reason":"length"',
       "openai-responses": b'"max_output_tokens"', "gemini": b'"finishReason":"MAX_TOKENS"'}


def _squeezed(data: bytes) -> bytes:
    return data.replace(b'": "', b'":"').replace(b'", "', b'","')


@pytest.mark.parametrize("client", ["anthropic", "openai-responses", "gemini"])
def test_a_stream_the_endpoints_cap_ended_is_told_end_turn_and_recorded(client):
    capped = Capped(asked=64000, cap=512)
    t = translate.stream("openai", client, capped=capped)
    out = _squeezed(t.feed(_chat_stream("length")) + t.close())
    assert ENDED[client] in out and CUT[client] not in out, out[-600:]
    assert t.report.stop_reason == "max_tokens" and t.report.completed  # the ledger keeps the endpoint's own
    assert t.report.converted == CONVERTED
    # the same reply without the endpoint's cap in place of the client's limit: told as it is
    plain = translate.stream("openai", client)
    out = _squeezed(plain.feed(_chat_stream("length")) + plain.close())
    assert CUT[client] in out and plain.report.converted == [] and plain.report.stop_reason == "max_tokens"


def test_a_cut_tool_call_is_told_max_tokens_never_end_turn():
    """Its arguments may be the part the cap cut: the client must not run it as if it were whole."""
    t = translate.stream("openai", "anthropic", capped=Capped(asked=64000, cap=512))
    out = _squeezed(t.feed(_chat_stream("length", call=True)) + t.close())
    assert CUT["anthropic"] in out and b"end_turn" not in out and t.report.converted == []


def test_a_reply_that_ended_on_its_own_is_untouched():
    t = translate.stream("openai", "anthropic", capped=Capped(asked=64000, cap=512))
    out = _squeezed(t.feed(_chat_stream("stop")) + t.close())
    assert ENDED["anthropic"] in out and t.report.stop_reason == "end_turn" and t.report.converted == []


@pytest.mark.parametrize("client", ["anthropic", "openai-responses", "gemini"])
def test_a_whole_reply_the_endpoints_cap_ended_is_told_end_turn_and_recorded(client):
    capped = Capped(asked=None, cap=512)  # the client named no limit: the endpoint's was the turn's
    rep = translate.reply("openai", client, json.dumps(CHAT_WHOLE).encode(), created=1, capped=capped)
    out = _squeezed(rep.body)
    assert ENDED[client] in out and CUT[client] not in out, out
    assert rep.stop_reason == "max_tokens" and rep.message.stop_reason == "max_tokens"
    assert rep.converted == ["stop_reason max_tokens -> end_turn (the endpoint's cap, max_tokens 512, ended the "
                             "reply; the client named no limit)"]
    plain = translate.reply("openai", client, json.dumps(CHAT_WHOLE).encode(), created=1)
    assert CUT[client] in _squeezed(plain.body) and plain.converted == []


def test_mitmweb_marks_a_capped_turn_and_says_why():
    note = cap_note(endpoint="local", capped=Capped(asked=64000, cap=512), details={"stop_reason": "max_tokens"})
    assert final_mark("capped") == ":scissors:" != final_mark("translated")
    assert headline("capped", 200, note=note) == \
        "✂️ capped 200: cut by endpoint local's cap (max_tokens 512; the client asked for 64000)"
    assert headline("translated", 200) == "🔁 translated 200"
