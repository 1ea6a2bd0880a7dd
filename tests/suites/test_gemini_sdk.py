"""The google-genai SDK's own parsing accepts every translated Gemini reply and stream
(issue 11): ``generate_content`` and ``generate_content_stream`` of a real
``genai.Client`` whose HTTP goes to an httpx2 MockTransport serving what tokunseba wrote.
Also the SDK's own error classes for translated errors (429 -> RESOURCE_EXHAUSTED, a
context overflow -> 400 INVALID_ARGUMENT), and the request the SDK sends, decoded."""

from __future__ import annotations

import json

import httpx2
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from tests.translate.gemini.test_stream import CREATED, OTHER_FIXTURES, other_upstream, run
from tests.translate.openai_chat.test_stream import STREAMS
from tokunseba import translate

MODEL = "gemini-2.5-flash"


def client_for(status: int, content_type: str, body: bytes, seen: list) -> genai.Client:
    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append((str(request.url), dict(request.headers), json.loads(request.content)))
        return httpx2.Response(status, headers={"content-type": content_type}, content=body)

    return genai.Client(api_key="AIza-test", http_options=types.HttpOptions(
        base_url="http://127.0.0.1:9", api_version="v1beta",
        httpx_client=httpx2.Client(transport=httpx2.MockTransport(handler))))


def sdk_stream(body: bytes) -> list[types.GenerateContentResponse]:
    seen: list = []
    chunks = list(client_for(200, "text/event-stream", body, seen).models.generate_content_stream(
        model=MODEL, contents="hi"))
    assert seen[0][0].endswith(f"/v1beta/models/{MODEL}:streamGenerateContent?alt=sse")
    return chunks


def sdk_whole(body: bytes) -> types.GenerateContentResponse:
    seen: list = []
    return client_for(200, "application/json", body, seen).models.generate_content(model=MODEL, contents="hi")


def _calls(responses: list[types.GenerateContentResponse]) -> list[tuple]:
    return [(fc.id, fc.name, fc.args) for r in responses for fc in (r.function_calls or [])]


def _text(responses: list[types.GenerateContentResponse]) -> str:
    return "".join(p.text for r in responses if r.candidates and r.candidates[0].content
                   for p in r.candidates[0].content.parts or [] if p.text and not p.thought)


WITH_REPLY = sorted(n for n in OTHER_FIXTURES if (STREAMS / n.replace(".sse", ".reply.json")).exists())


@pytest.mark.parametrize("name", OTHER_FIXTURES)
def test_sdk_stream_accepts_every_translated_stream(name):
    out, t = run((STREAMS / name).read_bytes(), other_upstream(name), "gemini")
    if not t.report.completed:  # an upstream error mid-stream: the SDK raises it as an APIError
        with pytest.raises(genai_errors.APIError):
            sdk_stream(out)
        return
    chunks = sdk_stream(out)
    last = chunks[-1]
    assert last.candidates[0].finish_reason in (types.FinishReason.STOP, types.FinishReason.MAX_TOKENS,
                                                types.FinishReason.SAFETY)
    if t.client_usage is not None:
        um = last.usage_metadata
        assert um.prompt_token_count == t.client_usage.get("promptTokenCount")
        assert um.candidates_token_count == t.client_usage.get("candidatesTokenCount")
        assert um.total_token_count == t.client_usage.get("totalTokenCount")


@pytest.mark.parametrize("name", WITH_REPLY)
def test_sdk_generate_content_accepts_every_translated_reply_and_matches_the_stream(name):
    up = other_upstream(name)
    rep = translate.reply(up, "gemini", (STREAMS / name.replace(".sse", ".reply.json")).read_bytes(), created=CREATED)
    whole = sdk_whole(rep.body)
    streamed = sdk_stream(run((STREAMS / name).read_bytes(), up, "gemini")[0])
    assert _calls([whole]) == _calls(streamed)
    assert _text([whole]) == _text(streamed)
    assert whole.candidates[0].finish_reason == streamed[-1].candidates[0].finish_reason
    assert whole.usage_metadata == streamed[-1].usage_metadata


def test_sdk_sees_ids_args_and_thoughts_from_an_anthropic_upstream():
    out, _ = run((STREAMS / "anthropic_thinking_signature.sse").read_bytes(), "anthropic", "gemini")
    chunks = sdk_stream(out)
    assert _calls(chunks) == [("toolu_01Abc", "get_weather", {"city": "Paris"})]
    thoughts = [p.text for c in chunks if c.candidates and c.candidates[0].content
                for p in c.candidates[0].content.parts or [] if p.thought]
    assert "".join(thoughts) == "Weather in Paris; call the tool. 日本"
    assert chunks[-1].usage_metadata.thoughts_token_count == 40


@pytest.mark.parametrize("upstream,status,body,sdk_status,code", [
    ("anthropic", 429, b'{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}',
     "RESOURCE_EXHAUSTED", 429),
    ("anthropic", 529, b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
     "UNAVAILABLE", 503),
    ("openai", 400, b'{"error":{"message":"This model\'s maximum context length is 8192 tokens","type":'
                    b'"invalid_request_error","code":"context_length_exceeded"}}', "INVALID_ARGUMENT", 400),
    ("openai", 500, b"<html>oops</html>", "INTERNAL", 500),
])
def test_sdk_error_classes_for_translated_errors(upstream, status, body, sdk_status, code):
    st, out = translate.error(upstream, "gemini", status, body)
    assert st == code
    seen: list = []
    with pytest.raises(genai_errors.APIError) as exc:
        client_for(st, "application/json", out, seen).models.generate_content(model=MODEL, contents="hi")
    assert exc.value.code == code and exc.value.status == sdk_status


def test_gemini_errors_reach_other_clients():
    quota = b'{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}'
    st, out = translate.error("gemini", "anthropic", 429, quota)
    assert st == 429 and json.loads(out)["error"]["type"] == "rate_limit_error"
    st, out = translate.error("gemini", "openai", 429, quota)
    assert st == 429 and json.loads(out)["error"]["type"] == "rate_limit_error"
    overflow = (b'{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum number of '
                b'tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}')
    st, out = translate.error("gemini", "anthropic", 400, overflow)
    err = json.loads(out)["error"]
    assert st == 400 and err["type"] == "invalid_request_error"
    assert "prompt is too long" in err["message"] and "1048576" in err["message"]  # the upstream's text kept
    st, out = translate.error("gemini", "openai-responses", 400, overflow)
    assert json.loads(out)["error"]["code"] == "context_length_exceeded"


def test_the_sdk_request_decodes_and_snake_case_is_read():
    """What google-genai 3.6.1 really sends (snake_case leaks: parameters_json_schema,
    include_thoughts) decodes to the neutral request."""
    seen: list = []
    client = client_for(200, "application/json", b"{}", seen)
    try:
        client.models.generate_content(
            model=MODEL, contents="weather in Paris?",
            config=types.GenerateContentConfig(
                system_instruction="be brief", temperature=0.2, max_output_tokens=64, stop_sequences=["END"],
                thinking_config=types.ThinkingConfig(include_thoughts=True, thinking_budget=128),
                tools=[types.Tool(function_declarations=[types.FunctionDeclaration(
                    name="get_weather", description="w", parameters_json_schema={
                        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})])],
                tool_config=types.ToolConfig(function_calling_config=types.FunctionCallingConfig(mode="ANY"))))
    except Exception:
        pass  # the mock's "{}" reply is not what matters here
    url, headers, body = seen[0]
    assert "x-goog-api-key" in headers
    rt = translate.request("gemini", "openai", body, path=url.split("127.0.0.1:9", 1)[1])
    assert rt.body["model"] == MODEL and rt.body["stream"] is False
    assert rt.body["messages"] == [{"role": "system", "content": "be brief"},
                                   {"role": "user", "content": "weather in Paris?"}]
    assert rt.body["tools"] == [{"type": "function", "function": {
        "name": "get_weather", "description": "w",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    assert rt.body["tool_choice"] == "required" and rt.body["temperature"] == 0.2
    assert rt.body["max_completion_tokens"] == 64 and rt.body["stop"] == ["END"]
    assert rt.body["reasoning_effort"] == "minimal"  # thinking_budget 128, read in snake case (neutral/effort.py)
    assert any("include_thoughts" in d or "includeThoughts" in d for d in rt.dropped)
