"""Issue 43 end to end: an earned route through a real `tokunseba run`, a scripted primary
(Anthropic) and a scripted candidate (OpenAI Chat) on loopback. The candidate answers Claude
Code's title turns (the captured request, its JSON schema) validly and tool turns with the right
call only half the time: after min_turns the title stratum is earned and the next title turn goes
to the candidate while tool turns stay; when the candidate starts answering titles invalidly the
stratum returns; a session that left the candidate never comes back to it; `explain`,
`earn --json` and `earn --suggest` say the same."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest

from ..conftest import load_fixture
from .conftest import BIN, ledger_settled
from .test_console_e2e import Run
from tests.support.upstream import Recorded, Reply, Upstream

pytestmark = pytest.mark.e2e

TITLE = load_fixture("claude-code-title-haiku.json")
UA = "claude-cli/2.1.197 (external, cli)"
RULES = """\
endpoints:
  prim:
    protocol: anthropic
    url: {prim}/v1
  cand:
    protocol: openai
    url: {cand}/v1
    model: small-local
    max_tokens: 512
routes:
  - name: cc
    when: {{client: anthropic}}
    to: prim
    earn: {{to: cand, bar: 0.5, min_turns: 4, canary: 1.0}}
"""


def ant_reply(content: list, stop: str) -> Reply:
    return Reply.json({"id": "msg_earn", "type": "message", "role": "assistant", "model": "claude-haiku-4-5",
                       "content": content, "stop_reason": stop, "stop_sequence": None,
                       "usage": {"input_tokens": 100, "output_tokens": 9}})


def chat_reply(message: dict, finish: str) -> Reply:
    return Reply.json({"id": "chatcmpl-earn", "object": "chat.completion", "created": 1767225600, "model": "small-local",
                       "choices": [{"index": 0, "finish_reason": finish, "message": {"role": "assistant", **message}}],
                       "usage": {"prompt_tokens": 100, "completion_tokens": 9, "total_tokens": 109}})


class Scripted:
    """What each side answers: the primary always right; the candidate's titles valid unless
    ``titles_valid`` is off, its tool calls right every other time."""

    def __init__(self) -> None:
        self.titles_valid = True
        self.down = False  # the candidate answers 503 (busy)
        self.tool_turns = 0
        self.lock = threading.Lock()

    def primary(self, rec: Recorded) -> Reply:
        if rec.json().get("tools"):
            return ant_reply([{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}],
                             "tool_use")
        return ant_reply([{"type": "text", "text": '{"title": "Fix the login bug"}'}], "end_turn")

    def candidate(self, rec: Recorded) -> Reply:
        if self.down:
            return Reply.json({"error": {"message": "loading model", "type": "unavailable_error"}}, 503)
        if rec.json().get("tools"):
            with self.lock:
                self.tool_turns += 1
                right = self.tool_turns % 2 == 1
            args = {"command": "ls" if right else "ls -la"}
            return chat_reply({"content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
                "name": "Bash", "arguments": json.dumps(args)}}]}, "tool_calls")
        text = '{"title": "Login bug fix"}' if self.titles_valid else "Login bug fix"
        return chat_reply({"content": text}, "stop")


@pytest.fixture
def earned_run(tmp_path):
    script = Scripted()
    with Upstream() as prim, Upstream() as cand:
        prim.responder, cand.responder = script.primary, script.candidate
        rules = tmp_path / "rules.yaml"
        rules.write_text(RULES.format(prim=prim.url, cand=cand.url))
        run = Run(tmp_path, "--rules", str(rules), "--", "--set", f"tokunseba_provider_hosts=127.0.0.1:{prim.port}=anthropic")
        try:
            yield run, prim, cand, script, rules
        finally:
            run.stop()


def send(run: Run, prim: Upstream, kind: str, session: str) -> str:
    """A Claude Code turn through the proxy: the captured title turn (non-streamed) or a tool turn."""
    if kind == "title":
        body = dict(TITLE["body"], stream=False)
    else:
        body = {"model": "claude-sonnet-4-5", "max_tokens": 256, "messages": [{"role": "user", "content": "list files"}],
                "tools": [{"name": "Bash", "description": "run a command", "input_schema": {
                    "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}]}
    headers = {"content-type": "application/json", "anthropic-version": "2023-06-01", "user-agent": UA,
               "x-claude-code-session-id": session, "x-api-key": "sk-ant-earn-test"}
    with httpx.Client(proxy=run.url, timeout=30, trust_env=False) as c:
        r = c.post(f"{prim.url}/v1/messages", headers=headers, content=json.dumps(body).encode())
    assert r.status_code == 200, r.text
    reply = r.json()
    if kind == "title":
        assert reply["content"][0]["type"] == "text"
    return r.headers["x-tokunseba-request-id"]


def shadows_landed(run: Run, n: int, timeout: float = 30.0) -> None:
    """Wait for ``n`` shadow rows (and a moment for the proxy's book to fold the last one)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        con = sqlite3.connect(run.ledger)
        try:
            got = con.execute("SELECT count(*) FROM shadows WHERE kind = 'shadow'").fetchone()[0]
        except sqlite3.OperationalError:
            got = 0
        finally:
            con.close()
        if got >= n:
            time.sleep(0.3)
            return
        time.sleep(0.1)
    raise AssertionError(f"{n} shadow rows did not land")


def served_by(run: Run, rid: str) -> str:
    ledger_settled(run.ledger, 20.0, rid)
    con = sqlite3.connect(run.ledger)
    try:
        return con.execute("SELECT endpoint FROM turns WHERE request_id = ?", (rid,)).fetchone()[0]
    finally:
        con.close()


def cli(run: Run, rules: Path, *args: str) -> subprocess.CompletedProcess:
    p = subprocess.run([str(BIN / "tokunseba"), *args, "--ledger", str(run.ledger)], capture_output=True, text=True,
                       timeout=60, env={**os.environ, "TOKUNSEBA_RULES": str(rules)})
    assert p.returncode == 0, p.stderr
    return p


def test_title_turns_are_earned_tool_turns_stay_and_a_returned_stratum_keeps_its_sessions(earned_run):
    run, prim, cand, script, rules = earned_run
    rows = 0
    for i in range(4):  # learning: every turn served by prim and shadowed to cand
        for kind in ("title", "tool"):
            rid = send(run, prim, kind, f"{kind}-{i}")
            rows += 1
            shadows_landed(run, rows)
            assert served_by(run, rid) == "prim"

    # the title stratum is earned (4 of 4 valid, bound 0.51 ≥ 0.5); tool calls agreed 2 of 4: still learning
    title = send(run, prim, "title", "title-a")
    assert served_by(run, title) == "cand"
    assert cand.requests[-1].json()["model"] == "small-local"
    rows += 1  # canary 1.0: shadowed back to prim
    tool = send(run, prim, "tool", "tool-a")
    assert served_by(run, tool) == "prim"
    rows += 1
    shadows_landed(run, rows)

    explained = cli(run, rules, "explain", title).stdout
    assert "served by cand · earned: stratum route=cc client=anthropic agent=background tools=none thinking=off " \
           "size=≤4KB, agreement 1.00 (lower bound 0.51) over 4 turns since " in explained, explained
    assert "learning: 4 of 4" in cli(run, rules, "explain", tool).stdout

    # the candidate turns bad: its next title turn (served by it, compared by the canary) returns the stratum
    script.titles_valid = False
    bad = send(run, prim, "title", "title-a")
    assert served_by(run, bad) == "cand"
    rows += 1
    shadows_landed(run, rows)
    script.titles_valid = True  # valid again: four fresh comparisons earn it again, for every session but title-a
    back = send(run, prim, "title", "title-a")  # returned: prim again; session title-a has left the candidate
    assert served_by(run, back) == "prim"
    assert "returned: stratum route=cc client=anthropic agent=background" in cli(run, rules, "explain", back).stdout
    rows += 1
    shadows_landed(run, rows)

    for i in range(3):
        send(run, prim, "title", f"title-b{i}")
        rows += 1
        shadows_landed(run, rows)
    again = send(run, prim, "title", "title-c")
    assert served_by(run, again) == "cand"
    rows += 1
    shadows_landed(run, rows)
    stays = send(run, prim, "title", "title-a")
    assert served_by(run, stays) == "prim"
    said = cli(run, rules, "explain", stays).stdout
    assert "but session title-a left the candidate before (a session's tier only rises)" in said, said
    rows += 1
    shadows_landed(run, rows)

    # earn --json, explain and --suggest agree
    rep = json.loads(cli(run, rules, "earn", "--json").stdout)
    (route,) = rep["routes"]
    assert route["route"] == "cc" and route["earn"] == {"to": "cand", "bar": 0.5, "min_turns": 4, "canary": 1.0}
    by_agent = {s["stratum"]["agent"]: s for s in route["strata"]}
    t, u = by_agent["background"], by_agent["main"]
    assert t["state"] == "earned" and [x["to"] for x in t["transitions"]] == ["earned", "returned", "earned"]
    assert t["counted"] >= 4 and t["lower_bound"] >= 0.5
    assert u["state"] == "learning" and u["counted"] == 5 and u["agree"] == 3 and u["lower_bound"] < 0.5
    assert any("Bash: arguments differ" in f for w in u["worst"] for f in w["failed"])
    explained = cli(run, rules, "explain", again).stdout
    assert f"earned: stratum {t['stratum']['key']}, agreement" in explained
    suggested = cli(run, rules, "earn", "--suggest").stdout
    assert "- name: cc-earned-1" in suggested and "to: cand" in suggested, suggested
    assert ('when: {"client":"anthropic","background":true,"tools":false,"thinking":false,'
            '"max_request_bytes":4096}') in suggested, suggested
    assert f"# {t['said']}" in suggested
    text = cli(run, rules, "earn").stdout
    assert "earned" in text and "learning" in text and "disagreed: " in text
    shadow = cli(run, rules, "shadow").stdout
    assert "agent=background tools=none thinking=off size=≤4KB" in shadow, shadow

    # the candidate fails a turn it took: the route's own target answers it (failover), and the
    # comparison counts it as the candidate's disagreement (the stratum returns: 6 of 7)
    script.down = True
    failed = send(run, prim, "title", "title-d")
    assert served_by(run, failed) == "prim"
    rows += 1
    shadows_landed(run, rows)
    rep = json.loads(cli(run, rules, "earn", "--json").stdout)
    t = next(s for s in rep["routes"][0]["strata"] if s["stratum"]["agent"] == "background")
    assert t["state"] == "returned" and t["transitions"][-1]["n"] == 7 and t["transitions"][-1]["agree"] == 6
    assert any("did not answer (the turn failed over to prim)" in f for w in t["worst"] for f in w["failed"])
