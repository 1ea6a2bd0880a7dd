"""End to end: a provider host that cannot be reached, for turns that pass through to it.

A real mitmdump with the addon and no routes (every turn passes through to its provider),
on a machine where the provider hosts cannot be reached: ``point_hosts.py`` makes the proxy
connect to a loopback address instead of each provider host (nothing listening there; a
TLS server whose certificate is not trusted; a listener that never answers). Each client
(the SDKs, and Claude Code, Codex and Gemini CLI where installed) gets an error in its own
protocol that names the host and the reason and carries the request id, made by tokunseba
(not mitmproxy's HTML 502 page), and the ledger has the turn."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import ssl
import subprocess
import threading
import time
from pathlib import Path

import anthropic
import httpx
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from .conftest import Mitmdump, ledger_settled, need_npm_tool
from tests.support.upstream import closed_port

pytestmark = pytest.mark.e2e

HERE = Path(__file__).resolve().parent
HOSTS = ("api.anthropic.com", "api.openai.com", "generativelanguage.googleapis.com", "chatgpt.com")
RID_HEADER = "x-tokunseba-request-id"


def start_pointed(work: Path, port: int, *extra: str) -> Mitmdump:
    """mitmdump (no rules: everything passes through) whose provider hosts are at 127.0.0.1:port."""
    point = ";".join(f"{h}=127.0.0.1:{port}" for h in HOSTS)
    work.mkdir(parents=True, exist_ok=True)
    return Mitmdump(work, None, env={"TK_TEST_POINT": point},
                    extra=["-s", str(HERE.parent / "support" / "point_hosts.py"), *extra])


@pytest.fixture(scope="module")
def refused(tmp_path_factory):
    port = closed_port()
    m = start_pointed(tmp_path_factory.mktemp("unreachable"), port)
    m.point_port = port
    yield m
    m.stop()


def rows(proxy: Mitmdump, *request_ids: str) -> dict[str, dict]:
    ledger_settled(proxy.ledger, 20.0, *request_ids)
    con = sqlite3.connect(proxy.ledger)
    con.row_factory = sqlite3.Row
    try:
        out = {r["request_id"]: dict(r) for r in con.execute("SELECT * FROM turns")}
        for rid, row in out.items():
            row["events"] = [dict(e) for e in con.execute("SELECT kind, data FROM events WHERE request_id = ?", (rid,))]
        return out
    finally:
        con.close()


def new_rows(proxy: Mitmdump, before: set[str], timeout: float = 20.0) -> list[dict]:
    """The turns recorded since ``before``, waiting (the writer batches) until there is one."""
    deadline = time.monotonic() + timeout
    while not (new := [r for rid, r in rows(proxy).items() if rid not in before]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return new


def assert_recorded(proxy: Mitmdump, rid: str, host: str, reason: str) -> dict:
    row = rows(proxy, rid)[rid]
    assert row["outcome"] == "error", row
    assert host in row["error"] and reason in row["error"], row["error"]
    assert row["endpoint"] is None and row["rule"] is None  # a pass-through turn
    kinds = [e["kind"] for e in row["events"]]
    assert "upstream_unreachable" in kinds, kinds
    return row


def client_env(proxy: Mitmdump, monkeypatch) -> None:
    for k, v in proxy.client_env().items():
        monkeypatch.setenv(k, v)
    for k in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "GEMINI_API_KEY",
              "GOOGLE_API_KEY"):
        monkeypatch.delenv(k, raising=False)


def test_anthropic_sdk_gets_an_anthropic_error_naming_the_host(refused, monkeypatch):
    client_env(refused, monkeypatch)
    c = anthropic.Anthropic(api_key="sk-ant-dummy", max_retries=0)
    for stream in (False, True):
        with pytest.raises(anthropic.APIStatusError) as ei:
            c.messages.create(model="claude-haiku-4-5", max_tokens=16, stream=stream,
                              messages=[{"role": "user", "content": "hi"}])
        e = ei.value
        assert e.status_code == 502
        assert e.response.headers["content-type"].startswith("application/json")
        body = e.response.json()
        assert body["type"] == "error" and body["error"]["type"] == "api_error"
        msg = body["error"]["message"]
        rid = e.response.headers[RID_HEADER]
        assert f"cannot reach api.anthropic.com (at 127.0.0.1:{refused.point_port}): connection refused" in msg
        assert rid in msg
        assert_recorded(refused, rid, "api.anthropic.com", "connection refused")


def test_openai_sdk_chat_and_responses_get_openai_errors(refused, monkeypatch):
    client_env(refused, monkeypatch)
    c = openai.OpenAI(api_key="sk-dummy", max_retries=0)
    calls = [lambda: c.chat.completions.create(model="gpt-5", messages=[{"role": "user", "content": "hi"}]),
             lambda: c.responses.create(model="gpt-5", input="hi", stream=True)]
    for call in calls:
        with pytest.raises(openai.APIStatusError) as ei:
            call()
        e = ei.value
        assert e.status_code == 502
        err = e.response.json()["error"]
        assert "cannot reach api.openai.com" in err["message"] and "connection refused" in err["message"]
        assert set(err) >= {"message", "type", "code"}
        rid = e.response.headers[RID_HEADER]
        assert rid in err["message"]
        assert_recorded(refused, rid, "api.openai.com", "connection refused")


def test_genai_sdk_gets_a_google_error(refused, monkeypatch):
    client_env(refused, monkeypatch)
    c = genai.Client(api_key="dummy-gemini-key", http_options=types.HttpOptions(api_version="v1beta"))
    with pytest.raises(genai_errors.ServerError) as ei:
        c.models.generate_content(model="gemini-2.5-flash", contents="hi")
    e = ei.value
    assert e.code == 502
    assert "cannot reach generativelanguage.googleapis.com" in e.message and "connection refused" in e.message
    rid = e.response.headers[RID_HEADER]
    assert_recorded(refused, rid, "generativelanguage.googleapis.com", "connection refused")


def test_non_provider_traffic_is_left_to_mitmproxy(refused):
    """Only provider turns are answered by tokunseba: other calls to a provider host (here a
    GET) still get mitmproxy's own reply, and no ledger row."""
    with httpx.Client(proxy=refused.url, verify=ssl.create_default_context(cafile=str(refused.ca))) as h:
        r = h.get("https://api.anthropic.com/api/claude_code/settings")
    assert r.status_code == 502 and RID_HEADER not in r.headers


# ---- TLS failure and timeout -------------------------------------------------------------

class _TlsServer:
    """A loopback TLS server whose certificate (a fresh mitmproxy CA's) nobody trusts."""

    def __init__(self, certfile: Path) -> None:
        self.ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.ctx.load_cert_chain(certfile)
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            try:
                with self.ctx.wrap_socket(conn, server_side=True):
                    pass
            except (OSError, ssl.SSLError):
                pass

    def close(self) -> None:
        self.sock.close()


def test_tls_failure_is_said_as_such(tmp_path, monkeypatch):
    other = start_pointed(tmp_path / "ca", closed_port())  # only to make a CA nobody trusts
    other.stop()
    server = _TlsServer(other.confdir / "mitmproxy-ca.pem")
    m = start_pointed(tmp_path / "tls", server.port)
    try:
        client_env(m, monkeypatch)
        c = anthropic.Anthropic(api_key="sk-ant-dummy", max_retries=0)
        with pytest.raises(anthropic.APIStatusError) as ei:
            c.messages.create(model="claude-haiku-4-5", max_tokens=16, messages=[{"role": "user", "content": "hi"}])
        assert ei.value.status_code == 502
        msg = ei.value.body["error"]["message"]
        assert "cannot reach api.anthropic.com" in msg and "TLS certificate not trusted" in msg, msg
        assert_recorded(m, ei.value.response.headers[RID_HEADER], "api.anthropic.com", "TLS")
    finally:
        m.stop()
        server.close()


def test_a_host_that_never_answers_is_a_504_after_the_connect_timeout(tmp_path, monkeypatch):
    silent = socket.create_server(("127.0.0.1", 0))  # the kernel accepts; nobody ever speaks TLS
    m = start_pointed(tmp_path, silent.getsockname()[1], "--set", "tokunseba_connect_timeout_ms=700")
    try:
        client_env(m, monkeypatch)
        c = openai.OpenAI(api_key="sk-dummy", max_retries=0)
        with pytest.raises(openai.APIStatusError) as ei:
            c.chat.completions.create(model="gpt-5", messages=[{"role": "user", "content": "hi"}], stream=True)
        assert ei.value.status_code == 504
        msg = ei.value.body["message"] if "message" in ei.value.body else ei.value.body["error"]["message"]
        assert "cannot reach api.openai.com" in msg and "no connection within 0.7 s" in msg, msg
        assert_recorded(m, ei.value.response.headers[RID_HEADER], "api.openai.com", "no connection within 0.7 s")
    finally:
        m.stop()
        silent.close()


# ---- the real clients ---------------------------------------------------------------------

def only_turns(proxy: Mitmdump) -> list[dict]:
    return list(rows(proxy).values())


@pytest.mark.claudecode
def test_claude_code_says_the_host_cannot_be_reached(refused, tmp_path):
    claude = need_npm_tool("claude", "Claude Code")
    before = set(rows(refused))
    (tmp_path / "home").mkdir()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path / "home"), "TERM": "dumb",
           "HTTPS_PROXY": refused.url, "HTTP_PROXY": refused.url, "NODE_EXTRA_CA_CERTS": str(refused.ca),
           "ANTHROPIC_API_KEY": "sk-ant-dummy-claude-code-key-0123456789",
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1",
           "CLAUDE_CODE_MAX_RETRIES": "0"}
    p = subprocess.run([claude, "-p", "say hi"], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=120)
    out = p.stdout + p.stderr
    assert p.returncode != 0
    assert "cannot reach api.anthropic.com" in out and "connection refused" in out, out[-3000:]
    new = new_rows(refused, before)
    assert new and all(r["outcome"] == "error" and "api.anthropic.com" in r["error"] for r in new)
    assert any(r["request_id"] in out for r in new), out[-3000:]


def test_codex_says_the_host_cannot_be_reached(refused, tmp_path):
    codex = need_npm_tool("codex", "Codex")
    before = set(rows(refused))
    home = tmp_path / "home"
    (home / "codex").mkdir(parents=True)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "CODEX_HOME": str(home / "codex"),
           "HTTPS_PROXY": refused.url, "HTTP_PROXY": refused.url, "SSL_CERT_FILE": str(refused.ca),
           "CODEX_API_KEY": "sk-dummy-codex", "TERM": "dumb"}
    p = subprocess.run([codex, "exec", "--skip-git-repo-check", "-c", "analytics.enabled=false",
                        "-c", "features.plugins=false", "-c", "features.api_key_model_discovery=false",
                        "-c", "model=gpt-5.5", "say hi"],
                       cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180)
    out = p.stdout + p.stderr
    assert "cannot reach api.openai.com" in out and "connection refused" in out, out[-3000:]
    new = new_rows(refused, before)
    assert new and all(r["outcome"] == "error" and "api.openai.com" in r["error"] for r in new)


def test_gemini_cli_says_the_host_cannot_be_reached(refused, tmp_path):
    gemini = need_npm_tool("gemini", "Gemini CLI")
    before = set(rows(refused))
    home, project = tmp_path / "home", tmp_path / "project"
    (home / ".gemini").mkdir(parents=True)
    project.mkdir()
    (home / ".gemini" / "settings.json").write_text(json.dumps({
        "privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False, "maxAttempts": 1}}))
    env = {"PATH": f"{Path(gemini).parent}:{os.environ['PATH']}", "HOME": str(home), "TERM": "dumb",
           "TMPDIR": str(tmp_path), "HTTPS_PROXY": refused.url, "NODE_EXTRA_CA_CERTS": str(refused.ca),
           "GEMINI_API_KEY": "dummy-gemini-key", "GEMINI_CLI_TRUST_WORKSPACE": "true", "NO_PROXY": ""}
    p = subprocess.run([gemini, "-m", "gemini-2.5-flash", "-p", "say hi"], cwd=project, env=env,
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180)
    out = p.stdout + p.stderr
    assert "cannot reach generativelanguage.googleapis.com" in out, out[-3000:]
    new = new_rows(refused, before)
    assert new and all(r["outcome"] == "error" for r in new)


def test_a_host_lost_after_it_answered_is_checked_again_after_one_failure(tmp_path, monkeypatch):
    """A host that answered is not connected to first for 30 s; lost in that window, the next
    turn gets mitmproxy's own 502 once (recorded as an error), and the turn after is checked
    and answered by tokunseba again."""
    from tests.support.upstream import Reply, Upstream

    up = Upstream().__enter__()
    port = up.port
    m = Mitmdump(tmp_path, None, extra=["--set", f"tokunseba_provider_hosts=127.0.0.1:{port}=anthropic"])
    try:
        client_env(m, monkeypatch)
        c = anthropic.Anthropic(api_key="sk-ant-dummy", max_retries=0, base_url=up.url)
        up.script(Reply.json({"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": [],
                              "stop_reason": "end_turn", "stop_sequence": None,
                              "usage": {"input_tokens": 1, "output_tokens": 1}}))
        assert c.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}]).id == "msg_1"
        c.close()
        up.__exit__(None, None, None)  # the host goes away
        c = anthropic.Anthropic(api_key="sk-ant-dummy", max_retries=0, base_url=up.url)  # a new connection
        with pytest.raises(anthropic.APIStatusError) as first:
            c.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
        assert first.value.status_code == 502 and RID_HEADER not in first.value.response.headers  # mitmproxy's
        with pytest.raises(anthropic.APIStatusError) as second:
            c.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
        assert second.value.status_code == 502
        assert "cannot reach 127.0.0.1:" in second.value.body["error"]["message"]
        rid = second.value.response.headers[RID_HEADER]
        turns = rows(m, rid)
        assert sorted(r["outcome"] for r in turns.values()) == ["error", "error", "pass_through"]
        assert "connection refused" in turns[rid]["error"]
    finally:
        m.stop()
