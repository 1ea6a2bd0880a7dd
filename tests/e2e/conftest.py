"""End-to-end fixtures: a real mitmdump with the tokunseba addon on a free loopback port,
and scripted upstream servers on loopback."""

from __future__ import annotations

import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.support.upstream import Upstream, closed_port

ROOT = Path(__file__).resolve().parents[2]
ADDON = ROOT / "addon" / "tokunseba_addon.py"
BIN = Path(sys.executable).parent

pytestmark = pytest.mark.e2e

CACHE = Path(os.environ.get("TOKUNSEBA_CACHE") or Path.home() / ".cache" / "tokunseba")


def need_npm_tool(name: str, what: str) -> str:
    """The path of an npm client installed by scripts/install-claude-code.sh; fails under CI
    (which must have installed it), skips elsewhere."""
    cached = CACHE / "npm" / "bin" / name
    if cached.exists():
        return str(cached)
    found = shutil.which(name)
    if found:
        return found
    if os.environ.get("CI"):
        pytest.fail(f"{what} is not installed at {cached}: .ci/run must run scripts/ci-extras.sh")
    pytest.skip(f"{what} not installed (scripts/install-claude-code.sh)")


class Mitmdump:
    """`mitmdump -s addon/tokunseba_addon.py -p 0` as a real process."""

    def __init__(self, workdir: Path, rules: Path | None, *, extra: list[str] | None = None, env: dict | None = None,
                 ledger: str | None = None):
        self.workdir = workdir
        self.confdir = workdir / "conf"
        self.ledger = ledger or workdir / "ledger.db"  # a file, or a postgresql:// URL (mitmproxy takes one --set each)
        self.rules = rules
        self.lines: list[str] = []
        cmd = [str(BIN / "mitmdump"), "--listen-host", "127.0.0.1", "-p", "0", "--set", f"confdir={self.confdir}",
               "-s", str(ADDON), "--set", f"tokunseba_ledger={self.ledger}", "--set", "connection_strategy=lazy"]
        if rules:
            cmd += ["--set", f"tokunseba_rules={rules}"]
        cmd += extra or []
        self.cmd = cmd
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env={**os.environ, **(env or {})}, cwd=workdir)
        self.port = self._wait_port()
        self.drain = threading.Thread(target=self._drain, daemon=True)
        self.drain.start()

    def _wait_port(self) -> int:
        deadline = time.time() + 30
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                if self.proc.poll() is not None:
                    raise RuntimeError("mitmdump exited:\n" + "".join(self.lines))
                continue
            self.lines.append(line)
            m = re.search(r"proxy listening at .*:(\d+)", line)
            if m:
                return int(m.group(1))
        raise RuntimeError("mitmdump did not start:\n" + "".join(self.lines))

    def _drain(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ca(self) -> Path:
        return self.confdir / "mitmproxy-ca-cert.pem"

    def client_env(self) -> dict[str, str]:
        return {"HTTPS_PROXY": self.url, "HTTP_PROXY": self.url, "SSL_CERT_FILE": str(self.ca),
                "NO_PROXY": "", "no_proxy": ""}

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.drain.join(5)  # its last lines read (log() right after stop() sees them)

    def log(self) -> str:
        return "".join(self.lines)


QUIET_S = 0.3  # the ledger writer lingers 50 ms: six of them with nothing new is settled


def ledger_settled(ledger: Path, timeout: float = 20.0, *request_ids: str) -> None:
    """Wait until no turn in ``ledger`` is open (and each of ``request_ids`` is there). A
    turn's start and end are written just after they happen, by the ledger's writer thread
    in batches (it lingers up to ~50 ms for the records that come meanwhile: ledger/writer.py):
    a test that reads the ledger right after its client finished waits here until nothing is
    open and nothing new came for ``QUIET_S`` (several lingers); naming the turn's request id
    also waits for a turn whose start is not written yet."""
    deadline = time.monotonic() + timeout
    seen, quiet_since = None, None  # (turns, events) at the last poll, and since when they stay so
    while True:
        con = sqlite3.connect(ledger)
        try:
            open_turns = con.execute("SELECT count(*) FROM turns WHERE outcome IS NULL").fetchone()[0]
            open_turns += sum(con.execute("SELECT count(*) FROM turns WHERE request_id = ?", (rid,)).fetchone()[0] == 0
                              for rid in request_ids)
            counts = (con.execute("SELECT count(*) FROM turns").fetchone()[0],
                      con.execute("SELECT count(*) FROM events").fetchone()[0])
        except sqlite3.OperationalError:  # not created yet
            open_turns, counts = 1, None
        finally:
            con.close()
        now = time.monotonic()
        if open_turns or counts != seen:
            seen, quiet_since = (counts if open_turns == 0 else None), now
        elif now - quiet_since >= QUIET_S:
            return
        assert now < deadline, f"{open_turns} turns still open or not yet written in {ledger}"
        time.sleep(0.05)


RULES = """\
endpoints:
  oai:
    protocol: openai
    url: {oai}/v1
    key_env: TK_TEST_OAI_KEY
    max_tokens: 2048
  ant:
    protocol: anthropic
    url: {ant}/v1
    key_env: TK_TEST_ANT_KEY
    max_tokens: 1024
  gem:
    protocol: gemini
    url: {gem}/v1beta
  down:
    protocol: openai
    url: http://127.0.0.1:{closed}/v1
routes:
  - name: to-gemini
    when: {{client: anthropic, model: "refuse-*"}}
    to: gem
  - name: gemini-or-error
    when: {{client: anthropic, model: "error-*"}}
    to: gem
    on_refused: error
  - name: down-first
    when: {{model: "down-*"}}
    to: down
  - name: retarget
    when: {{client: anthropic, model: "retarget-*"}}
    to: ant
    model: retargeted-model
    on_failure: error  # these tests see the endpoints' errors as the client gets them
  - name: a2o
    when: {{client: anthropic, model: ["claude-*", "refuse-*", "down-*"]}}
    to: oai
    on_failure: error  # these tests see the endpoints' errors as the client gets them
  - name: o2a
    when: {{client: openai, model: ["gpt-*", "down-*"]}}
    to: ant
    on_failure: error  # these tests see the endpoints' errors as the client gets them
"""

KEYS = {"TK_TEST_OAI_KEY": "sk-endpoint-oai-0001", "TK_TEST_ANT_KEY": "sk-endpoint-ant-0002"}


@pytest.fixture(scope="session")
def upstreams():
    with Upstream() as oai, Upstream() as ant, Upstream() as gem:
        yield {"oai": oai, "ant": ant, "gem": gem}


def start_test_proxy(upstreams: dict, work: Path, *extra: str, ledger: str | None = None) -> Mitmdump:
    """mitmdump with RULES pointing at the scripted upstreams; the Anthropic-shaped upstream is
    also declared a provider host, so pass-through to it can be observed."""
    rules = work / "rules.yaml"
    rules.write_text(RULES.format(oai=upstreams["oai"].url, ant=upstreams["ant"].url, gem=upstreams["gem"].url,
                                  closed=closed_port()))
    return Mitmdump(work, rules, env=KEYS, ledger=ledger,
                    extra=["--set", f"tokunseba_provider_hosts=127.0.0.1:{upstreams['ant'].port}=anthropic", *extra])


@pytest.fixture(scope="session")
def proxy(upstreams, tmp_path_factory):
    m = start_test_proxy(upstreams, tmp_path_factory.mktemp("proxy"))
    yield m
    m.stop()


def point_clients_at(proxy: Mitmdump, monkeypatch) -> Mitmdump:
    """The SDKs made in this test go through ``proxy`` (HTTPS_PROXY and its CA), with no
    key or base URL from the environment."""
    for k, v in proxy.client_env().items():
        monkeypatch.setenv(k, v)
    for k in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(k, raising=False)
    return proxy


@pytest.fixture
def client_env(proxy, monkeypatch):
    return point_clients_at(proxy, monkeypatch)
