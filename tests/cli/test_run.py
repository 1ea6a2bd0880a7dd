"""`tokunseba run` / `env` / `check` arguments: the mitmdump command, the hint that points
clients at the proxy, where the CA bundle goes, the help text, and one-line errors for bad
port numbers (through the installed console script)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tokunseba.cli import run as cli_run
from tokunseba.cli.main import main
from tokunseba.protocols.detect import api_hosts, provider_hosts

SCRIPT = Path(sys.executable).parent / "tokunseba"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(autouse=True)
def _no_env_rules(monkeypatch):
    monkeypatch.delenv("TOKUNSEBA_RULES", raising=False)


@pytest.fixture
def execv(monkeypatch):
    """Record what `run` would exec instead of replacing the test process."""
    calls: list[list[str]] = []
    monkeypatch.setattr(os, "execv", lambda path, argv: calls.append(list(argv)))
    return calls


def allowed_hosts(cmd: list[str]) -> list[str]:
    return [m.group(1).replace("\\", "") for a in cmd if (m := re.fullmatch(r"allow_hosts=\^(.+):443\$", a))]


def test_run_decrypts_every_detected_provider_host_and_the_rules_https_hosts(capsys, tmp_path):
    rules = tmp_path / "r.yaml"
    rules.write_text("endpoints:\n  corp:\n    protocol: openai\n    url: https://llm.corp.example/v1\n"
                     "  local:\n    protocol: openai\n    url: http://127.0.0.1:9/v1\n")
    rc, out, err = run(capsys, "run", "--dry-run", "--rules", str(rules))
    assert (rc, err) == (0, "")
    assert allowed_hosts(shlex.split(out)) == [*provider_hosts(), "llm.corp.example"]  # plain-HTTP hosts need none


def test_run_on_port_0_says_where_the_real_port_is_printed(capsys, execv, tmp_path):
    rc, out, err = run(capsys, "run", "--port", "0", "--confdir", str(tmp_path / "conf"))
    assert rc == 0 and execv and execv[0][execv[0].index("-p") + 1] == "0"
    assert "PORT" not in err
    assert ('mitmdump prints the port it picked ("proxy listening at 127.0.0.1:N"); point clients at it with:  '
            f'eval "$({cli_run.cli_command()} env --port N --confdir {tmp_path / "conf"})"') in err


def need_free(*ports: int) -> None:
    """`run` says so and stops when its port is taken (another proxy on this machine)."""
    for port in ports:
        if cli_run.port_in_use("127.0.0.1", port):
            pytest.skip(f"127.0.0.1:{port} is in use on this machine")


def test_run_hint_is_the_env_command_that_matches(capsys, execv, tmp_path, monkeypatch):
    need_free(18111, cli_run.DEFAULT_PORT)
    monkeypatch.chdir(tmp_path)
    rc, _, err = run(capsys, "run", "--port", "18111", "--confdir", "conf")
    assert rc == 0 and execv
    hint = re.search(r'eval "\$\((.+)\)"', err).group(1)
    assert hint == f"{cli_run.cli_command()} env --port 18111 --confdir {tmp_path / 'conf'}"  # absolute: the client's cwd differs
    rc, out, _ = run(capsys, *shlex.split(hint)[1:])
    assert rc == 0
    assert "export HTTPS_PROXY=http://127.0.0.1:18111" in out
    assert f"export NODE_EXTRA_CA_CERTS={tmp_path / 'conf' / 'mitmproxy-ca-cert.pem'}" in out
    rc, _, err = run(capsys, "run")  # the defaults: nothing to repeat
    assert f'point clients at it with:  eval "$({cli_run.cli_command()} env)"' in err


@pytest.mark.parametrize("home_env", ["TOKUNSEBA_HOME", "XDG_DATA_HOME"])
def test_env_writes_the_ca_bundle_under_the_ledger_home(capsys, tmp_path, monkeypatch, home_env):
    """The same home as the ledger (ledger.tokunseba_home), "~" expanded."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)  # an unexpanded "~" would become ./~ here
    monkeypatch.delenv("TOKUNSEBA_HOME", raising=False)
    monkeypatch.setenv(home_env, "~/h")
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "mitmproxy-ca-cert.pem").write_bytes(b"-----BEGIN CERTIFICATE-----\nTEST\n-----END CERTIFICATE-----\n")
    rc, out, _ = run(capsys, "env", "--confdir", str(conf))
    bundle = tmp_path / "h" / ("ca-bundle.pem" if home_env == "TOKUNSEBA_HOME" else "tokunseba/ca-bundle.pem")
    assert rc == 0 and f"export SSL_CERT_FILE={bundle}" in out
    assert bundle.read_bytes().endswith(b"TEST\n-----END CERTIFICATE-----\n")
    assert not (tmp_path / "~").exists()


def test_env_brackets_an_ipv6_host(capsys):
    rc, out, _ = run(capsys, "env", "--host", "::1", "--port", "8443")
    assert rc == 0 and "export HTTPS_PROXY='http://[::1]:8443'" in out


def test_env_help_explains_each_option():
    p = subprocess.run([str(SCRIPT), "env", "--help"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0
    text = " ".join(p.stdout.split())  # argparse wraps lines
    assert "--host HOST the proxy's address as clients reach it (default 127.0.0.1)" in text
    assert "--port PORT the proxy's port, as given to tokunseba run (default 8080)" in text
    assert "--confdir DIR mitmproxy confdir holding its CA, as given to tokunseba run (default ~/.mitmproxy)" in text
    assert p.stdout.rstrip().endswith('example: eval "$(tokunseba env)"; claude')
    assert p.stdout.count("usage:") == 1
    p = subprocess.run([str(SCRIPT), "run", "--help"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and "--port PORT)" not in p.stdout


@pytest.mark.parametrize("argv,line", [
    (["run", "--dry-run", "--port", "99999999999"], "error: --port: expected a port number from 0 to 65535, "
                                                    "got '99999999999'"),
    (["run", "--dry-run", "--port", "-1"], "error: --port: expected a port number from 0 to 65535, got '-1'"),
    (["run", "--dry-run", "--web", "--web-port", "65536"], "error: --web-port: expected a port number from 0"),
    (["run", "--dry-run", "--port", "8o80"], "error: --port: expected a port number from 0 to 65535, got '8o80'"),
    (["env", "--port", "100000000000000000000000"], "error: --port: expected a port number from 1 to 65535"),
    (["env", "--port", "0"], "error: --port: expected a port number from 1 to 65535, got '0'"),
])
def test_bad_port_numbers_are_one_line_through_the_console_script(tmp_path, argv, line):
    p = subprocess.run([str(SCRIPT), *argv], capture_output=True, text=True, timeout=30,
                       env={**os.environ, "TOKUNSEBA_HOME": str(tmp_path)})
    assert p.returncode == 2, p.stderr
    assert p.stdout == "" and p.stderr.startswith(line) and p.stderr.count("\n") == 1
    assert "Traceback" not in p.stderr


def test_port_number_bounds():
    assert cli_run.port_number("--port", "0", 0) == 0
    assert cli_run.port_number("--port", "65535", 1) == 65535
    for bad in ("65536", "-1", "1.5", ""):
        with pytest.raises(ValueError, match="expected a port number"):
            cli_run.port_number("--port", bad, 0)


def _set_values(cmd: list[str], name: str) -> list[str]:
    return [cmd[i + 1].split("=", 1)[1] for i, a in enumerate(cmd[:-1]) if a == "--set" and cmd[i + 1].startswith(name + "=")]


def test_run_web_sets_one_column_per_option_and_prints_the_url_with_its_token(capsys, execv):
    import argon2

    need_free(cli_run.DEFAULT_PORT, 18222)
    rc, _, err = run(capsys, "run", "--web", "--web-port", "18222")
    assert rc == 0 and execv
    cmd = execv[0]
    assert Path(cmd[0]).name == "mitmweb"
    # mitmproxy 12 reads web_columns as a list: one --set per column, never one comma-joined value
    assert _set_values(cmd, "web_columns") == list(cli_run.WEB_COLUMNS)
    assert "comment" in cli_run.WEB_COLUMNS and not any("," in v for v in _set_values(cmd, "web_columns"))
    token = re.search(r"http://127\.0\.0\.1:18222/\?token=([0-9a-f]{32})\n", err).group(1)
    # and the URL that opens on the model turns (mitmweb 12 reads its Search box from the fragment)
    assert (f"mitmweb on the model turns only (Search: ~h x-tokunseba-request-id; clear it for every flow):  "
            f"http://127.0.0.1:18222/?token={token}#/flows?s=~h%20x-tokunseba-request-id\n") in err
    (hashed,) = _set_values(cmd, "web_password")
    assert token not in " ".join(cmd)  # only the hash is in the process list
    assert hashed.startswith("$argon2") and argon2.PasswordHasher().verify(hashed, token)
    run(capsys, "run", "--web", "--web-port", "18222")
    assert _set_values(execv[1], "web_password") != [hashed]  # a new token on every start


def test_run_names_the_command_that_works_from_another_shell(tmp_path):
    """Not on PATH (run as .venv/bin/tokunseba): the hint names it by its absolute path; on
    PATH: by its name."""
    bare_path = "/usr/bin:/bin"
    p = subprocess.run([str(SCRIPT), "run", "--dry-run"], capture_output=True, text=True, timeout=30, cwd=tmp_path,
                       env={**os.environ, "PATH": bare_path})
    assert p.returncode == 0
    p = subprocess.run([str(SCRIPT), "run", "--port", "0", "--confdir", str(tmp_path / "c"), "--", "--version"],
                       capture_output=True, text=True, timeout=60, cwd=tmp_path, env={**os.environ, "PATH": bare_path})
    assert f'eval "$({SCRIPT} env --port N --confdir {tmp_path / "c"})"' in p.stderr, p.stderr
    p = subprocess.run(["tokunseba", "run", "--port", "0", "--confdir", str(tmp_path / "c"), "--", "--version"],
                       capture_output=True, text=True, timeout=60, cwd=tmp_path,
                       env={**os.environ, "PATH": f"{SCRIPT.parent}:{bare_path}"})
    assert f'eval "$(tokunseba env --port N --confdir {tmp_path / "c"})"' in p.stderr, p.stderr


def test_dry_run_prints_the_command_whatever_listens_on_the_port(capsys):
    import socket

    with socket.create_server(("127.0.0.1", 0)) as busy:
        rc, out, err = run(capsys, "run", "--dry-run", "--port", str(busy.getsockname()[1]))
    assert (rc, err) == (0, "") and "mitmdump" in out


def test_run_on_a_busy_port_says_to_use_port(tmp_path):
    import socket

    busy = socket.create_server(("127.0.0.1", 0))
    port = busy.getsockname()[1]
    try:
        p = subprocess.run([str(SCRIPT), "run", "--port", str(port), "--confdir", str(tmp_path / "c")],
                           capture_output=True, text=True, timeout=60, cwd=tmp_path)
    finally:
        busy.close()
    assert p.returncode == 2
    assert p.stderr.startswith(f"error: 127.0.0.1:{port} is already in use")
    assert "start on another port with --port N (--port 0 picks a free one)" in p.stderr
    assert "--mode" not in p.stderr and "regular@" not in p.stderr


# ---------------------------------------------------------------- base URLs (issue 30)


def _modes(cmd: list[str]) -> list[str]:
    return [cmd[i + 1] for i, a in enumerate(cmd[:-1]) if a == "--mode"]


def test_run_listens_as_the_proxy_and_one_reverse_listener_per_provider_host(capsys):
    rc, out, err = run(capsys, "run", "--dry-run", "--port", "9100")
    assert (rc, err) == (0, "")
    assert _modes(shlex.split(out)) == ["regular", *(f"reverse:https://{h}@{9102 + i}"
                                                     for i, h in enumerate(api_hosts()))]
    assert list(api_hosts()) == ["api.anthropic.com", "api.openai.com", "generativelanguage.googleapis.com"]
    rc, out, _ = run(capsys, "run", "--dry-run", "--base-url-port", "9300")
    assert _modes(shlex.split(out))[1:] == [f"reverse:https://{h}@{9300 + i}" for i, h in enumerate(api_hosts())]
    rc, out, _ = run(capsys, "run", "--dry-run", "--no-base-url")
    assert _modes(shlex.split(out)) == []  # mitmproxy's default: the proxy alone, as before


def test_run_on_port_0_picks_consecutive_free_base_url_ports(capsys):
    for argv in (["--port", "0"], ["--base-url-port", "0"]):
        rc, out, _ = run(capsys, "run", "--dry-run", *argv)
        ports = [int(m.rsplit("@", 1)[1]) for m in _modes(shlex.split(out))[1:]]
        assert rc == 0 and len(ports) == 3 and 0 not in ports and ports == list(range(ports[0], ports[0] + 3))


def test_user_modes_after_the_double_dash_replace_the_proxys_own(capsys):
    rc, out, _ = run(capsys, "run", "--dry-run", "--", "--mode", "upstream:http://corp-proxy:3128")
    modes = _modes(shlex.split(out))
    assert rc == 0 and "regular" not in modes and "upstream:http://corp-proxy:3128" in modes
    assert sum(m.startswith("reverse:https://") for m in modes) == 3


def test_run_prints_the_base_urls_and_the_env_line_that_matches(capsys, execv):
    need_free(18400, 18402, 18403, 18404)
    rc, _, err = run(capsys, "run", "--port", "18400")
    assert rc == 0 and execv
    assert ("tokunseba: base URLs (no proxy, no CA: each forwards only to its provider, same rules and ledger):  "
            "anthropic http://127.0.0.1:18402 · openai / openai-responses http://127.0.0.1:18403 · "
            "gemini http://127.0.0.1:18404") in err
    assert f"each client's settings for them:  {cli_run.cli_command()} env --base-url --port 18400" in err
    rc, out, _ = run(capsys, "env", "--base-url", "--port", "18400")
    assert "export ANTHROPIC_BASE_URL=http://127.0.0.1:18402" in out
    assert "export OPENAI_BASE_URL=http://127.0.0.1:18403/v1" in out
    assert "export GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:18404" in out


def test_env_base_url_prints_every_clients_settings_and_no_proxy(capsys):
    rc, out, err = run(capsys, "env", "--base-url", "--base-url-port", "9500")
    assert (rc, err) == (0, "")
    lines = out.splitlines()
    assert not any(ln.startswith("export HTTPS_PROXY") or "NODE_EXTRA_CA_CERTS=" in ln or "SSL_CERT_FILE=" in ln
                   for ln in lines)
    assert "export ANTHROPIC_BASE_URL=http://127.0.0.1:9500" in lines
    assert "export GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:9502" in lines
    assert '"selectedType": "gemini-api-key"' in out
    alias = next(ln for ln in lines if ln.startswith("alias codex="))
    words = shlex.split(shlex.split(alias.split("=", 1)[1])[0])  # as the shell expands the alias
    assert words[:3] == ["codex", "-c", "model_provider=tokunseba"]
    assert "model_providers.tokunseba.base_url=http://127.0.0.1:9501/v1" in words
    assert "model_providers.tokunseba.wire_api=responses" in words
    # every line is a comment, an export or the alias: safe to eval, and a shell reads it as meant
    assert all(ln.startswith(("#", "export ", "alias ")) for ln in lines), lines
    r = subprocess.run(["bash", "-c", 'shopt -s expand_aliases; eval "$1"\necho "$ANTHROPIC_BASE_URL|$OPENAI_BASE_URL|'
                        '$GOOGLE_GEMINI_BASE_URL|${HTTPS_PROXY-unset}"; alias codex', "bash", out],
                       capture_output=True, text=True, timeout=30, env={"PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    first, alias_line = r.stdout.splitlines()
    assert first == "http://127.0.0.1:9500|http://127.0.0.1:9501/v1|http://127.0.0.1:9502|unset"
    assert alias_line == alias
    rc, out, _ = run(capsys, "env", "--base-url", "--host", "::1", "--port", "9000")
    assert "export ANTHROPIC_BASE_URL='http://[::1]:9002'" in out


@pytest.mark.parametrize("argv,line", [
    (["run", "--dry-run", "--base-url-port", "65534"], "error: --base-url-port: the base-URL ports 65534 to 65536 "
                                                        "pass 65535; give --base-url-port N"),
    (["run", "--dry-run", "--port", "65534"], "error: --base-url-port: the base-URL ports 65536 to 65538 pass"),
    (["run", "--dry-run", "--base-url-port", "x"], "error: --base-url-port: expected a port number from 0 to 65535"),
    (["run", "--dry-run", "--port", "9000", "--base-url-port", "8999"], "error: two listeners on one port"),
    (["run", "--dry-run", "--web", "--port", "9000", "--web-port", "9003"], "error: two listeners on one port"),
    (["env", "--base-url", "--base-url-port", "0"], "error: --base-url-port: expected a port number from 1"),
])
def test_bad_base_url_ports_are_one_line(tmp_path, argv, line):
    p = subprocess.run([str(SCRIPT), *argv], capture_output=True, text=True, timeout=30,
                       env={**os.environ, "TOKUNSEBA_HOME": str(tmp_path)})
    assert p.returncode == 2, p.stderr
    assert p.stdout == "" and p.stderr.startswith(line) and p.stderr.count("\n") == 1, p.stderr


def test_run_on_a_busy_base_url_port_says_to_use_base_url_port(tmp_path):
    import socket

    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = busy.getsockname()[1]
        free = [p for p in (port - 3,) if p > 1024 and not cli_run.port_in_use("127.0.0.1", p)]
        if not free:
            pytest.skip("no free port just below the busy one")
        p = subprocess.run([str(SCRIPT), "run", "--port", str(free[0]), "--confdir", str(tmp_path / "c")],
                           capture_output=True, text=True, timeout=60, cwd=tmp_path)  # base URLs: port-1 .. port+1
    assert p.returncode == 2
    assert re.match(r"error: 127\.0\.0\.1:\d+ is already in use", p.stderr), p.stderr  # port, or port-1 if taken too
    assert ("start on other ports with --base-url-port N (--base-url-port 0 picks free ones; the base-URL listeners "
            "take N and the next ones), or --no-base-url") in p.stderr


def test_run_help_explains_the_base_url_options():
    p = subprocess.run([str(SCRIPT), "run", "--help"], capture_output=True, text=True, timeout=30)
    text = " ".join(p.stdout.split())
    assert "--base-url-port PORT the first port of the base-URL listeners" in text
    assert "anthropic PORT, openai / openai-responses PORT+1, gemini PORT+2" in text
    assert "--no-base-url listen only as the HTTPS proxy" in text


def test_an_option_given_after_dashdash_wins_over_the_one_run_adds(capsys):
    """`tokunseba run -- --set flow_detail=3`: mitmproxy refuses an option given twice, so run
    leaves its own flow_detail=0 out and the user's value is the one mitmdump gets."""
    rc, out, err = run(capsys, "run", "--dry-run", "--", "--set", "flow_detail=3", "--set=tokunseba_console=all")
    assert rc == 0, err
    cmd = shlex.split(out.strip().splitlines()[-1])
    sets = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--set"] + [a[6:] for a in cmd if a.startswith("--set=")]
    assert [s for s in sets if s.startswith("flow_detail=")] == ["flow_detail=3"]
    assert [s for s in sets if s.startswith("tokunseba_console=")] == ["tokunseba_console=all"]
    assert "connection_strategy=lazy" in sets  # the others stay


def test_run_says_when_its_rules_route_nothing(tmp_path):
    """rules/default.yaml routes nothing: run says so at start, with where to look."""
    from tokunseba.cli.run import _routes_nothing

    root = Path(__file__).resolve().parents[2]
    said = _routes_nothing(str(root / "rules" / "default.yaml"))
    assert said and "has no routes: nothing is routed: every turn passes through" in said and "rules/examples/" in said
    assert _routes_nothing(str(root / "rules" / "examples" / "easy-turns-local.yaml")) is None
