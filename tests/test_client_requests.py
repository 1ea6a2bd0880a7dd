"""client_requests: `tokunseba check` warns, with FILE:LINE, about a route no request of a
pinned client (as measured) can match."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tokunseba.routing.client_requests import KINDS, can_match, never_matching
from tokunseba.routing.rules import load_rules_text

SCRIPT = Path(sys.executable).parent / "tokunseba"
RULES = """\
endpoints:
  local:
    protocol: openai
    url: http://127.0.0.1:9/v1
    max_tokens: 256
routes:
  - name: codex-small
    when: {client: openai-responses, max_request_bytes: 20000}
    to: local
  - name: claude-tiny
    when: {client: anthropic, tools: false, max_request_bytes: 1000}
    to: local
  - name: gemini-pro-toolless
    when: {client: gemini, model: "*pro*", tools: false}
    to: local
  - name: claude-title
    when: {client: anthropic, model: "*haiku*", tools: false, thinking: false}
    to: local
  - name: everything
    to: local
"""


def test_routes_no_pinned_client_request_can_meet_are_named_with_file_and_line():
    warnings = never_matching(load_rules_text(RULES, "r.yaml"))
    assert len(warnings) == 3, warnings
    codex, claude, gemini = warnings
    assert codex.startswith("r.yaml:7: warning: route 'codex-small' can never match Codex 0.171.0's turns (it sends "
                            "main turn: tools, thinking on, 38.8 KB or more;")
    assert claude.startswith("r.yaml:10: warning: route 'claude-tiny' can never match Claude Code 2.1.197's turns")
    assert "session title: no tools, thinking off, 2.2 KB or more, model claude-haiku-4-5-20251001" in claude
    assert gemini.startswith("r.yaml:13: warning: route 'gemini-pro-toolless' can never match Gemini CLI 0.61.0's")
    # each with the next step (issue 31)
    assert codex.endswith("next: Codex always sends tools and 38.8 KB or more (-c model=gpt-5.5; 74 KB, about 7k tokens, "
                          "with its default model): leave out tools: false and max_request_bytes, and give a local "
                          "endpoint the context it needs (scripts/localmodel.sh start --ctx 16384; "
                          "rules/examples/codex-local.yaml), or route it to another endpoint")
    assert "; next: `claude -p --tools \"\" --system-prompt" in claude and "; next: without -m its router call" in gemini


def test_the_title_turn_and_the_toolless_print_turn_match_the_shipped_easy_routes():
    rules = load_rules_text((Path(__file__).resolve().parents[1] / "rules/examples/easy-turns-local.yaml").read_text(),
                            "easy.yaml")
    routes = {r.name: r for r in rules.routes}
    by_what = {k.what: k for k in KINDS if k.client.startswith("Claude Code")}
    assert can_match(routes["claude-background"], by_what["session title"])
    assert can_match(routes["small-toolless"], by_what['main turn with --tools "" --system-prompt'])
    assert not can_match(routes["small-toolless"], by_what["main turn"])  # 48.5 KB, 9 tools


def test_check_prints_the_warning(tmp_path):
    f = tmp_path / "r.yaml"
    f.write_text(RULES)
    p = subprocess.run([str(SCRIPT), "check", str(f)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0
    assert f"{f}:7: warning: route 'codex-small' can never match Codex 0.171.0's turns" in p.stdout
