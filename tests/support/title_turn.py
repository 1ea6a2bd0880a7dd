"""The real Claude Code title turn (a structured-output request to Haiku) and its turn facts, shared
by the earned-route tests (strata, agreement, earn); and its main turn (a prompt with tools), for the
prefix and cache tests."""

from __future__ import annotations

from tokunseba.routing import turn_facts

from tests.conftest import load_fixture


def title_turn():
    fx = load_fixture("claude-code-title-haiku.json")
    return fx["body"], {k: v for k, v in fx["headers"]}


def title_facts(session="s-1"):
    body, headers = title_turn()
    headers["X-Claude-Code-Session-Id"] = session
    return turn_facts("anthropic", body, 2213, headers)

def claude_turn() -> dict:
    return load_fixture("claude-code-print-main-turn.json")["body"]
