"""The README's demo, as written: the real llama-server started by scripts/localmodel.sh,
`tokunseba run` with rules/examples/easy-turns-local.yaml, then in another shell the
README's `eval "$(… env)"`, PATH line and `claude -p …` command with the pinned Claude Code:
at least one turn goes local, as `tokunseba log` shows. Skipped when the local model or
Claude Code is not installed (fails under CI=true)."""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

from .conftest import BIN, CACHE, ROOT, ledger_settled, need_npm_tool
from .test_console_e2e import Run
from .test_localmodel_e2e import _start, _stop

pytestmark = [pytest.mark.e2e, pytest.mark.localmodel, pytest.mark.claudecode]

README = ROOT / "README.md"


def demo_lines() -> list[str]:
    """The shell lines of the README's first-local-turn block (eval, PATH, claude -p, log)."""
    text = README.read_text()
    block = re.search(r"```sh\n(eval \"\$\(\.venv/bin/tokunseba env\)\".*?)```", text, re.S).group(1)
    lines = [ln.split("  #")[0].strip() for ln in block.splitlines() if ln.strip()]
    assert lines[0].startswith('eval "$(.venv/bin/tokunseba env)"') and any(ln.startswith("claude -p") for ln in lines)
    return lines


def test_readme_demo_makes_a_local_turn_with_the_pinned_claude_code(tmp_path):
    need_npm_tool("claude", "Claude Code")
    state = tmp_path / "localmodel"
    url = _start("llama-server", state)
    try:
        rules = tmp_path / "easy.yaml"
        rules.write_text((ROOT / "rules" / "examples" / "easy-turns-local.yaml").read_text()
                         .replace("http://127.0.0.1:28431/v1", url))
        run = Run(tmp_path, "--rules", str(rules))
        try:
            home = tmp_path / "home"
            home.mkdir()
            # the README's lines, with the port and confdir this run uses, and the pinned clients' folder
            script = "\n".join(["set -e", *(
                ln.replace(".venv/bin/tokunseba env", f"{BIN / 'tokunseba'} env --port {run.port} --confdir {run.conf}")
                for ln in demo_lines() if not ln.startswith(".venv/bin/tokunseba log"))])
            env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "TERM": "dumb", "TOKUNSEBA_HOME": str(tmp_path / "th"),
                   "ANTHROPIC_API_KEY": "sk-ant-dummy-readme-demo-0123456789",
                   "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
                   "CLAUDE_CODE_MAX_RETRIES": "0"}
            if str(CACHE) != str(home / ".cache" / "tokunseba"):  # the README's $HOME/.cache/tokunseba
                script = script.replace("$HOME/.cache/tokunseba", str(CACHE))
            p = subprocess.run(["bash", "-c", script], cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=300)
            assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-2000:])
            assert p.stdout.strip(), "Claude Code printed no reply"
            ledger_settled(run.ledger)
        finally:
            out = run.stop()
    finally:
        _stop("llama-server", state)
    turns = json.loads(subprocess.run([str(BIN / "tokunseba"), "log", "--ledger", str(run.ledger), "--json"],
                                      capture_output=True, text=True, timeout=60).stdout)
    local = [t for t in turns if t["endpoint"] == "local" and t["outcome"] == "translated" and t["status"] == 200]
    assert local, turns
    text = subprocess.run([str(BIN / "tokunseba"), "log", "--ledger", str(run.ledger)], capture_output=True,
                          text=True, timeout=60).stdout
    assert "small-toolless → local" in text and "gemma-3-270m" in text, text
    assert any(t["request_id"] in ln and "→ small-toolless → local · translated 200" in ln
               for t in local for ln in out.splitlines()), out  # the console said it too


def test_localmodel_start_without_port_says_the_example_rules_expect_another(tmp_path):
    """`localmodel.sh start` with no --port picks a free port; it then says that the example
    rules expect 28431, so their easy turns would not reach it (issue 22: a mis-set endpoint)."""
    from .test_localmodel_e2e import SCRIPT, _installed

    if not _installed("llama-server"):
        if os.environ.get("CI"):
            pytest.fail("llama-server is not installed: .ci/run must run scripts/ci-extras.sh")
        pytest.skip("llama-server not installed (scripts/localmodel.sh install)")
    env = {**os.environ, "LOCALMODEL_STATE_DIR": str(tmp_path / "state")}
    env.pop("LOCALMODEL_PORT", None)
    try:
        p = subprocess.run([str(SCRIPT), "start"], capture_output=True, text=True, env=env, timeout=180)
        assert p.returncode == 0, p.stderr[-2000:]
        url = p.stdout.strip().splitlines()[-1]
        port = int(re.fullmatch(r"http://127\.0\.0\.1:(\d+)/v1", url).group(1))
        if port == 28431:
            pytest.skip("the free port picked happened to be the example rules' port")
        assert (f"note: the example rules (rules/examples/*.yaml) expect port 28431; this server is on {port}: "
                f"start it with --port 28431, or set your local endpoint's url to {url}") in p.stderr, p.stderr
    finally:
        subprocess.run([str(SCRIPT), "stop"], capture_output=True, text=True, env=env, timeout=60)
