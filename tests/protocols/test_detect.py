"""Protocol detection: provider turns are recognised, everything else passes through (None)."""

from __future__ import annotations

import pytest

from tests.conftest import load_fixture
from tokunseba.protocols import REGISTRY
from tokunseba.protocols.detect import Detected, api_path, detect

A, O, G = "api.anthropic.com", "api.openai.com", "generativelanguage.googleapis.com"
C = "chatgpt.com"

TABLE = [
    # Anthropic
    (A, "/v1/messages", "POST", Detected("anthropic", "messages")),
    (A, "/v1/messages?beta=true", "POST", Detected("anthropic", "messages")),
    (A, "/v1/messages/count_tokens?beta=true", "POST", Detected("anthropic", "count_tokens")),
    (A, "/v1/messages/count_tokens", "post", Detected("anthropic", "count_tokens")),
    ("API.Anthropic.COM:443", "/v1/messages", "POST", Detected("anthropic", "messages")),
    ("api.anthropic.com.", "/v1/messages", "POST", Detected("anthropic", "messages")),
    (A, "/v1/messages", "GET", None),
    (A, "/api/claude_code/settings", "GET", None),
    (A, "/api/claude_code/policy_limits", "GET", None),
    (A, "/api/event_logging/v2/batch", "POST", None),
    (A, "/api/eval/sdk-abc", "POST", None),
    (A, "/v1/messages/batches", "POST", None),
    (A, "/v1/messagesx", "POST", None),
    (A, "/v1/messages/", "POST", None),
    (A, "/v2/messages", "POST", None),
    (A, "/proxy/v1/messages", "POST", None),  # provider hosts need the exact path
    (A, "/v1/models", "GET", None),
    (A, "/", "HEAD", None),
    (A, "/v1/chat/completions", "POST", None),  # right path, wrong host
    # OpenAI
    (O, "/v1/chat/completions", "POST", Detected("openai", "chat")),
    (O, "/v1/responses", "POST", Detected("openai-responses", "responses")),
    (O, "/v1/responses", "GET", None),  # Codex's WebSocket upgrade is not a turn
    (O, "/v1/responses/input_tokens", "POST", Detected("openai-responses", "input_tokens")),  # its counter (issue 32)
    (O, "/v1/responses/compact", "POST", Detected("openai-responses", "compact")),  # Codex's remote compaction
    (O, "/v1/completions", "POST", None),
    (O, "/v1/embeddings", "POST", None),
    (O, "/v1/models", "GET", None),
    (O, "/v1/messages", "POST", None),
    # Gemini
    (G, "/v1beta/models/gemini-2.5-flash:generateContent", "POST", Detected("gemini", "generate", "gemini-2.5-flash")),
    (G, "/v1beta/models/gemini-3-pro:streamGenerateContent?alt=sse", "POST",
     Detected("gemini", "stream_generate", "gemini-3-pro")),
    (G, "/v1beta/models/gemini-2.5-flash:countTokens", "POST", Detected("gemini", "count", "gemini-2.5-flash")),
    (G, "/v1/models/gemini-2.0-flash:generateContent?key=x", "POST", Detected("gemini", "generate", "gemini-2.0-flash")),
    (G, "/v1beta/models/gemini%2D2.5:generateContent", "POST", Detected("gemini", "generate", "gemini-2.5")),
    (G, "/v1beta/models/gemini-2.5-flash:embedContent", "POST", None),
    (G, "/v1beta/models/gemini-2.5-flash", "GET", None),
    (G, "/v1beta/models", "GET", None),
    (G, "/v1beta/models/a/b:generateContent", "POST", None),
    (G, "/v1beta/models/:generateContent", "POST", None),
    # the ChatGPT backend (Codex signed in with ChatGPT, issue 39): its two turn paths, nothing else
    (C, "/backend-api/codex/responses", "POST", Detected("openai-responses", "responses", backend=C)),
    ("ChatGPT.com:443", "/backend-api/codex/responses", "POST", Detected("openai-responses", "responses", backend=C)),
    (C, "/backend-api/codex/responses/compact", "POST", Detected("openai-responses", "compact", backend=C)),
    (C, "/backend-api/codex/responses", "GET", None),  # its WebSocket upgrade is not a turn
    (C, "/backend-api/codex/models?client_version=0.171.0", "GET", None),
    (C, "/backend-api/codex/models", "POST", None),
    (C, "/backend-api/wham/accounts/check", "GET", None),
    (C, "/backend-api/wham/settings/user", "GET", None),
    (C, "/backend-api/wham/usage", "GET", None),  # usage polls
    (C, "/backend-api/ps/mcp", "POST", None),  # plugin and MCP calls
    (C, "/backend-api/ps/plugins/list", "GET", None),
    (C, "/backend-api/codex/analytics-events/events", "POST", None),  # telemetry
    (C, "/backend-api/codex/memories/trace_summarize", "POST", None),  # not a Responses body
    (C, "/backend-api/codex/responses/input_tokens", "POST", None),  # only the backend's own paths
    (C, "/v1/responses", "POST", None),  # the API's paths are not the backend's
    (C, "/backend-api/conversation", "POST", None),  # ChatGPT's own web app
    ("auth.openai.com", "/oauth/token", "POST", None),  # token refresh
    (O, "/backend-api/codex/responses", "POST", None),  # the backend's paths are not the API's
    ("evil.chatgpt.com", "/backend-api/codex/responses", "POST", None),
    # other hosts
    ("example.com", "/v1/messages", "POST", None),
    ("downloads.claude.ai", "/claude-code-releases/plugins/latest", "GET", None),
    ("127.0.0.1:8000", "/v1/chat/completions", "POST", None),
    ("evil.api.anthropic.com", "/v1/messages", "POST", None),
]


@pytest.mark.parametrize("host,path,method,want", TABLE, ids=[f"{h}{p} {m}" for h, p, m, _ in TABLE])
def test_detection_table(host, path, method, want):
    assert detect(host, path, method) == want


@pytest.mark.parametrize(
    "name,want",
    [
        ("claude-code-print-main-turn.json", Detected("anthropic", "messages")),
        ("claude-code-title-haiku.json", Detected("anthropic", "messages")),
        ("claude-code-count-tokens.json", Detected("anthropic", "count_tokens")),
        ("codex-responses-gpt55-tool-followup.json", Detected("openai-responses", "responses")),
    ],
)
def test_real_captured_requests(name, want):
    fx = load_fixture(name)
    _, _, rest = fx["url"].partition("://")
    host, _, path = rest.partition("/")
    assert detect(host, "/" + path, fx["method"]) == want


def test_custom_provider_host_only_with_extra_hosts():
    fx = load_fixture("codex-responses-custom-provider.json")
    assert fx["url"] == "https://llm.example.test/v1/responses"
    assert detect("llm.example.test", "/v1/responses") is None
    got = detect("LLM.Example.Test", "/v1/responses", extra_hosts={"llm.example.test": "openai-responses"})
    assert got == Detected("openai-responses", "responses")


EXTRA = {"127.0.0.1:8000": "openai", "localhost": "anthropic", "[::1]:9000": "gemini"}


@pytest.mark.parametrize(
    "host,path,want",
    [
        ("127.0.0.1:8000", "/v1/chat/completions", Detected("openai", "chat")),
        ("127.0.0.1:8000", "/openai/v1/chat/completions", Detected("openai", "chat")),  # any prefix
        ("127.0.0.1:8000", "/chat/completions", Detected("openai", "chat")),
        ("127.0.0.1:9000", "/v1/chat/completions", None),  # host:port key only matches that port
        ("127.0.0.1:8000", "/v1/responses", None),  # only the mapped protocol's paths
        ("127.0.0.1:8000", "/v1/models", None),
        ("127.0.0.1:8000", "/v1/messages", None),
        ("localhost:1234", "/v1/messages?beta=true", Detected("anthropic", "messages")),  # bare host: any port
        ("localhost", "/v1/messages/count_tokens", Detected("anthropic", "count_tokens")),
        ("localhost", "/health", None),
        ("[::1]:9000", "/v1beta/models/gemma:generateContent", Detected("gemini", "generate", "gemma")),
        ("[::1]:9001", "/v1beta/models/gemma:generateContent", None),
    ],
)
def test_extra_hosts(host, path, want):
    assert detect(host, path, "POST", extra_hosts=EXTRA) == want


def test_extra_hosts_do_not_override_provider_hosts():
    # api.openai.com keeps serving both OpenAI protocols whatever extra_hosts says
    got = detect("api.openai.com", "/v1/responses", extra_hosts={"api.openai.com": "openai"})
    assert got == Detected("openai-responses", "responses")


def test_every_path_in_the_table_is_detected_on_a_provider_host():
    for proto, pp in REGISTRY.items():
        for kind in pp.paths:
            path = pp.api_prefixes[0] + api_path(proto, kind, "m-1")
            assert detect(pp.hosts[0], path) == Detected(proto, kind, "m-1" if "{model}" in pp.paths[kind] else None)


def test_api_path():
    assert api_path("anthropic", "count_tokens") == "/messages/count_tokens"
    assert api_path("openai-responses", "responses") == "/responses"
    assert api_path("gemini", "stream_generate", "gemini-3-pro") == "/models/gemini-3-pro:streamGenerateContent?alt=sse"
    assert api_path("gemini", "generate", "tuned/x") == "/models/tuned%2Fx:generateContent"
    with pytest.raises(ValueError, match="needs a model"):
        api_path("gemini", "generate")
    with pytest.raises(ValueError, match="has no 'chat'"):
        api_path("anthropic", "chat")
    with pytest.raises(ValueError):
        api_path("cohere", "chat")


def test_backend_hosts_are_provider_hosts_but_get_no_base_url_listener():
    """chatgpt.com is intercepted (its credentials redacted for display) like an API host, but
    it is reached through the proxy: the base-URL listeners stay one per API host."""
    from tokunseba.protocols.detect import api_hosts, provider_hosts

    assert provider_hosts()["chatgpt.com"] == ("openai-responses",)
    assert "chatgpt.com" not in api_hosts()
    assert list(provider_hosts())[:len(api_hosts())] == list(api_hosts())


def test_a_backend_kind_is_asked_of_an_endpoint_at_its_api_path():
    """A ChatGPT turn retargeted to another Responses endpoint goes to that endpoint's own
    path for its kind (``{url}/responses``, ``{url}/responses/compact``)."""
    assert api_path("openai-responses", "responses") == "/responses"
    assert api_path("openai-responses", "compact") == "/responses/compact"
