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
from tests.support.upstream import Recorded, Reply, Upstream

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


@pytest.mark.claudecode
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


# ---------------------------------------------------------------- two sessions at once, three turns each


def run_pair(run_one) -> dict[str, subprocess.CompletedProcess]:
    """``run_one(marker)`` for sessions A and B at the same time."""
    out: dict[str, subprocess.CompletedProcess] = {}
    threads = [threading.Thread(target=lambda k=k: out.__setitem__(k, run_one(k))) for k in ("A", "B")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    return out


def marker_of(text: str) -> str:
    return "A" if "SESSION-A" in text else "B" if "SESSION-B" in text else "?"


def sessions_by_marker(ledger: Path, protocol: str) -> dict[str, set[str]]:
    """session id -> the markers of the request bodies of its turns (bodies stored: opt-in)."""
    import sqlite3

    ledger_settled(ledger)
    with sqlite3.connect(ledger) as db:
        rows = db.execute("SELECT t.session_id, t.session_fingerprint, b.request_body FROM turns t JOIN bodies b "
                          "USING (request_id) WHERE t.client_protocol = ?", (protocol,)).fetchall()
    out: dict[str, set[str]] = {}
    counts: dict[str, int] = {}
    for sid, _fp, body in rows:
        out.setdefault(sid, set()).add(marker_of(body.decode("utf-8", "replace")))
        counts[sid] = counts.get(sid, 0) + 1
    return {sid: (markers, counts[sid]) for sid, markers in out.items()}


GEMINI_RULES = """\
endpoints:
  gem-up:
    protocol: gemini
    url: {url}/v1beta
    key_env: TK_TEST_GEM_KEY
routes:
  - name: gemini-sessions
    when: {{client: gemini}}
    to: gem-up
"""


def gemini_sse(parts: list[dict]) -> Reply:
    obj = {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
           "usageMetadata": {"promptTokenCount": 50, "candidatesTokenCount": 5, "totalTokenCount": 55},
           "modelVersion": "cli-model"}
    return Reply.sse([b"data: " + json.dumps(obj).encode() + b"\r\n\r\n"])


def gemini_agent(rec: Recorded) -> Reply:
    """Two shell-command round trips, then the answer: three turns per conversation."""
    body = rec.json()
    done = sum(1 for c in body.get("contents", []) for p in c.get("parts", []) if "functionResponse" in p)
    m = marker_of(json.dumps(body.get("contents", [])[:1]))
    if done < 2:
        return gemini_sse([{"functionCall": {"name": "run_shell_command", "id": f"call_{m}_{done}",
                                             "args": {"command": f"echo step-{done}-{m}",
                                                      "description": "print a marker"}}}])
    return gemini_sse([{"text": f"finished session {m}"}])


@pytest.mark.claudecode
def test_gemini_cli_two_sessions_at_once_three_turns_each_never_mixed(tmp_path):
    from .test_gemini_e2e import run_gemini_cli

    need_npm_tool("gemini", "Gemini CLI")
    with Upstream() as up:
        up.responder = gemini_agent
        rules = tmp_path / "rules.yaml"
        rules.write_text(GEMINI_RULES.format(url=up.url))
        m = Mitmdump(tmp_path, rules, env=KEYS, extra=["--set", "tokunseba_ledger_bodies=true"])
        try:
            runs = run_pair(lambda k: run_gemini_cli(m, tmp_path / k, f"SESSION-{k}: run the two marker steps",
                                                     "--yolo", "-o", "json"))
        finally:
            m.stop()
    for k, r in runs.items():
        assert r.returncode == 0, (k, r.stdout[-2000:], r.stderr[-3000:], m.log()[-3000:])
        assert json.loads(r.stdout)["response"].strip().endswith(f"finished session {k}")
    posts = [r for r in up.requests if r.method == "POST"]
    assert len(posts) == 6, [r.path for r in up.requests]
    grouped = sessions_by_marker(m.ledger, "gemini")
    assert sorted((sorted(k), n) for k, n in grouped.values()) == [(["A"], 3), (["B"], 3)]  # its own 3 turns only
    assert all(sid.startswith("fp-") for sid in grouped)
    sessions = cli(m.ledger, "sessions", "--json")
    assert sorted((s["turns"], s["fingerprint"], s["client"]) for s in sessions) == [
        (3, True, "gemini-cli 0.61.0")] * 2


CODEX_RULES = """\
endpoints:
  resp-up:
    protocol: openai-responses
    url: {url}/v1
    key_env: TK_TEST_RESP_KEY
routes:
  - name: codex-sessions
    when: {{client: openai-responses}}
    to: resp-up
"""


def responses_sse(item: dict) -> Reply:
    snap = {"id": "resp_sess", "object": "response", "created_at": 1767225600, "status": "in_progress",
            "model": "gpt-5.5", "output": []}
    usage = {"input_tokens": 700, "input_tokens_details": {"cached_tokens": 600}, "output_tokens": 9,
             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 709}
    evs = [("response.created", {"response": snap}),
           ("response.output_item.added", {"output_index": 0, "item": item}),
           ("response.output_item.done", {"output_index": 0, "item": item}),
           ("response.completed", {"response": {**snap, "status": "completed", "output": [item], "usage": usage}})]
    return Reply.sse([f"event: {n}\ndata: {json.dumps({'type': n, 'sequence_number': i, **d})}\n\n".encode()
                      for i, (n, d) in enumerate(evs)])


def codex_agent(rec: Recorded) -> Reply:
    """Two exec_command round trips, then the answer: three turns per session."""
    body = rec.json()
    items = body.get("input", [])
    done = sum(1 for i in items if isinstance(i, dict) and i.get("type") == "function_call_output")
    m = marker_of(json.dumps([i for i in items if isinstance(i, dict) and i.get("role") == "user"][-1:]))
    if m == "?":
        m = marker_of(json.dumps(items))
    if done < 2:
        return responses_sse({"id": f"fc_{m}{done}", "type": "function_call", "status": "completed",
                              "call_id": f"call_{m}_{done}", "name": "exec_command",
                              "arguments": json.dumps({"cmd": f"echo step-{done}-{m}"})})
    return responses_sse({"id": f"msg_{m}", "type": "message", "status": "completed", "role": "assistant",
                          "content": [{"type": "output_text", "annotations": [], "text": f"finished session {m}"}]})


def run_codex(proxy: Mitmdump, tmp: Path, prompt: str) -> subprocess.CompletedProcess:
    codex = need_npm_tool("codex", "Codex")
    home, work = tmp / "home", tmp / "work"
    (home / "codex").mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "CODEX_HOME": str(home / "codex"),
           "HTTPS_PROXY": proxy.url, "HTTP_PROXY": proxy.url, "SSL_CERT_FILE": str(proxy.ca),
           "CODEX_API_KEY": "sk-codex-client-dummy-sess-0123", "TERM": "dumb"}
    return subprocess.run([codex, "exec", "--skip-git-repo-check", "-c", "analytics.enabled=false",
                           "-c", "features.plugins=false", "-c", "features.api_key_model_discovery=false",
                           "-c", "model=gpt-5.5", prompt], cwd=work, env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=240)


@pytest.mark.claudecode
def test_codex_two_sessions_at_once_three_turns_each_never_mixed(tmp_path):
    need_npm_tool("codex", "Codex")
    with Upstream() as up:
        up.responder = codex_agent
        rules = tmp_path / "rules.yaml"
        rules.write_text(CODEX_RULES.format(url=up.url))
        m = Mitmdump(tmp_path, rules, env=KEYS, extra=["--set", "tokunseba_ledger_bodies=true"])
        try:
            runs = run_pair(lambda k: run_codex(m, tmp_path / k, f"SESSION-{k}: run the two marker steps"))
        finally:
            m.stop()
    for k, r in runs.items():
        assert r.returncode == 0, (k, r.stdout[-2000:], r.stderr[-3000:], m.log()[-3000:])
        assert f"finished session {k}" in r.stdout
    grouped = sessions_by_marker(m.ledger, "openai-responses")
    assert sorted((sorted(k), n) for k, n in grouped.values()) == [(["A"], 3), (["B"], 3)]
    assert not any(sid.startswith("fp-") for sid in grouped)  # Codex's own session ids
    sessions = cli(m.ledger, "sessions", "--json")
    assert sorted((s["turns"], s["fingerprint"], s["client"], s["agents"]["main"]) for s in sessions) == [
        (3, False, "codex 0.171.0", 3)] * 2


# ---------------------------------------------------------------- the SDKs (always run)

SDK_RULES = """\
endpoints:
  gem-up:
    protocol: gemini
    url: {gem}/v1beta
    key_env: TK_TEST_GEM_KEY
  resp-up:
    protocol: openai-responses
    url: {resp}/v1
    key_env: TK_TEST_RESP_KEY
  ant-up:
    protocol: anthropic
    url: {ant}/v1
    key_env: TK_TEST_ANT_KEY
  flaky:
    protocol: anthropic
    url: {flaky}/v1
    key_env: TK_TEST_ANT_KEY
routes:
  - name: flaky-first
    when: {{client: anthropic, model: claude-failover}}
    to: flaky
  - name: genai
    when: {{client: gemini}}
    to: gem-up
  - name: responses
    when: {{client: openai-responses}}
    to: resp-up
  - name: messages
    when: {{client: anthropic}}
    to: ant-up
"""


def gemini_json(rec: Recorded) -> Reply:
    m = marker_of(json.dumps(rec.json().get("contents", [])[:1]))
    return Reply.json({"candidates": [{"content": {"role": "model", "parts": [{"text": f"noted {m}"}]},
                                       "finishReason": "STOP", "index": 0}],
                       "usageMetadata": {"promptTokenCount": 20, "candidatesTokenCount": 2, "totalTokenCount": 22},
                       "modelVersion": "sdk-model"})


def responses_json(rec: Recorded) -> Reply:
    m = marker_of(json.dumps(rec.json().get("input")))
    return Reply.json({"id": f"resp_{m}", "object": "response", "created_at": 1767225600, "status": "completed",
                       "model": "gpt-sdk", "output": [{"id": f"msg_{m}", "type": "message", "status": "completed",
                                                       "role": "assistant", "content": [
                                                           {"type": "output_text", "annotations": [],
                                                            "text": f"noted {m}"}]}],
                       "usage": {"input_tokens": 30, "output_tokens": 2, "total_tokens": 32}})


def anthropic_json(rec: Recorded) -> Reply:
    return Reply.json({"id": "msg_bad", "type": "message", "role": "assistant", "model": "claude-scripted",
                       "content": [{"type": "text", "text": "still served"}], "stop_reason": "end_turn",
                       "usage": {"input_tokens": 5, "output_tokens": 2}})


@pytest.fixture(scope="module")
def sdk_proxy(tmp_path_factory):
    with Upstream() as gem, Upstream() as resp, Upstream() as ant, Upstream() as flaky:
        gem.responder, resp.responder, ant.responder = gemini_json, responses_json, anthropic_json
        flaky.responder = lambda rec: Reply.json({"type": "error", "error": {"type": "overloaded_error",
                                                                             "message": "Overloaded"}}, 529)
        work = tmp_path_factory.mktemp("sessions-sdk")
        rules = work / "rules.yaml"
        rules.write_text(SDK_RULES.format(gem=gem.url, resp=resp.url, ant=ant.url, flaky=flaky.url))
        m = Mitmdump(work, rules, env=KEYS, extra=["--set", "tokunseba_ledger_bodies=true",
                                                    "--set", f"tokunseba_provider_hosts=127.0.0.1:{ant.port}=anthropic"])
        m.ant = ant
        try:
            yield m
        finally:
            m.stop()


def test_genai_sdk_conversations_at_once_are_grouped_by_their_fingerprint(sdk_proxy, monkeypatch):
    from google import genai
    from google.genai import types

    for k, v in sdk_proxy.client_env().items():
        monkeypatch.setenv(k, v)
    client = genai.Client(api_key="AIza-sdk-client-key-0009", http_options=types.HttpOptions(api_version="v1beta"))

    def chat(k: str) -> list[str]:
        c = client.chats.create(model="sdk-model")
        return [c.send_message(f"SESSION-{k} turn {i}").text for i in range(3)]

    got: dict[str, list[str]] = {}
    threads = [threading.Thread(target=lambda k=k: got.__setitem__(k, chat(k))) for k in ("A", "B")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert got == {"A": ["noted A"] * 3, "B": ["noted B"] * 3}
    grouped = sessions_by_marker(sdk_proxy.ledger, "gemini")
    assert sorted((sorted(k), n) for k, n in grouped.values()) == [(["A"], 3), (["B"], 3)]
    assert all(sid.startswith("fp-") for sid in grouped)
    clients = {t["client_name"] for t in cli(sdk_proxy.ledger, "log", "--json") if t["client_protocol"] == "gemini"}
    assert clients == {"google-genai"}


def test_responses_sdk_calls_carrying_a_prompt_cache_key_are_grouped_by_it(sdk_proxy, monkeypatch):
    import openai

    for k, v in sdk_proxy.client_env().items():
        monkeypatch.setenv(k, v)
    client = openai.OpenAI(api_key="sk-openai-sdk-client-0009")

    def conversation(k: str) -> list[str]:
        history: list = [{"role": "developer", "content": "be brief"}]
        out = []
        for i in range(3):
            history.append({"role": "user", "content": f"SESSION-{k} turn {i}"})
            r = client.responses.create(model="gpt-sdk", input=history, prompt_cache_key=f"codex-like-session-{k}")
            out.append(r.output_text)
            history.append({"role": "assistant", "content": r.output_text})
        return out

    got: dict[str, list[str]] = {}
    threads = [threading.Thread(target=lambda k=k: got.__setitem__(k, conversation(k))) for k in ("A", "B")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert got == {"A": ["noted A"] * 3, "B": ["noted B"] * 3}
    grouped = sessions_by_marker(sdk_proxy.ledger, "openai-responses")
    assert grouped == {"codex-like-session-A": ({"A"}, 3), "codex-like-session-B": ({"B"}, 3)}


# ---------------------------------------------------------------- bad input never breaks a turn


def raw_post(proxy: Mitmdump, port: int, header_lines: list[bytes], body: dict) -> tuple[int, bytes]:
    """POST http://127.0.0.1:PORT/v1/messages through the proxy, header bytes exactly as given."""
    import socket

    data = json.dumps(body).encode()
    head = [b"POST http://127.0.0.1:%d/v1/messages HTTP/1.1" % port, b"Host: 127.0.0.1:%d" % port,
            b"Content-Type: application/json", b"Content-Length: %d" % len(data), b"Connection: close",
            b"User-Agent: claude-cli/2.1.197 (external, sdk-cli)", b"x-api-key: sk-ant-client-raw-0001",
            b"anthropic-version: 2023-06-01", *header_lines]
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=30) as s:
        s.sendall(b"\r\n".join(head) + b"\r\n\r\n" + data)
        reply = b""
        while b"\r\n\r\n" not in reply:
            chunk = s.recv(65536)
            assert chunk, f"the proxy closed before a reply: {reply!r}"
            reply += chunk
        head_bytes, rest = reply.split(b"\r\n\r\n", 1)
        status = int(head_bytes.split(b" ", 2)[1])
        headers = {k.strip().lower(): v.strip() for k, _, v in
                   (ln.partition(b":") for ln in head_bytes.split(b"\r\n")[1:])}
        if b"content-length" in headers:  # read the body by its framing: no wait for the close
            while len(rest) < int(headers[b"content-length"]):
                rest += s.recv(65536)
            return status, rest
        while not rest.endswith(b"0\r\n\r\n"):
            rest += s.recv(65536)
    body_out = b""
    while rest:
        size, rest = rest.split(b"\r\n", 1)
        n = int(size, 16)
        if n == 0:
            break
        body_out, rest = body_out + rest[:n], rest[n + 2:]
    return status, body_out


BAD_SESSION_HEADERS = {
    "junk-10kb": [b"X-Claude-Code-Session-Id: " + b"J" * 10_240],
    "control-chars": [b"X-Claude-Code-Session-Id: sess\x01\x1b[31m\t\xe9nd",
                      b"x-claude-code-agent-id: agent\x7f\x02"],
    "empty": [b"X-Claude-Code-Session-Id:"],
}


@pytest.mark.parametrize("case", list(BAD_SESSION_HEADERS))
def test_a_bad_session_header_is_recorded_bounded_and_escaped_and_the_turn_served(sdk_proxy, case):
    body = {"model": "claude-bad-input", "max_tokens": 16, "tools": [{"name": "t", "input_schema": {"type": "object"}}],
            "messages": [{"role": "user", "content": f"BAD-INPUT {case}"}]}
    status, reply = raw_post(sdk_proxy, sdk_proxy.ant.port, BAD_SESSION_HEADERS[case], body)
    assert status == 200 and json.loads(reply)["content"][0]["text"] == "still served", reply[:500]
    ledger_settled(sdk_proxy.ledger)
    rows = [t for t in cli(sdk_proxy.ledger, "log", "--json") if t["requested_model"] == "claude-bad-input"]
    row = next(t for t in rows if t["rule"] == "messages" and t["started_at"] == max(r["started_at"] for r in rows))
    assert row["status"] == 200 and row["outcome"] == "retargeted" and row["client_name"] == "claude-code"
    sid = row["session_id"]
    assert len(sid) <= 128 and all(" " <= ch <= "~" or ch == "…" for ch in sid)
    if case == "junk-10kb":
        assert sid.startswith("JJJJ") and "…#" in sid and row["session_fingerprint"] == 0
    elif case == "control-chars":
        assert sid == "sess\\x01\\x1b[31m\\x09\\xe9nd" and row["agent"] == "subagent" and row["agent_id"] == "agent\\x7f\\x02"
    else:  # no value: the session is the conversation's fingerprint
        assert sid.startswith("fp-") and row["session_fingerprint"] == 1
    assert cli(sdk_proxy.ledger, "sessions")  # the views read it


def test_sessions_count_the_failovers_of_a_sessions_turns(sdk_proxy):
    body = {"model": "claude-failover", "max_tokens": 16, "tools": [{"name": "t", "input_schema": {"type": "object"}}],
            "messages": [{"role": "user", "content": "FAILOVER turn"}]}
    for _ in range(2):
        status, reply = raw_post(sdk_proxy, sdk_proxy.ant.port, [b"X-Claude-Code-Session-Id: sess-failover-1"], body)
        assert status == 200 and json.loads(reply)["content"][0]["text"] == "still served", reply[:500]
    (s,) = [s for s in cli(sdk_proxy.ledger, "sessions", "--json") if s["session"] == "sess-failover-1"]
    # the first turn failed over from flaky (529); the second went straight past it (cooling down)
    assert (s["turns"], s["errors"], s["failovers"], s["endpoints"]) == (2, 0, 1, {"ant-up": 2})
    assert s["routes"] == {"messages": 2}
    text = cli(sdk_proxy.ledger, "sessions")
    assert "FAILOVERS" in text.splitlines()[0]
