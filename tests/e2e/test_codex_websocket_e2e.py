"""The real Codex CLI over WebSocket, through `tokunseba run`: a provider of its own with
``supports_websockets = true`` (as Codex's built-in provider, which tries the WebSocket first),
whose host (api.openai.com, pointed at loopback by point_hosts.py) is a scripted Responses
endpoint that speaks WebSocket (ws_upstream.py).

- No rule takes the turn: the upgrade goes on, the turns reach the endpoint as WebSocket
  messages (no 426, no fallback POST), each is in the ledger with its usage, the warm-up is not.
- A rule translates the turns to a scripted Anthropic endpoint: the exec tool loop (the model
  calls ``exec`` running ``tools.apply_patch``) completes inside the one WebSocket session —
  each turn over HTTPS, its events written back into the WebSocket — and Codex prints the answer.
- The endpoint cuts the connection mid-turn: the turn is recorded interrupted."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from tokunseba.neutral.tools import freeform_arguments

from .conftest import BIN, ledger_settled
from .test_codex_default_e2e import FINAL, JS, call_reply, text_reply
from .test_codex_e2e import codex_exec, need_codex
from .test_console_e2e import Run
from tests.support.upstream import Upstream
from tests.support.ws_upstream import WsScript, WsUpstream, text_events
from tests.support.console import said_status

pytestmark = [pytest.mark.e2e, pytest.mark.claudecode]
HERE = Path(__file__).resolve().parent
ENDPOINT_KEY = "sk-ws-codex-endpoint-key-7"
PROVIDER = ("-c", "model_provider=tkws", "-c", 'model_providers.tkws.name="tkws"',
            "-c", 'model_providers.tkws.base_url="https://api.openai.com/v1"',
            "-c", 'model_providers.tkws.env_key="CODEX_API_KEY"', "-c", 'model_providers.tkws.wire_api="responses"',
            "-c", "model_providers.tkws.supports_websockets=true", "-c", "model_providers.tkws.stream_max_retries=0",
            "-c", "model_providers.tkws.request_max_retries=0")
TO_ANTHROPIC = """\
endpoints:
  claude:
    protocol: anthropic
    url: {url}/v1
    key_env: TK_TEST_WS_CODEX_KEY
    max_tokens: 8192
routes:
  - name: codex-to-claude
    when: {{client: openai-responses}}
    to: claude
    model: claude-sonnet-4-5
"""


def _run(tmp_path: Path, ws: WsUpstream, rules: str = "routes: []\n") -> Run:
    path = tmp_path / "rules.yaml"
    path.write_text(rules)
    return Run(tmp_path, "--rules", str(path), "--", "-s", str(HERE.parent / "support" / "point_hosts.py"),
               env={"TK_TEST_POINT": f"api.openai.com=http://127.0.0.1:{ws.port}",
                    "TK_TEST_WS_CODEX_KEY": ENDPOINT_KEY})


def _codex(run: Run, tmp_path: Path, prompt: str, *extra: str) -> tuple[subprocess.CompletedProcess, Path]:
    proxy = SimpleNamespace(url=run.url, ca=run.conf / "mitmproxy-ca-cert.pem")
    return codex_exec(proxy, tmp_path, prompt, *PROVIDER, *extra)  # type: ignore[arg-type]


def _log(run: Run) -> list[dict]:
    return json.loads(subprocess.run([str(BIN / "tokunseba"), "log", "--ledger", str(run.ledger), "--json"],
                                     capture_output=True, text=True, check=True).stdout)


def test_codex_turns_over_websocket_are_recorded_with_their_usage(tmp_path):
    need_codex()
    with WsUpstream() as ws:
        ws.script(WsScript(text_events(["hello over ", "the websocket"]), delay=0.01))
        run = _run(tmp_path, ws)
        try:
            p, _ = _codex(run, tmp_path, "say hi", "-c", "model=gpt-5.5")
            ledger_settled(run.ledger)
        finally:
            out = run.stop()
    assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-3000:])
    assert "hello over the websocket" in p.stdout
    assert ws.turns(), (ws.requests, p.stderr[-3000:])
    assert all(method == "GET" for method, _ in ws.requests)  # the upgrade only: no fallback POST
    assert not said_status(out, 426)
    turns = [t for t in _log(run) if t["client_protocol"] == "openai-responses"]
    assert len(turns) == len(ws.turns()) >= 1  # each turn message, and no warm-up
    assert all(t["outcome"] == "pass_through" and t["usage_reported"]["input_tokens"] == 5120 for t in turns)
    assert all(t["request_id"] in out for t in turns)  # the console line


def test_codex_exec_loop_translated_to_anthropic_inside_one_websocket_session(tmp_path):
    need_codex()
    call_id = "call_ws_exec_01"
    with WsUpstream() as ws, Upstream() as ant:
        ws.script(WsScript(text_events(["never used"])))
        ant.script(call_reply("anthropic", call_id, "exec", freeform_arguments(JS)), text_reply("anthropic", FINAL))
        run = _run(tmp_path, ws, TO_ANTHROPIC.format(url=ant.url))
        try:
            p, work = _codex(run, tmp_path, "create hello.txt", "--dangerously-bypass-approvals-and-sandbox")
            ledger_settled(run.ledger)
        finally:
            run.stop()
    assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-3000:])
    assert (work / "hello.txt").read_text() == "hi from the routed model\n"
    assert FINAL in p.stdout
    assert len(ws.upgrades) == 1 and ws.turns() == []  # one WebSocket session; no turn reached the provider
    posts = [r for r in ant.requests if r.method == "POST"]
    assert len(posts) == 2 and all(r.headers["x-api-key"] == ENDPOINT_KEY for r in posts)
    second = posts[1].json()
    results = [b for m in second["messages"] if isinstance(m["content"], list) for b in m["content"]
               if b.get("type") == "tool_result"]
    assert [r["tool_use_id"] for r in results] == [call_id]  # the whole conversation, the call's id untouched
    turns = [t for t in _log(run) if t["client_protocol"] == "openai-responses"]
    assert len(turns) == 2 and all(t["outcome"] == "translated" and t["endpoint"] == "claude" for t in turns)
    assert all(t["usage_reported"] for t in turns)


def test_codex_connection_cut_mid_turn_is_interrupted(tmp_path):
    need_codex()
    with WsUpstream() as ws:
        ws.script(WsScript(text_events(["cut ", "here"]), delay=0.01, cut_after=3))
        run = _run(tmp_path, ws)
        try:
            p, _ = _codex(run, tmp_path, "say hi", "-c", "model=gpt-5.5")
            ledger_settled(run.ledger)
        finally:
            run.stop()
    turns = [t for t in _log(run) if t["client_protocol"] == "openai-responses"]
    assert turns and turns[-1]["outcome"] == "interrupted", (turns, p.stderr[-2000:])
    assert all(t["outcome"] != "pass_through" for t in turns)  # a cut turn is never a success
