"""mitmdump start-up with good and bad rules files; `tokunseba run` builds that command."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tokunseba.protocols.detect import provider_hosts

from .conftest import ADDON, BIN, Mitmdump

pytestmark = pytest.mark.e2e

BAD_RULES = {
    "unknown-key": ("routes:\n  - name: r\n    to: openai\n    colour: red\n", 4),
    "unknown-endpoint": ("routes:\n  - name: r\n    to: nowhere\n", 3),
    "bad-regex": ("routes:\n  - name: r\n    when:\n      last_user_matches: \"(unclosed\"\n    to: openai\n", 4),
    "bad-protocol": ("endpoints:\n  x:\n    protocol: grpc\n    url: http://127.0.0.1:1/v1\n", 3),
}


@pytest.mark.parametrize("name", sorted(BAD_RULES))
def test_bad_rules_stop_mitmdump_with_file_and_line(tmp_path, name):
    text, line = BAD_RULES[name]
    rules = tmp_path / f"{name}.yaml"
    rules.write_text(text)
    p = subprocess.run([str(BIN / "mitmdump"), "--listen-host", "127.0.0.1", "-p", "0", "--set",
                        f"confdir={tmp_path / 'conf'}", "-s", str(ADDON), "--set", f"tokunseba_rules={rules}",
                        "--set", f"tokunseba_ledger={tmp_path / 'l.db'}"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    out = p.stdout + p.stderr
    assert f"{rules}:{line}:" in out, out


def test_good_rules_start_and_stop(tmp_path):
    rules = Path(__file__).resolve().parents[2] / "rules" / "default.yaml"
    m = Mitmdump(tmp_path, rules)
    try:
        assert m.port > 0 and m.proc.poll() is None
    finally:
        m.stop()
    assert m.proc.returncode == 0


def test_tokunseba_run_dry_run_builds_the_mitmdump_command(tmp_path):
    rules = Path(__file__).resolve().parents[2] / "rules" / "examples" / "easy-turns-local.yaml"
    p = subprocess.run([str(BIN / "tokunseba"), "run", "--rules", str(rules), "--port", "0", "--dry-run"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    cmd = p.stdout.strip()
    assert "mitmdump" in cmd and str(ADDON) in cmd and "connection_strategy=lazy" in cmd
    assert "--listen-host 127.0.0.1" in cmd
    for host in provider_hosts():  # every host detection knows is decrypted
        assert f"allow_hosts=^{re.escape(host)}:443$" in cmd
    assert f"tokunseba_rules={rules}" in cmd


def test_tokunseba_env_prints_client_exports(tmp_path):
    p = subprocess.run([str(BIN / "tokunseba"), "env", "--port", "18765", "--confdir", str(tmp_path)],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0
    out = p.stdout
    assert "export HTTPS_PROXY=http://127.0.0.1:18765" in out
    assert f"export NODE_EXTRA_CA_CERTS={tmp_path}/mitmproxy-ca-cert.pem" in out
    assert "export SSL_CERT_FILE=" in out
    # the lines are valid shell
    r = subprocess.run(["bash", "-c", out + "\necho \"$HTTPS_PROXY|$NODE_EXTRA_CA_CERTS\""], capture_output=True, text=True)
    assert r.stdout.strip().startswith("http://127.0.0.1:18765|")


def test_tokunseba_help_teaches():
    p = subprocess.run([str(BIN / "tokunseba"), "--help"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0
    for word in ("run", "env", "check", "models", "stats", "explain", "log", "eval"):
        assert word in p.stdout


def test_tokunseba_run_web_dry_run_uses_mitmweb():
    p = subprocess.run([str(BIN / "tokunseba"), "run", "--web", "--rules", "rules/examples/easy-turns-local.yaml",
                        "--dry-run"], capture_output=True, text=True, timeout=30, cwd=Path(__file__).resolve().parents[2])
    assert p.returncode == 0, p.stderr
    assert "mitmweb" in p.stdout and "store_streamed_bodies=true" in p.stdout and "web_port=8081" in p.stdout


@pytest.mark.parametrize("name", ["default.yaml", "examples/easy-turns-local.yaml", "examples/all-local.yaml",
                                  "examples/retarget-anthropic.yaml"])
def test_tokunseba_check_accepts_shipped_rules(name):
    root = Path(__file__).resolve().parents[2]
    p = subprocess.run([str(BIN / "tokunseba"), "check", str(root / "rules" / name)], capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("OK")


def test_tokunseba_check_reports_file_and_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("routes:\n  - name: r\n    to: nowhere\n")
    p = subprocess.run([str(BIN / "tokunseba"), "check", str(bad)], capture_output=True, text=True, timeout=30)
    assert p.returncode == 1
    assert p.stderr.startswith(f"{bad}:3:") and "Traceback" not in p.stderr


def test_tokunseba_run_really_starts_mitmdump_with_the_addon(tmp_path):
    """The README's run command, for real: `tokunseba run` execs mitmdump, which listens on
    loopback, loads the addon and the rules, and stops cleanly on SIGTERM."""
    import signal
    import time

    root = Path(__file__).resolve().parents[2]
    p = subprocess.Popen([str(BIN / "tokunseba"), "run", "--rules", str(root / "rules" / "default.yaml"), "--port", "0",
                          "--confdir", str(tmp_path / "conf"), "--ledger", str(tmp_path / "ledger.db")],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines, port, reverse = [], None, 0
        deadline = time.time() + 30
        # every listener up (the proxy and the 3 base-URL listeners) before the SIGTERM: mitmproxy
        # 12's Rust side panics (SIGSEGV) when the interpreter stops while a listener still starts
        while time.time() < deadline and (port is None or reverse < 3):
            line = p.stdout.readline()
            if not line:
                break
            lines.append(line)
            m = re.search(r"HTTP\(S\) proxy listening at 127\.0\.0\.1:(\d+)", line)
            port = int(m.group(1)) if m else port
            reverse += bool(re.search(r"reverse proxy to \S+ listening at 127\.0\.0\.1:\d+", line))
        assert port and reverse == 3, "".join(lines)
        # port 0: the hint says where the port is printed and which env line to run with it
        # the command as it works from another shell: its name when on PATH, else its absolute path
        on_path = shutil.which("tokunseba")
        cli = "tokunseba" if on_path and os.path.samefile(on_path, BIN / "tokunseba") else str(BIN / "tokunseba")
        hint = next(ln for ln in lines if f"eval \"$({cli} env" in ln)
        assert 'mitmdump prints the port it picked ("proxy listening at 127.0.0.1:N")' in hint
        assert f'eval "$({cli} env --port N --confdir {tmp_path / "conf"})"' in hint
        assert (tmp_path / "conf" / "mitmproxy-ca-cert.pem").exists()
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(20)
    assert p.returncode == 0
