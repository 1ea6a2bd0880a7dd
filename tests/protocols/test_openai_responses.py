"""OpenAI Responses' protocol facts (protocols/openai_responses.py): the login a turn is sent with,
read from the host and headers; a namespaced tool's flat name elsewhere; every neutral stop reason
with its response status; the cap answer Codex reads as final; the mid-stream error event; the
reasoning items kept as the endpoint made them."""

from __future__ import annotations

import json

import pytest

from tokunseba import protocols
from tokunseba.neutral.events import STOP_REASONS
from tokunseba.neutral.message import Block
from tokunseba.protocols import openai_responses as resp
from tokunseba.sse import SSEDecoder


# ---------------------------------------------------------------- the login fact


@pytest.mark.parametrize("backend,headers,want", [
    ("chatgpt.com", {}, "chatgpt"),  # the ChatGPT backend's host says it
    (None, {"chatgpt-account-id": "acct-1"}, "chatgpt"),  # a ChatGPT account named elsewhere (a base URL)
    (None, {"authorization": "Bearer sk-x"}, "api_key"),
    (None, {"chatgpt-account-id": ""}, "api_key"),
])
def test_the_login_is_read_from_the_host_and_headers(backend, headers, want):
    assert resp.login_of(backend, headers)[0] == want
    assert set(resp.LOGINS) == {"chatgpt", "api_key"} and protocols.get(resp.PROTOCOL).login is resp.login_of


def test_a_namespaced_tools_flat_name():
    assert resp.flat_tool_name(None, "exec") == resp.flat_tool_name("functions", "exec") == "exec"
    assert resp.flat_tool_name("clock", "sleep") == "clock__sleep"
    assert resp.flat_tool_name("mcp__notes__", "read") == "mcp__notes__read"  # MCP's own join, not twice


def test_every_neutral_stop_reason_has_a_response_status():
    assert set(resp.STOP_TO_STATUS) == STOP_REASONS
    for stop, (status, reason) in resp.STOP_TO_STATUS.items():
        assert status in ("completed", "incomplete") and (reason is None) == (status == "completed"), stop
    assert set(resp.INCOMPLETE_TO_STOP.values()) <= STOP_REASONS
    assert resp.CODEX_ERROR_CODES <= set(resp.CODE_STATUS)


def test_a_reached_cap_is_the_usage_limit_error_codex_reads_as_final():
    status, headers, body = resp.stop_now("budget five spent", reset_in_s=30.2, reset_at=1_800_000_000.5)
    err = json.loads(body)["error"]
    assert status == 429 and headers["x-should-retry"] == "false" and headers["retry-after"] == "61"
    assert (err["type"], err["code"], err["message"]) == ("usage_limit_reached", "usage_limit_reached",
                                                         "budget five spent")
    assert (err["resets_at"], err["resets_in_seconds"]) == (1_800_000_001, 31)


def test_a_mid_stream_error_event():
    (ev,) = SSEDecoder().feed(resp.sse_error("server_error", "boom"))
    assert ev.event == "error"
    assert json.loads(ev.data) == {"type": "error", "code": "server_error", "message": "boom", "param": None}


def test_reasoning_items_kept_as_the_endpoint_made_them():
    item = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA", "status": "done"}
    blocks = [Block("thinking", raw={"item": item}), Block("text", text="hi"),
              Block("thinking", raw={"item": {"type": "reasoning"}})]  # no id: not kept
    assert resp.state_payload(blocks) == {"items": [{"type": "reasoning", "id": "rs_1", "summary": [],
                                                     "encrypted_content": "gAAA"}]}
    assert resp.state_payload([Block("text", text="x")]) is None
