"""Errors in the client's protocol (docs/dev/protocols.md A.7, B.6, E.6; docs/dev/architecture.md rule 6): status
and envelope mapped by table, the upstream's message text kept, any body shape accepted. Each protocol's own
envelope is tested beside it (tests/protocols/test_<protocol>.py)."""

from __future__ import annotations

import json

import pytest

from tokunseba.neutral.error import parse_error_body
from tokunseba.protocols import anthropic as pa
from tokunseba.translate import error as translate_error


def oai(message: str, etype: str = "invalid_request_error", code: str | None = None, param: str | None = None) -> bytes:
    return json.dumps({"error": {"message": message, "type": etype, "param": param, "code": code}}).encode()


def ant(etype: str, message: str) -> bytes:
    return json.dumps({"type": "error", "error": {"type": etype, "message": message}, "request_id": "req_1"}).encode()


def to_anthropic(status: int, body: bytes) -> tuple[int, dict]:
    st, out = translate_error("openai", "anthropic", status, body)
    return st, json.loads(out)


def to_openai(status: int, body: bytes) -> tuple[int, dict]:
    st, out = translate_error("anthropic", "openai", status, body)
    return st, json.loads(out)


# ---- OpenAI-side upstream -> Anthropic client ----


@pytest.mark.parametrize("status,etype", [(400, "invalid_request_error"), (401, "authentication_error"),
                                          (403, "permission_error"), (404, "not_found_error"),
                                          (413, "request_too_large"), (429, "rate_limit_error"), (500, "api_error"),
                                          (504, "timeout_error")])
def test_openai_error_to_anthropic_by_status(status, etype):
    st, body = to_anthropic(status, oai("upstream says no", "whatever"))
    assert st == status
    assert body == {"type": "error", "error": {"type": etype, "message": "upstream says no"}}


def test_openai_503_becomes_anthropic_529_overloaded():
    st, body = to_anthropic(503, oai("The engine is currently overloaded", "server_error"))
    assert st == 529 and body["error"] == {"type": "overloaded_error", "message": "The engine is currently overloaded"}


def test_context_length_exceeded_becomes_prompt_is_too_long():
    text = "This model's maximum context length is 4096 tokens. However, you requested 4217 tokens (4117 in the messages, 100 in the completion)."
    st, body = to_anthropic(400, oai(text, "invalid_request_error", "context_length_exceeded", "messages"))
    assert st == 400
    assert body["error"]["type"] == "invalid_request_error"
    assert body["error"]["message"] == "prompt is too long: " + text
    assert "prompt is too long" in body["error"]["message"].lower()  # what Claude Code matches


@pytest.mark.parametrize("body", [
    # llama.cpp llama-server
    b'{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it",'
    b'"type":"exceed_context_size_error","n_prompt_tokens":5000,"n_ctx":4096}}',
    # vLLM (flat, no string code)
    b'{"object":"error","message":"This model\'s maximum context length is 8192 tokens. However, you requested 9000 tokens.",'
    b'"type":"BadRequestError","param":null,"code":400}',
])
def test_local_servers_context_overflow_also_says_prompt_is_too_long(body):
    st, out = to_anthropic(400, body)
    assert st == 400 and out["error"]["type"] == "invalid_request_error"
    assert out["error"]["message"].startswith("prompt is too long: ")
    assert parse_error_body(400, body).message in out["error"]["message"]


def test_llama_cpp_python_plain_text_500():
    st, body = to_anthropic(500, b"Internal Server Error")
    assert st == 500 and body == {"type": "error", "error": {"type": "api_error", "message": "Internal Server Error"}}


def test_fastapi_detail_bodies():
    st, body = to_anthropic(404, b'{"detail":"Not Found"}')
    assert st == 404 and body["error"] == {"type": "not_found_error", "message": "Not Found"}
    st, body = to_anthropic(401, b'{"detail":"Invalid API key"}')
    assert body["error"] == {"type": "authentication_error", "message": "Invalid API key"}
    st, body = to_anthropic(422, b'{"detail":[{"loc":["body","messages"],"msg":"field required","type":"missing"}]}')
    assert st == 422 and body["error"]["message"] == "body.messages: field required"


def test_ollama_string_error():
    st, body = to_anthropic(404, b'{"error":"model \\"qwen9\\" not found, try pulling it first"}')
    assert body["error"] == {"type": "not_found_error", "message": 'model "qwen9" not found, try pulling it first'}


def test_empty_and_html_bodies():
    st, body = to_anthropic(502, b"")
    assert st == 502 and body["error"] == {"type": "api_error", "message": "upstream returned HTTP 502"}
    html = b"<html><body><h1>502 Bad Gateway</h1></body></html>"
    st, body = to_anthropic(502, html)
    assert body["error"]["message"] == html.decode()
    st, body = to_anthropic(500, b"\xff\xfe broken bytes")
    assert body["error"]["type"] == "api_error" and "broken bytes" in body["error"]["message"]


def test_whole_body_status_wins_over_an_integer_code():
    st, body = to_anthropic(500, b'{"error":{"code":400,"message":"odd","type":"x"}}')
    assert st == 500 and body["error"]["type"] == "api_error"


# ---- Anthropic upstream -> OpenAI client ----


@pytest.mark.parametrize("status,etype,code", [(400, "invalid_request_error", None), (401, "authentication_error", None),
                                               (403, "permission_error", None), (404, "not_found_error", None),
                                               (429, "rate_limit_error", "rate_limit_exceeded"),
                                               (500, "server_error", None)])
def test_anthropic_error_to_openai_by_status(status, etype, code):
    st, body = to_openai(status, ant(pa.error_type_for_status(status), "upstream says no"))
    assert st == status
    assert body == {"error": {"message": "upstream says no", "type": etype, "param": None, "code": code}}


def test_anthropic_529_overloaded_becomes_openai_503():
    st, body = to_openai(529, ant("overloaded_error", "Overloaded"))
    assert st == 503 and body["error"]["message"] == "Overloaded" and body["error"]["type"] == "server_error"


def test_anthropic_prompt_too_long_gets_the_openai_context_code():
    st, body = to_openai(400, ant("invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"))
    assert st == 400
    assert body["error"] == {"message": "prompt is too long: 210000 tokens > 200000 maximum",
                             "type": "invalid_request_error", "param": None, "code": "context_length_exceeded"}


@pytest.mark.parametrize("message", [
    "input length and `max_tokens` exceed context limit: 198000 + 8192 > 200000, decrease input length or "
    "`max_tokens` and try again",
    "Prompt is too long",
])
def test_anthropic_context_overflow_wording_gets_the_openai_context_code(message):
    st, body = to_openai(400, ant("invalid_request_error", message))
    assert (st, body["error"]["code"], body["error"]["message"]) == (400, "context_length_exceeded", message)


def test_a_server_error_mentioning_the_prompt_is_not_a_context_overflow():
    """Same test as the other direction (protocols.failures.is_context_window): only a client error (< 500) is."""
    st, body = to_openai(500, ant("api_error", "internal error while checking whether the prompt is too long"))
    assert (st, body["error"]["type"], body["error"]["code"]) == (500, "server_error", None)


def test_same_protocol_is_untouched():
    body = b'{"error": {"message": "x"}}'
    assert translate_error("openai", "openai", 418, body) == (418, body)


def test_unknown_client_protocol_is_refused():
    with pytest.raises(ValueError):
        translate_error("openai", "smoke-signals", 400, b"{}")
