"""End to end through the real `mitmweb` (docs/dev/architecture.md §1: the third way users reach
tokunseba): one translated Anthropic turn and one non-provider request through the proxy,
then mitmweb's own REST API shows the decision as the flow comment, the outcome as the
mark, and the client's original body through the `tokunseba-original` content view.

mitmweb 12 API access (mitmproxy/tools/web/app.py, webaddons.py): every handler requires
the token printed at startup (`Web server listening at http://HOST:PORT/?token=...`, or the
`web_password` option), sent as `Authorization: Bearer <token>` or `?token=`; POSTs also
need tornado's XSRF double-submit: a `_mitmproxy_xsrf` cookie and the same value in an
`X-XSRFToken` header."""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import anthropic
import httpx
import httpx2
import pytest
from mitmproxy.utils.emoji import emoji

from tokunseba.proxy.relay import PREFIX
from tokunseba.proxy.mitm import MARKS
from tokunseba.sse import SSEDecoder

from tests.support.upstream import Reply, Upstream, free_port

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
ADDON = ROOT / "addon" / "tokunseba_addon.py"
MITMWEB = Path(sys.executable).parent / "mitmweb"
CLIENT_KEY = "sk-ant-client-secret-WEB-DO-NOT-LEAK"
EP_KEY = "sk-endpoint-web-0001"
TIMEOUT = 30.0

RULES = """\
endpoints:
  local:
    protocol: openai
    url: {oai}/v1
    key_env: TK_WEB_EP_KEY
routes:
  - name: easy-turns
    when: {{client: anthropic, model: "claude-*"}}
    to: local
"""


def poll(fn, what: str, timeout: float = TIMEOUT, every: float = 0.05):
    """fn() until it returns something truthy; fail with ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        got = fn()
        if got:
            return got
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(every)


class Mitmweb:
    """`mitmweb -s addon/tokunseba_addon.py -p 0` as a real process, plus its REST API."""

    what = "mitmweb"

    def __init__(self, workdir: Path, rules: Path, env: dict[str, str]) -> None:
        self.confdir = workdir / "conf"
        self.ledger = workdir / "ledger.db"
        self.lines: list[str] = []
        for _attempt in range(3):  # the web port is picked free then closed: retry a lost race
            self.web_port = free_port()
            self.proc = subprocess.Popen(self.command(rules), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                         text=True, env={**os.environ, **env}, cwd=workdir)
            if self._wait_ready():
                break
        else:
            raise RuntimeError(f"{self.what} did not start:\n" + self.log())
        threading.Thread(target=self._drain, daemon=True).start()
        self.api = httpx.Client(base_url=f"http://127.0.0.1:{self.web_port}", trust_env=False, timeout=TIMEOUT,
                                headers={"Authorization": f"Bearer {self.token}"})

    @classmethod
    @contextlib.contextmanager
    def serving(cls, work: Path, rules_template: str, env: dict[str, str]):
        """A scripted upstream, rules pointing at it (``{oai}`` in the template), the process;
        at the end it must exit cleanly with no traceback or addon error in its log."""
        with Upstream() as oai:
            rules = work / "rules.yaml"
            rules.write_text(rules_template.format(oai=oai.url))
            m = cls(work, rules, env)
            m.upstream, m.rules = oai, rules
            try:
                yield m
            finally:
                m.api.close()
                rc = m.stop()
            assert rc == 0, f"{cls.what} exited with {rc}:\n{m.log()}"
            for bad in ("Traceback", "Addon error", "hook failed", "has crashed"):
                assert bad not in m.log(), m.log()

    def command(self, rules: Path) -> list[str]:
        return [str(MITMWEB), "--listen-host", "127.0.0.1", "-p", "0", "-s", str(ADDON),
                "--set", f"web_port={self.web_port}", "--set", "web_host=127.0.0.1",
                "--set", "web_open_browser=false", "--set", f"confdir={self.confdir}",
                "--set", f"tokunseba_ledger={self.ledger}", "--set", f"tokunseba_rules={rules}",
                "--set", "store_streamed_bodies=true"]

    def read_startup_line(self, line: str) -> None:
        """Learn the proxy port and the web token from one startup line."""
        if m := re.search(r"HTTP\(S\) proxy listening at .*:(\d+)", line):
            self.port = int(m.group(1))
        if m := re.search(rf"Web server listening at http://127\.0\.0\.1:{self.web_port}/\?token=(\w+)", line):
            self.token = m.group(1)

    def ready(self) -> bool:
        return self.port is not None and self.token is not None

    def _wait_ready(self) -> bool:
        """Read startup lines until the process is ready (see read_startup_line)."""
        self.port = self.token = None
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline and not self.ready():
            line = self.proc.stdout.readline()
            if not line:
                if self.proc.poll() is not None:
                    return False
                continue
            self.lines.append(line)
            self.read_startup_line(line)
        if not self.ready():
            self.stop()
            return False
        return True

    def _drain(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def flows(self) -> list[dict]:
        r = self.api.get("/flows")
        r.raise_for_status()
        return r.json()

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def log(self) -> str:
        return "".join(self.lines)


def chat_stream(cid: str, parts: tuple[str, ...]) -> list[bytes]:
    def chunk(delta=None, finish=None, usage=None, choices=True) -> bytes:
        obj = {"id": cid, "object": "chat.completion.chunk", "created": 1767225600, "model": "local-model",
               "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}] if choices else []}
        if usage:
            obj["usage"] = usage
        return b"data: " + json.dumps(obj).encode() + b"\n\n"

    return ([chunk({"role": "assistant", "content": ""})] + [chunk({"content": p}) for p in parts]
            + [chunk({}, "stop"), chunk(usage={"prompt_tokens": 21, "completion_tokens": 4, "total_tokens": 25},
                                        choices=False), b"data: [DONE]\n\n"])


@pytest.fixture(scope="module")
def web(tmp_path_factory):
    with Mitmweb.serving(tmp_path_factory.mktemp("mitmweb"), RULES, {"TK_WEB_EP_KEY": EP_KEY}) as m:
        yield m


@pytest.fixture(scope="module")
def traffic(web):
    """One translated, streamed Anthropic turn (official SDK via HTTPS_PROXY and the
    mitmproxy CA) and one plain non-provider request; then both flows as mitmweb lists them."""
    oai = web.upstream
    oai.script(Reply.sse(chat_stream("chatcmpl-web01", ("Hel", "lo ", "wörld")), delay=0.02),
               Reply.json({"settings": {"theme": "dark"}}))
    sent: list[bytes] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HTTPS_PROXY", web.url)
        mp.setenv("SSL_CERT_FILE", str(web.confdir / "mitmproxy-ca-cert.pem"))
        for k in ("HTTP_PROXY", "NO_PROXY", "no_proxy", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
            mp.delenv(k, raising=False)
        hc = httpx2.Client(timeout=TIMEOUT, event_hooks={"request": [lambda r: sent.append(r.read())]})
        client = anthropic.Anthropic(api_key=CLIENT_KEY, max_retries=0, http_client=hc)
        with client.messages.stream(model="claude-haiku-4-5", max_tokens=3000,
                                    thinking={"type": "adaptive"},
                                    metadata={"user_id": "user-web-1"},
                                    messages=[{"role": "user", "content": "Say hello, été."}]) as s:
            msg = s.get_final_message()
            request_id = s.response.headers["x-tokunseba-request-id"]
        hc.close()
    with httpx.Client(proxy=web.url, trust_env=False, timeout=TIMEOUT) as c:
        settings_reply = c.get(f"{oai.url}/api/claude_code/settings", headers={"x-api-key": CLIENT_KEY})

    def both_done():
        flows = web.flows()
        # a translated turn keeps the client's URL in mitmweb (the relay is an implementation detail)
        tr = [f for f in flows if f["request"]["host"] == "api.anthropic.com" and f["request"]["path"] == "/v1/messages"]
        other = [f for f in flows if f["request"]["path"] == "/api/claude_code/settings"]
        # the streamed body is stored on the flow only once the stream ended cleanly
        if tr and other and tr[0].get("response", {}).get("contentLength") and other[0].get("response"):
            return tr[0], other[0]
        return None

    translated, passed = poll(both_done, "both flows in mitmweb's /flows")
    return {"msg": msg, "request_id": request_id, "sent": sent, "settings": settings_reply,
            "translated": translated, "passed": passed}


def test_the_turn_itself_was_translated(web, traffic):
    msg = traffic["msg"]
    assert msg.content[0].text == "Hello wörld" and msg.usage.input_tokens == 21 and msg.usage.output_tokens == 4
    rec = web.upstream.requests[0]
    assert rec.path == "/v1/chat/completions" and rec.headers["authorization"] == f"Bearer {EP_KEY}"
    assert traffic["settings"].json() == {"settings": {"theme": "dark"}}
    assert web.upstream.requests[1].headers["x-api-key"] == CLIENT_KEY  # non-provider: untouched


def test_translated_flow_shows_the_decision_and_mark(web, traffic):
    f = traffic["translated"]
    assert f["comment"] == (f"🔁 translated 200 · {traffic['request_id']} · easy-turns → local · anthropic→openai · dropped: thinking, metadata.user_id"
                            f" · added: stream_options.include_usage · sent to {web.upstream.url}/v1/chat/completions")
    assert f["request"]["scheme"] == "https" and not f["request"]["path"].startswith(PREFIX)
    assert f["marked"] == emoji[MARKS["translated"]] == "🔁"
    assert f["response"]["status_code"] == 200
    assert ["x-tokunseba-request-id", traffic["request_id"]] in f["response"]["headers"]


def test_non_provider_flow_has_no_comment_or_mark(traffic):
    f = traffic["passed"]
    assert f["comment"] == "" and f["marked"] == ""
    assert f["response"]["status_code"] == 200
    assert not any(k.lower() == "x-tokunseba-request-id" for k, _ in f["response"]["headers"])


def test_original_request_view_returns_the_clients_anthropic_body(web, traffic):
    fid = traffic["translated"]["id"]
    (original,) = traffic["sent"]
    view = web.api.get(f"/flows/{fid}/request/content/tokunseba-original.json")
    assert view.status_code == 200
    v = view.json()
    assert v["view_name"] == "tokunseba-original"
    head, text = v["text"].split("\n\n", 1)
    assert head.startswith("POST https://api.anthropic.com/v1/messages\n")
    assert CLIENT_KEY not in v["text"] and EP_KEY not in v["text"]
    body = json.loads(text)
    assert body == json.loads(original)  # what the SDK sent, indented for reading
    assert body["max_tokens"] == 3000 and body["metadata"] == {"user_id": "user-web-1"}
    assert body["thinking"] == {"type": "adaptive"}
    assert "max_completion_tokens" not in body and "stream_options" not in body
    # the flow's request body itself is the translated Chat request the endpoint received
    raw = web.api.get(f"/flows/{fid}/request/content.data")
    assert raw.content == web.upstream.requests[0].body
    chat = json.loads(raw.content)
    assert chat["stream_options"] == {"include_usage": True} and chat["max_completion_tokens"] == 3000
    assert "thinking" not in chat and "metadata" not in chat


def test_streamed_response_is_stored_as_the_client_got_it(web, traffic):
    fid = traffic["translated"]["id"]
    raw = web.api.get(f"/flows/{fid}/response/content.data")
    d = SSEDecoder()
    events = [(e.event, json.loads(e.data)) for e in d.feed(raw.content) + d.close()]
    assert events[0][0] == "message_start" and events[-1][0] == "message_stop"
    assert "".join(e["delta"]["text"] for k, e in events if k == "content_block_delta") == "Hello wörld"


def test_api_needs_the_token_and_posts_need_xsrf(web):
    assert httpx.get(f"http://127.0.0.1:{web.web_port}/flows", trust_env=False).status_code == 403
    assert httpx.get(f"http://127.0.0.1:{web.web_port}/flows", params={"token": web.token},
                     trust_env=False).status_code == 200
    xsrf = secrets.token_hex(16)
    cmd = "/commands/tokunseba.status"
    assert web.api.post(cmd, json={"arguments": []}).status_code == 403  # no XSRF token
    with httpx.Client(base_url=web.api.base_url, trust_env=False, cookies={"_mitmproxy_xsrf": xsrf},
                      headers={"Authorization": f"Bearer {web.token}", "X-XSRFToken": xsrf}) as c:
        r = c.post(cmd, json={"arguments": []})
    assert r.status_code == 200
    assert r.json()["value"] == f"rules={web.rules} routes=1 in-flight=0"
