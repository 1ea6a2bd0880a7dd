"""Anthropic Messages' protocol facts (protocols/anthropic.py): its error types by HTTP status and
back, its error body and the SSE error event (docs/dev/protocols.md A.7)."""

from __future__ import annotations

import json

import pytest

from tokunseba.protocols import anthropic as pa
from tokunseba.sse import SSEDecoder


# ---- the protocol tables ----


@pytest.mark.parametrize("status,etype", [
    (400, "invalid_request_error"), (401, "authentication_error"), (402, "billing_error"),
    (403, "permission_error"), (404, "not_found_error"), (409, "conflict_error"), (413, "request_too_large"),
    (429, "rate_limit_error"), (500, "api_error"), (503, "overloaded_error"), (504, "timeout_error"),
    (529, "overloaded_error"), (422, "invalid_request_error"), (418, "invalid_request_error"), (502, "api_error")])
def test_anthropic_error_type_for_status(status, etype):
    assert pa.error_type_for_status(status) == etype


def test_anthropic_error_body_and_sse_event():
    assert json.loads(pa.error_body(429, "slow down")) == {
        "type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
    assert json.loads(pa.error_body(400, "x", "not_found_error"))["error"]["type"] == "not_found_error"
    raw = pa.sse_error("overloaded_error", "Overloaded")
    assert raw.startswith(b"event: error\n") and raw.endswith(b"\n\n")
    (ev,) = SSEDecoder().feed(raw)
    assert ev.event == "error"
    assert json.loads(ev.data) == {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


def test_anthropic_status_for_type_round_trips():
    for status, etype in pa.ERROR_TYPES.items():
        if status != 503:
            assert pa.status_for_type(etype) == status
    assert pa.status_for_type("something_new") == 500
