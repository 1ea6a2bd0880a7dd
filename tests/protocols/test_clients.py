"""Client facts (protocols/clients.py), data only: the user-agent pattern reads the pinned clients'
own user-agents; every alias is a lower-case product token naming a client; what each who-is-talking
key is said by names a real ``when`` key; the bounds on recorded say-so are sane."""

from __future__ import annotations

import pytest

from tokunseba.protocols import clients as c
from tokunseba.routing.facts import PREDICATES


@pytest.mark.parametrize(("ua", "name", "version"), [
    ("claude-cli/2.1.197 (external, cli)", "claude-cli", "2.1.197"),
    ("codex_exec/0.171.0 (Ubuntu 24.4.0; x86_64) xterm", "codex_exec", "0.171.0"),
    ("GeminiCLI/0.20.0/gemini-2.5-flash (linux; x64)", "GeminiCLI", "0.20.0"),
    ("Anthropic/Python 2.16.0", "Anthropic/Python", "2.16.0"),
    ("OpenAI/Python 1.99.1", "OpenAI/Python", "1.99.1"),
    ("google-genai-sdk/1.2.0 gl-python/3.12.3", "google-genai-sdk", "1.2.0"),
    ("curl", "curl", None),
])
def test_the_user_agent_pattern_reads_the_pinned_clients(ua, name, version):
    m = c.USER_AGENT_RX.match(ua)
    assert (m.group("name"), m.group("version")) == (name, version)


def test_every_alias_is_a_lower_case_token_the_pattern_can_read():
    for token, name in c.CLIENT_ALIASES.items():
        assert token == token.lower() and name == name.lower() and name
        m = c.USER_AGENT_RX.match(f"{token}/1.0")
        assert m.group("name").lower() == token
    for prefix, name in c.CLIENT_PREFIXES:
        assert prefix == prefix.lower() and name in c.CLIENT_ALIASES.values()
    assert c.CLIENT_ALIASES["claude-cli"] == c.CC_CLIENT and c.CLIENT_ALIASES["codex_exec"] == c.CODEX_CLIENT


def test_each_who_is_talking_key_is_a_when_key_and_says_who_can_say_it():
    assert set(c.VISIBILITY) <= set(PREDICATES)
    for key, who in c.VISIBILITY.items():
        assert who, key
        for client, how in who:
            assert client and how, key


def test_header_names_are_lower_case_as_requests_are_read():
    for name in (c.CC_SESSION_HEADER, c.CC_AGENT_HEADER, c.CC_PARENT_AGENT_HEADER, c.CC_APP_HEADER,
                 c.CODEX_TURN_METADATA_HEADER, c.CODEX_SUBAGENT_HEADER, *c.CODEX_SESSION_HEADERS):
        assert name == name.lower()


def test_bounds_on_what_is_recorded():
    assert 0 < c.MAX_VERSION_CHARS < c.MAX_NAME_CHARS < c.MAX_AGENT_CHARS < c.MAX_SESSION_CHARS
    assert "/root" in c.CODEX_MAIN_AGENTS and c.OPENAI_SDK_PATH == "/v1"
