"""The real Claude Code (npm @anthropic-ai/claude-code, installed by scripts/install-claude-code.sh)
through a real mitmdump with the addon: HTTPS_PROXY + NODE_EXTRA_CA_CERTS, a dummy key,
non-essential traffic off, a throwaway HOME. Its turns are routed to a scripted
OpenAI-compatible upstream (and, when installed, to the real local model)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from .conftest import KEYS, Mitmdump, need_npm_tool
from .test_proxy_e2e import chat_chunk
from tests.support.upstream import Reply, Upstream

pytestmark = [pytest.mark.e2e, pytest.mark.claudecode]

DUMMY_KEY = "sk-ant-dummy-claude-code-key-0123456789"


def need_claude() -> str:
    return need_npm_tool("claude", "Claude Code")


RULES = """\
endpoints:
  scripted:
    protocol: openai
    url: {oai}/v1
    key_env: TK_TEST_OAI_KEY
    max_tokens: 4096
routes:
  - name: everything-scripted
    when: {{client: anthropic}}
    to: scripted
"""


@pytest.fixture(scope="module")
def cc_proxy(tmp_path_factory):
    with Upstream() as oai:
        work = tmp_path_factory.mktemp("claude-code")
        rules = work / "rules.yaml"
        rules.write_text(RULES.format(oai=oai.url))
        m = Mitmdump(work, rules, env=KEYS)
        m.upstream = oai
        try:
            yield m
        finally:
            m.stop()


def run_claude(proxy: Mitmdump, tmp_path: Path, prompt: str, *extra: str, timeout: int = 180,
               env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    home = tmp_path / "home"
    work = tmp_path / "work"
    home.mkdir(exist_ok=True)
    work.mkdir(exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "TERM": "dumb",
        "HTTPS_PROXY": proxy.url, "HTTP_PROXY": proxy.url, "NODE_EXTRA_CA_CERTS": str(proxy.ca),
        "ANTHROPIC_API_KEY": DUMMY_KEY, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_MAX_RETRIES": "0", **(env_extra or {}),
    }
    return subprocess.run([need_claude(), "-p", prompt, "--output-format", "json", *extra], cwd=work, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)


def result_json(p: subprocess.CompletedProcess) -> dict:
    lines = [ln for ln in p.stdout.splitlines() if ln.strip().startswith("{")]
    assert lines, f"no JSON result (rc={p.returncode})\nstdout={p.stdout[-2000:]}\nstderr={p.stderr[-2000:]}"
    return json.loads(lines[-1])


def turns_to_messages(upstream: Upstream) -> list:
    return [r for r in upstream.requests if r.path.endswith("/chat/completions")]


def test_claude_code_reports_exactly_the_upstream_usage(cc_proxy, tmp_path):
    """Usage reported by an OpenAI-compatible upstream (with cached tokens) reaches Claude
    Code's own JSON result re-based: input excluding cache reads, cache reads, output."""
    cid = "chatcmpl-cc-usage"
    usage = {"prompt_tokens": 1500, "completion_tokens": 42, "total_tokens": 1542,
             "prompt_tokens_details": {"cached_tokens": 1000}}
    cc_proxy.upstream.script(Reply.sse([
        chat_chunk(cid, {"role": "assistant", "content": ""}), chat_chunk(cid, {"content": "hi from "}),
        chat_chunk(cid, {"content": "the scripted upstream"}), chat_chunk(cid, {}, "stop"),
        chat_chunk(cid, usage=usage, choices=False), b"data: [DONE]\n\n"], delay=0.05))
    p = run_claude(cc_proxy, tmp_path, "say hi")
    res = result_json(p)
    assert p.returncode == 0, p.stderr[-2000:]
    assert res["result"] == "hi from the scripted upstream"
    u = res["usage"]
    assert u["input_tokens"] == 500 and u["cache_read_input_tokens"] == 1000 and u["output_tokens"] == 42
    sent = turns_to_messages(cc_proxy.upstream)
    assert len(sent) == 1  # a real stream: no non-streaming fallback request
    body = sent[0].json()
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert len(body["tools"]) >= 5  # Claude Code's tools, translated
    hdrs = sent[0].headers
    assert hdrs["authorization"] == f"Bearer {KEYS['TK_TEST_OAI_KEY']}" and "x-api-key" not in hdrs
    assert DUMMY_KEY.encode() not in sent[0].body and all(DUMMY_KEY not in v for v in hdrs.values())


def test_claude_code_tool_loop_through_translation(cc_proxy, tmp_path):
    """A streamed Bash tool call with fragmented arguments: Claude Code runs it, sends the
    tool_result with the same id, gets the final text, exits 0."""
    call_id = "call_ccBashTool0001"
    first = "chatcmpl-cc-tool-1"
    args = json.dumps({"command": "echo tokunseba-tool-ran", "description": "Print a marker"})
    pieces = [args[:7], args[7:19], args[19:33], args[33:]]
    second = "chatcmpl-cc-tool-2"
    cc_proxy.upstream.script(
        Reply.sse([chat_chunk(first, {"role": "assistant", "content": None}),
                   chat_chunk(first, {"tool_calls": [{"index": 0, "id": call_id, "type": "function",
                                                      "function": {"name": "Bash", "arguments": ""}}]}),
                   *[chat_chunk(first, {"tool_calls": [{"index": 0, "function": {"arguments": a}}]}) for a in pieces],
                   chat_chunk(first, {}, "tool_calls"),
                   chat_chunk(first, usage={"prompt_tokens": 900, "completion_tokens": 30, "total_tokens": 930},
                              choices=False),
                   b"data: [DONE]\n\n"], delay=0.03),
        Reply.sse([chat_chunk(second, {"role": "assistant", "content": ""}),
                   chat_chunk(second, {"content": "The command printed the marker."}),
                   chat_chunk(second, {}, "stop"),
                   chat_chunk(second, usage={"prompt_tokens": 960, "completion_tokens": 8, "total_tokens": 968},
                              choices=False),
                   b"data: [DONE]\n\n"], delay=0.03),
    )
    p = run_claude(cc_proxy, tmp_path, "run echo tokunseba-tool-ran with Bash", "--allowedTools", "Bash")
    res = result_json(p)
    assert p.returncode == 0, p.stderr[-2000:]
    assert res["result"] == "The command printed the marker."
    sent = turns_to_messages(cc_proxy.upstream)
    assert len(sent) == 2
    msgs = sent[1].json()["messages"]
    assistant = [m for m in msgs if m["role"] == "assistant"][-1]
    assert assistant["tool_calls"][0]["id"] == call_id
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == json.loads(args)
    tool = [m for m in msgs if m["role"] == "tool"][-1]
    assert tool["tool_call_id"] == call_id and "tokunseba-tool-ran" in tool["content"]


def test_claude_code_bash_loop_of_three_tool_turns_against_deepseek_thinking(tmp_path):
    """Issue 18 fact 1 with the real client: Claude Code's Bash loop routed to a DeepSeek-style
    upstream that answers 400 when a tool turn comes back without its reasoning_content. Three
    tool turns, every follow-up accepted, each with the reasoning DeepSeek wrote for its call."""
    from tests.support.enforcing import DeepSeekChat

    with Upstream() as ds:
        work = tmp_path / "proxy"
        work.mkdir()
        rules = work / "rules.yaml"
        rules.write_text(RULES.format(oai=ds.url))
        m = Mitmdump(work, rules, env=KEYS)
        try:
            enforcer = DeepSeekChat(tool_turns=3)
            ds.responder = enforcer
            p = run_claude(m, tmp_path, "run the three steps with Bash", "--allowedTools", "Bash", timeout=240)
            res = result_json(p)
            assert p.returncode == 0, p.stderr[-2000:]
            assert enforcer.rejected == [] and res["result"] == "All 3 steps done."
            loop = [r.json() for r in turns_to_messages(ds) if r.json().get("tools")]
            assert len(loop) == 4
            last = loop[-1]["messages"]
            back = {mm["tool_calls"][0]["id"]: mm["reasoning_content"] for mm in last if mm.get("tool_calls")}
            assert back == {c: enforcer.issued[c] for c in ("call_ds01", "call_ds02", "call_ds03")}
            results = [mm["content"] for mm in last if mm["role"] == "tool"]
            assert all(f"step{i}" in r for i, r in zip((1, 2, 3), results))  # Claude Code really ran them
        finally:
            m.stop()
