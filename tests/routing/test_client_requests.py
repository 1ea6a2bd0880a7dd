"""client_requests: `tokunseba check` warns, with FILE:LINE, about a route no request of a
pinned client (as measured) can match."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tokunseba.routing.client_requests import KINDS, can_match, never_matching, too_big
from tokunseba.routing import load_rules_text

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
    rules = load_rules_text((Path(__file__).resolve().parents[2] / "rules/examples/easy-turns-local.yaml").read_text(),
                            "easy.yaml")
    routes = {r.name: r for r in rules.routes}
    by_what = {k.what: k for k in KINDS if k.client.startswith("Claude Code")}
    assert can_match(routes["claude-background"], by_what["session title"])
    assert can_match(routes["small-toolless"], by_what['main turn with --tools "" --system-prompt'])
    assert not can_match(routes["small-toolless"], by_what["main turn"])  # 48.5 KB, 9 tools


def check_output(tmp_path, text: str) -> tuple[Path, str]:
    """`tokunseba check` on ``text`` as a file: its path and what check printed (it exits 0)."""
    f = tmp_path / "r.yaml"
    f.write_text(text)
    p = subprocess.run([str(SCRIPT), "check", str(f)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return f, p.stdout


def test_check_prints_the_warning(tmp_path):
    f, out = check_output(tmp_path, RULES)
    assert f"{f}:7: warning: route 'codex-small' can never match Codex 0.171.0's turns" in out


CONTEXT_RULES = """\
unmatched: refuse
endpoints:
  small:
    protocol: openai
    url: http://127.0.0.1:9/v1
    max_tokens_field: max_tokens
    context_tokens: 4096
  roomy:
    protocol: openai
    url: http://127.0.0.1:9/v2
    max_tokens_field: max_tokens
    context_tokens: 16384
routes:
  - name: codex-small
    when: {client: openai-responses}
    to: small
  - name: claude-toolless
    when: {client: anthropic, tools: false}
    to: small
  - name: claude-all
    when: {client: anthropic}
    to: small
    on_failure: error
  - name: codex-roomy
    when: {client: openai-responses}
    to: roomy
"""


def test_routes_whose_endpoint_cannot_hold_a_clients_turns_are_named_with_the_next_step():
    warnings = too_big(load_rules_text(CONTEXT_RULES, "c.yaml"))
    assert len(warnings) == 2, warnings  # not the tool-less Claude Code route (147 and 383 tokens), not codex-roomy
    codex, claude = warnings
    assert codex.startswith("c.yaml:14: warning: route 'codex-small' → small: Codex 0.171.0's main turn (5,904 prompt "
                            "tokens or more, measured) cannot fit endpoint small's context_tokens 4,096: the server "
                            "answers a context error and each such turn fails over to the next route whose when "
                            "matches, then unmatched: refused; next: a larger context (scripts/localmodel.sh start "
                            "--ctx 16384, and say context_tokens: 16384;")
    assert claude.startswith("c.yaml:20: warning: route 'claude-all' → small: Claude Code 2.1.197's main turn (12,000 ")
    assert "the client gets that error (on_failure: error); next: keep its main turns with the provider" in claude
    # an endpoint that does not say its context is not judged
    assert too_big(load_rules_text(CONTEXT_RULES.replace("    context_tokens: 4096\n", ""), "c.yaml")) == []


def test_the_shipped_examples_fit_their_servers_except_all_local():
    examples = Path(__file__).resolve().parents[2] / "rules" / "examples"
    said = {p.name: too_big(load_rules_text(p.read_text(), p.name)) for p in examples.glob("*.yaml")}
    assert {name for name, w in said.items() if w} == {"all-local.yaml"}, said  # every turn local: the truth is said
    assert load_rules_text((examples / "codex-local.yaml").read_text(), "x").endpoints["local"].context_tokens == 16384


def test_context_tokens_must_be_a_positive_integer():
    import pytest

    from tokunseba.routing import RulesError

    for bad, said in (("0", "context_tokens must be a positive integer"), ("lots", "context_tokens")):
        with pytest.raises(RulesError) as ei:
            load_rules_text(CONTEXT_RULES.replace("context_tokens: 4096", f"context_tokens: {bad}"), "c.yaml")
        assert "c.yaml:7" in str(ei.value) and said in str(ei.value), str(ei.value)


def test_check_prints_the_context_warning(tmp_path):
    f, out = check_output(tmp_path, CONTEXT_RULES)
    assert f"{f}:14: warning: route 'codex-small' → small: Codex 0.171.0's main turn" in out
    m = subprocess.run([str(SCRIPT), "models", "--rules", str(f)], capture_output=True, text=True, timeout=60)
    head = next(ln for ln in m.stdout.splitlines() if ln.startswith("ENDPOINT"))
    assert head.split()[-1] == "CONTEXT" and any(ln.split()[0] == "roomy" and ln.split()[-1] == "16384"
                                                 for ln in m.stdout.splitlines() if ln.strip()), m.stdout
