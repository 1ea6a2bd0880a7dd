"""The product promise with the real, interactive Claude Code (in tmux): its background
session-title turn (Haiku, no tools, thinking off) is sent by the easy-turns rule to the
"local" endpoint, while its main turn goes elsewhere — and the reply still appears on screen.
Both endpoints are scripted OpenAI-compatible servers here, so what each received can be
checked exactly."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from .conftest import BIN, Mitmdump
from .test_claude_code_e2e import DUMMY_KEY, need_claude
from .test_proxy_e2e import chat_chunk
from tests.support.tmux import need_tmux, tmux, wait_screen
from tests.support.upstream import Reply, Upstream

pytestmark = [pytest.mark.e2e, pytest.mark.claudecode]

RULES = """\
endpoints:
  local:
    protocol: openai
    url: {local}/v1
    model: gemma-3-270m
    max_tokens: 512
    max_tokens_field: max_tokens
  main:
    protocol: openai
    url: {main}/v1
routes:
  - name: claude-background
    when: {{client: anthropic, model: "*haiku*", tools: false, thinking: false}}
    to: local
  - name: main-turns
    when: {{client: anthropic}}
    to: main
"""


def _stream(cid: str, text: str) -> Reply:
    return Reply.sse([chat_chunk(cid, {"role": "assistant", "content": ""}), chat_chunk(cid, {"content": text}),
                      chat_chunk(cid, {}, "stop"),
                      chat_chunk(cid, usage={"prompt_tokens": 100, "completion_tokens": 9, "total_tokens": 109},
                                 choices=False),
                      b"data: [DONE]\n\n"], delay=0.05)


def test_interactive_claude_code_title_turn_goes_local_main_turn_elsewhere(tmp_path):
    claude = need_claude()
    need_tmux()
    with Upstream() as local, Upstream() as main:
        local.script(_stream("chatcmpl-title", '{"title": "Lists in Python"}'))
        main.script(_stream("chatcmpl-main", "A list comprehension builds a list from an iterable in one expression."))
        rules = tmp_path / "rules.yaml"
        rules.write_text(RULES.format(local=local.url, main=main.url))
        m = Mitmdump(tmp_path, rules)
        home, work = tmp_path / "home", tmp_path / "work"
        home.mkdir()
        work.mkdir()
        (home / ".claude.json").write_text(json.dumps({
            "hasCompletedOnboarding": True, "theme": "dark",
            "customApiKeyResponses": {"approved": [DUMMY_KEY[-20:]], "rejected": []},
            "projects": {str(work): {"hasTrustDialogAccepted": True, "allowedTools": []}}}))
        env = {"HOME": str(home), "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TERM": "xterm-256color",
               "HTTPS_PROXY": m.url, "HTTP_PROXY": m.url, "NODE_EXTRA_CA_CERTS": str(m.ca),
               "ANTHROPIC_API_KEY": DUMMY_KEY, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
               "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1"}
        sock = str(tmp_path / "tmux.sock")
        envargs = [a for k, v in env.items() for a in ("-e", f"{k}={v}")]
        tmux("new-session", "-d", "-x", "160", "-y", "50", "-c", str(work), *envargs, claude, sock=sock)
        screen = ""
        try:
            wait_screen(sock, "? for shortcuts", 60)  # the prompt box
            tmux("send-keys", "-l", "Explain what a Python list comprehension is, in one sentence.", sock=sock)
            time.sleep(0.5)
            tmux("send-keys", "Enter", sock=sock)
            deadline = time.time() + 120
            while time.time() < deadline:
                time.sleep(0.5)
                screen = tmux("capture-pane", "-p", "-J", sock=sock).stdout
                if "builds a list from an iterable" in screen and local.requests:
                    break
        finally:
            tmux("kill-server", sock=sock)
            m.stop()
        assert "builds a list from an iterable" in screen, screen
        # the background title turn: translated to Chat for the local endpoint, with its model
        title = [r.json() for r in local.requests]
        assert title and title[0]["model"] == "gemma-3-270m" and "tools" not in title[0]
        assert title[0]["max_tokens"] <= 512
        # the main turn (tools, thinking) went to the other endpoint, never to the local one
        mains = [r.json() for r in main.requests]
        assert mains and all(len(b.get("tools", [])) > 0 for b in mains)
    log = json.loads(subprocess.run([str(BIN / "tokunseba"), "log", "--ledger", str(m.ledger), "--json"],
                                    capture_output=True, text=True).stdout)
    rules_used = {t["rule"] for t in log if t["client_protocol"] == "anthropic"}
    assert {"claude-background", "main-turns"} <= rules_used
