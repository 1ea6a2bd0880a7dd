"""Driving a real terminal program in tmux, for the e2e tests of interactive clients: a tmux
server of its own per test (its socket under the test's tmp dir), so the tests never touch a
user's tmux; skipped when tmux is not installed (fails under CI=true)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest


def need_tmux() -> None:
    if not shutil.which("tmux"):
        if os.environ.get("CI"):
            pytest.fail("tmux is not installed: scripts/ci-extras.sh installs it")
        pytest.skip("tmux not installed")


def tmux(*args: str, sock: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """One tmux command on the server at ``sock`` (the server starts with ``env``, when given)."""
    return subprocess.run(["tmux", "-S", sock, *args], capture_output=True, text=True, timeout=30, env=env)


def screen(sock: str) -> str:
    """The pane as shown now, wrapped lines joined."""
    return tmux("capture-pane", "-p", "-J", sock=sock).stdout


def wait_screen(sock: str, text: str, timeout: float) -> str:
    """The screen once it shows ``text``, or as it was when ``timeout`` ran out."""
    deadline = time.monotonic() + timeout
    shown = screen(sock)
    while text not in shown and time.monotonic() < deadline:
        time.sleep(0.5)
        shown = screen(sock)
    return shown
