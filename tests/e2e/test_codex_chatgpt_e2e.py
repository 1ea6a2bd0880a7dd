"""The real Codex CLI signed in with ChatGPT (issue 39), through a real mitmdump with the addon:
its turns go to the ChatGPT backend (``chatgpt.com/backend-api/codex/responses``), are
recognised as Responses turns, recorded with their usage and ``login: chatgpt``, and routed by a
rule on the login to a scripted Anthropic and a scripted Chat Completions endpoint; with no rule
taking them they pass to the (scripted) ChatGPT backend byte for byte and are recorded, with
what its replies say about the subscription (``x-codex-…`` headers, a ``provider_limits``
event). The login's access token and account id (canary values) reach no other host.

The login is the test's own: an ``auth.json`` whose id token is an unsigned JWT carrying the
ChatGPT claims and whose ``last_refresh`` is now (no refresh is asked). Before its first turn
Codex asks chatgpt.com for its models, account (workspace routing: it sends no turn without
it), settings, plugins and MCP; a scripted ChatGPT backend plays those, reached through
``point_hosts.py`` (a test-only mitmproxy script that points the host ``chatgpt.com`` at it:
every chatgpt.com request goes there, non-turn paths included, untouched by tokunseba). Codex
opens each session with a WebSocket upgrade of the turn path; it reaches the scripted
backend (each turn message over a WebSocket would be routed: proxy/websocket.py), which
declines it (426: it speaks no WebSocket), and Codex sends the turn over HTTPS at once."""

from __future__ import annotations

import base64
import json
import os
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from tokunseba.encoding import Decoding

from .conftest import BIN, Mitmdump, ledger_settled
from .test_codex_default_e2e import MODELS, text_reply
from .test_codex_e2e import need_codex, responses_stream
from tests.support.upstream import Recorded, Reply, Upstream

pytestmark = [pytest.mark.e2e, pytest.mark.claudecode]

HERE = Path(__file__).resolve().parent
ACCOUNT = "acct-canary-4f1c0a9e7b"  # the ChatGPT account id (canary)
ACCESS_SIG = "canary-access-7d2e91b04c"  # the access token's signature part (canary)
REFRESH = "rt-canary-refresh-5a8f"
ENDPOINT_KEY = "sk-endpoint-key-for-chatgpt-login"
TURN_PATH = "/backend-api/codex/responses"
LIMITS = {"x-codex-primary-used-percent": "12", "x-codex-primary-window-minutes": "300",
          "x-codex-primary-reset-at": "1767243600", "x-codex-secondary-used-percent": "3",
          "x-codex-secondary-window-minutes": "10080"}
ENDPOINTS = {
    "anthropic": "protocol: anthropic\n    url: {url}/v1\n    max_tokens: 8192",
    "openai": "protocol: openai\n    url: {url}/v1\n    max_tokens: 8192",
}
RULES = """\
endpoints:
  target:
    {endpoint}
    key_env: TK_TEST_TARGET_KEY
routes:
  - name: {name}
    when: {{login: {login}}}
    to: target
    model: {model}
"""


def _b64(doc: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(doc).encode()).rstrip(b"=").decode()


def access_token() -> str:
    exp = int(time.time()) + 86400
    return ".".join([_b64({"alg": "none", "typ": "JWT"}),
                     _b64({"exp": exp, "https://api.openai.com/auth": {"chatgpt_account_id": ACCOUNT}}), ACCESS_SIG])


def sign_in(codex_home: Path) -> str:
    """A ChatGPT login in ``codex_home`` (Codex reads it as `codex login` writes it); its access token."""
    exp = int(time.time()) + 86400
    claims = {"email": "user@example.test", "exp": exp,
              "https://api.openai.com/auth": {"chatgpt_plan_type": "plus", "chatgpt_account_id": ACCOUNT}}
    token = access_token()
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "auth.json").write_text(json.dumps({
        "OPENAI_API_KEY": None,
        "tokens": {"id_token": ".".join([_b64({"alg": "none", "typ": "JWT"}), _b64(claims), "unsigned"]),
                   "access_token": token, "refresh_token": REFRESH, "account_id": ACCOUNT},
        "last_refresh": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }))
    return token


def chatgpt_backend(rec: Recorded) -> Reply:
    """The scripted ChatGPT backend: the account Codex routes its workspace by, an empty model
    list (Codex keeps its bundled catalog), 404 for plugins, MCP and settings; the WebSocket
    upgrade declined (426); the turn answered as a Responses stream with the limit headers."""
    path = rec.path.split("?", 1)[0]
    if path == TURN_PATH and rec.method == "POST":
        reply = Reply.sse(responses_stream(["hello from ", "the ChatGPT backend"]), delay=0.01)
        reply.headers.update(LIMITS)
        return reply
    if path == TURN_PATH:  # GET: the WebSocket upgrade
        return Reply.json({"error": {"message": "no WebSocket here", "type": "invalid_request_error"}}, 426)
    if path == "/backend-api/wham/accounts/check":
        return Reply.json({"accounts": [{"id": ACCOUNT, "workspace_backend_origin": "https://chatgpt.com",
                                         "account_routing_override": "NO_CONSTRAINT"}]})
    if path == "/backend-api/codex/models":
        return Reply.json({"models": []})
    return Reply.json({"detail": "not found"}, 404)


def run_codex(m: Mitmdump, tmp_path: Path, prompt: str) -> tuple[subprocess.CompletedProcess, str]:
    """`codex exec PROMPT` as a ChatGPT-signed-in user, through the proxy ``m`` (its CA trusted);
    (the run, the login's access token)."""
    codex = need_codex()
    home = tmp_path / "home"
    token = sign_in(home / "codex")
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "CODEX_HOME": str(home / "codex"),
           "HTTPS_PROXY": m.url, "HTTP_PROXY": m.url, "SSL_CERT_FILE": str(m.ca), "TERM": "dumb"}
    return subprocess.run([codex, "exec", "--skip-git-repo-check", "-c", "analytics.enabled=false", prompt],
                          cwd=work, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=180), token


def proxy(tmp_path: Path, backend: Upstream, rules: Path) -> Mitmdump:
    """mitmdump with the addon (the client's request bodies kept: what Codex sent) whose
    chatgpt.com is the scripted ``backend``."""
    return Mitmdump(tmp_path, rules, env={"TK_TEST_POINT": f"chatgpt.com=http://127.0.0.1:{backend.port}",
                                          "TK_TEST_TARGET_KEY": ENDPOINT_KEY},
                    extra=["-s", str(HERE.parent / "support" / "point_hosts.py"), "--set", "tokunseba_ledger_bodies=true"])


def sent_by_codex(m: Mitmdump, request_id: str) -> bytes:
    """The request body as Codex sent it (the ledger keeps it when bodies are kept)."""
    con = sqlite3.connect(m.ledger)
    try:
        return con.execute("SELECT request_body FROM bodies WHERE request_id = ?", (request_id,)).fetchone()[0]
    finally:
        con.close()


def carries_login(r: Recorded) -> bool:
    """Whether a request holds the login's token or account id anywhere (headers or body)."""
    seen = " ".join(f"{k}: {v}" for k, v in r.headers.items()) + r.body.decode("utf-8", "replace")
    return any(secret in seen for secret in (ACCESS_SIG, ACCOUNT, REFRESH))


def ledger(m: Mitmdump) -> tuple[list[dict], dict[str, list[tuple[str, dict]]]]:
    """(turns, request id -> [(event kind, data)])."""
    ledger_settled(m.ledger)
    con = sqlite3.connect(m.ledger)
    con.row_factory = sqlite3.Row
    try:
        turns = [dict(r) for r in con.execute("SELECT * FROM turns ORDER BY started_at")]
        events: dict[str, list[tuple[str, dict]]] = {}
        for r in con.execute("SELECT request_id, kind, data FROM events ORDER BY id"):
            events.setdefault(r["request_id"], []).append((r["kind"], json.loads(r["data"]) if r["data"] else {}))
    finally:
        con.close()
    return turns, events


def tokunseba(m: Mitmdump, *args: str) -> str:
    return subprocess.run([str(BIN / "tokunseba"), *args, "--ledger", str(m.ledger)], capture_output=True, text=True,
                          check=True).stdout


@pytest.mark.parametrize("protocol", ["anthropic", "openai"])
def test_a_chatgpt_login_turn_is_routed_by_its_login_and_its_credentials_stay_home(tmp_path, protocol):
    answer = f"routed answer from the {protocol} endpoint"
    with Upstream() as backend, Upstream() as target:
        backend.responder = chatgpt_backend
        target.script(text_reply(protocol, answer))
        rules = tmp_path / "rules.yaml"
        rules.write_text(RULES.format(endpoint=ENDPOINTS[protocol].format(url=target.url), name="chatgpt-elsewhere",
                                      login="chatgpt", model=MODELS[protocol]))
        m = proxy(tmp_path, backend, rules)
        try:
            p, _ = run_codex(m, tmp_path, "say hi")
        finally:
            m.stop()
        assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-3000:])
        assert answer in p.stdout
        # the turn went to the rule's endpoint, with its own key and nothing of the login
        (sent,) = [r for r in target.requests if r.method == "POST"]
        assert sent.path == ("/v1/messages" if protocol == "anthropic" else "/v1/chat/completions")
        assert ENDPOINT_KEY in (sent.headers.get("x-api-key", "") + sent.headers.get("authorization", ""))
        assert not [r for r in target.requests if carries_login(r)]
        assert "chatgpt-account-id" not in sent.headers and "cookie" not in sent.headers
        # the backend saw Codex's account and model calls and its WebSocket upgrade (which it
        # declined: Codex sent the turn over HTTPS), never the turn
        paths = [(r.method, r.path.split("?", 1)[0]) for r in backend.requests]
        assert ("GET", "/backend-api/wham/accounts/check") in paths
        assert not [pp for pp in paths if pp == ("POST", TURN_PATH)]
    turns, events = ledger(m)
    assert len(turns) == 1, turns  # the account, model, plugin and MCP calls are no turns
    t = turns[0]
    assert (t["client_protocol"], t["host"], t["path"]) == ("openai-responses", "chatgpt.com", TURN_PATH)
    assert (t["outcome"], t["rule"], t["endpoint"], t["target_protocol"]) == ("translated", "chatgpt-elsewhere",
                                                                               "target", protocol)
    assert t["usage_input"] == 9100 and t["usage_output"] == 9  # as the endpoint reported it
    assert t["session_id"] and t["client_name"] == "codex"
    assert ("login", {"login": "chatgpt", "why": "sent to the ChatGPT backend (chatgpt.com)"}) in events[t["request_id"]]
    left = next(d for k, d in events[t["request_id"]] if k == "left_behind")
    assert "chatgpt-account-id" in left["headers"] and "authorization" in left["headers"]
    said = tokunseba(m, "explain", t["request_id"])
    assert "login" in said and "chatgpt (sent to the ChatGPT backend (chatgpt.com))" in said
    assert "when.login" not in said and "login: chatgpt" in said  # the trace says why the rule took it
    assert ACCESS_SIG not in m.log() and ACCOUNT not in json.dumps(turns) + json.dumps(events)


def test_b_a_chatgpt_login_turn_no_rule_takes_passes_to_the_chatgpt_backend_and_is_recorded(tmp_path):
    with Upstream() as backend, Upstream() as target:
        backend.responder = chatgpt_backend
        rules = tmp_path / "rules.yaml"  # a rule for API-key logins only: this turn passes
        rules.write_text(RULES.format(endpoint=ENDPOINTS["anthropic"].format(url=target.url), name="api-keys-elsewhere",
                                      login="api_key", model=MODELS["anthropic"]))
        m = proxy(tmp_path, backend, rules)
        try:
            p, token = run_codex(m, tmp_path, "say hi")
        finally:
            m.stop()
        assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-3000:])
        assert "hello from the ChatGPT backend" in p.stdout
        assert target.requests == []  # the rule's endpoint saw nothing
        (turn,) = [r for r in backend.requests if r.method == "POST" and r.path == TURN_PATH]
        # passed through byte for byte: the login's own credentials, to its own host
        assert turn.headers["authorization"] == f"Bearer {token}"
        assert turn.headers["chatgpt-account-id"] == ACCOUNT
    turns, events = ledger(m)
    assert len(turns) == 1, turns
    t = turns[0]
    assert (t["host"], t["path"], t["outcome"], t["rule"]) == ("chatgpt.com", TURN_PATH, "pass_through", None)
    assert t["usage_input"] == 5120 and t["usage_output"] == 41 and t["usage_cache_read"] == 4096
    assert t["requested_model"] and t["session_id"] and t["client_name"] == "codex" and t["agent"] == "main"
    # the body as Codex wrote it: still compressed with its own encoding, the same JSON inside
    assert turn.headers["content-encoding"] == "zstd" and turn.body[:4] == b"\x28\xb5\x2f\xfd"  # zstd's magic
    unzipped = Decoding("zstd")
    assert unzipped.feed(turn.body) + unzipped.close() == sent_by_codex(m, t["request_id"])
    ev = events[t["request_id"]]
    assert ("login", {"login": "chatgpt", "why": "sent to the ChatGPT backend (chatgpt.com)"}) in ev
    (limits,) = [d for k, d in ev if k == "provider_limits"]
    assert limits["host"] == "chatgpt.com" and dict(map(tuple, limits["headers"])) == LIMITS
    route = json.loads(t["trace"])[0]
    assert route["matched"] is False and "login: chatgpt" in " ".join(route["reasons"])
    assert ACCESS_SIG not in m.log() and ACCOUNT not in json.dumps(turns) + json.dumps(events)
