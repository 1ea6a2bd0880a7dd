"""The real Codex CLI (npm @openai/codex) through a real mitmdump with the addon: its
Responses API turns are detected, routed by a rule to another Responses endpoint (a
scripted upstream: same protocol, so retargeted, not translated), with the endpoint's own
key; the WebSocket upgrade Codex tries first is declined with 426 (api.openai.com cannot be
reached here: the connection has no WebSocket peer) so the turn goes over HTTPS where it can be
routed and recorded."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from .conftest import BIN, Mitmdump, need_npm_tool
from tests.support.upstream import Reply, Upstream

pytestmark = [pytest.mark.e2e, pytest.mark.claudecode]

DUMMY = "sk-codex-client-dummy-key-0123456789"
ENDPOINT_KEY = "sk-responses-endpoint-key-42"


def need_codex() -> str:
    return need_npm_tool("codex", "Codex")


def responses_stream(text_parts: list[str], rid: str = "resp_tk0001", mid: str = "msg_tk0001") -> list[bytes]:
    seq = iter(range(1000))
    text = "".join(text_parts)
    snap = {"id": rid, "object": "response", "created_at": 1767225600, "status": "in_progress", "model": "gpt-5.5",
            "output": []}
    item = {"id": mid, "type": "message", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "annotations": [], "text": text}]}
    evs = [
        ("response.created", {"response": snap}),
        ("response.in_progress", {"response": snap}),
        ("response.output_item.added", {"output_index": 0, "item": {**item, "status": "in_progress", "content": []}}),
        ("response.content_part.added", {"item_id": mid, "output_index": 0, "content_index": 0,
                                         "part": {"type": "output_text", "annotations": [], "text": ""}}),
        *[("response.output_text.delta", {"item_id": mid, "output_index": 0, "content_index": 0, "delta": t,
                                          "logprobs": []}) for t in text_parts],
        ("response.output_text.done", {"item_id": mid, "output_index": 0, "content_index": 0, "text": text,
                                       "logprobs": []}),
        ("response.content_part.done", {"item_id": mid, "output_index": 0, "content_index": 0,
                                        "part": {"type": "output_text", "annotations": [], "text": text}}),
        ("response.output_item.done", {"output_index": 0, "item": item}),
        ("response.completed", {"response": {**snap, "status": "completed", "output": [item],
                                             "usage": {"input_tokens": 5120, "input_tokens_details": {"cached_tokens": 4096},
                                                       "output_tokens": 41, "output_tokens_details": {"reasoning_tokens": 0},
                                                       "total_tokens": 5161}}}),
    ]
    return [f"event: {name}\ndata: {json.dumps({'type': name, 'sequence_number': next(seq), **data})}\n\n".encode()
            for name, data in evs]


RULES = """\
endpoints:
  responses-elsewhere:
    protocol: openai-responses
    url: {url}/v1
    key_env: TK_TEST_RESP_KEY
routes:
  - name: codex-elsewhere
    when: {{client: openai-responses}}
    to: responses-elsewhere
"""


def test_codex_turn_is_retargeted_with_the_endpoints_key(tmp_path):
    need_codex()  # skipped (or failed under CI) without it
    with Upstream() as up:
        up.script(Reply.sse(responses_stream(["hello from ", "the retargeted endpoint"]), delay=0.02))
        rules = tmp_path / "rules.yaml"
        rules.write_text(RULES.format(url=up.url))
        m = Mitmdump(tmp_path, rules, env={"TK_TEST_RESP_KEY": ENDPOINT_KEY})
        try:
            p, _ = codex_exec(m, tmp_path, "say hi", "-c", "model=gpt-5.5")
        finally:
            m.stop()
        assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-2000:])
        assert "hello from the retargeted endpoint" in p.stdout
        posts = [r for r in up.requests if r.method == "POST"]
        assert len(posts) == 1 and posts[0].path == "/v1/responses"
        assert posts[0].headers["authorization"] == f"Bearer {ENDPOINT_KEY}"
        assert all(DUMMY not in v for r in up.requests for v in r.headers.values())
        assert posts[0].json()["model"] == "gpt-5.5" and posts[0].json()["stream"] is True
    log = json.loads(subprocess.run([str(BIN / "tokunseba"), "log", "--ledger", str(m.ledger), "--json"],
                                    capture_output=True, text=True).stdout)
    turns = [t for t in log if t["client_protocol"] == "openai-responses"]
    assert len(turns) == 1 and turns[0]["outcome"] == "retargeted" and turns[0]["endpoint"] == "responses-elsewhere"
    assert turns[0]["usage_reported"]["input_tokens"] == 5120  # read on the side, as reported
    # Codex tried its WebSocket first; the upgrade was declined at once, so it used HTTPS
    assert "GET https://api.openai.com/v1/responses" in m.log() and "426 Upgrade Required" in m.log()


TRANSLATE_RULES = """\
endpoints:
  chat-local:
    protocol: openai
    url: {url}/v1
    key_env: TK_TEST_CHAT_KEY
    max_tokens: 1024
    max_tokens_field: max_tokens
routes:
  - name: codex-to-chat
    when: {{client: openai-responses}}
    to: chat-local
"""


def codex_exec(m: Mitmdump, tmp_path: Path, prompt: str, *args: str,
               timeout: float = 180) -> tuple[subprocess.CompletedProcess, Path]:
    """`codex exec PROMPT` through the proxy ``m`` (its CA trusted, a dummy key, its home and
    working folder under ``tmp_path``), with ``args`` before the prompt; (the run, the folder)."""
    codex = need_codex()
    home = tmp_path / "home"
    (home / "codex").mkdir(parents=True, exist_ok=True)
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "CODEX_HOME": str(home / "codex"),
           "HTTPS_PROXY": m.url, "HTTP_PROXY": m.url, "SSL_CERT_FILE": str(m.ca), "CODEX_API_KEY": DUMMY,
           "TERM": "dumb"}
    p = subprocess.run([codex, "exec", "--skip-git-repo-check", "-c", "analytics.enabled=false",
                        "-c", "features.plugins=false", "-c", "features.api_key_model_discovery=false", *args, prompt],
                       cwd=work, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
    return p, work


def _codex(codex: str, m: Mitmdump, tmp_path: Path, prompt: str) -> subprocess.CompletedProcess:
    return codex_exec(m, tmp_path, prompt, "-c", "model=gpt-5.5")[0]


def test_codex_tool_loop_translated_to_a_chat_endpoint(tmp_path):
    """Codex speaks Responses; the endpoint speaks Chat Completions. A streamed exec_command
    call with fragmented arguments: Codex runs it, sends function_call_output with the same
    call id (translated to a tool message), and prints the final text."""
    from .test_proxy_e2e import chat_chunk

    codex = need_codex()
    call_id = "call_codexExec0001"
    args = json.dumps({"cmd": "echo codex-tool-ran"})
    first, second = "chatcmpl-codex-1", "chatcmpl-codex-2"
    with Upstream() as up:
        up.script(
            Reply.sse([chat_chunk(first, {"role": "assistant", "content": None}),
                       chat_chunk(first, {"tool_calls": [{"index": 0, "id": call_id, "type": "function",
                                                          "function": {"name": "exec_command", "arguments": ""}}]}),
                       *[chat_chunk(first, {"tool_calls": [{"index": 0, "function": {"arguments": args[i:i + 9]}}]})
                         for i in range(0, len(args), 9)],
                       chat_chunk(first, {}, "tool_calls"),
                       chat_chunk(first, usage={"prompt_tokens": 900, "completion_tokens": 20, "total_tokens": 920,
                                                "prompt_tokens_details": {"cached_tokens": 512}}, choices=False),
                       b"data: [DONE]\n\n"], delay=0.03),
            Reply.sse([chat_chunk(second, {"role": "assistant", "content": ""}),
                       chat_chunk(second, {"content": "The command printed codex-tool-ran."}),
                       chat_chunk(second, {}, "stop"),
                       chat_chunk(second, usage={"prompt_tokens": 950, "completion_tokens": 9, "total_tokens": 959},
                                  choices=False),
                       b"data: [DONE]\n\n"], delay=0.03),
        )
        rules = tmp_path / "rules.yaml"
        rules.write_text(TRANSLATE_RULES.format(url=up.url))
        m = Mitmdump(tmp_path, rules, env={"TK_TEST_CHAT_KEY": ENDPOINT_KEY})
        try:
            p = _codex(codex, m, tmp_path, "run echo codex-tool-ran")
        finally:
            m.stop()
        assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-2000:])
        assert "The command printed codex-tool-ran." in p.stdout
        posts = [r for r in up.requests if r.method == "POST"]
        assert [r.path for r in posts] == ["/v1/chat/completions"] * 2
        assert all(r.headers["authorization"] == f"Bearer {ENDPOINT_KEY}" for r in posts)
        body = posts[1].json()
        assistant = [msg for msg in body["messages"] if msg["role"] == "assistant"][-1]
        assert assistant["tool_calls"][0]["id"] == call_id
        tool = [msg for msg in body["messages"] if msg["role"] == "tool"][-1]
        assert tool["tool_call_id"] == call_id and "codex-tool-ran" in tool["content"]
    log = json.loads(subprocess.run([str(BIN / "tokunseba"), "log", "--ledger", str(m.ledger), "--json"],
                                    capture_output=True, text=True).stdout)
    turns = [t for t in log if t["client_protocol"] == "openai-responses"]
    assert len(turns) == 2 and all(t["outcome"] == "translated" and t["target_protocol"] == "openai" for t in turns)
    assert turns[-1]["usage_reported"]["prompt_tokens"] == 900  # oldest last; as the upstream reported it


ANTHROPIC_RULES = """\
endpoints:
  claude:
    protocol: anthropic
    url: {url}/v1
    key_env: TK_TEST_ANT_KEY
    max_tokens: 32000
routes:
  - name: codex-to-claude
    when: {{client: openai-responses}}
    to: claude
    model: claude-sonnet-4-5
"""


def test_codex_tool_loop_with_reasoning_effort_high_against_anthropic_thinking(tmp_path):
    """Issue 18 facts 2 and 4 with the real client: Codex's reasoning effort high reaches an
    Anthropic endpoint as thinking with a budget, and each follow-up of its exec_command loop
    starts with the signed thinking block that endpoint made (it rejects the loop otherwise)."""
    from tests.support.enforcing import AnthropicThinking

    need_codex()  # skipped (or failed under CI) without it
    with Upstream() as up:
        ant = AnthropicThinking(tool_turns=3)
        up.responder = ant
        rules = tmp_path / "rules.yaml"
        rules.write_text(ANTHROPIC_RULES.format(url=up.url))
        m = Mitmdump(tmp_path, rules, env={"TK_TEST_ANT_KEY": ENDPOINT_KEY})
        try:
            p, _ = codex_exec(m, tmp_path, "run the three steps", "-c", "model=gpt-5.5",
                              "-c", "model_reasoning_effort=high", timeout=240)
        finally:
            m.stop()
        assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-2000:])
        assert ant.rejected == [] and "All 3 steps done." in p.stdout
        loop = [r.json() for r in up.requests if r.method == "POST" and r.json().get("tools")]
        assert len(loop) == 4
        assert all(b["thinking"] == {"type": "enabled", "budget_tokens": 16000} for b in loop)  # high, half of 32000
        firsts = [mm["content"][0] for mm in loop[-1]["messages"] if mm["role"] == "assistant"]
        assert [b["type"] for b in firsts] == ["thinking"] * 3 and all(b["signature"] == ant.sign(b["thinking"])
                                                                       for b in firsts)
        results = [b for mm in loop[-1]["messages"] if mm["role"] == "user" and isinstance(mm["content"], list)
                   for b in mm["content"] if b.get("type") == "tool_result"]
        assert len(results) == 3 and "step3" in json.dumps(results[-1])  # Codex really ran them
