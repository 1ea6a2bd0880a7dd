"""`models` (cli/models.py): whole output, --json with what each translated pair still refuses,
the built-in endpoints without rules, one-line errors, and `models --probe` against real HTTP
servers on loopback."""

from __future__ import annotations

import http.server
import re
import socket
import threading
import time
from pathlib import Path

import pytest

from tokunseba import jsonc
from tokunseba.protocols.anthropic import ANTHROPIC_VERSION

from tests.support.read_story import expected, run, scrub


# ---------------------------------------------------------------- models

RULES = """\
endpoints:
  local:
    protocol: openai
    url: http://127.0.0.1:{port}/v1
    key_env: TK_TEST_LOCAL_KEY
    model: gemma-3-270m
  claude-proxy:
    protocol: anthropic
    url: http://127.0.0.1:{closed}/v1
routes:
  - name: easy-turns
    when:
      client: anthropic
      model: "*haiku*"
    to: local
    model: qwen3-0.6b
  - name: codex-to-local
    when:
      client: [openai-responses, openai]
    to: local
    model: gpt-oss-20b
    on_unreachable: error
  - name: all-to-gemini
    to: gemini
    on_refused: error
"""


def rules_file(tmp_path: Path, port: int = 8000, closed: int = 8001, text: str = RULES) -> Path:
    p = tmp_path / "rules.yaml"
    p.write_text(text.format(port=port, closed=closed))
    return p


def test_models_whole_output(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("TK_TEST_LOCAL_KEY", "sk-test-not-shown")
    for k in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(k, raising=False)
    rules = rules_file(tmp_path)
    rc, out, err = run(capsys, "models", "--rules", str(rules))
    assert (rc, err) == (0, "")
    assert "sk-test-not-shown" not in out
    assert scrub(out, rules) == expected("""
        rules: <PATH>
        unmatched: pass (turns no route takes: pass through to the host the client asked for)

        ENDPOINT      PROTOCOL   URL                                               MODELS IN RULES                        KEY                        TOKEN COUNTER           ACCEPTS
        anthropic     anthropic  https://api.anthropic.com/v1                      -                                      ANTHROPIC_API_KEY (unset)  Anthropic count_tokens  text, images, documents, server_tools (default)
        openai        openai     https://api.openai.com/v1                         -                                      OPENAI_API_KEY (unset)     none                    text, images, documents, server_tools (default)
        gemini        gemini     https://generativelanguage.googleapis.com/v1beta  -                                      GEMINI_API_KEY (unset)     Gemini countTokens      text, images, documents, server_tools (default)
        local         openai     http://127.0.0.1:8000/v1                          gemma-3-270m, qwen3-0.6b, gpt-oss-20b  TK_TEST_LOCAL_KEY (set)    none                    text (default)
        claude-proxy  anthropic  http://127.0.0.1:8001/v1                          -                                      -                          Anthropic count_tokens  text (default)

        Token counts routed to openai (OpenAI Chat Completions has no token counter); local (OpenAI Chat Completions has no token counter) are answered with an error naming the endpoint: a count is never estimated.

        CLIENT            ENDPOINT      RESULT
        anthropic         anthropic     retarget
        anthropic         openai        translated
        anthropic         gemini        translated
        anthropic         local         translated
        anthropic         claude-proxy  retarget
        openai            anthropic     translated
        openai            openai        retarget
        openai            gemini        translated
        openai            local         retarget
        openai            claude-proxy  translated
        openai-responses  anthropic     translated
        openai-responses  openai        translated
        openai-responses  gemini        translated
        openai-responses  local         translated
        openai-responses  claude-proxy  translated
        gemini            anthropic     translated
        gemini            openai        translated
        gemini            gemini        retarget
        gemini            local         translated
        gemini            claude-proxy  translated

        A translated turn is still refused, before anything is sent, when it carries what the target cannot take without inventing (`explain` names the JSON path):
          turns of openai clients, to another protocol: n above 1 (every other protocol returns exactly one choice)
          turns of openai-responses clients, to another protocol: built-in tool calls in the history (local shell, shell, apply_patch_call, computer, MCP server calls, ...), items or state stored by the provider (previous_response_id, item_reference, encrypted compaction); two tools that would share one flat name (freeform tools and namespaced tools travel as declared encodings)
          turns of gemini clients, to another protocol: cachedContent (content stored at Google); candidateCount above 1; a functionResponse that answers no call in the history; streamGenerateContent without alt=sse
          turns translated to anthropic endpoints: tool call ids that do not match ^[a-zA-Z0-9_-]+$ (ids are never rewritten)
          turns translated to openai endpoints: tool names longer than 64 characters (renaming would invent a tool)
          turns translated to openai-responses endpoints: tool names longer than 64 characters (renaming would invent a tool)
          turns translated to gemini endpoints: function names Gemini rejects (not [A-Za-z_][A-Za-z0-9_.:-]{0,63}); a tool result that answers no call in the history (Gemini needs the function's name); function-call arguments that are not a JSON object

        ROUTE           LINE  TO      MODEL        CLIENTS                                      RESULT  IF IT FAILS
        easy-turns        11  local   qwen3-0.6b   anthropic                                    ok      next route
        codex-to-local    17  local   gpt-oss-20b  openai-responses, openai                     ok      error to the client
        all-to-gemini     23  gemini  -            anthropic, openai, openai-responses, gemini  ok      next route
    """)


def test_models_json_lists_what_each_translated_pair_still_refuses_per_turn(capsys):
    rc, out, _ = run(capsys, "models", "--json")
    rep = jsonc.loads(out)
    by = {(p["client"], p["endpoint"]): p for p in rep["pairs"]}
    assert by[("anthropic", "anthropic")]["refused_per_turn"] == []  # a retarget carries everything
    gem = by[("openai-responses", "gemini")]["refused_per_turn"]
    assert any("freeform" in r for r in gem) and any("function names Gemini rejects" in r for r in gem)
    assert rep["refused_per_turn"]["anthropic"]["arriving"] and rep["refused_per_turn"]["anthropic"]["leaving"] == []


def test_models_without_rules_uses_the_builtins_and_the_env_rules(capsys, tmp_path, monkeypatch):
    rc, out, _ = run(capsys, "models", "--json")
    rep = jsonc.loads(out)
    assert rep["rules"] is None and rep["routes"] == []
    assert [e["name"] for e in rep["endpoints"]] == ["anthropic", "openai", "gemini"]
    assert len(rep["pairs"]) == 4 * 3
    monkeypatch.setenv("TOKUNSEBA_RULES", str(rules_file(tmp_path)))
    rc, out, _ = run(capsys, "models", "--json", "--endpoint", "local")
    rep = jsonc.loads(out)
    assert rep["rules"] == str(tmp_path / "rules.yaml")
    assert rep["endpoints"] == [{"name": "local", "protocol": "openai", "url": "http://127.0.0.1:8000/v1",
                                 "builtin": False, "key_env": "TK_TEST_LOCAL_KEY", "key_set": False,
                                 "models_in_rules": ["gemma-3-270m", "qwen3-0.6b", "gpt-oss-20b"],
                                 "count_tokens": "none", "counter": None,
                                 "no_counter_why": "OpenAI Chat Completions has no token counter",
                                 "accepts": ["text"], "accepts_said": False, "cache": "off",
                                 "context_tokens": None, "budgets": []}]
    assert [(p["client"], p["result"], p["reason"]) for p in rep["pairs"]] == [
        ("anthropic", "translated", None), ("openai", "retarget", None),
        ("openai-responses", "translated", None),
        ("gemini", "translated", None)]
    assert [r["name"] for r in rep["routes"]] == ["easy-turns", "codex-to-local"]
    assert rep["routes"][1]["refused"] == {}


def test_models_errors_are_one_line(capsys, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("routes:\n  - name: x\n    to: nowhere\n")
    rc, out, err = run(capsys, "models", "--rules", str(bad))
    assert (rc, out) == (1, "")
    assert err.startswith(f"error: {bad}:3: ") and "nowhere" in err and err.count("\n") == 1
    rc, out, err = run(capsys, "models", "--endpoint", "nope")
    assert (rc, err) == (2, "error: --endpoint: unknown endpoint 'nope' (known: anthropic, openai, gemini)\n")
    rc, out, err = run(capsys, "models", "--timeout", "-1")
    assert (rc, err) == (2, "error: --timeout: expected a positive number of seconds up to 3600, got '-1'\n")
    rc, out, err = run(capsys, "models", "--rules", str(tmp_path / "missing.yaml"))
    assert (rc, err) == (1, f"error: {tmp_path / 'missing.yaml'}: no such rules file\n")


# ---------------------------------------------------------------- models --probe, against real servers


class ModelsAPI(http.server.BaseHTTPRequestHandler):
    """A tiny models API: one answer per path prefix; records what it was sent."""

    seen: list[tuple[str, dict]] = []
    REPLIES = {
        "/v1/models": (200, "application/json",
                       b'{"object":"list","data":[{"id":"gemma-3-270m","object":"model"},{"id":"qwen3-0.6b"}]}'),
        "/locked/v1/models": (401, "application/json", b'{"type":"error","error":{"type":"authentication_error"}}'),
        "/html/v1/models": (200, "text/html", b"<html>hello</html>"),
        "/gem/v1beta/models": (200, "application/json", b'{"models":[{"name":"models/gemini-2.0-flash"}]}'),
    }

    def do_GET(self) -> None:  # noqa: N802
        ModelsAPI.seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
        if self.path.startswith("/slow/"):
            time.sleep(1.5)
        status, ctype, body = self.REPLIES.get(self.path, (404, "text/plain", b"no"))
        try:
            self.send_response(status)
            self.send_header("content-type", ctype)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # the slow path: the probe timed out and left
            pass

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def models_api():
    ModelsAPI.seen = []
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), ModelsAPI)
    srv.daemon_threads = True
    th = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    th.start()
    yield srv.server_address[1]
    srv.shutdown()
    srv.server_close()


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


PROBE_RULES = """\
endpoints:
  local:
    protocol: openai
    url: http://127.0.0.1:{port}/v1
    key_env: TK_TEST_LOCAL_KEY
    model: gemma-3-270m
  locked:
    protocol: anthropic
    url: http://127.0.0.1:{port}/locked/v1
    key_env: TK_TEST_LOCKED_KEY
  html:
    protocol: openai
    url: http://127.0.0.1:{port}/html/v1
  gem:
    protocol: gemini
    url: http://127.0.0.1:{port}/gem/v1beta
  root:                    # the server's root, not its API base
    protocol: openai
    url: http://127.0.0.1:{port}
  slow:
    protocol: openai
    url: http://127.0.0.1:{port}/slow/v1
  down:
    protocol: openai
    url: http://127.0.0.1:{closed}/v1
routes:
  - name: r
    to: local
    model: gpt-oss-20b
"""


def test_models_probe_shows_what_each_endpoint_serves(capsys, tmp_path, monkeypatch, models_api):
    closed = closed_port()
    rules = rules_file(tmp_path, models_api, closed, PROBE_RULES)
    monkeypatch.setenv("TK_TEST_LOCAL_KEY", "local-key-123")
    monkeypatch.delenv("TK_TEST_LOCKED_KEY", raising=False)
    for var in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY"):
        monkeypatch.setenv(var, f"http://127.0.0.1:{closed}")  # the probe must not use a proxy
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    names = ["local", "locked", "html", "gem", "root", "slow", "down"]
    rc, out, err = run(capsys, "models", "--rules", str(rules), "--probe", "--timeout", "0.5",
                       *(a for n in names for a in ("--endpoint", n)))
    assert (rc, err) == (1, "")  # some probed endpoints gave no models list
    # the slow endpoint answers after 1.5 s: --timeout cut it short (its row says so below; no
    # wall-clock bound here: this machine's load decides the elapsed time)
    probe = out[out.index("ENDPOINT  PROBED"):].replace(str(models_api), "PORT").replace(str(closed), "CLOSED")
    # compared cell by cell: the column widths follow the (random) port numbers
    assert [re.split(r"  +", line) for line in probe.splitlines()] == [
        ["ENDPOINT", "PROBED", "STATE", "MODELS SERVED"],
        ["local", "http://127.0.0.1:PORT/v1/models", "reachable, 2 models", "gemma-3-270m, qwen3-0.6b",
         "[not served: gpt-oss-20b]"],
        ["locked", "http://127.0.0.1:PORT/locked/v1/models",
         "reachable, but HTTP 401 (no key: set TK_TEST_LOCKED_KEY)", "-"],
        ["html", "http://127.0.0.1:PORT/html/v1/models", "reachable, but unexpected reply (not JSON)", "-"],
        ["gem", "http://127.0.0.1:PORT/gem/v1beta/models", "reachable, 1 model", "gemini-2.0-flash"],
        ["root", "http://127.0.0.1:PORT/models",
         "reachable, but HTTP 404 (no models API here: does the url end with the API's base, e.g. /v1?)", "-"],
        ["slow", "http://127.0.0.1:PORT/slow/v1/models", "unreachable: timed out after 0.5s", "-"],
        ["down", "http://127.0.0.1:CLOSED/v1/models", "unreachable: connection refused", "-"],
    ]
    assert out.index("ROUTE ") < out.index("ENDPOINT  PROBED")  # the probe comes after the rules' view
    # each endpoint got only its own key, in its protocol's header; the others got none
    sent = dict(ModelsAPI.seen)
    assert sent["/v1/models"]["authorization"] == "Bearer local-key-123"
    assert "authorization" not in sent["/locked/v1/models"] and "x-api-key" not in sent["/locked/v1/models"]
    assert sent["/locked/v1/models"]["anthropic-version"] == ANTHROPIC_VERSION == "2023-06-01"
    assert all("local-key-123" not in str(h) for p, h in ModelsAPI.seen if p != "/v1/models")


def test_models_probe_json(capsys, tmp_path, models_api):
    closed = closed_port()
    rules = rules_file(tmp_path, models_api, closed, PROBE_RULES)
    rc, out, _ = run(capsys, "models", "--rules", str(rules), "--probe", "--json", "--endpoint", "local",
                     "--endpoint", "down")
    rep = jsonc.loads(out)
    local, down = rep["endpoints"]
    assert rc == 1  # "down" gave no models list
    assert local["probe"] == {"url": f"http://127.0.0.1:{models_api}/v1/models", "reachable": True, "ok": True,
                              "status": 200, "models": ["gemma-3-270m", "qwen3-0.6b"], "error": None,
                              "not_served": ["gpt-oss-20b"]}
    assert down["probe"] == {"url": f"http://127.0.0.1:{closed}/v1/models", "reachable": False, "ok": False,
                             "status": None, "models": None, "error": "connection refused", "not_served": []}
    rc, out, _ = run(capsys, "models", "--rules", str(rules), "--probe", "--json", "--endpoint", "local")
    assert rc == 0  # every probed endpoint answered with its models: a script can rely on the status


def test_models_probe_asks_the_rules_own_endpoints_by_default(capsys, tmp_path, models_api):
    """With a rules file that declares endpoints, `--probe` alone asks those (the local server
    the demo names), not the built-in cloud ones, and says which it left out (issue 31)."""
    rules = tmp_path / "one.yaml"
    rules.write_text(f"endpoints:\n  local:\n    protocol: openai\n    url: http://127.0.0.1:{models_api}/v1\n"
                     "routes:\n  - name: r\n    when: {client: anthropic}\n    to: local\n")
    rc, out, _ = run(capsys, "models", "--rules", str(rules), "--probe", "--json")
    rep = jsonc.loads(out)
    assert rc == 0 and [e["name"] for e in rep["endpoints"] if "probe" in e] == ["local"]
    assert rep["not_probed"] == ["anthropic", "openai", "gemini"]
    rc, out, _ = run(capsys, "models", "--rules", str(rules), "--probe")
    assert rc == 0 and "not probed (built in): anthropic, openai, gemini; probe one with --endpoint NAME" in out
    assert "api.anthropic.com/v1/models" not in out
