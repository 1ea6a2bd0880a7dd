"""Minimal Anthropic and Chat request bodies and the checked translations between them, shared by
the Anthropic request codec's tests (decode: Anthropic -> Chat; encode: Chat -> Anthropic)."""

from __future__ import annotations

import copy

from tokunseba import jsonc
from tokunseba.neutral.conversation import RequestTranslation

from tests.support.pairs import anthropic_to_chat, chat_to_anthropic


def A(**extra) -> dict:
    """A minimal Anthropic request plus ``extra``."""
    return {"model": "claude-x", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]} | extra


def C(**extra) -> dict:
    """A minimal Chat request plus ``extra``."""
    return {"model": "gpt-x", "max_completion_tokens": 100, "messages": [{"role": "user", "content": "hi"}]} | extra


def a2c(body: dict, **kw) -> RequestTranslation:
    before = copy.deepcopy(body)
    rt = anthropic_to_chat(body, **kw)
    assert body == before, "input mutated"
    jsonc.dumpb(rt.body)  # always serialisable
    return rt


def c2a(body: dict, **kw) -> RequestTranslation:
    before = copy.deepcopy(body)
    rt = chat_to_anthropic(body, **kw)
    assert body == before, "input mutated"
    jsonc.dumpb(rt.body)
    return rt


# ---------------------------------------------------------------------------------------
# Anthropic -> Chat, one case per mapping: (id, request, kwargs, expected messages or body
# subset, expected dropped, expected plumbing)
# ---------------------------------------------------------------------------------------

IMG64 = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
IMGURL = {"type": "image", "source": {"type": "url", "url": "https://x.test/a.png"}}
PDF64 = {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjQ="}}
TOOL = {"name": "get_weather", "description": "Weather.", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}
FN = {"type": "function", "function": {"name": "get_weather", "description": "Weather.", "parameters": TOOL["input_schema"]}}
ASSISTANT_TOOL_USE = {"role": "assistant", "content": [
    {"type": "text", "text": "Checking."},
    {"type": "tool_use", "id": "toolu_01A", "name": "get_weather", "input": {"city": "Paris", "n": [1, 2]}},
    {"type": "tool_use", "id": "toolu_01B", "name": "get_weather", "input": {}},
]}
CHAT_TOOL_CALLS = {"role": "assistant", "content": "Checking.", "tool_calls": [
    {"id": "toolu_01A", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris","n":[1,2]}'}},
    {"id": "toolu_01B", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}},
]}
