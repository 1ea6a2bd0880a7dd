"""A rules file routing Gemini clients to a Chat endpoint and Claude Code to a Gemini endpoint, and
the planned turn of a request under it, shared by the Gemini request codec's tests."""

from __future__ import annotations

import json

from tokunseba.routing import load_rules_text

from tests.support.planning import plan_request


RULES = """\
endpoints:
  local: {protocol: openai, url: "http://127.0.0.1:8000/v1", key_env: LOCAL_KEY, max_tokens: 512}
  gem: {protocol: gemini, url: "http://127.0.0.1:8002/v1beta", key_env: GEM_KEY}
routes:
  - name: gemini-easy
    when: {client: gemini}
    to: local
    model: qwen3
  - name: claude-to-gemini
    when: {client: anthropic}
    to: gem
    model: gemini-2.5-flash
"""
ENV = {"LOCAL_KEY": "sk-local-SECRET", "GEM_KEY": "AIza-endpoint-SECRET"}


def plan(host, path, body, headers):
    return plan_request(load_rules_text(RULES, "r.yaml"), method="POST", host=host, port=443, path=path,
                        headers=headers, body=json.dumps(body).encode(), env=ENV)
