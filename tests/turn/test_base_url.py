"""turn/base_url.py: a base-URL listener forwards only to its own provider host; a request
naming another one is answered 421 in the client's protocol (guessed from its path)."""

from __future__ import annotations

import json

import pytest

from tokunseba.turn import base_url


@pytest.mark.parametrize("host", ["api.anthropic.com", "API.Anthropic.com", "api.anthropic.com.",
                                  "api.anthropic.com:443"])
def test_its_own_host_passes(host):
    assert base_url.Arrival("api.anthropic.com").misdirected(host, "/v1/messages") is None


@pytest.mark.parametrize("host,path,envelope", [
    ("127.0.0.1:9999", "/v1/messages", "anthropic"),
    ("api.openai.com", "/v1/chat/completions", "openai"),
    ("[::1]:8080", "/v1beta/models/g:generateContent", "gemini"),
    ("", "/other", "openai"),  # no host, no known path: the fallback envelope
])
def test_another_host_is_answered_421_in_the_clients_protocol(host, path, envelope):
    r = base_url.Arrival("api.anthropic.com").misdirected(host, path)
    assert r is not None and r.status == base_url.MISDIRECTED == 421
    body = json.loads(r.body)
    msg = body["error"]["message"]
    assert "forwards only to api.anthropic.com" in msg and "not sent anywhere" in msg
    if envelope == "anthropic":
        assert body["type"] == "error"
    elif envelope == "gemini":
        assert body["error"]["code"] == 421
    else:
        assert "type" not in body


def test_client_label_marks_base_url_turns():
    assert base_url.client_label("claude-code", base_url.BASE_URL) == "claude-code (base URL)"
    assert base_url.client_label("claude-code", base_url.PROXY) == "claude-code"


def test_an_arrival_says_how_the_flow_came_in_and_names_its_client():
    proxied, listened = base_url.Arrival(), base_url.Arrival("api.anthropic.com")
    assert proxied.via == base_url.PROXY and listened.via == base_url.BASE_URL
    assert proxied.misdirected("127.0.0.1:9999", "/v1/messages") is None  # through the proxy: nothing to check
    ua = "claude-cli/2.1.197 (external, cli)"
    assert proxied.client(ua, "anthropic") == "claude-code"
    assert listened.client(ua, "anthropic") == "claude-code (base URL)"
