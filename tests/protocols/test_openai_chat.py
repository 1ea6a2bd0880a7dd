"""OpenAI Chat Completions' protocol facts (protocols/openai_chat.py): its error body by status and
the SSE error chunk (docs/dev/protocols.md B.6)."""

from __future__ import annotations

import json

from tokunseba.protocols import openai_chat as po


def test_openai_error_body_and_sse_event():
    assert json.loads(po.error_body(400, "bad", code="context_length_exceeded")) == {
        "error": {"message": "bad", "type": "invalid_request_error", "param": None, "code": "context_length_exceeded"}}
    assert json.loads(po.error_body(429, "slow"))["error"]["code"] == "rate_limit_exceeded"
    assert json.loads(po.error_body(500, "boom"))["error"]["type"] == "server_error"
    raw = po.sse_error("server_error", "boom")
    assert raw == b'data: {"error":{"message":"boom","type":"server_error","param":null,"code":null}}\n\n'
