"""Gemini both ways, end to end through a real mitmdump with the addon (issue 11):

- the google-genai SDK (HTTPS_PROXY + the mitmproxy CA, as docs/dev/clients.md §6.1) against a scripted
  Anthropic upstream, streamed and not, and an upstream error;
- Gemini CLI (npm @google/gemini-cli, pinned by scripts/install-gemini-cli.sh) headless with
  --yolo against a scripted Chat upstream: a run_shell_command tool loop (the CLI really runs
  the command and sends its output back), its `-o json` stats equal to the upstream's usage
  converted, the ledger holding the usage as reported; and a headless turn answered by the
  real local model (llama-server, when scripts/localmodel.sh installed it);
- Claude Code (`-p --output-format json`, a Bash tool loop, its usage report equal to the
  upstream's usageMetadata converted) and Codex (a tool loop) against a scripted Gemini
  endpoint.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from .conftest import Mitmdump, ledger_settled, need_npm_tool
from tests.support.upstream import Reply, Upstream

STREAMS = Path(__file__).resolve().parents[1] / "data" / "streams"
KEYS = {"TK_TEST_ANT_KEY": "sk-endpoint-ant-gem-0002", "TK_TEST_OAI_KEY": "sk-endpoint-oai-gem-0001"}
CLIENT_KEY = "AIza-client-key-SECRET-0003"

RULES = """\
endpoints:
  ant:
    protocol: anthropic
    url: {ant}/v1
    key_env: TK_TEST_ANT_KEY
    max_tokens: 1024
  oai:
    protocol: openai
    url: {oai}/v1
    key_env: TK_TEST_OAI_KEY
routes:
  - name: genai-to-claude
    when: {{client: gemini, model: "sdk-*"}}
    to: ant
    model: claude-test-model
    on_failure: error  # its endpoint's errors reach the client as they came (no failover)
  - name: gemini-cli-easy-turns
    when: {{client: gemini}}
    to: oai
    model: local-qwen
"""


@pytest.fixture(scope="module")
def gem_proxy(upstreams, tmp_path_factory):
    work = tmp_path_factory.mktemp("gemini-proxy")
    rules = work / "rules.yaml"
    rules.write_text(RULES.format(ant=upstreams["ant"].url, oai=upstreams["oai"].url))
    m = Mitmdump(work, rules, env=KEYS)
    yield m
    m.stop()


@pytest.fixture
def sdk(gem_proxy, monkeypatch):
    for k, v in gem_proxy.client_env().items():
        monkeypatch.setenv(k, v)
    return genai.Client(api_key=CLIENT_KEY, http_options=types.HttpOptions(api_version="v1beta"))


def ledger(proxy: Mitmdump, sql: str, *args) -> list[dict]:
    ledger_settled(proxy.ledger)  # turns are recorded just after their client got the last byte
    with sqlite3.connect(proxy.ledger) as db:
        db.row_factory = sqlite3.Row
        return [dict(r) for r in db.execute(sql, args)]


def turn_row(proxy: Mitmdump, request_id: str) -> dict:
    ledger_settled(proxy.ledger)  # a turn's end is recorded just after its client got the last byte
    rows = ledger(proxy, "SELECT * FROM turns WHERE request_id = ?", request_id)
    assert rows, proxy.log()[-3000:]
    return rows[0]


def _upstream_checks(req, stream: bool) -> dict:
    assert req.path == "/v1/messages"
    assert req.headers["x-api-key"] == KEYS["TK_TEST_ANT_KEY"]  # the endpoint's own key
    assert "x-goog-api-key" not in req.headers and CLIENT_KEY not in json.dumps(req.headers)
    body = req.json()
    assert body["model"] == "claude-test-model" and body["max_tokens"] == 1024  # max_tokens: the endpoint's
    assert body.get("stream", False) is stream
    assert body["system"] and body["messages"][0]["role"] == "user"
    return body


ANT_USAGE = {"input_tokens": 472, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 2048,
             "output_tokens": 71}


def test_genai_sdk_stream_against_an_anthropic_upstream(sdk, gem_proxy, upstreams):
    ant = upstreams["ant"]
    ant.script(Reply.sse((STREAMS / "anthropic_validated_text_tool.sse").read_bytes(), delay=0.05))
    chunks = list(sdk.models.generate_content_stream(
        model="sdk-flash", contents="weather in Paris?",
        config=types.GenerateContentConfig(system_instruction="be brief", tools=[types.Tool(function_declarations=[
            types.FunctionDeclaration(name="get_weather", description="w", parameters_json_schema={
                "type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}}})])])))
    body = _upstream_checks(ant.requests[-1], stream=True)
    assert body["tools"][0]["name"] == "get_weather"
    text = "".join(p.text for c in chunks if c.candidates and c.candidates[0].content
                   for p in c.candidates[0].content.parts or [] if p.text)
    assert text == "Let me check the weather."
    calls = [fc for c in chunks for fc in c.function_calls or []]
    assert [(fc.id, fc.name, fc.args) for fc in calls] == [
        ("toolu_01T1x1fJ34qAmk2tNTrN7Up6", "get_weather", {"city": "Paris", "unit": "celsius"})]
    last = chunks[-1]
    assert last.candidates[0].finish_reason == types.FinishReason.STOP
    um = last.usage_metadata  # docs/dev/protocols.md D.6: prompt = input + cache read + cache write
    assert (um.prompt_token_count, um.cached_content_token_count, um.candidates_token_count, um.total_token_count) == (
        472 + 2048, 2048, 71, 472 + 2048 + 71)
    rid = ledger(gem_proxy, "SELECT request_id FROM turns ORDER BY rowid DESC LIMIT 1")[0]["request_id"]
    row = turn_row(gem_proxy, rid)
    assert row["outcome"] == "translated" and row["target_protocol"] == "anthropic"
    reported = json.loads(row["usage_reported"])
    assert {k: reported[k] for k in ANT_USAGE} == ANT_USAGE  # exactly as the upstream said
    assert row["usage_input"] == 472 and row["usage_cache_read"] == 2048 and row["usage_output"] == 71


def test_genai_sdk_whole_reply_against_an_anthropic_upstream(sdk, gem_proxy, upstreams):
    ant = upstreams["ant"]
    ant.script(Reply.json(json.loads((STREAMS / "anthropic_validated_text_tool.reply.json").read_bytes())))
    resp = sdk.models.generate_content(model="sdk-flash", contents="weather in Paris?",
                                       config=types.GenerateContentConfig(system_instruction="be brief"))
    _upstream_checks(ant.requests[-1], stream=False)
    assert resp.text == "Let me check the weather."
    assert [(fc.id, fc.name) for fc in resp.function_calls] == [("toolu_01T1x1fJ34qAmk2tNTrN7Up6", "get_weather")]
    assert resp.usage_metadata.prompt_token_count == 472 + 2048
    assert resp.sdk_http_response.headers.get("x-tokunseba-request-id", "").startswith("tk-")


def test_genai_sdk_sees_an_anthropic_rate_limit_as_resource_exhausted(sdk, upstreams):
    upstreams["ant"].script(Reply.json({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}},
                                       429))
    with pytest.raises(genai_errors.ClientError) as e:
        sdk.models.generate_content(model="sdk-flash", contents="hi")
    assert (e.value.code, e.value.status) == (429, "RESOURCE_EXHAUSTED") and "slow down" in e.value.message


# ---------------------------------------------------------------- Gemini CLI


def chat_chunk(cid: str, delta: dict | None = None, finish=None, usage=None) -> bytes:
    obj = {"id": cid, "object": "chat.completion.chunk", "created": 1767225600, "model": "local-qwen",
           "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage is not None:
        obj["usage"] = usage
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


USAGE_1 = {"prompt_tokens": 9000, "completion_tokens": 25, "total_tokens": 9025,
           "prompt_tokens_details": {"cached_tokens": 8000}}
USAGE_2 = {"prompt_tokens": 9100, "completion_tokens": 8, "total_tokens": 9108}


def tool_call_stream(call_id: str, command: str) -> list[bytes]:
    args = json.dumps({"command": command, "description": "print a marker"})
    return [chat_chunk("chatcmpl-gcli-1", {"role": "assistant", "content": "Running it."}),
            chat_chunk("chatcmpl-gcli-1", {"tool_calls": [{"index": 0, "id": call_id, "type": "function",
                                                           "function": {"name": "run_shell_command", "arguments": ""}}]}),
            chat_chunk("chatcmpl-gcli-1", {"tool_calls": [{"index": 0, "function": {"arguments": args[:20]}}]}),
            chat_chunk("chatcmpl-gcli-1", {"tool_calls": [{"index": 0, "function": {"arguments": args[20:]}}]}),
            chat_chunk("chatcmpl-gcli-1", {}, "tool_calls"), chat_chunk("chatcmpl-gcli-1", usage=USAGE_1),
            b"data: [DONE]\n\n"]


def text_stream(text: str) -> list[bytes]:
    return [chat_chunk("chatcmpl-gcli-2", {"role": "assistant", "content": ""}),
            *[chat_chunk("chatcmpl-gcli-2", {"content": t}) for t in (text[:5], text[5:])],
            chat_chunk("chatcmpl-gcli-2", {}, "stop"), chat_chunk("chatcmpl-gcli-2", usage=USAGE_2), b"data: [DONE]\n\n"]


def run_gemini_cli(proxy: Mitmdump, tmp: Path, prompt: str, *flags: str, timeout: int = 120,
                   extra_settings: dict | None = None, extra_env: dict | None = None):
    """`gemini -m cli-model -p PROMPT` headless through the proxy (docs/dev/clients.md §5.1, §5.8): its own
    HOME with the quiet settings, its own TMPDIR and project folder, stdin closed."""
    gemini = need_npm_tool("gemini", "Gemini CLI")
    home, project, scratch = tmp / "home", tmp / "project", tmp / "scratch"
    for d in (home / ".gemini", project, scratch):
        d.mkdir(parents=True, exist_ok=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps({
        "privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False, "maxAttempts": 1},
        **(extra_settings or {})}))
    env = {"PATH": f"{Path(gemini).parent}:{os.environ['PATH']}", "HOME": str(home), "TERM": "dumb",
           "TMPDIR": str(scratch), "HTTPS_PROXY": proxy.url, "NODE_EXTRA_CA_CERTS": str(proxy.ca),
           "GEMINI_API_KEY": CLIENT_KEY, "GEMINI_CLI_TRUST_WORKSPACE": "true", "NO_PROXY": "", **(extra_env or {})}
    return subprocess.run([gemini, "-m", "cli-model", *flags, "-p", prompt], cwd=project, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)


def test_gemini_cli_tool_loop_against_a_chat_upstream(gem_proxy, upstreams, tmp_path):
    oai = upstreams["oai"]
    oai.script(Reply.sse(tool_call_stream("call_gcli_0001", "printf 'hi-from-%s' tool-ran"), delay=0.02),
               Reply.sse(text_stream("Done: hi-from-tool-ran"), delay=0.02))
    r = run_gemini_cli(gem_proxy, tmp_path, "run the marker command", "--yolo", "-o", "json")
    assert r.returncode == 0, (r.stdout, r.stderr[-3000:], gem_proxy.log()[-3000:])
    out = json.loads(r.stdout)
    assert out["response"].strip().endswith("Done: hi-from-tool-ran")
    assert len(oai.requests) == 2, [q.path for q in oai.requests]
    first, second = oai.requests[0], oai.requests[1]
    for q in (first, second):
        assert q.path == "/v1/chat/completions" and q.headers["authorization"] == f"Bearer {KEYS['TK_TEST_OAI_KEY']}"
        assert "x-goog-api-key" not in q.headers and CLIENT_KEY not in json.dumps(q.headers)
        body = q.json()
        assert body["model"] == "local-qwen" and body["stream"] is True
        assert body["messages"][0]["role"] == "system"  # the CLI's systemInstruction
        assert "run_shell_command" in {t["function"]["name"] for t in body["tools"]}
    msgs = second.json()["messages"]
    call_turn = next(m for m in msgs if m.get("tool_calls"))
    assert call_turn["tool_calls"][0]["id"] == "call_gcli_0001"  # the upstream's id, echoed by the CLI, untouched
    result = next(m for m in msgs if m["role"] == "tool")
    assert result["tool_call_id"] == "call_gcli_0001" and "hi-from-tool-ran" in result["content"]  # really ran
    # -o json stats: the last usageMetadata of each turn, summed over the turns (docs/dev/clients.md §5.7)
    assert list(out["stats"]["models"]) == ["local-qwen"], out["stats"]  # the CLI names the model the reply named
    tokens = out["stats"]["models"]["local-qwen"]["tokens"]
    assert tokens["prompt"] == USAGE_1["prompt_tokens"] + USAGE_2["prompt_tokens"]
    assert tokens["candidates"] == USAGE_1["completion_tokens"] + USAGE_2["completion_tokens"]
    assert tokens["cached"] == 8000 and tokens["total"] == USAGE_1["total_tokens"] + USAGE_2["total_tokens"]
    rows = ledger(gem_proxy, "SELECT * FROM turns WHERE client_protocol = 'gemini' AND target_protocol = 'openai' "
                             "ORDER BY rowid DESC LIMIT 2")
    assert [json.loads(r["usage_reported"]) for r in rows] == [USAGE_2, USAGE_1]  # exactly as reported
    assert all(r["outcome"] == "translated" and r["status"] == 200 for r in rows)


# ---------------------------------------------------------------- Gemini CLI -> the real local model

LOCAL_RULES = """\
endpoints:
  llama:
    protocol: openai
    url: {llama}
    model: gemma-3-270m
    max_tokens: 64
    max_tokens_field: max_tokens
    stop: ["<|im_end|>"]
routes:
  - name: gemini-cli-easy-turns
    when: {{client: gemini}}
    to: llama
"""


@pytest.fixture(scope="module")
def llama_proxy(tmp_path_factory):
    from .test_localmodel_e2e import _start, _stop  # skips (fails under CI) when not installed

    state = tmp_path_factory.mktemp("gemini-localmodel-state")
    url = _start("llama-server", state)
    work = tmp_path_factory.mktemp("gemini-local-proxy")
    rules = work / "rules.yaml"
    rules.write_text(LOCAL_RULES.format(llama=url))
    m = Mitmdump(work, rules)
    try:
        yield m
    finally:
        m.stop()
        _stop("llama-server", state)


@pytest.mark.localmodel
def test_gemini_cli_headless_turn_answered_by_the_real_local_model(llama_proxy, tmp_path):
    """A small Gemini CLI turn fits the local model's 4096-token context: a one-line system
    prompt (GEMINI_SYSTEM_MD), one tool (tools.core), and, through the CLI's own model-config
    override, temperature 0 and maxOutputTokens 40 (the base model then writes text
    deterministically). Assertions are on structure, never on the model's words."""
    sysmd = tmp_path / "system.md"
    sysmd.write_text("Answer the question.\n")
    settings = {"tools": {"core": ["read_file"]}, "modelConfigs": {"customOverrides": [
        {"match": {"model": "cli-model"},
         "modelConfig": {"generateContentConfig": {"temperature": 0, "maxOutputTokens": 40}}}]}}
    r = run_gemini_cli(llama_proxy, tmp_path, "What is 2+2? Answer:", "-o", "json", extra_settings=settings,
                       extra_env={"GEMINI_SYSTEM_MD": str(sysmd)})
    assert r.returncode == 0, (r.stdout, r.stderr[-3000:], llama_proxy.log()[-3000:])
    out = json.loads(r.stdout)
    assert out["response"].strip()  # the reply appears
    rows = ledger(llama_proxy, "SELECT * FROM turns WHERE client_protocol = 'gemini'")
    assert len(rows) == 1 and rows[0]["outcome"] == "translated" and rows[0]["endpoint"] == "llama"
    reported = json.loads(rows[0]["usage_reported"])  # llama-server's usage, exactly as it reported it
    assert {"prompt_tokens", "completion_tokens", "total_tokens"} <= set(reported)
    assert 0 < reported["completion_tokens"] <= 40
    tokens = next(iter(out["stats"]["models"].values()))["tokens"]
    assert (tokens["prompt"], tokens["candidates"], tokens["total"]) == (
        reported["prompt_tokens"], reported["completion_tokens"], reported["total_tokens"])


# ---------------------------------------------------------------- Claude Code and Codex -> a Gemini endpoint

GEM_KEY = "AIza-endpoint-gemini-0005"
TO_GEMINI_RULES = """\
endpoints:
  gem:
    protocol: gemini
    url: {url}/v1beta
    key_env: TK_TEST_GEM_KEY
    max_tokens: 4096
routes:
  - name: to-gemini
    when: {{client: [anthropic, openai-responses]}}
    to: gem
    model: gemini-test-flash
"""


def gemini_sse(parts_per_chunk: list[list[dict]], usage: dict, rid: str) -> list[bytes]:
    """A Gemini stream (docs/dev/protocols.md D.2): one GenerateContentResponse per chunk, running usage on
    the last one with finishReason STOP (also for function calls)."""
    out = []
    for i, parts in enumerate(parts_per_chunk):
        cand = {"content": {"role": "model", "parts": parts}, "index": 0}
        obj = {"candidates": [cand], "modelVersion": "gemini-test-flash", "responseId": rid}
        if i == len(parts_per_chunk) - 1:
            cand["finishReason"] = "STOP"
            obj["usageMetadata"] = usage
        out.append(b"data: " + json.dumps(obj).encode() + b"\r\n\r\n")
    return out


@pytest.fixture
def gem_upstream(tmp_path):
    with Upstream() as up:
        rules = tmp_path / "rules.yaml"
        rules.write_text(TO_GEMINI_RULES.format(url=up.url))
        m = Mitmdump(tmp_path, rules, env={"TK_TEST_GEM_KEY": GEM_KEY})
        m.upstream = up
        try:
            yield m
        finally:
            m.stop()


def _gemini_posts(up: Upstream) -> list:
    posts = [r for r in up.requests if r.method == "POST"]
    assert all(r.path == "/v1beta/models/gemini-test-flash:streamGenerateContent?alt=sse" for r in posts), posts
    assert all(r.headers["x-goog-api-key"] == GEM_KEY and "authorization" not in r.headers
               and "x-api-key" not in r.headers for r in posts)
    return posts


@pytest.mark.claudecode
def test_claude_code_bash_tool_loop_against_a_gemini_endpoint(gem_upstream, tmp_path):
    """Gemini sends its functionCall without an id: one is minted for Claude Code
    (deterministically, recorded) and comes back byte for byte on the functionResponse, named
    from the history; Claude Code's usage report equals the upstream's usageMetadata
    converted (docs/dev/protocols.md D.6), summed over its two turns."""
    from .test_claude_code_e2e import result_json, run_claude

    args = {"command": "echo tokunseba-gemini-tool-ran", "description": "Print a marker"}
    u1 = {"promptTokenCount": 5000, "cachedContentTokenCount": 4000, "candidatesTokenCount": 30,
          "thoughtsTokenCount": 20, "totalTokenCount": 5050}
    u2 = {"promptTokenCount": 5200, "cachedContentTokenCount": 4000, "candidatesTokenCount": 8, "totalTokenCount": 5208}
    up = gem_upstream.upstream
    up.script(Reply.sse(gemini_sse([[{"text": "Running it."}], [{"functionCall": {"name": "Bash", "args": args}}]],
                                   u1, "gemresp-cc-1"), delay=0.03),
              Reply.sse(gemini_sse([[{"text": "The command printed "}], [{"text": "the marker."}]], u2, "gemresp-cc-2"),
                        delay=0.03))
    p = run_claude(gem_upstream, tmp_path, "run echo tokunseba-gemini-tool-ran with Bash", "--allowedTools", "Bash")
    res = result_json(p)
    assert p.returncode == 0, (p.stderr[-2000:], gem_upstream.log()[-3000:])
    assert res["result"] == "The command printed the marker."
    u = res["usage"]
    assert (u["input_tokens"], u["cache_read_input_tokens"], u["output_tokens"]) == (
        (5000 - 4000) + (5200 - 4000), 4000 + 4000, (30 + 20) + 8)
    posts = _gemini_posts(up)
    assert len(posts) == 2
    first, second = posts[0].json(), posts[1].json()
    assert "model" not in first and first["systemInstruction"]["parts"][0]["text"]
    assert any(d["name"] == "Bash" for d in first["tools"][0]["functionDeclarations"])
    assert first["generationConfig"]["maxOutputTokens"] <= 4096
    model_turn = second["contents"][-2]
    call = next(p["functionCall"] for p in model_turn["parts"] if "functionCall" in p)
    result = second["contents"][-1]["parts"][0]["functionResponse"]
    assert call["id"] == result["id"] == "call_gemresp-cc-1_0"  # minted once, then untouched
    assert call["args"] == args and result["name"] == "Bash"
    assert "tokunseba-gemini-tool-ran" in result["response"]["output"]
    assert next(p for p in model_turn["parts"] if "functionCall" in p)["thoughtSignature"] == \
        "skip_thought_signature_validator"
    rows = ledger(gem_upstream, "SELECT * FROM turns WHERE target_protocol = 'gemini' ORDER BY rowid")
    assert [json.loads(r["usage_reported"]) for r in rows[-2:]] == [u1, u2]  # as reported
    warned = ledger(gem_upstream, "SELECT data FROM events WHERE request_id = ? AND kind = 'completed'",
                    rows[-2]["request_id"])
    assert warned and "id_synthesized" in warned[0]["data"]


@pytest.mark.claudecode
def test_codex_tool_loop_against_a_gemini_endpoint(gem_upstream, tmp_path):
    codex = need_npm_tool("codex", "Codex")
    call_id = "gemcall_codex_0001"  # Gemini sent an id this time: it travels byte for byte
    up = gem_upstream.upstream
    up.script(Reply.sse(gemini_sse([[{"text": "Running it."}],
                                    [{"functionCall": {"id": call_id, "name": "exec_command",
                                                       "args": {"cmd": "echo codex-gemini-tool-ran"}}}]],
                                   {"promptTokenCount": 900, "candidatesTokenCount": 25, "totalTokenCount": 925},
                                   "gemresp-codex-1"), delay=0.03),
              Reply.sse(gemini_sse([[{"text": "The command printed codex-gemini-tool-ran."}]],
                                   {"promptTokenCount": 1000, "candidatesTokenCount": 12, "totalTokenCount": 1012},
                                   "gemresp-codex-2"), delay=0.03))
    home, work = tmp_path / "home", tmp_path / "work"
    (home / "codex").mkdir(parents=True)
    work.mkdir()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "CODEX_HOME": str(home / "codex"),
           "HTTPS_PROXY": gem_upstream.url, "HTTP_PROXY": gem_upstream.url, "SSL_CERT_FILE": str(gem_upstream.ca),
           "CODEX_API_KEY": "sk-codex-client-dummy-key-0123456789", "TERM": "dumb"}
    p = subprocess.run([codex, "exec", "--skip-git-repo-check", "-c", "analytics.enabled=false",
                        "-c", "features.plugins=false", "-c", "features.api_key_model_discovery=false",
                        "-c", "model=gpt-5.5", "run echo codex-gemini-tool-ran"], cwd=work, env=env,
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-2000:], gem_upstream.log()[-3000:])
    assert "The command printed codex-gemini-tool-ran." in p.stdout
    posts = _gemini_posts(up)
    assert len(posts) == 2
    first, second = posts[0].json(), posts[1].json()
    assert first["systemInstruction"]["parts"][0]["text"].startswith("You are Codex")
    assert any(d["name"] == "exec_command" for t in first["tools"] for d in t["functionDeclarations"])
    call = next(p["functionCall"] for c in second["contents"] if c["role"] == "model" for p in c["parts"]
                if "functionCall" in p)
    result = next(p["functionResponse"] for c in second["contents"] for p in c["parts"] if "functionResponse" in p)
    assert call["id"] == result["id"] == call_id and result["name"] == "exec_command"
    assert "codex-gemini-tool-ran" in json.dumps(result["response"])
    rows = ledger(gem_upstream, "SELECT * FROM turns WHERE client_protocol = 'openai-responses' ORDER BY rowid")
    assert len(rows) == 2 and all((r["outcome"], r["target_protocol"]) == ("translated", "gemini") for r in rows)


def test_gemini_cli_shell_loop_against_a_chat_upstream_streaming_reasoning_content(tmp_path):
    """Issue 18 with the real client: Gemini CLI's run_shell_command loop (three tool turns)
    routed to a Chat upstream in DeepSeek's thinking mode, which streams reasoning_content and
    answers 400 when a tool turn comes back without it."""
    from tests.support.enforcing import DeepSeekChat

    with Upstream() as ds:
        work = tmp_path / "proxy"
        work.mkdir()
        rules = work / "rules.yaml"
        rules.write_text(f"endpoints:\n  ds: {{protocol: openai, url: {ds.url}/v1}}\n"
                         "routes:\n  - name: gemini-cli-to-ds\n    when: {client: gemini}\n    to: ds\n"
                         "    model: deepseek-reasoner\n")
        m = Mitmdump(work, rules)
        try:
            enforcer = DeepSeekChat(tool_turns=3)
            ds.responder = enforcer
            r = run_gemini_cli(m, tmp_path, "run the three steps", "--yolo", "-o", "json", timeout=240)
            assert r.returncode == 0, (r.stdout, r.stderr[-3000:], m.log()[-3000:])
            assert enforcer.rejected == [] and json.loads(r.stdout)["response"].strip().endswith("All 3 steps done.")
            loop = [q.json() for q in ds.requests if q.json().get("tools")]
            assert len(loop) == 4
            last = loop[-1]["messages"]
            back = {mm["tool_calls"][0]["id"]: mm["reasoning_content"] for mm in last if mm.get("tool_calls")}
            assert back == {c: enforcer.issued[c] for c in ("call_ds01", "call_ds02", "call_ds03")}
            assert "step3" in [mm for mm in last if mm["role"] == "tool"][-1]["content"]  # really ran
        finally:
            m.stop()
