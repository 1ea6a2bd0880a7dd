"""An upstream's error read from any envelope (neutral/error.py): Anthropic's and OpenAI's, Ollama's
string, vLLM's flat object, FastAPI's detail, plain text or nothing; the message always kept, the
status the HTTP one (a mid-stream code only when asked), the neutral type named by status."""

from __future__ import annotations

import pytest

from tokunseba.neutral.error import (
    ERROR_TYPES, MAX_MESSAGE_CHARS, UpstreamError, error_from_obj, error_type_for_status, parse_error_body,
    status_for_type,
)


def test_anthropic_and_openai_envelopes():
    assert parse_error_body(429, b'{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}') == \
        UpstreamError(429, "slow down", "rate_limit_error", None)
    assert parse_error_body(400, b'{"error":{"message":"too long","type":"invalid_request_error",'
                                 b'"param":"messages","code":"context_length_exceeded"}}') == \
        UpstreamError(400, "too long", "invalid_request_error", "context_length_exceeded")


def test_other_servers_shapes():
    assert parse_error_body(404, b'{"error":"model \\"q\\" not found"}').message == 'model "q" not found'  # Ollama
    assert parse_error_body(400, b'{"object":"error","message":"bad","type":"BadRequestError","code":400}') == \
        UpstreamError(400, "bad", "BadRequestError", None)  # vLLM: an integer code is no code
    assert parse_error_body(404, b'{"detail":"Not Found"}').message == "Not Found"  # FastAPI
    assert parse_error_body(422, b'{"detail":[{"loc":["body","messages"],"msg":"field required"},{"msg":"x"}]}'
                            ).message == "body.messages: field required; x"


def test_plain_text_and_empty_bodies():
    assert parse_error_body(500, b"Internal Server Error") == UpstreamError(500, "Internal Server Error")
    assert parse_error_body(502, b"") == UpstreamError(502, "upstream returned HTTP 502")
    assert parse_error_body(502, b"   \n").message == "upstream returned HTTP 502"
    assert "broken" in parse_error_body(500, b"\xff\xfe broken").message
    assert parse_error_body(500, b"[1, 2]").message == "[1, 2]"  # JSON that is no object: its text
    long = parse_error_body(502, b"<html>" + b"x" * (MAX_MESSAGE_CHARS * 2))
    assert len(long.message) == MAX_MESSAGE_CHARS


def test_an_object_without_a_message_is_said_whole():
    assert parse_error_body(500, b'{"weird":1}').message == '{"weird":1}'
    assert error_from_obj(500, {"error": {"message": {"nested": True}}}).message == '{"nested":true}'


def test_a_mid_stream_integer_code_is_the_status_only_when_asked():
    doc = {"error": {"code": 429, "message": "busy", "type": "x"}}
    assert error_from_obj(200, doc).status == 200
    assert error_from_obj(200, doc, status_from_code=True).status == 429
    assert error_from_obj(200, {"error": {"code": 42, "message": "m"}}, status_from_code=True).status == 200
    assert error_from_obj(200, {"error": {"code": True, "message": "m"}}, status_from_code=True).code is None


@pytest.mark.parametrize(("status", "etype"), [(400, "invalid_request_error"), (418, "invalid_request_error"),
                                               (503, "overloaded_error"), (529, "overloaded_error"),
                                               (502, "api_error"), (599, "api_error")])
def test_error_type_for_status(status, etype):
    assert error_type_for_status(status) == etype


def test_status_for_type_inverts_the_table():
    for status, etype in ERROR_TYPES.items():
        assert status_for_type(etype) == (529 if status == 503 else status)
    assert status_for_type(None) == status_for_type("brand_new_error") == 500
