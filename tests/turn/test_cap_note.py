"""The console line when the endpoint's own cap ended a reply (turn/cap_note.py), from what
the real Chat request codec records when it caps a client's max_tokens."""

from __future__ import annotations

import json

import pytest

from tokunseba import translate
from tokunseba.neutral.conversation import Capped
from tokunseba.turn.cap_note import cap_line

TURN = {"model": "claude-opus-4-8", "max_tokens": 64000, "messages": [{"role": "user", "content": "hi"}]}


def _capped(body: dict, cap: int | None, client: str = "anthropic", target: str = "openai") -> Capped | None:
    return translate.request(client, target, body, model="m", max_tokens=cap).capped


def test_the_endpoints_cap_ending_the_reply_is_said_with_both_numbers():
    line = cap_line(request_id="tk-1", endpoint="local", capped=_capped(TURN, 512), details={"stop_reason": "max_tokens"})
    assert line == ("tokunseba: tk-1 the reply was cut by endpoint local's cap (max_tokens 512; the client asked "
                    "for 64000), not by the client's own limit: its client may send continuation turns. Give the "
                    "endpoint stop strings that end its turns, or raise its max_tokens")


def test_no_line_when_the_reply_ended_otherwise_or_the_cap_was_the_clients():
    capped = _capped(TURN, 512)
    assert cap_line(request_id="tk-1", endpoint="local", capped=capped, details={"stop_reason": "end_turn"}) is None
    small = {**TURN, "max_tokens": 100}  # under the cap: the client's own limit ended it
    assert _capped(small, 512) is None and _capped(TURN, None) is None
    assert cap_line(request_id="tk-1", endpoint="local", capped=None, details={"stop_reason": "max_tokens"}) is None


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
    assert node == 256 and ".".join(path) in rt.plumbing and rt.capped is None
    if target != "anthropic":  # which requires one: without the endpoint's, the turn is refused (tested elsewhere)
        bare = translate.request(client, target, body, model="m")  # no endpoint limit: nothing sent
        assert ".".join(path) not in bare.plumbing and path[-1] not in json.dumps(bare.body)
