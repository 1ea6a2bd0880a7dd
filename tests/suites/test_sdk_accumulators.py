"""Translated streams go through the official SDKs' own stream accumulators, through a real
SDK client on an httpx MockTransport, and the final objects equal the whole-reply
translation (translate_reply) of the same reply (tests/data/streams/*.reply.json).

anthropic 2.x and openai 3.x take an ``httpx2.Client`` as ``http_client``."""

from __future__ import annotations

import json

import anthropic
import httpx2
import openai
import pytest

from tests.translate.openai_chat.test_stream import ANTHROPIC_FIXTURES, CHAT_FIXTURES, STREAMS, reply_json, translate
from tokunseba.translate import reply as translate_reply

WITH_REPLY = {p.name.replace(".reply.json", ".sse") for p in STREAMS.glob("*.reply.json")}
CHAT_OK = [n for n in CHAT_FIXTURES if n in WITH_REPLY]
ANTHROPIC_OK = [n for n in ANTHROPIC_FIXTURES if n in WITH_REPLY]


def _http(body: bytes, seen: list[dict]) -> httpx2.Client:
    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(json.loads(request.content))
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    return httpx2.Client(transport=httpx2.MockTransport(handler))


def anthropic_final(body: bytes):
    seen: list[dict] = []
    client = anthropic.Anthropic(api_key="x", base_url="http://127.0.0.1:9", http_client=_http(body, seen), max_retries=0)
    with client.messages.stream(model="m", max_tokens=64, messages=[{"role": "user", "content": "hi"}]) as s:
        final = s.get_final_message()
    assert seen and seen[0]["stream"] is True
    return final


def openai_final(body: bytes):
    seen: list[dict] = []
    client = openai.OpenAI(api_key="x", base_url="http://127.0.0.1:9/v1", http_client=_http(body, seen), max_retries=0)
    with client.chat.completions.stream(model="m", messages=[{"role": "user", "content": "hi"}]) as s:
        try:
            final = s.get_final_completion()
        except openai.LengthFinishReasonError as e:  # the helper raises on "length", as it does for OpenAI
            final = e.completion
    assert seen and seen[0]["stream"] is True
    return final


def _anthropic_view(msg: dict) -> dict:
    """The comparable part of an Anthropic message (nulls the SDK adds removed)."""
    blocks = []
    for b in msg["content"]:
        b = {k: v for k, v in b.items() if v is not None}
        blocks.append(b)
    return {"id": msg["id"], "model": msg["model"], "role": msg["role"], "content": blocks,
            "stop_reason": msg["stop_reason"], "stop_sequence": msg.get("stop_sequence"),
            "usage": {k: v for k, v in (msg.get("usage") or {}).items() if v is not None}}


def _chat_view(c: dict) -> dict:
    m = c["choices"][0]["message"]
    calls = [(tc["id"], tc["type"], tc["function"]["name"], json.loads(tc["function"]["arguments"] or "{}"))
             for tc in m.get("tool_calls") or []]
    usage = c.get("usage")
    return {"id": c["id"], "model": c["model"], "content": m.get("content") or "", "tool_calls": calls,
            "finish_reason": c["choices"][0]["finish_reason"],
            "usage": None if usage is None else _strip_nulls(usage)}


def _strip_nulls(d):
    if isinstance(d, dict):
        return {k: _strip_nulls(v) for k, v in d.items() if v is not None}
    return d


@pytest.mark.parametrize("name", CHAT_OK)
def test_anthropic_sdk_accumulates_translated_chat_stream(name):
    out, t = translate(name)
    final = anthropic_final(out).model_dump(mode="json")
    rep = translate_reply("openai", "anthropic", reply_json(name))
    assert _anthropic_view(final) == _anthropic_view(json.loads(rep.body))
    assert t.report.stop_reason == rep.stop_reason
    assert t.client_usage == rep.client_usage
    assert t.report.usage == rep.usage
    assert [p.replace(".delta.", ".message.") for p in t.report.dropped] == rep.dropped


@pytest.mark.parametrize("name", ANTHROPIC_OK)
@pytest.mark.parametrize("include_usage", [True, False])
def test_openai_sdk_accumulates_translated_anthropic_stream(name, include_usage):
    out, t = translate(name, include_usage=include_usage)
    final = openai_final(out).model_dump(mode="json")
    rep = translate_reply("anthropic", "openai", reply_json(name), created=1)
    expected = _chat_view(json.loads(rep.body))
    if not include_usage:
        expected["usage"] = None  # the client did not ask for usage in the stream
    assert _chat_view(final) == expected
    assert t.report.stop_reason == rep.stop_reason
    assert t.client_usage == rep.client_usage
    assert sorted(t.report.dropped) == sorted(rep.dropped)


def test_anthropic_sdk_sees_tool_id_and_input_exactly():
    out, _ = translate("chat_validated_parallel_tools.sse")
    final = anthropic_final(out)
    tools = [b for b in final.content if b.type == "tool_use"]
    assert [(b.id, b.name, b.input) for b in tools] == [("call_pQ0bLh1E9vRZ", "get_weather", {"city": "Paris"}),
                                                        ("call_Yz7mW4kTfN2c", "get_weather", {"city": "Oslo"})]
    assert final.usage.input_tokens == 562 and final.usage.cache_read_input_tokens == 2048


def test_anthropic_sdk_with_no_upstream_usage_gets_no_numbers():
    """usage {} in message_start and message_delta: the helper works, and reports nothing
    rather than zeros (docs/dev/architecture.md rule 3)."""
    out, _ = translate("llamacpp_py_text.sse")
    final = anthropic_final(out)
    assert final.usage.input_tokens is None and final.usage.output_tokens is None
    assert final.content[0].text == "Say hello. mendatanguser\n"


def test_openai_sdk_does_not_concatenate_repeated_ids():
    """llama_cpp.server repeats id and name in every delta; what reaches a Chat client after a
    round trip through Anthropic carries them once (docs/dev/pitfalls.md 5)."""
    anth, _ = translate("llamacpp_py_tool.sse")
    back, _ = translate(anth, "anthropic", "openai")
    final = openai_final(back)
    tc = final.choices[0].message.tool_calls[0]
    assert tc.id == "call__0_get_weather_cmpl-9f6e47d6-a94e-4d05-a0e0-ea413a804ace"
    assert tc.function.name == "get_weather"
    assert json.loads(tc.function.arguments) == {"location": "Paris", "unit": "celsius"}


def test_anthropic_sdk_raises_on_translated_error_event():
    out, _ = translate("chat_error_midstream.sse")
    with pytest.raises(anthropic.APIStatusError) as exc:
        anthropic_final(out)
    assert "Sorry about that" in str(exc.value)


def test_openai_sdk_raises_on_translated_error_chunk():
    out, _ = translate("anthropic_error_midstream.sse")
    with pytest.raises(openai.APIError) as exc:
        openai_final(out)
    assert "Overloaded" in str(exc.value)
