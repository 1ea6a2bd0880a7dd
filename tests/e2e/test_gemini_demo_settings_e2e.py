"""The README's Gemini CLI demo reads its settings wherever the clone is (issue 41): from a clone
in a world-writable folder (as under /tmp), the block's lines as written (its own Gemini CLI home,
GEMINI_CLI_HOME, with rules/examples/gemini-cli-local.settings.json as its user settings), with the
real Gemini CLI, the real `tokunseba run` and rules/examples/gemini-cli-local.yaml pointed at a
scripted Chat endpoint: no security warning, and the settings hold (the chat turns ask for
temperature 0). The way it was read before, as system settings (GEMINI_CLI_SYSTEM_SETTINGS_PATH),
is skipped there by Gemini CLI ("Security Warning: Skipping system settings file … Parent
directory … is insecure": it wants root to own the file and every folder above it, none
writable by group or others), and its temperature 0 is lost."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from .conftest import ROOT, need_npm_tool
from .test_console_e2e import Run
from .test_proxy_e2e import chat_chunk
from .test_readme_demo_e2e import _script, example_rules
from tests.support.upstream import Recorded, Reply, Upstream

pytestmark = [pytest.mark.e2e, pytest.mark.claudecode]

SETTINGS = "rules/examples/gemini-cli-local.settings.json"
SYSTEM_MD = "rules/examples/gemini-cli-local.system.md"  # its system prompt (GEMINI_SYSTEM_MD)
ANSWER = "Bonjour !"
ROUTED = {"reasoning": "A greeting: simple.", "model_choice": "flash"}


def _routed(body: dict) -> dict:
    """The router's answer in the shape its own schema asks (Gemini CLI's router strategies differ
    by version: a model choice, or a complexity score): every property, an enum's first value."""
    schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema") or {}
    out = {}
    for name, prop in (schema.get("properties") or {}).items():
        if prop.get("enum"):
            out[name] = prop["enum"][0]
        elif prop.get("type") in ("integer", "number"):
            out[name] = 5
        else:
            out[name] = ROUTED.get(name, "A greeting: simple.")
    return out or ROUTED


def _reply(rec: Recorded) -> Reply:
    """The router call (a JSON schema asked) gets its JSON, the main turn a short text; streamed
    or whole as asked."""
    body = rec.json()
    text = json.dumps(_routed(body)) if body.get("response_format") else ANSWER
    usage = {"prompt_tokens": 50, "completion_tokens": 5, "total_tokens": 55}
    if not body.get("stream"):
        return Reply.json({"id": "chatcmpl-gdemo", "object": "chat.completion", "created": 1767225600,
                           "model": "gemma-3-270m", "usage": usage,
                           "choices": [{"index": 0, "finish_reason": "stop",
                                        "message": {"role": "assistant", "content": text}}]})
    cid = "chatcmpl-gdemo-s"
    return Reply.sse([chat_chunk(cid, {"role": "assistant", "content": ""}), chat_chunk(cid, {"content": text}),
                      chat_chunk(cid, {}, "stop"), chat_chunk(cid, usage=usage, choices=False), b"data: [DONE]\n\n"])


def _run_block(tmp_path: Path, clone: Path, tag: str, *, system_settings: bool) -> tuple[subprocess.CompletedProcess, list[dict]]:
    """The README's Gemini CLI block run in ``clone``; with ``system_settings``, its settings given
    the old way (GEMINI_CLI_SYSTEM_SETTINGS_PATH) instead. (The run, the chat requests sent.)"""
    need_npm_tool("gemini", "Gemini CLI")
    work = tmp_path / tag
    work.mkdir()
    with Upstream() as up:
        up.responder = _reply
        run = Run(work, "--rules", str(example_rules(work, "gemini-cli-local.yaml", f"{up.url}/v1")))
        try:
            home = work / "home"
            home.mkdir()  # nothing in it, as on a fresh machine
            script = _script("gemini -p", run, home)
            assert 'export GEMINI_CLI_HOME="${XDG_CONFIG_HOME:-$HOME/.config}/tokunseba/gemini-cli-demo"' in script
            if system_settings:
                script = "\n".join(ln for ln in script.splitlines() if "GEMINI_CLI_HOME" not in ln)
                script = script.replace("\ngemini -p", f'\nexport GEMINI_CLI_SYSTEM_SETTINGS_PATH="$PWD/{SETTINGS}"\ngemini -p')
            env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "TERM": "dumb", "TOKUNSEBA_HOME": str(work / "th")}
            p = subprocess.run(["bash", "-c", script], cwd=clone, env=env, stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=180)
        finally:
            run.stop()
        chats = [r.json() for r in up.requests if r.path.endswith("/chat/completions")]
    return p, chats


def test_the_gemini_cli_demo_settings_are_read_from_a_clone_in_a_world_writable_folder(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # as /tmp
    clone = shared / "tokunseba"
    (clone / "rules" / "examples").mkdir(parents=True)
    shutil.copy(ROOT / SETTINGS, clone / SETTINGS)
    shutil.copy(ROOT / SYSTEM_MD, clone / SYSTEM_MD)

    p, chats = _run_block(tmp_path, clone, "home-of-its-own", system_settings=False)
    assert p.returncode == 0 and ANSWER in p.stdout, (p.stdout[-2000:], p.stderr[-3000:])
    assert "Security Warning" not in p.stderr and "Skipping system settings" not in p.stderr, p.stderr[-3000:]
    main = [c for c in chats if not c.get("response_format")]
    assert main and all(c.get("temperature") == 0 for c in main), [c.get("temperature") for c in chats]
    # its own short system prompt in place of Gemini CLI's 25 KB one (GEMINI_SYSTEM_MD, read from
    # the world-writable clone's copy in its home without a warning)
    systems = [[m["content"] for m in c["messages"] if m["role"] == "system"] for c in main]
    assert all(sys == [(ROOT / SYSTEM_MD).read_text().strip()] for sys in systems), systems
    assert not (clone / ".gemini").exists()  # nothing written into the clone

    # the old way, from the same clone: skipped by Gemini CLI, and its temperature 0 lost
    p, chats = _run_block(tmp_path, clone, "system-settings", system_settings=True)
    assert f"Security Warning: Skipping system settings file '{clone / SETTINGS}'" in p.stderr, p.stderr[-3000:]
    assert f"Parent directory '{shared}' is insecure" in p.stderr
    assert any(c.get("temperature") != 0 for c in chats if not c.get("response_format")), chats
