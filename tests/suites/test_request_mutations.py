"""Odd input never crashes a request translator: every subtree (up to the fourth item of
each list) of real client requests — the captured fixtures of Claude Code, Codex, Gemini CLI
and google-genai, and a Chat request made from one — replaced by an odd JSON value, one at
a time; ``translate.request`` to every other protocol either translates it or raises a
``TranslationError`` (a 400 in the client's protocol), never another exception (which
would be a 500 and a traceback). Complements test_request_properties' random bodies with
real shapes; it found a list where Gemini's functionCallingConfig.mode or maxOutputTokens
goes, and a list as Anthropic's output_config.effort."""

from __future__ import annotations

import json
from urllib.parse import urlparse

import pytest

from tokunseba import translate
from tokunseba.errors import TranslationError

from tests.conftest import load_fixture
from tests.support.mutations import ODD, PROTOCOLS, paths, replaced
CASES = [("anthropic", "claude-code-print-main-turn.json"), ("anthropic", "claude-code-title-haiku.json"),
         ("openai-responses", "codex-responses-gpt55-tool-followup.json"),
         ("gemini", "gemini-cli-tool-result-followup.json"), ("gemini", "google-genai-py-generate-content-tools.json")]


def _cases():
    for proto, name in CASES:
        fx = load_fixture(name)
        body = fx["body"] if isinstance(fx["body"], dict) else json.loads(fx["body"])
        yield proto, name, body, urlparse(fx["url"]).path
        if name == "claude-code-print-main-turn.json":  # a Chat client's request, as the translator makes one
            chat = translate.request("anthropic", "openai", body, max_tokens=4096).body
            yield "openai", "chat-from-claude-code", chat, "/v1/chat/completions"


@pytest.mark.parametrize("client,name,body,path", list(_cases()), ids=lambda v: v if isinstance(v, str) else None)
def test_every_subtree_replaced_by_an_odd_value_is_translated_or_refused(client, name, body, path):
    crashes = {}
    for where in list(paths(body))[1:]:
        for odd in ODD:
            mutated = replaced(body, where, odd)
            for target in PROTOCOLS:
                if target == client:
                    continue
                try:
                    translate.request(client, target, mutated, max_tokens=1024, path=path, endpoint="e")
                except TranslationError:
                    pass
                except Exception as e:  # noqa: BLE001 - the point of the test
                    crashes.setdefault(f"{type(e).__name__}: {e}", (target, where, odd))
    assert not crashes, crashes
