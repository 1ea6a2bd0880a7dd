"""End to end for the pairs issue 9 opened, through a real mitmdump with the addon and
scripted upstreams on loopback: the official openai SDK (Chat Completions) against a
Responses endpoint; Claude Code (``-p --output-format json``) running a Bash tool loop
against a Responses endpoint and reporting exactly the upstream's usage; the real Codex
running a tool loop against an Anthropic endpoint."""

from __future__ import annotations

import json
import os
import subprocess

import openai
import pytest

from .conftest import BIN, Mitmdump, ledger_settled, need_npm_tool
from tests.support.upstream import Reply, Upstream

pytestmark = pytest.mark.e2e

CLIENT_KEY = "sk-openai-client-secret-DO-NOT-LEAK"
ENDPOINT_KEY = "sk-endpoint-responses-0003"
CREATED = 1767225600

RULES = """\
endpoints:
  resp:
    protocol: openai-responses
    url: {url}/v1
    key_env: TK_TEST_RESP_KEY
    max_tokens: 2048
routes:
  - name: to-responses
    when: {{client: [openai, anthropic]}}
    to: resp
    on_failure: error  # its endpoint's errors reach the client as they came (no failover)
"""


def responses_events(items: list[dict], usage: dict | None, rid: str = "resp_e2e0001",
                     pieces: int = 3) -> list[bytes]:
    """A Responses stream (docs/dev/protocols.md C.3) for the given complete output items: each text
    and argument string sent in ``pieces`` deltas."""
    events: list[tuple[str, dict]] = []
    snap = {"id": rid, "object": "response", "created_at": CREATED, "status": "in_progress", "model": "gpt-5.5",
            "output": []}
    events += [("response.created", {"response": snap}), ("response.in_progress", {"response": snap})]
    for i, item in enumerate(items):
        if item["type"] == "message":
            text = item["content"][0]["text"]
            events.append(("response.output_item.added", {"output_index": i, "item": {**item, "status": "in_progress",
                                                                                      "content": []}}))
            events.append(("response.content_part.added", {"item_id": item["id"], "output_index": i, "content_index": 0,
                                                           "part": {"type": "output_text", "annotations": [], "text": ""}}))
            step = max(1, len(text) // pieces)
            events += [("response.output_text.delta", {"item_id": item["id"], "output_index": i, "content_index": 0,
                                                       "delta": text[k:k + step], "logprobs": []})
                       for k in range(0, len(text), step)]
        else:
            args = item["arguments"]
            events.append(("response.output_item.added", {"output_index": i, "item": {**item, "status": "in_progress",
                                                                                      "arguments": ""}}))
            step = max(1, len(args) // pieces)
            events += [("response.function_call_arguments.delta", {"item_id": item["id"], "output_index": i,
                                                                   "delta": args[k:k + step]})
                       for k in range(0, len(args), step)]
        events.append(("response.output_item.done", {"output_index": i, "item": item}))
    final = {**snap, "status": "completed", "output": items}
    if usage is not None:
        final["usage"] = usage
    events.append(("response.completed", {"response": final}))
    return [f"event: {n}\ndata: {json.dumps({'type': n, 'sequence_number': s, **d})}\n\n".encode()
            for s, (n, d) in enumerate(events)]


def message(mid: str, text: str) -> dict:
    return {"id": mid, "type": "message", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "annotations": [], "text": text}]}


def call(fid: str, call_id: str, name: str, args: dict) -> dict:
    return {"id": fid, "type": "function_call", "status": "completed", "call_id": call_id, "name": name,
            "arguments": json.dumps(args)}


USAGE = {"input_tokens": 3100, "input_tokens_details": {"cached_tokens": 2048}, "output_tokens": 57,
         "output_tokens_details": {"reasoning_tokens": 12}, "total_tokens": 3157}


@pytest.fixture(scope="module")
def resp_proxy(tmp_path_factory):
    with Upstream() as up:
        work = tmp_path_factory.mktemp("pairs")
        rules = work / "rules.yaml"
        rules.write_text(RULES.format(url=up.url))
        m = Mitmdump(work, rules, env={"TK_TEST_RESP_KEY": ENDPOINT_KEY})
        m.upstream = up
        try:
            yield m
        finally:
            m.stop()


@pytest.fixture
def sdk_env(resp_proxy, monkeypatch):
    for k, v in resp_proxy.client_env().items():
        monkeypatch.setenv(k, v)
    for k in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(k, raising=False)
    return resp_proxy


def ledger(m: Mitmdump) -> list[dict]:
    ledger_settled(m.ledger)  # turns are recorded just after their client got the last byte
    return json.loads(subprocess.run([str(BIN / "tokunseba"), "log", "--ledger", str(m.ledger), "--json"],
                                     capture_output=True, text=True, check=True).stdout)


def test_openai_sdk_chat_stream_against_a_responses_endpoint(sdk_env):
    up = sdk_env.upstream
    items = [message("msg_e2e1", "Checking the weather in Zürich."),
             call("fc_e2e1", "call_e2eWeather01", "get_weather", {"city": "Zürich"})]
    up.script(Reply.sse(responses_events(items, USAGE), delay=0.03))
    client = openai.OpenAI(api_key=CLIENT_KEY, max_retries=0)
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    with client.chat.completions.stream(model="gpt-5.5", messages=[{"role": "system", "content": "Be brief."},
                                                                   {"role": "user", "content": "weather?"}],
                                        tools=tools, stream_options={"include_usage": True}) as s:
        final = s.get_final_completion()
    msg = final.choices[0].message
    assert msg.content == "Checking the weather in Zürich."
    assert [(tc.id, tc.function.name, json.loads(tc.function.arguments)) for tc in msg.tool_calls] == [
        ("call_e2eWeather01", "get_weather", {"city": "Zürich"})]
    assert final.choices[0].finish_reason == "tool_calls"
    # usage as reported, renamed only (same definitions: input includes the cache)
    assert (final.usage.prompt_tokens, final.usage.completion_tokens, final.usage.total_tokens) == (3100, 57, 3157)
    assert final.usage.prompt_tokens_details.cached_tokens == 2048
    sent = [r for r in up.requests if r.method == "POST"]
    assert [r.path for r in sent] == ["/v1/responses"]
    body = sent[0].json()
    assert body["instructions"] == "Be brief." and body["stream"] is True and "stream_options" not in body
    assert body["input"] == [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "weather?"}]}]
    assert body["tools"][0]["name"] == "get_weather" and body["tools"][0]["strict"] is False
    assert sent[0].headers["authorization"] == f"Bearer {ENDPOINT_KEY}"
    assert all(CLIENT_KEY not in v for v in sent[0].headers.values())
    turn = ledger(sdk_env)[0]
    assert (turn["client_protocol"], turn["target_protocol"], turn["outcome"]) == ("openai", "openai-responses",
                                                                                  "translated")
    assert turn["usage_reported"] == USAGE


def test_openai_sdk_chat_create_against_a_responses_endpoint(sdk_env):
    up = sdk_env.upstream
    whole = {"id": "resp_e2ewhole", "object": "response", "created_at": CREATED, "status": "completed",
             "model": "gpt-5.5", "output": [message("msg_w", "Bonjour")],
             "usage": {"input_tokens": 12, "output_tokens": 3, "total_tokens": 15}}
    up.script(Reply.json(whole))
    c = openai.OpenAI(api_key=CLIENT_KEY, max_retries=0).chat.completions.create(
        model="gpt-5.5", messages=[{"role": "user", "content": "hi"}], max_completion_tokens=20)
    assert c.choices[0].message.content == "Bonjour" and c.choices[0].finish_reason == "stop"
    assert (c.usage.prompt_tokens, c.usage.completion_tokens, c.usage.total_tokens) == (12, 3, 15)
    assert up.requests[-1].json()["max_output_tokens"] == 20


def test_openai_sdk_gets_a_responses_endpoints_error_in_its_own_envelope(sdk_env):
    up = sdk_env.upstream
    up.script(Reply.json({"error": {"message": "Rate limit reached for gpt-5.5", "type": "requests",
                                    "code": "rate_limit_exceeded", "param": None}}, 429))
    with pytest.raises(openai.RateLimitError) as e:
        openai.OpenAI(api_key=CLIENT_KEY, max_retries=0).chat.completions.create(
            model="gpt-5.5", messages=[{"role": "user", "content": "hi"}])
    assert "Rate limit reached for gpt-5.5" in str(e.value) and e.value.code == "rate_limit_exceeded"


# ---- Claude Code -> a Responses endpoint -------------------------------------------------

DUMMY_ANT_KEY = "sk-ant-dummy-claude-code-key-0123456789"


def run_claude(m: Mitmdump, tmp_path, prompt: str, *extra: str) -> subprocess.CompletedProcess:
    claude = need_npm_tool("claude", "Claude Code")
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir(exist_ok=True)
    work.mkdir(exist_ok=True)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "TERM": "dumb",
           "HTTPS_PROXY": m.url, "HTTP_PROXY": m.url, "NODE_EXTRA_CA_CERTS": str(m.ca),
           "ANTHROPIC_API_KEY": DUMMY_ANT_KEY, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
           "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_MAX_RETRIES": "0"}
    return subprocess.run([claude, "-p", prompt, "--output-format", "json", *extra], cwd=work, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180)


@pytest.mark.claudecode
def test_claude_code_bash_tool_loop_against_a_responses_endpoint(resp_proxy, tmp_path):
    up = resp_proxy.upstream
    call_id = "call_ccRespBash0001"
    args = {"command": "echo tokunseba-responses-tool-ran", "description": "Print a marker"}
    final_usage = {"input_tokens": 4200, "input_tokens_details": {"cached_tokens": 3000}, "output_tokens": 17,
                   "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 4217}
    up.script(
        Reply.sse(responses_events([call("fc_cc1", call_id, "Bash", args)],
                                   {"input_tokens": 4000, "output_tokens": 30, "total_tokens": 4030},
                                   rid="resp_cc1"), delay=0.03),
        Reply.sse(responses_events([message("msg_cc2", "The command printed the marker.")], final_usage,
                                   rid="resp_cc2"), delay=0.03))
    p = run_claude(resp_proxy, tmp_path, "run echo tokunseba-responses-tool-ran with Bash", "--allowedTools", "Bash")
    lines = [ln for ln in p.stdout.splitlines() if ln.strip().startswith("{")]
    assert p.returncode == 0 and lines, (p.stdout[-2000:], p.stderr[-2000:])
    res = json.loads(lines[-1])
    assert res["result"] == "The command printed the marker."
    # exactly the upstream's usage, summed by Claude Code over its two turns and re-based where
    # definitions differ (Responses input includes cached tokens, Anthropic's does not)
    u = res["usage"]
    assert (u["input_tokens"], u["cache_read_input_tokens"], u["output_tokens"]) == (4000 + (4200 - 3000), 3000, 30 + 17)
    sent = [r for r in up.requests if r.method == "POST" and r.path == "/v1/responses"]
    assert len(sent) == 2
    second = sent[1].json()["input"]
    fc = [i for i in second if i["type"] == "function_call"][-1]
    out = [i for i in second if i["type"] == "function_call_output"][-1]
    assert fc["call_id"] == out["call_id"] == call_id and json.loads(fc["arguments"]) == args
    assert "tokunseba-responses-tool-ran" in json.dumps(out["output"])
    assert all(r.headers["authorization"] == f"Bearer {ENDPOINT_KEY}" and "x-api-key" not in r.headers for r in sent)


# ---- Codex -> an Anthropic endpoint --------------------------------------------------------

ANT_RULES = """\
endpoints:
  claude-ep:
    protocol: anthropic
    url: {url}/v1
    key_env: TK_TEST_ANT_KEY
    max_tokens: 4096
routes:
  - name: codex-to-anthropic
    when: {{client: openai-responses}}
    to: claude-ep
    model: claude-sonnet-test
"""


def anthropic_sse(mid: str, blocks: list[tuple[str, object]], stop: str, usage: dict) -> list[bytes]:
    """An Anthropic stream (docs/dev/protocols.md A.6): blocks are ("text", str) or ("tool_use", (id, name, args_json))."""
    ev = [("message_start", {"message": {"id": mid, "type": "message", "role": "assistant", "model": "claude-sonnet-test",
                                         "content": [], "stop_reason": None, "stop_sequence": None,
                                         "usage": {"input_tokens": usage["input_tokens"], "output_tokens": 1}}})]
    for i, (kind, val) in enumerate(blocks):
        if kind == "text":
            ev.append(("content_block_start", {"index": i, "content_block": {"type": "text", "text": ""}}))
            ev += [("content_block_delta", {"index": i, "delta": {"type": "text_delta", "text": val[k:k + 8]}})
                   for k in range(0, len(val), 8)]
        else:
            tid, name, args = val
            ev.append(("content_block_start", {"index": i, "content_block": {"type": "tool_use", "id": tid, "name": name,
                                                                              "input": {}}}))
            ev += [("content_block_delta", {"index": i, "delta": {"type": "input_json_delta",
                                                                  "partial_json": args[k:k + 9]}})
                   for k in range(0, len(args), 9)]
        ev.append(("content_block_stop", {"index": i}))
    ev += [("message_delta", {"delta": {"stop_reason": stop, "stop_sequence": None}, "usage": usage}),
           ("message_stop", {})]
    return [f"event: {n}\ndata: {json.dumps({'type': n, **d})}\n\n".encode() for n, d in ev]


@pytest.mark.claudecode
def test_codex_tool_loop_against_an_anthropic_endpoint(tmp_path):
    codex = need_npm_tool("codex", "Codex")
    call_id = "toolu_codexExec0001"
    args = json.dumps({"cmd": "echo codex-anthropic-tool-ran"})
    with Upstream() as up:
        up.script(
            Reply.sse(anthropic_sse("msg_codex1", [("text", "Running it."), ("tool_use", (call_id, "exec_command", args))],
                                    "tool_use", {"input_tokens": 800, "cache_read_input_tokens": 200,
                                                 "output_tokens": 25}), delay=0.03),
            Reply.sse(anthropic_sse("msg_codex2", [("text", "The command printed codex-anthropic-tool-ran.")],
                                    "end_turn", {"input_tokens": 900, "cache_read_input_tokens": 200,
                                                 "output_tokens": 12}), delay=0.03))
        rules = tmp_path / "rules.yaml"
        rules.write_text(ANT_RULES.format(url=up.url))
        m = Mitmdump(tmp_path, rules, env={"TK_TEST_ANT_KEY": "sk-ant-endpoint-0004"})
        try:
            home, work = tmp_path / "home", tmp_path / "work"
            (home / "codex").mkdir(parents=True)
            work.mkdir()
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "CODEX_HOME": str(home / "codex"),
                   "HTTPS_PROXY": m.url, "HTTP_PROXY": m.url, "SSL_CERT_FILE": str(m.ca),
                   "CODEX_API_KEY": "sk-codex-client-dummy-key-0123456789", "TERM": "dumb"}
            p = subprocess.run([codex, "exec", "--skip-git-repo-check", "-c", "analytics.enabled=false",
                                "-c", "features.plugins=false", "-c", "features.api_key_model_discovery=false",
                                "-c", "model=gpt-5.5", "run echo codex-anthropic-tool-ran"], cwd=work, env=env,
                               stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180)
        finally:
            m.stop()
        assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-2000:])
        assert "The command printed codex-anthropic-tool-ran." in p.stdout
        posts = [r for r in up.requests if r.method == "POST"]
        assert [r.path for r in posts] == ["/v1/messages"] * 2
        assert all(r.headers["x-api-key"] == "sk-ant-endpoint-0004" and "authorization" not in r.headers for r in posts)
        first, second = posts[0].json(), posts[1].json()
        assert first["model"] == "claude-sonnet-test" and first["system"].startswith("You are Codex")
        assert any(t["name"] == "exec_command" for t in first["tools"])
        use = [b for msg in second["messages"] if isinstance(msg["content"], list) for b in msg["content"]
               if b["type"] == "tool_use"][-1]
        result = [b for msg in second["messages"] if isinstance(msg["content"], list) for b in msg["content"]
                  if b["type"] == "tool_result"][-1]
        assert use["id"] == result["tool_use_id"] == call_id and use["input"] == json.loads(args)
        assert "codex-anthropic-tool-ran" in json.dumps(result["content"])
    turns = [t for t in ledger(m) if t["client_protocol"] == "openai-responses"]
    assert len(turns) == 2 and all((t["outcome"], t["target_protocol"]) == ("translated", "anthropic") for t in turns)
    assert turns[-1]["usage_reported"] == {"input_tokens": 800, "cache_read_input_tokens": 200, "output_tokens": 25}
