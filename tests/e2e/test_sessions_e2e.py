"""Who is talking, end to end (issue 20): real clients through a real mitmdump with the addon,
against scripted upstreams on loopback that answer by what they are asked.

- Claude Code (pinned) in `-p` mode asked for a session title (the SDK's
  `generate_session_title` control request) and given a prompt its main agent answers with
  an Agent (Task) tool call: the title turn goes where `background: true` says, the
  subagent's turn where `agent: subagent` says, the main agent's turns elsewhere; the ledger,
  `tokunseba sessions` and `stats --by agent` report them as one session.
- Codex CLI and Gemini CLI: two sessions each, run at once, of three turns each (tool round
  trips): every turn is grouped with its own session, never the other's.
- The SDKs (always run, also where the CLIs are not installed): google-genai conversations
  (grouped by fingerprint) and OpenAI Responses calls carrying Codex's `prompt_cache_key`,
  two at once, three turns each.
- Bad input: junk, control characters or an empty session header never break a turn and are
  recorded bounded and escaped.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path

import pytest

from .conftest import BIN, Mitmdump, ledger_settled, need_npm_tool
from .upstream import Recorded, Reply, Upstream

pytestmark = [pytest.mark.e2e]

KEYS = {"TK_TEST_OAI_KEY": "sk-endpoint-oai-sess-0001", "TK_TEST_ANT_KEY": "sk-endpoint-ant-sess-0002",
        "TK_TEST_GEM_KEY": "AIza-endpoint-gem-sess-0003", "TK_TEST_RESP_KEY": "sk-endpoint-resp-sess-0004"}


def cli(ledger: Path, *argv: str):
    ledger_settled(ledger)
    p = subprocess.run([str(BIN / "tokunseba"), *argv, "--ledger", str(ledger)], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, (argv, p.stdout, p.stderr)
    return json.loads(p.stdout) if "--json" in argv else p.stdout


# ---------------------------------------------------------------- scripted replies


def anthropic_sse(blocks: list[dict], stop: str = "end_turn") -> Reply:
    ev = [{"type": "message_start", "message": {"id": "msg_sess01", "type": "message", "role": "assistant",
                                                "model": "claude-scripted", "content": [], "stop_reason": None,
                                                "usage": {"input_tokens": 40, "output_tokens": 1}}}]
    for i, b in enumerate(blocks):
        if b["type"] == "text":
            ev += [{"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}},
                   {"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": b["text"]}}]
        else:
            ev += [{"type": "content_block_start", "index": i,
                    "content_block": {"type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}},
                   {"type": "content_block_delta", "index": i,
                    "delta": {"type": "input_json_delta", "partial_json": json.dumps(b["input"])}}]
        ev.append({"type": "content_block_stop", "index": i})
    ev += [{"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 7}},
           {"type": "message_stop"}]
    return Reply.sse([f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in ev])


def chat_sse(text: str, usage: dict) -> Reply:
    def chunk(delta=None, finish=None, u=None) -> bytes:
        obj = {"id": "chatcmpl-sess", "object": "chat.completion.chunk", "created": 1767225600, "model": "local",
               "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]}
        if u is not None:
            obj["usage"] = u
        return b"data: " + json.dumps(obj).encode() + b"\n\n"

    return Reply.sse([chunk({"role": "assistant", "content": ""}), chunk({"content": text}), chunk({}, "stop"),
                      chunk(u=usage), b"data: [DONE]\n\n"])


# ---------------------------------------------------------------- Claude Code

CC_RULES = """\
endpoints:
  bg-local:
    protocol: openai
    url: {bg}/v1
    key_env: TK_TEST_OAI_KEY
    max_tokens: 1024
  sub-local:
    protocol: openai
    url: {sub}/v1
    key_env: TK_TEST_OAI_KEY
    max_tokens: 1024
  cloud:
    protocol: anthropic
    url: {main}/v1
    key_env: TK_TEST_ANT_KEY
routes:
  - name: background-turns
    when: {{client: anthropic, background: true}}
    to: bg-local
  - name: subagent-turns
    when: {{client: anthropic, agent: subagent}}
    to: sub-local
  - name: main-turns
    when: {{client: anthropic, agent: main}}
    to: cloud
"""

SUBAGENT_PROMPT = "SUBAGENT-TASK: reply with SUBAGENT-DONE"


def _user_blocks(body: dict) -> list:
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    content = users[-1]["content"] if users else []
    return content if isinstance(content, list) else [{"type": "text", "text": content}]


def main_agent(rec: Recorded) -> Reply:
    """The main agent: an Agent tool call first; once its result is back, the final text."""
    results = [b for b in _user_blocks(rec.json()) if b.get("type") == "tool_result"]
    if results:
        got = results[0]["content"]
        text = got if isinstance(got, str) else " ".join(p.get("text", "") for p in got)
        return anthropic_sse([{"type": "text", "text": f"MAIN-DONE after: {text.strip()[:200]}"}])
    return anthropic_sse([{"type": "tool_use", "id": "toolu_sessAgent01", "name": "Agent",
                           "input": {"description": "Check the marker", "prompt": SUBAGENT_PROMPT,
                                     "subagent_type": "general-purpose"}}], "tool_use")


def need_claude() -> str:
    return need_npm_tool("claude", "Claude Code")


def run_claude_stream_json(proxy: Mitmdump, tmp: Path, lines: list[dict]) -> subprocess.CompletedProcess:
    """`claude -p --input-format stream-json`: the SDK's way of driving Claude Code, which
    can ask for a session title (control request generate_session_title)."""
    home, work = tmp / "home", tmp / "work"
    home.mkdir(exist_ok=True)
    work.mkdir(exist_ok=True)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "TERM": "dumb",
           "HTTPS_PROXY": proxy.url, "HTTP_PROXY": proxy.url, "NODE_EXTRA_CA_CERTS": str(proxy.ca),
           "ANTHROPIC_API_KEY": "sk-ant-dummy-session-test-key-0123", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
           "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_MAX_RETRIES": "0"}
    stdin = "".join(json.dumps(x) + "\n" for x in lines)
    return subprocess.run([need_claude(), "-p", "--input-format", "stream-json", "--output-format", "stream-json",
                           "--verbose"], cwd=work, env=env, input=stdin, capture_output=True, text=True, timeout=180)


def test_claude_code_background_subagent_and_main_turns_go_where_their_rules_say(tmp_path):
    need_claude()
    with Upstream() as bg, Upstream() as sub, Upstream() as main:
        bg.responder = lambda rec: chat_sse('{"title": "Marker check from the local model"}',
                                            {"prompt_tokens": 300, "completion_tokens": 12, "total_tokens": 312})
        sub.responder = lambda rec: chat_sse("SUBAGENT-DONE", {"prompt_tokens": 900, "completion_tokens": 4,
                                                               "total_tokens": 904})
        main.responder = main_agent
        rules = tmp_path / "rules.yaml"
        rules.write_text(CC_RULES.format(bg=bg.url, sub=sub.url, main=main.url))
        m = Mitmdump(tmp_path, rules, env=KEYS)
        try:
            p = run_claude_stream_json(m, tmp_path, [
                {"type": "control_request", "request_id": "req_title_1",
                 "request": {"subtype": "generate_session_title",
                             "description": "Please check the marker file for me and report back", "persist": False}},
                {"type": "user", "message": {"role": "user", "content": "Use an agent to check the marker file"}},
            ])
        finally:
            m.stop()
    out = [json.loads(ln) for ln in p.stdout.splitlines() if ln.startswith("{")]
    assert p.returncode == 0, (p.stdout[-3000:], p.stderr[-3000:], m.log()[-3000:])
    title = next(o for o in out if o.get("type") == "control_response")["response"]
    assert title["subtype"] == "success" and title["response"] == {"title": "Marker check from the local model"}
    result = next(o for o in out if o.get("type") == "result")
    assert result["result"].startswith("MAIN-DONE after: SUBAGENT-DONE agentId: ")  # the tool result names the agent

    # each kind of turn reached the upstream its rule names, and only that one
    assert len(bg.requests) == 1 and len(sub.requests) == 1 and len(main.requests) == 2
    title_req = bg.requests[0].json()
    assert "tools" not in title_req and "Generate a concise, sentence-case title" in json.dumps(title_req["messages"])
    assert SUBAGENT_PROMPT in json.dumps(sub.requests[0].json()["messages"])  # the subagent's own conversation
    assert all(r.headers["x-api-key"] == KEYS["TK_TEST_ANT_KEY"] for r in main.requests)
    assert all(r.headers["authorization"] == f"Bearer {KEYS['TK_TEST_OAI_KEY']}" for r in bg.requests + sub.requests)

    # the ledger: one session, each turn with its agent
    turns = cli(m.ledger, "log", "--json")
    model_turns = sorted((t for t in turns if t["client_protocol"] == "anthropic"), key=lambda t: t["started_at"])
    assert len(model_turns) == 4, [(t["path"], t["rule"]) for t in turns]
    sessions = {t["session_id"] for t in model_turns}
    assert len(sessions) == 1 and next(iter(sessions))  # Claude Code's own session id
    (sid,) = sessions
    assert all(t["session_fingerprint"] == 0 and t["client_name"] == "claude-code" and t["client_version"] == "2.1.197"
               for t in model_turns)
    by_rule = {t["rule"]: t for t in model_turns}
    assert (by_rule["background-turns"]["agent"], by_rule["background-turns"]["background"]) == ("main", 1)
    sub_turn = by_rule["subagent-turns"]
    assert sub_turn["agent"] == "subagent" and sub_turn["background"] == 0
    assert f"agentId: {sub_turn['agent_id']} " in result["result"]  # the id Claude Code gives its subagent
    assert [t["rule"] for t in model_turns if t["agent"] == "main" and not t["background"]] == ["main-turns"] * 2

    (s,) = cli(m.ledger, "sessions", "--json")
    assert s["session"] == sid and s["fingerprint"] is False and s["client"] == "claude-code 2.1.197"
    assert s["agents"] == {"background": 1, "main": 2, "subagent": 1} and s["subagents"] == [sub_turn["agent_id"]]
    assert s["endpoints"] == {"bg-local": 1, "cloud": 2, "sub-local": 1} and s["errors"] == 0
    assert s["usage"]["openai"]["input"] == 1200 and s["usage"]["anthropic"]["output"] == 14
    groups = {g["agent"]: g["turns"] for g in cli(m.ledger, "stats", "--by", "agent", "--json")["groups"]}
    assert groups == {"main": 2, "background": 1, "subagent": 1}
    text = cli(m.ledger, "sessions")
    assert sid in text and "main 2, background 1, subagent 1" in text
    explained = cli(m.ledger, "explain", sub_turn["request_id"])
    assert f"agent subagent {sub_turn['agent_id']}" in explained and "4 turns; around this one" in explained
