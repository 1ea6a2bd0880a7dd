"""Pair-named shorthands over the public API (``tokunseba.translate``) for the tests that
were written per pair; every call goes through the registry like the product's."""

from __future__ import annotations

from tokunseba import translate
from tokunseba.neutral.conversation import RequestTranslation


def anthropic_to_chat(body, *, model=None, system_role="system", max_tokens_field="max_completion_tokens",
                      max_tokens_cap=None) -> RequestTranslation:
    return translate.request("anthropic", "openai", body, model=model, system_role=system_role,
                             max_tokens_field=max_tokens_field, max_tokens=max_tokens_cap)


def chat_to_anthropic(body, *, model=None, default_max_tokens=None) -> RequestTranslation:
    return translate.request("openai", "anthropic", body, model=model, max_tokens=default_max_tokens)


def responses_to_chat(body, *, model=None, system_role="system", max_tokens_field="max_completion_tokens",
                      max_tokens_cap=None) -> RequestTranslation:
    return translate.request("openai-responses", "openai", body, model=model, system_role=system_role,
                             max_tokens_field=max_tokens_field, max_tokens=max_tokens_cap)
