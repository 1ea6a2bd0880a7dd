"""Which turns a shadow (or a replay) can take (routing/shadowable.py): the whole-reply turn kind of
the client's protocol; never a token count; never a protocol whose model travels in the URL
(Gemini), neither as the shadowed client nor as the shadow's target."""

from __future__ import annotations

import pytest

from tokunseba import protocols
from tokunseba.routing.shadowable import shadow_kind, shadow_refusal, shadowable, target_kind


@pytest.mark.parametrize("client", ["anthropic", "openai", "openai-responses"])
def test_a_turn_is_shadowed_as_its_protocols_whole_reply_kind(client):
    kind = protocols.get(client).turn_kind(False)
    assert shadow_kind(client) == target_kind(client) == kind
    assert shadowable(client, kind)
    assert not shadowable(client, "")  # a request of no kind
    assert not shadowable(client, "models")


def test_token_counts_are_never_shadowed():
    assert not shadowable("anthropic", "count_tokens")


def test_gemini_is_neither_shadowed_nor_a_target_yet():
    assert protocols.get("gemini").model_in_path
    assert shadow_kind("gemini") is None and target_kind("gemini") is None
    assert shadow_refusal("gemini", "openai") == "gemini turns are not shadowed or replayed yet"
    assert shadow_refusal("anthropic", "gemini") == ("shadows and replays to gemini endpoints are not built yet "
                                                     "(the model travels in the URL)")


def test_an_unknown_protocol_is_not_shadowed():
    assert shadow_kind("smoke-signals") is None and not shadowable("smoke-signals", "chat")
    assert shadow_refusal("smoke-signals", "openai") == "smoke-signals turns are not shadowed or replayed yet"


def test_every_pair_of_the_other_three_is_up_to_the_translators():
    for client in ("anthropic", "openai", "openai-responses"):
        for target in ("anthropic", "openai", "openai-responses"):
            assert shadow_refusal(client, target) is None
