"""Replay (shadow/replay.py): a recorded turn re-sent now to an endpoint on loopback, through the same
translators as a routed turn (non-streamed, the endpoint's own key), its reply translated into the
client's protocol and recorded as a ``replay`` row with usage as the endpoint reported it and the
comparison with the recorded reply; a turn without a stored body, or one the endpoint's protocol
cannot carry, is a one-line ``ReplayError``; an endpoint that does not answer is recorded, not raised."""

from __future__ import annotations

import json

import pytest

from tokunseba.ledger import Ledger
from tokunseba.routing import load_rules_text
from tokunseba.shadow.replay import ReplayError, replay

from tests.support.upstream import Reply, Upstream, closed_port

ENV = {"LOCAL_KEY": "sk-local-endpoint-key"}
REQUEST = {"model": "claude-haiku-4-5", "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]}
RECORDED = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-haiku-4-5",
            "content": [{"type": "text", "text": "hello"}], "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 8, "output_tokens": 2}}
CHAT_REPLY = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "qwen3",
              "choices": [{"index": 0, "message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}],
              "usage": {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10}}


def endpoint(port: int):
    rules = load_rules_text(f"endpoints:\n  local: {{protocol: openai, url: 'http://127.0.0.1:{port}/v1', "
                            "key_env: LOCAL_KEY, model: qwen3}\nroutes: []\n")
    return rules.endpoints["local"]


def recorded_turn(ledger: Ledger, rid: str = "tk-1", body: dict | None = REQUEST) -> dict:
    ledger.start_turn(rid, started_at=1.0, client_protocol="anthropic", host="api.anthropic.com",
                      path="/v1/messages", requested_model="claude-haiku-4-5", stream=False)
    ledger.update_turn(rid, outcome="pass_through", status=200,
                       **({"request_body": json.dumps(body).encode(),
                           "response_body": json.dumps(RECORDED).encode()} if body else {}))
    return ledger.get_turn(rid)


def test_a_recorded_turn_is_replayed_translated_and_recorded(tmp_path):
    with Upstream() as up, Ledger(tmp_path / "l.db", store_bodies=True) as led:
        up.script(Reply.json(CHAT_REPLY))
        done = replay(led, recorded_turn(led), endpoint(up.port), ENV, timeout=10)
        (row,) = led.shadows(request_id="tk-1")
    sent = up.requests[-1]
    assert sent.path == "/v1/chat/completions" and sent.headers["authorization"] == "Bearer sk-local-endpoint-key"
    assert sent.json()["model"] == "qwen3" and sent.json().get("stream") in (None, False)
    assert done.client_status == 200 and json.loads(done.client_body)["content"][0]["text"] == "hello"
    assert done.row["kind"] == "replay" and done.row["usage_reported"] == CHAT_REPLY["usage"]
    assert done.row["comparison"]["compared"] and done.row["endpoint"] == "local" and not done.row["at_original"]
    assert row["kind"] == "replay" and row["usage_input"] == 9 and row["status"] == 200


def test_a_turn_without_a_stored_body_is_one_line(tmp_path):
    with Ledger(tmp_path / "l.db") as led:
        turn = recorded_turn(led, body=None)
        with pytest.raises(ReplayError) as e:
            replay(led, turn, endpoint(9), ENV, timeout=1)
    assert str(e.value).startswith("turn tk-1 has no stored request body: replay needs turns recorded with")
    assert "\n" not in str(e.value)


def test_a_turn_the_endpoint_cannot_carry_is_one_line(tmp_path):
    bad = {**REQUEST, "messages": [{"role": "user", "content": [{"type": "tool_result", "content": "x"}]}]}
    with Ledger(tmp_path / "l.db", store_bodies=True) as led:
        with pytest.raises(ReplayError, match=r"^cannot replay turn tk-1 to local: messages\[0\]\.content\[0\]"):
            replay(led, recorded_turn(led, body=bad), endpoint(9), ENV, timeout=1)


def test_an_endpoint_that_does_not_answer_is_recorded_not_raised(tmp_path):
    with Ledger(tmp_path / "l.db", store_bodies=True) as led:
        done = replay(led, recorded_turn(led), endpoint(closed_port()), ENV, timeout=5)
        (row,) = led.shadows(request_id="tk-1")
    assert done.client_status == 502 and done.client_body == b"" and done.row["status"] is None
    assert done.row["error"].startswith("ConnectError") and row["error"] == done.row["error"]
