"""Endpoints: URLs per request kind, the endpoint's own credentials, host identity, validation."""

from __future__ import annotations

import pytest

from tokunseba.routing.endpoints import BUILTIN_ENDPOINTS, Endpoint, url_problem


@pytest.mark.parametrize(
    "name,protocol,host,base_path,key_env",
    [
        ("anthropic", "anthropic", "api.anthropic.com", "/v1", "ANTHROPIC_API_KEY"),
        ("openai", "openai", "api.openai.com", "/v1", "OPENAI_API_KEY"),
        ("gemini", "gemini", "generativelanguage.googleapis.com", "/v1beta", "GEMINI_API_KEY"),
    ],
)
def test_builtins(name, protocol, host, base_path, key_env):
    e = BUILTIN_ENDPOINTS[name]
    assert (e.name, e.protocol, e.host, e.port, e.scheme, e.base_path, e.key_env, e.builtin) == (
        name, protocol, host, 443, "https", base_path, key_env, True,
    )


def test_only_three_builtins():
    assert sorted(BUILTIN_ENDPOINTS) == ["anthropic", "gemini", "openai"]


@pytest.mark.parametrize(
    "endpoint,kind,model,url",
    [
        (BUILTIN_ENDPOINTS["anthropic"], "messages", None, "https://api.anthropic.com/v1/messages"),
        (BUILTIN_ENDPOINTS["anthropic"], "count_tokens", None, "https://api.anthropic.com/v1/messages/count_tokens"),
        (BUILTIN_ENDPOINTS["openai"], "chat", None, "https://api.openai.com/v1/chat/completions"),
        (BUILTIN_ENDPOINTS["gemini"], "generate", "gemini-2.5-flash",
         "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent"),
        (BUILTIN_ENDPOINTS["gemini"], "stream_generate", "gemini-2.5-flash",
         "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"),
        (Endpoint("local", "openai", "http://127.0.0.1:8000/v1"), "chat", "ignored",
         "http://127.0.0.1:8000/v1/chat/completions"),
        (Endpoint("local", "openai", "http://127.0.0.1:8000/v1/"), "chat", None,
         "http://127.0.0.1:8000/v1/chat/completions"),
        (Endpoint("r", "openai-responses", "https://llm.example.test/v1"), "responses", None,
         "https://llm.example.test/v1/responses"),
        (Endpoint("g", "gemini", "http://127.0.0.1:9/v1beta", model="gemma"), "generate", None,
         "http://127.0.0.1:9/v1beta/models/gemma:generateContent"),  # the endpoint's model
        (Endpoint("g", "gemini", "http://127.0.0.1:9/v1beta", model="gemma"), "count", "other",
         "http://127.0.0.1:9/v1beta/models/other:countTokens"),  # the given model wins
    ],
)
def test_request_url(endpoint, kind, model, url):
    assert endpoint.request_url(kind, model) == url


def test_request_url_rejects_a_kind_of_another_protocol_and_a_missing_path_model():
    with pytest.raises(ValueError):
        BUILTIN_ENDPOINTS["anthropic"].request_url("chat")
    with pytest.raises(ValueError, match="needs a model"):
        BUILTIN_ENDPOINTS["gemini"].request_url("generate")


@pytest.mark.parametrize(
    "protocol,header",
    [
        ("anthropic", {"x-api-key": "k-1"}),
        ("openai", {"authorization": "Bearer k-1"}),
        ("openai-responses", {"authorization": "Bearer k-1"}),
        ("gemini", {"x-goog-api-key": "k-1"}),
    ],
)
def test_auth_headers(protocol, header):
    e = Endpoint("e", protocol, "https://llm.example.test/v1", key_env="MY_KEY")
    assert e.auth_headers({"MY_KEY": "k-1", "OTHER": "x"}) == header
    assert e.auth_headers({}) == {}  # unset
    assert e.auth_headers({"MY_KEY": ""}) == {}  # empty counts as unset
    assert Endpoint("e", protocol, "https://llm.example.test/v1").auth_headers({"MY_KEY": "k-1"}) == {}


def test_ports_and_same_host():
    https = Endpoint("a", "anthropic", "https://GW.example.com/v1")
    http = Endpoint("b", "openai", "http://127.0.0.1/v1")
    explicit = Endpoint("c", "openai", "http://127.0.0.1:8000/v1")
    v6 = Endpoint("d", "openai", "http://[::1]:8000/v1")
    assert (https.host, https.port, http.port, explicit.port, v6.host, v6.port) == (
        "gw.example.com", 443, 80, 8000, "::1", 8000,
    )
    assert https.same_host("gw.example.com", 443) and https.same_host("GW.Example.COM", 443)
    assert not https.same_host("gw.example.com", 80)
    assert not https.same_host("api.anthropic.com", 443)
    assert http.same_host("127.0.0.1", 80) and not http.same_host("127.0.0.1", 8000)
    assert explicit.same_host("127.0.0.1", 8000) and not explicit.same_host("localhost", 8000)
    assert v6.same_host("[::1]", 8000) and v6.same_host("::1", 8000)


@pytest.mark.parametrize(
    "kwargs,fragment",
    [
        ({"protocol": "cohere"}, "protocol must be one of"),
        ({"url": "ftp://x/v1"}, "url must start with http:// or https://"),
        ({"url": "http:///v1"}, "has no host"),
        ({"url": "http://127.0.0.1:99999/v1"}, "not a valid URL"),
        ({"url": "http://127.0.0.1:8000/v1?x=1"}, "must be the API base"),
        ({"max_tokens": 0}, "max_tokens must be a positive integer"),
        ({"system_role": "user"}, "system_role must be one of: system, developer"),
        ({"max_tokens_field": "max_output_tokens"}, "max_tokens_field must be one of"),
        ({"key_env": "sk-ant-api03-secret"}, "NAME of an environment variable"),
        ({"url": "https://me:secret@gw.example.com/v1"}, "must not contain credentials"),
        ({"url": "https://me:secret@gw.example.com:99999/v1"}, "must not contain credentials"),
    ],
)
def test_validation(kwargs, fragment):
    args = {"name": "e", "protocol": "openai", "url": "http://127.0.0.1:8000/v1"} | kwargs
    with pytest.raises(ValueError, match="endpoint 'e': ") as ei:
        Endpoint(**args)
    assert fragment in str(ei.value)
    assert "secret" not in str(ei.value)  # a key put in key_env by mistake is never echoed


def test_url_problem_accepts_plain_bases():
    for url in ("http://127.0.0.1:8000/v1", "https://api.anthropic.com/v1", "http://localhost", "http://[::1]:1/v1"):
        assert url_problem(url) is None, url


def test_passive_health_backs_off_and_comes_back():
    from tokunseba.routing.endpoints import EndpointHealth

    now = [100.0]
    h = EndpointHealth(backoff_s=2.0, max_backoff_s=5.0, clock=lambda: now[0])
    ep = Endpoint("local", "openai", "http://127.0.0.1:9/v1")
    same_host_port = Endpoint("other", "anthropic", "http://127.0.0.1:9/v1")
    assert h.reachable(ep)  # never tried: assumed up, no probe
    assert h.failed(ep, "refused") == 2.0
    assert not h.reachable(ep) and not h.reachable(same_host_port) and h.down() == {"127.0.0.1:9": "refused"}
    now[0] += 2.0
    assert h.reachable(ep)  # back-off over: the next turn tries it
    assert h.failed(ep) == 4.0 and h.failed(ep) == 5.0  # doubling, capped
    h.ok(ep)
    assert h.reachable(ep) and h.down() == {} and h.failed(ep) == 2.0  # a success resets the count
