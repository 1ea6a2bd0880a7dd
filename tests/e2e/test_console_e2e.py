"""The console of `tokunseba run`, read from the real process: one line per provider turn
(request id, client, model → route → endpoint, outcome, status, tokens as reported, time),
and none of mitmproxy's per-connection or per-flow lines unless `-v`."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import anthropic
import httpx
import pytest

from .conftest import BIN, ledger_settled
from .test_proxy_e2e import chat_text_stream
from tests.support.upstream import Reply, Upstream, closed_port

pytestmark = pytest.mark.e2e

HERE = Path(__file__).resolve().parent
RULES = """\
endpoints:
  scripted:
    protocol: openai
    url: {oai}/v1
routes:
  - name: haiku-scripted
    when: {{client: anthropic, model: "claude-haiku-*"}}
    to: scripted
"""
ANT_REPLY = {"id": "msg_console01", "type": "message", "role": "assistant", "model": "claude-opus-4-8",
             "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn", "stop_sequence": None,
             "usage": {"input_tokens": 21, "output_tokens": 3}}


class Run:
    """`tokunseba run --port 0 …` as a real process; its whole output, as printed."""

    def __init__(self, work: Path, *args: str, env: dict | None = None) -> None:
        self.lines: list[str] = []
        self.conf = work / "conf"
        self.ledger = work / "ledger.db"
        self.proc = subprocess.Popen([str(BIN / "tokunseba"), "run", "--port", "0", "--confdir", str(self.conf),
                                      "--ledger", str(self.ledger), *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=work,
                                     env={**os.environ, "TOKUNSEBA_HOME": str(work / "home"),
                                          "PATH": "/usr/bin:/bin", **(env or {})})  # as run from .venv/bin
        deadline = time.monotonic() + 30
        self.port = None
        while self.port is None and time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line and self.proc.poll() is not None:
                raise RuntimeError("tokunseba run exited:\n" + "".join(self.lines))
            self.lines.append(line)
            m = re.search(r"proxy listening at .*:(\d+)", line)
            self.port = int(m.group(1)) if m else None
        assert self.port, "".join(self.lines)
        threading.Thread(target=lambda: [self.lines.append(x) for x in self.proc.stdout], daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(15)
        time.sleep(0.1)  # the drain thread's last lines
        return "".join(self.lines)


def _turns(run: Run, oai: Upstream, ant: Upstream, monkeypatch) -> tuple[list[str], str]:
    """Three provider turns (translated, passed through, unreachable) and two other calls;
    their request ids, and the run's whole output."""
    for k, v in {"HTTPS_PROXY": run.url, "HTTP_PROXY": run.url, "NO_PROXY": "",
                 "SSL_CERT_FILE": str(run.conf / "mitmproxy-ca-cert.pem")}.items():
        monkeypatch.setenv(k, v)
    oai.script(Reply.sse(chat_text_stream()))
    ant.script(Reply.json(ANT_REPLY))
    ids = []
    c = anthropic.Anthropic(api_key="sk-ant-console", max_retries=0)
    with c.messages.with_streaming_response.create(model="claude-haiku-4-5", max_tokens=64, stream=True,
                                                   messages=[{"role": "user", "content": "hi"}]) as r:
        r.read()
        ids.append(r.headers["x-tokunseba-request-id"])
    p = anthropic.Anthropic(api_key="sk-ant-console", max_retries=0, base_url=ant.url)
    r = p.messages.with_raw_response.create(model="claude-opus-4-8", max_tokens=64,
                                            messages=[{"role": "user", "content": "hi"}])
    ids.append(r.headers["x-tokunseba-request-id"])
    with pytest.raises(anthropic.APIStatusError) as ei:  # api.anthropic.com: pointed at a closed port
        c.messages.create(model="claude-opus-4-8", max_tokens=64, messages=[{"role": "user", "content": "hi"}])
    ids.append(ei.value.response.headers["x-tokunseba-request-id"])
    with httpx.Client(proxy=run.url, trust_env=False) as h:  # not provider turns
        h.get(f"{ant.url}/api/claude_code/settings")
        h.get(f"{oai.url}/telemetry")
    ledger_settled(run.ledger)
    return ids, run.stop()


def _start(tmp_path: Path, oai: Upstream, ant: Upstream, *args: str) -> Run:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES.format(oai=oai.url))
    return Run(tmp_path, "--rules", str(rules), *args, "--", "-s", str(HERE.parent / "support" / "point_hosts.py"),
               "--set", f"tokunseba_provider_hosts=127.0.0.1:{ant.port}=anthropic",
               env={"TK_TEST_POINT": f"api.anthropic.com=127.0.0.1:{closed_port()}"})


def test_one_line_per_provider_turn_and_no_connection_chatter(tmp_path, monkeypatch):
    with Upstream() as oai, Upstream() as ant:
        ids, out = _turns(_start(tmp_path, oai, ant), oai, ant, monkeypatch)
    for rid in ids:
        assert len([ln for ln in out.splitlines() if rid in ln and "→" in ln]) == 1, out
    line = {rid: next(ln for ln in out.splitlines() if rid in ln and "→" in ln) for rid in ids}
    translated, passed, unreachable = (line[i] for i in ids)
    assert "anthropic-python claude-haiku-4-5 → haiku-scripted → scripted · translated 200 · " in translated
    assert "prompt_tokens=2610 completion_tokens=58 total_tokens=2668" in translated  # as the endpoint reported
    assert re.search(r" · \d+\.\d\d s$", translated)
    assert "anthropic-python claude-opus-4-8 → no route → 127.0.0.1 · pass-through 200 · " in passed
    assert "input_tokens=21 output_tokens=3" in passed
    assert "→ no route → api.anthropic.com (not sent) · error 502 · no usage reported" in unreachable
    assert "cannot reach api.anthropic.com" in unreachable and "connection refused" in unreachable
    # mitmproxy's own lines: none for connections, none for flows (provider or not)
    for chatter in ("client connect", "server connect", "client disconnect", "server disconnect", "<< ",
                    "/telemetry", "/api/claude_code/settings"):
        assert chatter not in out, (chatter, out)


def test_verbose_brings_mitmproxys_lines_back(tmp_path, monkeypatch):
    with Upstream() as oai, Upstream() as ant:
        ids, out = _turns(_start(tmp_path, oai, ant, "-v"), oai, ant, monkeypatch)
    assert all(any(rid in ln and "→" in ln for ln in out.splitlines()) for rid in ids)
    for chatter in ("client connect", "server connect", "GET http://127.0.0.1", "/telemetry"):
        assert chatter in out, (chatter, out)


def test_run_names_at_start_every_endpoint_it_cannot_reach(tmp_path):
    """A local server started on another port than the rules say: `tokunseba run` says so at
    once, with what happens to the turns routed there; a reachable endpoint is not named."""
    closed = closed_port()
    with Upstream() as up:
        rules = tmp_path / "rules.yaml"
        rules.write_text(f"endpoints:\n  local:\n    protocol: openai\n    url: http://127.0.0.1:{closed}/v1\n"
                         f"  there:\n    protocol: openai\n    url: {up.url}/v1\n"
                         "routes:\n  - name: easy\n    when: {client: anthropic, model: \"claude-haiku-*\"}\n    to: local\n"
                         "  - name: other\n    when: {client: openai}\n    to: there\n")
        run = Run(tmp_path, "--rules", str(rules))
        try:
            deadline = time.monotonic() + 20
            while not any("endpoint local" in ln for ln in run.lines) and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            out = run.stop()
    want = (f"tokunseba: endpoint local (http://127.0.0.1:{closed}/v1) cannot be reached now: connection refused. "
            "Until it can: turns of route easy go to the next route whose when matches, else pass through to their "
            f"provider. Check it with: {BIN / 'tokunseba'} models --rules {rules} --probe --endpoint local")
    assert any(ln.rstrip().endswith(want) for ln in out.splitlines()), out
    assert "endpoint there" not in out
