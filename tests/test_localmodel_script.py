"""Light tests of scripts/localmodel.sh and scripts/install-claude-code.sh: usage, argument
errors and the not-installed / not-running paths. They never build, download or start anything:
TOKUNSEBA_CACHE points at an empty temp dir."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
LOCALMODEL = SCRIPTS / "localmodel.sh"
INSTALL_CC = SCRIPTS / "install-claude-code.sh"


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


def run(
    script: Path, *args: str, cache: Path, state: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TOKUNSEBA_CACHE": str(cache)}
    for var in ("LOCALMODEL_PORT", "LOCALMODEL_STATE_DIR"):
        env.pop(var, None)
    if state is not None:
        env["LOCALMODEL_STATE_DIR"] = str(state)
    return subprocess.run(
        ["bash", str(script), *args], env=env, capture_output=True, text=True, timeout=30,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize("flag", ["--help", "-h", "help"])
def test_help_lists_every_command(flag: str, cache: Path) -> None:
    r = run(LOCALMODEL, flag, cache=cache)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage: scripts/localmodel.sh")
    for cmd in ("install", "start [--server K] [--port P]", "stop [--server K]", "status", "url"):
        assert cmd in r.stdout
    assert "llama-server (default) or llama-cpp-python" in r.stdout
    assert str(cache) in r.stdout  # the cache location honours TOKUNSEBA_CACHE
    assert not cache.exists()  # help creates nothing


def test_no_command_prints_usage_and_fails(cache: Path) -> None:
    r = run(LOCALMODEL, cache=cache)
    assert r.returncode == 2
    assert r.stdout == ""
    assert r.stderr.startswith("usage: scripts/localmodel.sh")


def test_unknown_command_is_named(cache: Path) -> None:
    r = run(LOCALMODEL, "frobnicate", cache=cache)
    assert r.returncode == 2
    assert "localmodel: error: unknown command 'frobnicate'" in r.stderr
    assert "usage:" in r.stderr
    assert r.stdout == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("start", "--server", "vllm"), "unknown server 'vllm'"),
        (("start", "--server=ollama"), "unknown server 'ollama'"),
        (("start", "--server"), "--server needs a value"),
        (("start", "--port", "0x50"), "bad port '0x50'"),
        (("start", "--port", "70000"), "bad port '70000'"),
        (("start", "--verbose"), "unknown option '--verbose'"),
        (("url", "--server", "nope"), "unknown server 'nope'"),
        (("stop", "--bogus"), "unknown option '--bogus'"),
        (("install", "extra"), "install takes no arguments"),
    ],
)
def test_bad_arguments_fail_clearly(args: tuple[str, ...], message: str, cache: Path) -> None:
    r = run(LOCALMODEL, *args, cache=cache)
    assert r.returncode == 1
    assert f"localmodel: error: {message}" in r.stderr
    assert "Traceback" not in r.stderr
    assert r.stdout == ""


@pytest.mark.parametrize("kind", ["llama-server", "llama-cpp-python"])
def test_start_without_install_says_to_install(kind: str, cache: Path) -> None:
    r = run(LOCALMODEL, "start", "--server", kind, cache=cache)
    assert r.returncode == 1
    assert "run scripts/localmodel.sh install" in r.stderr
    assert not (cache / "state" / f"{kind}.pid").exists()


def test_url_when_not_running_fails(cache: Path) -> None:
    r = run(LOCALMODEL, "url", "--server", "llama-cpp-python", cache=cache)
    assert r.returncode == 1
    assert "llama-cpp-python is not running" in r.stderr
    assert r.stdout == ""


@pytest.mark.parametrize("private_state", [False, True])
def test_stale_pid_file_is_not_trusted(private_state: bool, cache: Path, tmp_path: Path) -> None:
    """A pid file naming a live process that is not our server is ignored: url fails, status
    says stopped, and stop leaves that process alive and clears the state. The state lives in
    $TOKUNSEBA_CACHE/state unless LOCALMODEL_STATE_DIR names another dir."""
    state = tmp_path / "private" if private_state else cache / "state"
    state.mkdir(parents=True)
    opt = {"state": state} if private_state else {}
    other = subprocess.Popen(["sleep", "60"])
    try:
        (state / "llama-server.pid").write_text(f"{other.pid}\n")
        (state / "llama-server.port").write_text("1\n")
        assert run(LOCALMODEL, "url", cache=cache, **opt).returncode == 1
        status = run(LOCALMODEL, "status", cache=cache, **opt)
        assert status.returncode == 0
        assert "llama-server: stopped" in status.stdout
        stop = run(LOCALMODEL, "stop", cache=cache, **opt)
        assert stop.returncode == 0
        assert other.poll() is None  # not ours: not killed
        assert not (state / "llama-server.pid").exists()
    finally:
        other.kill()
        other.wait()


def test_status_on_empty_cache(cache: Path) -> None:
    r = run(LOCALMODEL, "status", cache=cache)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"cache: {cache}"
    assert "model: missing (run install)" in lines
    assert "llama-server binary: missing (run install)" in lines
    assert "llama-server: stopped" in lines
    assert "llama-cpp-python: stopped" in lines


def test_install_claude_code_usage(cache: Path) -> None:
    ok = run(INSTALL_CC, "--help", cache=cache)
    assert ok.returncode == 0
    assert f"{cache}/npm" in ok.stdout
    bad = run(INSTALL_CC, "--global", cache=cache)
    assert bad.returncode == 1
    assert "install-claude-code: error: unexpected argument '--global'" in bad.stderr
    assert not cache.exists()
