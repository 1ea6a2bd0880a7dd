"""Issue 30 end to end: a real `tokunseba run` listens as the HTTPS proxy and, in the same
mitmdump, as one plain-HTTP base-URL listener per provider (a mitmproxy reverse proxy to
api.anthropic.com, api.openai.com, generativelanguage.googleapis.com). The official SDKs are
given only a base URL (no proxy variable, no CA): a turn routed by the rules goes to a
scripted local endpoint, another passes through to a scripted "provider" (``point_hosts.py``
makes each provider host a loopback upstream), streamed and whole, and the ledger says how
each came in. Also: a proxy-path client and a base-URL client at once, one ledger; the
listeners bind loopback only; a request naming another host is not forwarded there; the
client's key never reaches a routed endpoint; failover; the real Claude Code with only
ANTHROPIC_BASE_URL set, Codex with only a provider of its own and Gemini CLI with only
GOOGLE_GEMINI_BASE_URL and its API-key setting, each where installed (skipped otherwise,
failing under CI=true)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import sqlite3
import ssl
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anthropic
import httpx
import openai
import pytest
from google import genai
from google.genai import types

from .conftest import BIN, ledger_settled, need_npm_tool
from .test_codex_e2e import responses_stream
from .test_gemini_e2e import gemini_sse
from .test_proxy_e2e import chat_reply, chat_text_stream
from .test_security_e2e import CANARY, CANARY_HEADERS, CANARY_QUERY, listening_addresses
from tests.support.upstream import Reply, Upstream

pytestmark = pytest.mark.e2e

HERE = Path(__file__).resolve().parent
RID = "x-tokunseba-request-id"
LOCAL_KEY = "sk-endpoint-local-base-url-0007"
ANT_KEY = "sk-ant-client-base-url-CANARY-01"
OAI_KEY = "sk-openai-client-base-url-CANARY-02"
GEM_KEY = "AIza-client-base-url-CANARY-03"
CLIENT_KEYS = (ANT_KEY, OAI_KEY, GEM_KEY)

RULES = """\
endpoints:
  local:
    protocol: openai
    url: {local}/v1
    key_env: TK_BU_LOCAL_KEY
    max_tokens: 1024
  busy:
    protocol: openai
    url: {busy}/v1
routes:
  - name: busy-first
    when: {{client: anthropic, model: "claude-busy-*"}}
    to: busy
  - name: busy-then-local
    when: {{client: anthropic, model: "claude-busy-*"}}
    to: local
  - name: easy-anthropic
    when: {{client: anthropic, model: "claude-haiku-*"}}
    to: local
  - name: tool-less-anthropic
    when: {{client: anthropic, tools: false, model: "claude-cc-*"}}
    to: local
  - name: easy-openai
    when: {{client: [openai, openai-responses], model: "gpt-*-mini"}}
    to: local
  - name: easy-gemini
    when: {{client: gemini, model: "gemini-*-lite"}}
    to: local
"""

ANT_WHOLE = {"id": "msg_bu_provider", "type": "message", "role": "assistant", "model": "claude-opus-4-8",
             "content": [{"type": "text", "text": "from the provider"}], "stop_reason": "end_turn",
             "stop_sequence": None, "usage": {"input_tokens": 11, "output_tokens": 4}}


def ant_sse(text: str = "from the provider", mid: str = "msg_bu_stream") -> list[bytes]:
    def ev(name: str, obj: dict) -> bytes:
        return f"event: {name}\ndata: {json.dumps(obj)}\n\n".encode()
    return [
        ev("message_start", {"type": "message_start", "message": {
            "id": mid, "type": "message", "role": "assistant", "model": "claude-opus-4-8", "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 11, "output_tokens": 1}}}),
        ev("content_block_start", {"type": "content_block_start", "index": 0,
                                   "content_block": {"type": "text", "text": ""}}),
        ev("content_block_delta", {"type": "content_block_delta", "index": 0,
                                   "delta": {"type": "text_delta", "text": text}}),
        ev("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ev("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                             "usage": {"output_tokens": 4}}),
        ev("message_stop", {"type": "message_stop"}),
    ]


GEM_USAGE = {"promptTokenCount": 7, "candidatesTokenCount": 3, "totalTokenCount": 10}


def gem_whole(text: str) -> dict:
    return {"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP",
                            "index": 0}], "usageMetadata": GEM_USAGE, "modelVersion": "gemini-2.5-pro",
            "responseId": "gem-bu-1"}


def responses_whole(text: str) -> dict:
    return {"id": "resp_bu_1", "object": "response", "created_at": 1767225600, "status": "completed",
            "model": "gpt-5", "output": [{"type": "message", "id": "msg_bu_1", "status": "completed",
                                          "role": "assistant",
                                          "content": [{"type": "output_text", "text": text, "annotations": []}]}],
            "usage": {"input_tokens": 9, "output_tokens": 2, "total_tokens": 11}}


def then(up: Upstream, reply: Reply) -> None:
    """The upstream's next reply, its record of earlier requests kept (``script`` clears it)."""
    with up._lock:
        up.replies = [reply]


def fresh(*ups: Upstream) -> None:
    for up in ups:
        with up._lock:
            up.requests.clear()


class Run:
    """`tokunseba run --port 0 …` as a real process, its scripted providers pointed at by
    point_hosts.py; the proxy's port and each base URL, read from what it printed."""

    def __init__(self, work: Path, providers: dict[str, Upstream], *args: str, rules: str | None = None,
                 extra: tuple[str, ...] = ()) -> None:
        self.lines: list[str] = []
        self.conf, self.ledger = work / "conf", work / "ledger.db"
        point = ";".join(f"{host}=http://127.0.0.1:{up.port}" for host, up in providers.items())
        argv = [str(BIN / "tokunseba"), "run", "--port", "0", "--confdir", str(self.conf), "--ledger", str(self.ledger)]
        if rules is not None:
            (work / "rules.yaml").write_text(rules)
            argv += ["--rules", str(work / "rules.yaml")]
        argv += [*args, "--", "-s", str(HERE.parent / "support" / "point_hosts.py"), *extra]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=work,
                                     env={**os.environ, "TOKUNSEBA_HOME": str(work / "home"), "TK_TEST_POINT": point,
                                          "TK_BU_LOCAL_KEY": LOCAL_KEY, "PATH": "/usr/bin:/bin"})
        self.port: int | None = None
        self.reverse: dict[str, int] = {}  # provider host -> its listener's port, as mitmdump said
        deadline = time.monotonic() + 30
        while (self.port is None or len(self.reverse) < 3) and time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line and self.proc.poll() is not None:
                raise RuntimeError("tokunseba run exited:\n" + "".join(self.lines))
            self.lines.append(line)
            if m := re.search(r"HTTP\(S\) proxy listening at .*:(\d+)", line):
                self.port = int(m.group(1))
            if m := re.search(r"reverse proxy to https://([\w.]+) listening at .*:(\d+)", line):
                self.reverse[m.group(1)] = int(m.group(2))
        assert self.port and len(self.reverse) == 3, "".join(self.lines)
        threading.Thread(target=lambda: [self.lines.append(x) for x in self.proc.stdout], daemon=True).start()

    def base(self, host: str) -> str:
        return f"http://127.0.0.1:{self.reverse[host]}"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        time.sleep(0.1)
        return "".join(self.lines)

    def rows(self, *request_ids: str) -> dict[str, dict]:
        ledger_settled(self.ledger, 20.0, *request_ids)
        con = sqlite3.connect(self.ledger)
        con.row_factory = sqlite3.Row
        try:
            return {r["request_id"]: dict(r) for r in con.execute("SELECT * FROM turns")}
        finally:
            con.close()

    def cli(self, *args: str) -> str:
        p = subprocess.run([str(BIN / "tokunseba"), *args, "--ledger", str(self.ledger)], capture_output=True,
                           text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        return p.stdout


@pytest.fixture(scope="module")
def ups():
    with Upstream() as local, Upstream() as ant, Upstream() as oai, Upstream() as gem, Upstream() as busy:
        yield {"local": local, "api.anthropic.com": ant, "api.openai.com": oai,
               "generativelanguage.googleapis.com": gem, "busy": busy}


@pytest.fixture(scope="module")
def run(ups, tmp_path_factory):
    providers = {h: u for h, u in ups.items() if "." in h}
    r = Run(tmp_path_factory.mktemp("base-url"), providers, rules=RULES.format(local=ups["local"].url,
                                                                              busy=ups["busy"].url))
    yield r
    r.stop()


@pytest.fixture(autouse=True)
def no_proxy_env(monkeypatch):
    """Base-URL clients: no proxy variable, no CA, no base URL or key from the environment."""
    for k in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy", "ALL_PROXY", "SSL_CERT_FILE",
              "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "GOOGLE_GEMINI_BASE_URL", "ANTHROPIC_API_KEY",
              "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(k, raising=False)


def assert_local_never_saw_client_keys(local: Upstream) -> None:
    for rec in local.requests:
        seen = rec.path + repr(rec.headers) + rec.body.decode("utf-8", "replace")
        assert not any(k in seen for k in CLIENT_KEYS), seen
        assert rec.headers.get("authorization") == f"Bearer {LOCAL_KEY}"


def assert_came_in(run: Run, ids: dict[str, tuple[str, str]], via: str = "base_url") -> None:
    """Each request id's turn: its outcome and endpoint as expected, ``via`` in the ledger,
    in `log --json` and in `explain`."""
    rows = run.rows(*ids)
    logged = {t["request_id"]: t for t in json.loads(run.cli("log", "--json", "--limit", "1000"))}
    for rid, (outcome, endpoint) in ids.items():
        row = rows[rid]
        assert (row["outcome"], row["endpoint"], row["via"]) == (outcome, endpoint or None, via), row
        assert logged[rid]["via"] == via
        said = "via a base URL" if via == "base_url" else "via the HTTPS proxy"
        assert said in run.cli("explain", rid)
        assert json.loads(run.cli("explain", rid, "--json"))["turn"]["via"] == via


# ---------------------------------------------------------------- start


def test_run_prints_the_base_urls_it_listens_on_loopback_only(run):
    out = "".join(run.lines)
    said = re.search(r"tokunseba: base URLs .*?:  (.+)", out).group(1)
    for host, proto in (("api.anthropic.com", "anthropic"), ("api.openai.com", "openai / openai-responses"),
                        ("generativelanguage.googleapis.com", "gemini")):
        assert f"{proto} {run.base(host)}" in said, said
    assert "env --base-url --base-url-port " in out  # the env line that matches these ports
    addrs = listening_addresses(run.proc.pid)
    for port in (run.port, *run.reverse.values()):
        assert f"127.0.0.1:{port}" in addrs, addrs
    assert all(a.startswith("127.0.0.1:") for a in addrs), addrs  # nothing beyond loopback
    env = subprocess.run([str(BIN / "tokunseba"), "env", "--base-url", "--base-url-port",
                          str(run.reverse["api.anthropic.com"])], capture_output=True, text=True, timeout=30).stdout
    assert f"export ANTHROPIC_BASE_URL={run.base('api.anthropic.com')}" in env
    assert f"export GOOGLE_GEMINI_BASE_URL={run.base('generativelanguage.googleapis.com')}" in env
    assert f"export OPENAI_BASE_URL={run.base('api.openai.com')}/v1" in env
    assert f"model_providers.tokunseba.base_url={run.base('api.openai.com')}/v1" in env


# ---------------------------------------------------------------- the three SDKs, base URL only


def test_anthropic_sdk_routed_and_passed_through_streamed_and_whole(run, ups):
    local, prov = ups["local"], ups["api.anthropic.com"]
    fresh(local, prov)
    c = anthropic.Anthropic(api_key=ANT_KEY, base_url=run.base("api.anthropic.com"), max_retries=0)
    msgs = [{"role": "user", "content": "hi"}]
    ids = {}
    then(local, Reply.sse(chat_text_stream("chatcmpl-bu-1"), delay=0.01))
    with c.messages.stream(model="claude-haiku-4-5", max_tokens=64, messages=msgs) as s:
        assert s.get_final_message().content[0].text == "Hello wörld!"
        ids[s.response.headers[RID]] = ("translated", "local")
    then(local, Reply.json(chat_reply("chatcmpl-bu-2", "local whole")))
    r = c.messages.with_raw_response.create(model="claude-haiku-4-5", max_tokens=64, messages=msgs)
    assert r.parse().content[0].text == "local whole"
    ids[r.headers[RID]] = ("translated", "local")
    then(prov, Reply.sse(ant_sse()))
    with c.messages.stream(model="claude-opus-4-8", max_tokens=64, messages=msgs) as s:
        assert s.get_final_message().content[0].text == "from the provider"
        ids[s.response.headers[RID]] = ("pass_through", "")
    then(prov, Reply.json(ANT_WHOLE))
    r = c.messages.with_raw_response.create(model="claude-opus-4-8", max_tokens=64, messages=msgs)
    assert r.parse().content[0].text == "from the provider"
    ids[r.headers[RID]] = ("pass_through", "")
    # the provider got the client's own request, its Host the provider's, its key the client's
    assert [q.headers["host"] for q in prov.requests] == ["api.anthropic.com"] * 2
    assert all(ANT_KEY in (q.headers.get("x-api-key", "") + q.headers.get("authorization", ""))
               and q.path == "/v1/messages" for q in prov.requests)
    assert len(local.requests) == 2
    assert_local_never_saw_client_keys(local)
    assert_came_in(run, ids)
    deadline = time.monotonic() + 10  # the console line of each turn names the client as come by a base URL
    while not all(any(rid in ln for ln in run.lines) for rid in ids) and time.monotonic() < deadline:
        time.sleep(0.05)
    for rid in ids:
        line = next(ln for ln in run.lines if rid in ln and "→" in ln)
        assert "anthropic-python (base URL) claude-" in line, line


def test_failover_on_a_base_url(run, ups):
    """An endpoint answering 503 before any byte: the turn fails over to the next route, as on
    the proxy path, and the ledger has both attempts."""
    local, busy = ups["local"], ups["busy"]
    fresh(local, busy)
    then(busy, Reply.json({"error": {"message": "overloaded", "type": "server_error"}}, 503))
    then(local, Reply.sse(chat_text_stream("chatcmpl-bu-failover")))
    c = anthropic.Anthropic(api_key=ANT_KEY, base_url=run.base("api.anthropic.com"), max_retries=0)
    with c.messages.stream(model="claude-busy-1", max_tokens=16, messages=[{"role": "user", "content": "hi"}]) as st:
        assert st.get_final_message().content[0].text == "Hello wörld!"
        rid = st.response.headers[RID]
    row = run.rows(rid)[rid]
    assert (row["outcome"], row["rule"], row["endpoint"], row["via"]) == ("translated", "busy-then-local", "local",
                                                                          "base_url"), row
    attempts = json.loads(row["attempts"])
    assert [a["endpoint"] for a in attempts] == ["busy", "local"] and attempts[0]["status"] == 503
    assert len(busy.requests) == 1 and len(local.requests) == 1
    assert_local_never_saw_client_keys(local)
    assert not any(ANT_KEY in v for v in busy.requests[0].headers.values())


def test_openai_sdk_chat_and_responses_routed_and_passed_through(run, ups):
    local, prov = ups["local"], ups["api.openai.com"]
    fresh(local, prov)
    c = openai.OpenAI(api_key=OAI_KEY, base_url=run.base("api.openai.com") + "/v1", max_retries=0)
    msgs = [{"role": "user", "content": "hi"}]
    ids = {}
    then(local, Reply.sse(chat_text_stream("chatcmpl-bu-3"), delay=0.01))
    r = c.chat.completions.with_raw_response.create(model="gpt-5-mini", messages=msgs, stream=True)
    assert "".join(ch.choices[0].delta.content or "" for ch in r.parse() if ch.choices) == "Hello wörld!"
    ids[r.headers[RID]] = ("retargeted", "local")
    then(local, Reply.json(chat_reply("chatcmpl-bu-4", "local chat")))
    r = c.chat.completions.with_raw_response.create(model="gpt-5-mini", messages=msgs)
    assert r.parse().choices[0].message.content == "local chat"
    ids[r.headers[RID]] = ("retargeted", "local")
    then(local, Reply.sse(chat_text_stream("chatcmpl-bu-5"), delay=0.01))
    r = c.responses.with_raw_response.create(model="gpt-5-mini", input="hi", stream=True)
    done = [e for e in r.parse() if e.type == "response.completed"]
    assert done and done[0].response.output_text == "Hello wörld!"
    ids[r.headers[RID]] = ("translated", "local")
    then(prov, Reply.sse(responses_stream(["from ", "the provider"])))
    r = c.responses.with_raw_response.create(model="gpt-5", input="hi", stream=True)
    done = [e for e in r.parse() if e.type == "response.completed"]
    assert done, "no response.completed"
    ids[r.headers[RID]] = ("pass_through", "")
    then(prov, Reply.json(responses_whole("provider whole")))
    r = c.responses.with_raw_response.create(model="gpt-5", input="hi")
    assert r.parse().output_text == "provider whole"
    ids[r.headers[RID]] = ("pass_through", "")
    assert [q.headers["host"] for q in prov.requests] == ["api.openai.com"] * 2
    assert all(q.headers["authorization"] == f"Bearer {OAI_KEY}" for q in prov.requests)
    assert_local_never_saw_client_keys(local)
    assert_came_in(run, ids)


def test_genai_sdk_routed_and_passed_through_streamed_and_whole(run, ups):
    local, prov = ups["local"], ups["generativelanguage.googleapis.com"]
    fresh(local, prov)
    c = genai.Client(api_key=GEM_KEY, http_options=types.HttpOptions(
        base_url=run.base("generativelanguage.googleapis.com"), api_version="v1beta"))
    ids = {}
    then(local, Reply.sse(chat_text_stream("chatcmpl-bu-6"), delay=0.01))
    chunks = list(c.models.generate_content_stream(model="gemini-2.5-flash-lite", contents="hi"))
    assert "".join(ch.text or "" for ch in chunks) == "Hello wörld!"
    then(local, Reply.json(chat_reply("chatcmpl-bu-7", "local gemini")))
    assert c.models.generate_content(model="gemini-2.5-flash-lite", contents="hi").text == "local gemini"
    then(prov, Reply.sse(gemini_sse([[{"text": "from "}], [{"text": "the provider"}]], GEM_USAGE, "gem-bu-s")))
    chunks = list(c.models.generate_content_stream(model="gemini-2.5-pro", contents="hi"))
    assert "".join(ch.text or "" for ch in chunks) == "from the provider"
    then(prov, Reply.json(gem_whole("provider gemini")))
    assert c.models.generate_content(model="gemini-2.5-pro", contents="hi").text == "provider gemini"
    # the genai SDK does not expose the reply's headers: the ledger's newest four gemini turns
    rows = sorted((r for r in run.rows().values() if r["client_protocol"] == "gemini"), key=lambda r: r["started_at"])
    got = [(r["outcome"], r["endpoint"] or "", r["requested_model"], bool(r["stream"])) for r in rows[-4:]]
    assert got == [("translated", "local", "gemini-2.5-flash-lite", True),
                   ("translated", "local", "gemini-2.5-flash-lite", False),
                   ("pass_through", "", "gemini-2.5-pro", True), ("pass_through", "", "gemini-2.5-pro", False)]
    ids = {r["request_id"]: (r["outcome"], r["endpoint"] or "") for r in rows[-4:]}
    assert [q.headers["host"] for q in prov.requests] == ["generativelanguage.googleapis.com"] * 2
    assert all(q.headers["x-goog-api-key"] == GEM_KEY for q in prov.requests)
    assert_local_never_saw_client_keys(local)
    assert_came_in(run, ids)


# ---------------------------------------------------------------- both ways at once, one ledger


def test_a_proxy_client_and_a_base_url_client_at_once(run, ups):
    local, prov = ups["local"], ups["api.anthropic.com"]
    fresh(local, prov)

    def answer(rec):  # each client's own reply, whoever asks first
        body = rec.json()
        said = json.dumps(body.get("messages"))
        if rec.path.endswith("/chat/completions"):
            who = "proxy" if "from-proxy" in said else "base"
            return Reply.sse(chat_text_stream(f"chatcmpl-{who}", text=(who, "-local")), delay=0.05)
        who = "proxy" if "from-proxy" in said else "base"
        return Reply.sse(ant_sse(f"{who}-provider", mid=f"msg_{who}"), delay=0.05)

    local.responder = prov.responder = answer
    try:
        ca = ssl.create_default_context(cafile=str(run.conf / "mitmproxy-ca-cert.pem"))
        proxied = anthropic.Anthropic(api_key=ANT_KEY, max_retries=0, http_client=anthropic.DefaultHttpxClient(
            proxy=run.url, verify=ca, trust_env=False))
        based = anthropic.Anthropic(api_key=ANT_KEY, max_retries=0, base_url=run.base("api.anthropic.com"),
                                    http_client=anthropic.DefaultHttpxClient(trust_env=False))

        def turn(client, who: str, model: str) -> tuple[str, str]:
            with client.messages.stream(model=model, max_tokens=32,
                                        messages=[{"role": "user", "content": f"from-{who}"}]) as s:
                return s.get_final_message().content[0].text, s.response.headers[RID]

        jobs = [(proxied, "proxy", "claude-haiku-4-5"), (based, "base", "claude-haiku-4-5"),
                (proxied, "proxy", "claude-opus-4-8"), (based, "base", "claude-opus-4-8")] * 2
        with ThreadPoolExecutor(8) as pool:
            got = list(pool.map(lambda j: (j, turn(*j)), jobs))
    finally:
        local.responder = prov.responder = None
    rows = run.rows(*(rid for _, (_, rid) in got))
    for (client, who, model), (text, rid) in got:
        assert text == (f"{who}-local" if "haiku" in model else f"{who}-provider"), (who, model, text)
        row = rows[rid]
        assert row["via"] == ("proxy" if who == "proxy" else "base_url"), row
        assert row["outcome"] == ("translated" if "haiku" in model else "pass_through")
    assert len({rid for _, (_, rid) in got}) == len(jobs)
    assert_local_never_saw_client_keys(local)


# ---------------------------------------------------------------- calls that are not model turns


def test_calls_that_are_not_turns_behave_as_on_the_proxy_path(run, ups):
    """A model list passes through untouched to the listener's provider and gets its answer
    (not in the ledger); Codex's WebSocket upgrade goes on to the provider too (its messages
    would be the turns: proxy/websocket.py), as on the proxy path."""
    prov = ups["api.openai.com"]
    fresh(prov)
    before = set(run.rows())
    then(prov, Reply.json({"object": "list", "data": [{"id": "gpt-5", "object": "model"}]}))
    with httpx.Client(trust_env=False) as h:
        r = h.get(run.base("api.openai.com") + "/v1/models", headers={"authorization": f"Bearer {OAI_KEY}"})
        assert r.status_code == 200 and r.json()["data"][0]["id"] == "gpt-5"
        assert prov.requests[-1].path == "/v1/models" and prov.requests[-1].headers["host"] == "api.openai.com"
        assert prov.requests[-1].headers["authorization"] == f"Bearer {OAI_KEY}"
        ws = h.get(run.base("api.openai.com") + "/v1/responses",
                   headers={"upgrade": "websocket", "connection": "Upgrade", "sec-websocket-version": "13",
                            "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==", "authorization": f"Bearer {OAI_KEY}"})
        assert ws.status_code == 200, ws.text  # the scripted provider does not upgrade: its answer, as it came
    assert [r.path for r in prov.requests] == ["/v1/models", "/v1/responses"]  # the upgrade reached the provider
    assert set(run.rows()) == before  # neither is a turn


# ---------------------------------------------------------------- credentials: only to the client's own provider


def test_canary_credentials_reach_only_the_provider_on_a_base_url(run, ups):
    """The canary rides in every header, cookie and query parameter a base-URL client sends: a
    routed turn (translated, and retargeted) carries none of it, only the endpoint's own key;
    a turn passed through takes it to the client's own provider; the ledger has none of it."""
    local, ant, oai = ups["local"], ups["api.anthropic.com"], ups["api.openai.com"]
    fresh(local, ant, oai)
    a = anthropic.Anthropic(api_key=CANARY, base_url=run.base("api.anthropic.com"), max_retries=0,
                            default_headers={**CANARY_HEADERS, "authorization": f"Bearer {CANARY}"},
                            default_query=CANARY_QUERY)
    o = openai.OpenAI(api_key=CANARY, base_url=run.base("api.openai.com") + "/v1", max_retries=0,
                      default_headers={**CANARY_HEADERS, "x-api-key": CANARY}, default_query=CANARY_QUERY)
    msgs = [{"role": "user", "content": "hi"}]
    ids = []
    then(local, Reply.sse(chat_text_stream("chatcmpl-canary-1")))
    with a.messages.stream(model="claude-haiku-4-5", max_tokens=16, messages=msgs) as st:  # translated
        assert st.get_final_message().content[0].text == "Hello wörld!"
        ids.append(st.response.headers[RID])
    then(local, Reply.json(chat_reply("chatcmpl-canary-2", "ok")))
    r = o.chat.completions.with_raw_response.create(model="gpt-5-mini", messages=msgs)  # retargeted, another host
    assert r.parse().choices[0].message.content == "ok"
    ids.append(r.headers[RID])
    then(ant, Reply.json(ANT_WHOLE))
    r = a.messages.with_raw_response.create(model="claude-opus-4-8", max_tokens=16, messages=msgs)  # passed through
    ids.append(r.headers[RID])
    assert len(local.requests) == 2
    for rec in local.requests:
        seen = rec.path + repr(rec.headers) + rec.body.decode("utf-8", "replace")
        assert CANARY not in seen, seen
        assert rec.headers["authorization"] == f"Bearer {LOCAL_KEY}"
    assert CANARY in repr(ant.requests[-1].headers) and CANARY in ant.requests[-1].path  # its own business
    assert oai.requests == []  # the retargeted Chat turn never reached the OpenAI provider
    rows = run.rows(*ids)
    assert [rows[i]["via"] for i in ids] == ["base_url"] * 3
    raw = b"".join(p.read_bytes() for p in run.ledger.parent.glob(run.ledger.name + "*"))
    assert CANARY.encode() not in raw and LOCAL_KEY.encode() not in raw


# ---------------------------------------------------------------- a listener forwards only to its own host


def raw_request(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(request)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    return out


def test_another_host_on_a_listener_is_not_forwarded_there(run, ups, tmp_path):
    prov = ups["api.anthropic.com"]
    body = json.dumps({"model": "claude-opus-4-8", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]})
    with Upstream() as elsewhere:
        elsewhere.script(Reply.json({"error": "must not be reached"}, 500))
        then(prov, Reply.json(ANT_WHOLE))
        before = len(prov.requests)
        for target, host in (("/v1/messages", f"127.0.0.1:{elsewhere.port}"),  # another Host
                             (f"http://127.0.0.1:{elsewhere.port}/v1/messages", f"127.0.0.1:{elsewhere.port}"),
                             ("/v1/chat/completions", "api.openai.com")):  # another provider's host and path
            req = (f"POST {target} HTTP/1.1\r\nHost: {host}\r\nx-api-key: {ANT_KEY}\r\n"
                   f"content-type: application/json\r\ncontent-length: {len(body)}\r\nconnection: close\r\n\r\n{body}")
            raw_request(run.reverse["api.anthropic.com"], req.encode())
        assert elsewhere.requests == []
        sent = prov.requests[before:]
        assert len(sent) == 3 and all(q.headers["host"] == "api.anthropic.com" for q in sent)
        # a CONNECT to a base-URL listener opens no tunnel
        reply = raw_request(run.reverse["api.anthropic.com"],
                            f"CONNECT 127.0.0.1:{elsewhere.port} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        assert not reply.startswith(b"HTTP/1.1 200") and elsewhere.requests == []

        # mitmproxy's keep_host_header would leave the client's Host: such a request is answered 421
        r2 = Run(tmp_path, {h: u for h, u in ups.items() if "." in h}, extra=("--set", "keep_host_header=true"))
        try:
            for host in (f"127.0.0.1:{elsewhere.port}", "api.openai.com"):
                req = (f"POST /v1/messages HTTP/1.1\r\nHost: {host}\r\nx-api-key: {ANT_KEY}\r\n"
                       f"content-type: application/json\r\ncontent-length: {len(body)}\r\n"
                       f"connection: close\r\n\r\n{body}")
                reply = raw_request(r2.reverse["api.anthropic.com"], req.encode())
                assert reply.startswith(b"HTTP/1.1 421"), reply[:300]
                err = json.loads(reply.split(b"\r\n\r\n", 1)[1])
                assert err["type"] == "error" and "forwards only to api.anthropic.com" in err["error"]["message"]
        finally:
            r2.stop()
        assert elsewhere.requests == [] and len(prov.requests) == before + 3


# ---------------------------------------------------------------- the real Claude Code, ANTHROPIC_BASE_URL only


def test_claude_code_with_only_anthropic_base_url(run, ups, tmp_path):
    """No proxy variable, no CA: a tool-less turn is routed to the local endpoint (translated), a
    main turn with Claude Code's tools passes through to the provider; both in `tokunseba log`
    as come by a base URL."""
    claude = need_npm_tool("claude", "Claude Code")
    local, prov = ups["local"], ups["api.anthropic.com"]
    fresh(local, prov)
    before = set(run.rows())
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "TERM": "dumb",
           "ANTHROPIC_BASE_URL": run.base("api.anthropic.com"), "ANTHROPIC_API_KEY": ANT_KEY,
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1",
           "CLAUDE_CODE_MAX_RETRIES": "0"}

    def claude_p(*args: str) -> str:
        p = subprocess.run([claude, "-p", "say hi", "--output-format", "json", *args], cwd=work, env=env,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180)
        lines = [ln for ln in p.stdout.splitlines() if ln.strip().startswith("{")]
        assert p.returncode == 0 and lines, (p.stdout[-2000:], p.stderr[-2000:])
        return json.loads(lines[-1])["result"]

    then(local, Reply.sse(chat_text_stream("chatcmpl-cc-local", text=("hi from ", "the local endpoint"))))
    assert claude_p("--model", "claude-cc-small", "--tools", "") == "hi from the local endpoint"
    then(prov, Reply.sse(ant_sse("hi from the provider", mid="msg_cc_main")))
    assert claude_p("--model", "claude-opus-4-8") == "hi from the provider"
    new = [r for rid, r in run.rows().items() if rid not in before]
    assert new and all(r["via"] == "base_url" for r in new), new
    routed = [r for r in new if r["requested_model"] == "claude-cc-small"]
    main = [r for r in new if r["requested_model"] == "claude-opus-4-8"]
    assert routed and all((r["outcome"], r["rule"], r["endpoint"]) == ("translated", "tool-less-anthropic", "local")
                          for r in routed), routed
    assert main and all(r["outcome"] == "pass_through" for r in main), main
    mains = [q for q in prov.requests if q.method == "POST" and q.path.startswith("/v1/messages")]
    assert len(mains) == len(main) and all(q.headers["host"] == "api.anthropic.com" for q in mains)
    assert len(mains[-1].json()["tools"]) >= 5  # Claude Code's tools, to the provider as sent
    assert ANT_KEY in mains[-1].headers.get("x-api-key", "") + mains[-1].headers.get("authorization", "")
    assert_local_never_saw_client_keys(local)
    log = run.cli("log", "--limit", "50")
    assert all(r["request_id"] in log for r in new)


# ---------------------------------------------------------------- the real Codex, a provider of its own


def codex_base_url_args(run: Run) -> list[str]:
    """What `tokunseba env --base-url` tells Codex users, taken from its own output."""
    env = subprocess.run([str(BIN / "tokunseba"), "env", "--base-url", "--base-url-port",
                          str(run.reverse["api.anthropic.com"])], capture_output=True, text=True, timeout=30).stdout
    line = next(ln for ln in env.splitlines() if ln.startswith("alias codex="))
    import shlex

    return shlex.split(shlex.split(line.split("=", 1)[1])[0])[1:]  # the alias's words after "codex", as a shell would


def test_codex_with_a_base_url_provider_only(run, ups, tmp_path):
    """Codex 0.171.0 with the provider `env --base-url` prints (no proxy variable, no CA, no
    OPENAI_BASE_URL): a turn of its default model passes through to the provider, a
    *-mini turn is routed to the local Chat endpoint (translated); both come by a base URL."""
    codex = need_npm_tool("codex", "Codex")
    local, prov = ups["local"], ups["api.openai.com"]
    fresh(local, prov)
    before = set(run.rows())
    home = tmp_path / "home"
    (home / "codex").mkdir(parents=True)
    work = tmp_path / "work"
    work.mkdir()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "CODEX_HOME": str(home / "codex"),
           "OPENAI_API_KEY": OAI_KEY, "TERM": "dumb"}

    def codex_exec(model: str | None) -> subprocess.CompletedProcess:  # None: Codex's default model
        return subprocess.run([codex, *codex_base_url_args(run), "exec", "--skip-git-repo-check",
                               "-c", "analytics.enabled=false", "-c", "features.plugins=false",
                               "-c", "features.api_key_model_discovery=false",
                               *(["-c", f"model={model}"] if model else []), "say hi"],
                              cwd=work, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180)

    then(prov, Reply.sse(responses_stream(["hello from ", "the provider"]), delay=0.02))
    p = codex_exec(None)
    assert p.returncode == 0 and "hello from the provider" in p.stdout, (p.stdout[-2000:], p.stderr[-2000:])
    then(local, Reply.sse(chat_text_stream("chatcmpl-codex-local", text=("hello from ", "the local endpoint"))))
    p = codex_exec("gpt-5.4-mini")
    assert p.returncode == 0 and "hello from the local endpoint" in p.stdout, (p.stdout[-2000:], p.stderr[-2000:])
    new = [r for rid, r in run.rows().items() if rid not in before]
    assert new and all(r["via"] == "base_url" for r in new), new
    turns = {(r["requested_model"], r["outcome"], r["endpoint"]) for r in new if r["client_protocol"] == "openai-responses"}
    default = [r["requested_model"] for r in new if r["outcome"] == "pass_through"]
    assert default and not default[0].endswith("-mini"), new  # Codex's default model (gpt-6.2-sol in 0.171.0)
    assert turns == {(default[0], "pass_through", None), ("gpt-5.4-mini", "translated", "local")}, new
    posts = [q for q in prov.requests if q.method == "POST"]
    assert posts and all(q.path == "/v1/responses" and q.headers["host"] == "api.openai.com" for q in posts)
    assert posts[0].headers["authorization"] == f"Bearer {OAI_KEY}"
    assert_local_never_saw_client_keys(local)


# ---------------------------------------------------------------- the real Gemini CLI, GOOGLE_GEMINI_BASE_URL


def test_gemini_cli_with_only_its_base_url(run, ups, tmp_path):
    """Gemini CLI 0.61.0 with GOOGLE_GEMINI_BASE_URL and an API key (no proxy, no CA): without
    the settings `env --base-url` names it refuses at once (exit 41); with them, a *-lite turn
    is routed to the local endpoint and a gemini-2.5-pro turn passes through to the provider."""
    gemini = need_npm_tool("gemini", "Gemini CLI")
    local, prov = ups["local"], ups["generativelanguage.googleapis.com"]
    fresh(local, prov)
    before = set(run.rows())
    home, project, scratch = tmp_path / "home", tmp_path / "project", tmp_path / "scratch"
    for d in (home / ".gemini", project, scratch):
        d.mkdir(parents=True)
    env = {"PATH": f"{Path(gemini).parent}:{os.environ['PATH']}", "HOME": str(home), "TERM": "dumb",
           "TMPDIR": str(scratch), "GOOGLE_GEMINI_BASE_URL": run.base("generativelanguage.googleapis.com"),
           "GEMINI_API_KEY": GEM_KEY, "GEMINI_CLI_TRUST_WORKSPACE": "true"}

    def settings(**extra) -> None:
        (home / ".gemini" / "settings.json").write_text(json.dumps({
            "privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False},
            "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False, "maxAttempts": 1},
            **extra}))

    def gemini_p(model: str) -> subprocess.CompletedProcess:
        return subprocess.run([gemini, "-m", model, "-p", "say hi", "-o", "json"], cwd=project, env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)

    settings()
    p = gemini_p("gemini-2.5-pro")
    assert p.returncode == 41, (p.returncode, p.stdout[-1000:], p.stderr[-1000:])  # the variable alone
    settings(security={"auth": {"selectedType": "gemini-api-key"}})  # as `tokunseba env --base-url` says
    then(local, Reply.sse(chat_text_stream("chatcmpl-gcli-bu", text=("hi from ", "the local endpoint"))))
    p = gemini_p("gemini-2.5-flash-lite")
    assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-2000:])
    assert json.loads(p.stdout)["response"].strip() == "hi from the local endpoint"
    then(prov, Reply.sse(gemini_sse([[{"text": "hi from "}], [{"text": "the provider"}]], GEM_USAGE, "gem-cli-bu")))
    p = gemini_p("gemini-2.5-pro")
    assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-2000:])
    assert json.loads(p.stdout)["response"].strip() == "hi from the provider"
    new = [r for rid, r in run.rows().items() if rid not in before]
    assert new and all(r["via"] == "base_url" for r in new), new
    got = {(r["requested_model"], r["outcome"], r["endpoint"]) for r in new}
    assert got == {("gemini-2.5-flash-lite", "translated", "local"), ("gemini-2.5-pro", "pass_through", None)}, new
    posts = [q for q in prov.requests if q.method == "POST"]
    assert posts and all(q.headers["host"] == "generativelanguage.googleapis.com" for q in posts)
    assert posts[0].headers["x-goog-api-key"] == GEM_KEY and ":streamGenerateContent" in posts[0].path
    assert_local_never_saw_client_keys(local)
