"""Errors in the client's protocol (docs/protocols.md A.7, B.6, E.6; docs/architecture.md rule 6): status
and envelope mapped by table, the upstream's message text kept, any body shape accepted."""

from __future__ import annotations

import json

import pytest

from tokunseba.protocols import anthropic as pa
from tokunseba.protocols import gemini as pg
from tokunseba.protocols import openai_chat as po
from tokunseba.sse import SSEDecoder
from tokunseba.neutral.error import parse_error_body
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


def test_openai_error_body_and_sse_event():
    assert json.loads(po.error_body(400, "bad", code="context_length_exceeded")) == {
        "error": {"message": "bad", "type": "invalid_request_error", "param": None, "code": "context_length_exceeded"}}
    assert json.loads(po.error_body(429, "slow"))["error"]["code"] == "rate_limit_exceeded"
    assert json.loads(po.error_body(500, "boom"))["error"]["type"] == "server_error"
    raw = po.sse_error("server_error", "boom")
    assert raw == b'data: {"error":{"message":"boom","type":"server_error","param":null,"code":null}}\n\n'


def test_anthropic_status_for_type_round_trips():
    for status, etype in pa.ERROR_TYPES.items():
        if status != 503:
            assert pa.status_for_type(etype) == status
    assert pa.status_for_type("something_new") == 500


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


def test_gemini_error_body():
    assert json.loads(pg.error_body(429, "Resource has been exhausted (e.g. check quota).")) == {
        "error": {"code": 429, "message": "Resource has been exhausted (e.g. check quota).",
                  "status": "RESOURCE_EXHAUSTED"}}
    assert {s: json.loads(pg.error_body(s, "x"))["error"]["status"] for s in (400, 401, 403, 404, 500, 502, 503, 504)} \
        == {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
            500: "INTERNAL", 502: "UNAVAILABLE", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}
    assert json.loads(pg.error_body(418, "teapot")) == {"error": {"code": 418, "message": "teapot", "status": "UNKNOWN"}}
    assert pg.error_body(400, "ü \"q\"") == '{"error":{"code":400,"message":"ü \\"q\\"","status":"INVALID_ARGUMENT"}}'.encode()


def test_same_protocol_is_untouched():
    body = b'{"error": {"message": "x"}}'
    assert translate_error("openai", "openai", 418, body) == (418, body)


def test_unknown_client_protocol_is_refused():
    with pytest.raises(ValueError):
        translate_error("openai", "smoke-signals", 400, b"{}")
