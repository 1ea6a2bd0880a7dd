"""`tokunseba env`'s context settings (cli/context_env.py): the smallest main-turn window of the
rules' local endpoints, and the env command reading the rules file."""

from __future__ import annotations

import subprocess
import sys

from tokunseba.cli.context_env import context_lines
from tokunseba.routing import load_rules_text


ENV_RULES = """\
endpoints:
  small: {protocol: anthropic, url: "http://127.0.0.1:9/v1", max_tokens: 64, context_tokens: 4096}
  big: {protocol: anthropic, url: "http://127.0.0.1:8/v1", max_tokens: 64, context_tokens: 32768}
  silent: {protocol: anthropic, url: "http://127.0.0.1:7/v1", max_tokens: 64}
routes:
  - name: titles
    when: {client: anthropic, background: true}
    to: small                    # background only: never a main turn
  - name: main
    when: {client: anthropic}
    to: anthropic
    earn: {to: big}              # an earned candidate may take main turns too
"""


def test_env_context_settings_for_the_smallest_main_turn_window():
    lines = context_lines(load_rules_text(ENV_RULES))
    assert lines[0].startswith("# Claude Code: its main turns may go to big (route main), whose window is 32768")
    assert "export CLAUDE_CODE_MAX_CONTEXT_TOKENS=32768  # " in lines[1]
    assert lines[2].startswith("export CLAUDE_CODE_AUTO_COMPACT_WINDOW=32768")
    more = ENV_RULES + "  - name: other\n    to: silent\n  - name: sub\n    when: {agent: subagent}\n    to: small\n"
    lines = context_lines(load_rules_text(more))
    assert "CLAUDE_CODE_MAX_CONTEXT_TOKENS=32768" in lines[1]  # a subagent-only route is not a main turn's
    assert lines[-1].startswith("# Claude Code's main turns may also go to silent (route other), whose window the rules")
    assert context_lines(load_rules_text("")) == []


def test_env_command_reads_the_rules(tmp_path):
    rules = tmp_path / "r.yaml"
    rules.write_text(ENV_RULES)
    p = subprocess.run([sys.executable, "-m", "tokunseba.cli", "env", "--rules", str(rules)], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0 and "export CLAUDE_CODE_AUTO_COMPACT_WINDOW=32768" in p.stdout
    rules.write_text("routes: [")
    p = subprocess.run([sys.executable, "-m", "tokunseba.cli", "env", "--rules", str(rules)], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 1 and "YAML syntax error" in p.stderr
