"""A reply cut by the endpoint's own cap, told as what it is (issue 41), with the real Claude Code
and the real mitmweb: a scripted Chat endpoint with `max_tokens: 512` that always runs to its cap
(`finish_reason: length`, 512 completion tokens), as the local demo's base model did.

- The product: Claude Code `-p` through mitmweb is told `end_turn` (the client's own limit was
  never reached), so it sends one request, prints the reply and exits 0 — no continuation loop.
  The turn is `capped`, not a clean `translated`: in `log --json`, in `stats` (a count apart),
  in mitmweb's mark and comment, on the console; `explain` shows the endpoint's own stop reason
  (`max_tokens`) and the conversion (`stop_reason max_tokens -> end_turn (…)`).
- The client's own behaviour, which the decision rests on (docs/dev/clients.md "A reply cut by the
  endpoint's cap"): the same Claude Code told `max_tokens` (a same-protocol endpoint: the reply
  goes on as it came) sends continuation turns into the same cap and fails."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from mitmproxy.utils.emoji import emoji

from tokunseba.proxy.mitm import MARKS

from .conftest import BIN, need_npm_tool
from .test_mitmweb_e2e import Mitmweb, poll
from .test_proxy_e2e import chat_chunk
from tests.support.upstream import Reply

pytestmark = [pytest.mark.e2e, pytest.mark.claudecode]

DUMMY_KEY = "sk-ant-dummy-capmark-0123456789"
EP_KEY = "sk-endpoint-capmark-0001"
TEXT = "Hello! I can help with that, and then some more words that run on"

RULES = """\
endpoints:
  local:
    protocol: openai
    url: {oai}/v1
    key_env: TK_CAP_EP_KEY
    max_tokens: 512
routes:
  - name: everything-local
    when: {{client: anthropic}}
    to: local
"""

SAME_PROTOCOL_RULES = """\
endpoints:
  claude-capped:
    protocol: anthropic
    url: {oai}/v1
    key_env: TK_CAP_EP_KEY
routes:
  - name: everything-retargeted
    when: {{client: anthropic}}
    to: claude-capped
"""


def run_claude(web: Mitmweb, tmp_path: Path, prompt: str, timeout: int = 180) -> tuple[subprocess.CompletedProcess, float]:
    """The real Claude Code `-p` through mitmweb (HTTPS_PROXY + its CA), a throwaway HOME, no
    title turn (non-essential traffic off), no retries."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir(exist_ok=True)
    work.mkdir(exist_ok=True)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "TERM": "dumb",
           "HTTPS_PROXY": web.url, "HTTP_PROXY": web.url,
           "NODE_EXTRA_CA_CERTS": str(web.confdir / "mitmproxy-ca-cert.pem"), "ANTHROPIC_API_KEY": DUMMY_KEY,
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1",
           "CLAUDE_CODE_MAX_RETRIES": "0"}
    t0 = time.monotonic()
    p = subprocess.run([need_npm_tool("claude", "Claude Code"), "-p", prompt, "--output-format", "json"], cwd=work,
                       env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
    return p, time.monotonic() - t0


def result_json(p: subprocess.CompletedProcess) -> dict:
    lines = [ln for ln in p.stdout.splitlines() if ln.strip().startswith("{")]
    assert lines, f"no JSON result (rc={p.returncode})\nstdout={p.stdout[-2000:]}\nstderr={p.stderr[-2000:]}"
    return json.loads(lines[-1])


def to_the_cap(cid: str) -> Reply:
    """A Chat stream that runs to the endpoint's 512-token cap."""
    return Reply.sse([chat_chunk(cid, {"role": "assistant", "content": ""}), chat_chunk(cid, {"content": TEXT}),
                      chat_chunk(cid, {}, "length"),
                      chat_chunk(cid, usage={"prompt_tokens": 900, "completion_tokens": 512, "total_tokens": 1412},
                                 choices=False),
                      b"data: [DONE]\n\n"], delay=0.02)


def anthropic_to_the_cap() -> Reply:
    """An Anthropic stream that ends `stop_reason: max_tokens` (passed on as it came)."""
    def ev(name: str, obj: dict) -> bytes:
        return f"event: {name}\ndata: {json.dumps(obj)}\n\n".encode()
    return Reply.sse([
        ev("message_start", {"type": "message_start", "message": {
            "id": "msg_cap01", "type": "message", "role": "assistant", "model": "claude-opus-4-8", "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 900, "output_tokens": 1}}}),
        ev("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ev("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": TEXT}}),
        ev("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ev("message_delta", {"type": "message_delta", "delta": {"stop_reason": "max_tokens", "stop_sequence": None},
                             "usage": {"output_tokens": 512}}),
        ev("message_stop", {"type": "message_stop"})], delay=0.02)


def tk(*args: str) -> str:
    p = subprocess.run([str(BIN / "tokunseba"), *args], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_claude_code_told_end_turn_for_a_reply_the_endpoints_cap_cut_and_every_view_marks_it(tmp_path):
    (tmp_path / "web").mkdir()
    with Mitmweb.serving(tmp_path / "web", RULES, {"TK_CAP_EP_KEY": EP_KEY}) as web:
        web.upstream.script(to_the_cap("chatcmpl-cap"))  # every request: to the cap
        p, took = run_claude(web, tmp_path, "say hi")
        res = result_json(p)
        assert p.returncode == 0 and res["is_error"] is False, (p.stdout[-2000:], p.stderr[-2000:])
        assert res["result"] == TEXT  # printed as the model wrote it
        sent = [r for r in web.upstream.requests if r.path.endswith("/chat/completions")]
        assert len(sent) == 1, [r.json()["messages"][-1] for r in sent]  # no continuation turn
        assert sent[0].json()["max_completion_tokens"] == 512  # the endpoint's cap, in place of Claude Code's

        def flow():
            fl = [f for f in web.flows() if f["request"]["path"].startswith("/v1/messages") and f.get("comment")]
            return fl[0] if fl else None
        f = poll(flow, "the turn's flow comment in mitmweb")
        ledger = web.ledger
        console = web.log()
    print(f"Claude Code told end_turn: rc {p.returncode}, {len(sent)} request, {took:.1f} s")
    (turn,) = json.loads(tk("log", "--ledger", str(ledger), "--json"))
    assert (turn["outcome"], turn["status"], turn["error"]) == ("capped", 200, None)
    rid = turn["request_id"]
    assert f["marked"] == emoji[MARKS["capped"]] == "✂"
    assert f["comment"].startswith(f"✂️ capped 200: cut by endpoint local's cap (max_tokens 512; the client asked for "
                                   f"") and f" · {rid} · " in f["comment"], f["comment"]
    st = json.loads(tk("stats", "--ledger", str(ledger), "--json"))
    assert (st["turns"], st["served"], st["capped"], st["translated"], st["errors"]) == (1, 1, 1, 0, 0)
    assert "capped 1: cut by the endpoint's cap" in tk("stats", "--ledger", str(ledger))
    row = next(ln for ln in tk("log", "--ledger", str(ledger)).splitlines() if rid in ln)
    assert " capped " in row and " translated " not in row
    explain = tk("explain", rid, "--ledger", str(ledger))
    assert "stop reason  max_tokens" in explain  # the endpoint's own, as it came
    assert "told client  stop_reason max_tokens -> end_turn (the endpoint's cap, max_tokens 512, ended the reply; " \
           "the client asked for " in explain, explain
    assert "everything-local → local (openai) · capped" in explain
    assert f"{rid} the reply was cut by endpoint local's cap" in console and "the client was told end_turn" in console


def test_claude_code_told_max_tokens_sends_continuation_turns_into_the_same_cap(tmp_path):
    """Why the client is told end_turn: told `max_tokens` (a same-protocol endpoint, the reply
    passed on as it came), Claude Code asks the model to go on ("Output token limit hit. Resume
    directly…"), again and again into the same cap, and then fails."""
    (tmp_path / "web").mkdir()
    with Mitmweb.serving(tmp_path / "web", SAME_PROTOCOL_RULES, {"TK_CAP_EP_KEY": EP_KEY}) as web:
        web.upstream.script(anthropic_to_the_cap())
        p, took = run_claude(web, tmp_path, "say hi", timeout=300)
        sent = [r for r in web.upstream.requests if r.path.split("?")[0].endswith("/v1/messages")]
        resumed = [r for r in sent if "Output token limit hit" in r.body.decode("utf-8", "replace")]
    print(f"Claude Code told max_tokens: rc {p.returncode}, {len(sent)} requests ({len(resumed)} continuation), "
          f"{took:.1f} s; result {result_json(p).get('result')!r}")
    assert p.returncode == 1 and len(sent) > 1 and resumed, (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    assert "output token maximum" in result_json(p)["result"]


# ---------------------------------------------------------------- Codex (Responses)

CODEX_RULES = """\
endpoints:
  target:
    {endpoint}
    key_env: TK_CAP_EP_KEY
routes:
  - name: codex-capped
    when: {{client: openai-responses}}
    to: target
"""


def _codex_through(tmp_path: Path, endpoint: str, reply: Reply, prompt: str = "say hi"):
    """Codex (its default model) through a real mitmdump to ``endpoint`` (a scripted upstream
    answering every request with ``reply``): (the run, the requests, the ledger, seconds)."""
    from .conftest import Mitmdump
    from .test_codex_e2e import codex_exec
    from tests.support.upstream import Upstream

    need_npm_tool("codex", "Codex")
    with Upstream() as up:
        rules = tmp_path / "rules.yaml"
        rules.write_text(CODEX_RULES.format(endpoint=endpoint.format(url=up.url)))
        m = Mitmdump(tmp_path, rules, env={"TK_CAP_EP_KEY": EP_KEY})
        try:
            up.script(reply)
            t0 = time.monotonic()
            p, _ = codex_exec(m, tmp_path, prompt, timeout=240)
            took = time.monotonic() - t0
            sent = [r for r in up.requests if r.method == "POST"]
        finally:
            m.stop()
    return p, sent, m.ledger, took


def _responses_to_the_cap(event: str = "response.completed") -> Reply:
    """A Responses stream that ends ``status: incomplete`` (``max_output_tokens``), as a Responses
    endpoint's own encoder writes it (its terminal event ``response.completed``), or under
    ``event`` (``response.incomplete``: OpenAI's own)."""
    from tokunseba import translate as tr
    from tokunseba.neutral.events import BlockDelta, BlockStart, BlockStop, MessageStart, MessageStop
    from tokunseba.neutral.report import ReplyReport
    from tokunseba.neutral.usage import Usage

    enc = tr.CODECS["openai-responses"].stream_encoder(ReplyReport(), True, 1767225600)
    events = [MessageStart("resp_cap01", "gpt-cap"), BlockStart(0, "text"), BlockDelta(0, TEXT), BlockStop(0),
              MessageStop("max_tokens", None, Usage("openai", {"prompt_tokens": 900, "completion_tokens": 256}))]
    pieces = [b for b in (enc.encode(e) for e in events) if b]
    assert b'"status":"incomplete"' in pieces[-1]
    return Reply.sse([pc.replace(b"response.completed", event.encode()) for pc in pieces], delay=0.01)


def test_codex_told_completed_for_a_reply_the_endpoints_cap_cut(tmp_path):
    """Codex names no output limit: the endpoint's max_tokens is the turn's, and a reply run to
    it is told `completed` (never `incomplete`): one request, the reply printed, exit 0."""
    chat = "protocol: openai\n    url: {url}/v1\n    max_tokens: 256\n    model: local-model"
    p, sent, ledger, took = _codex_through(tmp_path, chat, to_the_cap("chatcmpl-codexcap"))
    print(f"Codex told completed: rc {p.returncode}, {len(sent)} requests, {took:.1f} s, stdout {p.stdout[-200:]!r}")
    assert p.returncode == 0 and TEXT in p.stdout, (p.stdout[-2000:], p.stderr[-3000:])
    assert len(sent) == 1 and sent[0].json()["max_completion_tokens"] == 256
    turns = json.loads(tk("log", "--ledger", str(ledger), "--json"))
    assert [t["outcome"] for t in turns] == ["capped"]
    assert "the client named no limit" in tk("explain", turns[0]["request_id"], "--ledger", str(ledger))


@pytest.mark.parametrize("event", ["response.completed", "response.incomplete"])
def test_codex_told_incomplete(tmp_path, event):
    """What Codex does with `status: incomplete` (a same-protocol endpoint: the reply goes on as it
    came): measured for the docs, under the terminal event tokunseba's Responses encoder writes
    (``response.completed``) and under OpenAI's own (``response.incomplete``)."""
    responses = "protocol: openai-responses\n    url: {url}/v1"
    p, sent, _, took = _codex_through(tmp_path, responses, _responses_to_the_cap(event))
    print(f"Codex told incomplete under {event}: rc {p.returncode}, {len(sent)} requests, {took:.1f} s, "
          f"stdout {p.stdout[-200:]!r}, stderr tail {p.stderr[-600:]!r}")
    assert len(sent) == 1  # no retry, no continuation
    if event == "response.completed":  # read as done: the reply printed, exit 0
        assert p.returncode == 0 and TEXT in p.stdout, (p.stdout[-2000:], p.stderr[-3000:])
    else:  # a failed turn: nothing printed, exit 1
        assert p.returncode == 1 and TEXT not in p.stdout, (p.stdout[-2000:], p.stderr[-3000:])
        assert "Incomplete response returned, reason: max_output_tokens" in p.stderr


# ---------------------------------------------------------------- Gemini CLI

GEMINI_RULES = """\
endpoints:
  target:
    {endpoint}
    key_env: TK_CAP_EP_KEY
routes:
  - name: gemini-capped
    when: {{client: gemini}}
    to: target
"""


def _gemini_through(tmp_path: Path, endpoint: str, reply: Reply):
    """Gemini CLI (`-m cli-model -p`: no router call) through a real mitmdump to ``endpoint``, a
    scripted upstream answering every request with ``reply``: (the run, the requests, the ledger, seconds)."""
    from .conftest import Mitmdump
    from .test_gemini_e2e import run_gemini_cli
    from tests.support.upstream import Upstream

    with Upstream() as up:
        rules = tmp_path / "rules.yaml"
        rules.write_text(GEMINI_RULES.format(endpoint=endpoint.format(url=up.url)))
        m = Mitmdump(tmp_path, rules, env={"TK_CAP_EP_KEY": EP_KEY})
        try:
            up.script(reply)
            t0 = time.monotonic()
            p = run_gemini_cli(m, tmp_path, "say hi", timeout=240)
            took = time.monotonic() - t0
            sent = [r for r in up.requests if r.method == "POST"]
        finally:
            m.stop()
    return p, sent, m.ledger, took


def _gemini_to_the_cap() -> Reply:
    """A Gemini stream that ends ``finishReason: MAX_TOKENS``, as a Gemini endpoint's own encoder writes it."""
    from tokunseba import translate as tr
    from tokunseba.neutral.events import BlockDelta, BlockStart, BlockStop, MessageStart, MessageStop
    from tokunseba.neutral.report import ReplyReport
    from tokunseba.neutral.usage import Usage

    enc = tr.CODECS["gemini"].stream_encoder(ReplyReport(), True, 1767225600)
    events = [MessageStart("gemresp-cap", "cli-model"), BlockStart(0, "text"), BlockDelta(0, TEXT), BlockStop(0),
              MessageStop("max_tokens", None, Usage("openai", {"prompt_tokens": 900, "completion_tokens": 256}))]
    pieces = [b for b in (enc.encode(e) for e in events) if b]
    assert b"MAX_TOKENS" in b"".join(pieces)
    return Reply.sse(pieces, delay=0.01)


def test_gemini_cli_told_stop_for_a_reply_the_endpoints_cap_cut(tmp_path):
    chat = "protocol: openai\n    url: {url}/v1\n    max_tokens: 256\n    model: local-model"
    p, sent, ledger, took = _gemini_through(tmp_path, chat, to_the_cap("chatcmpl-gemcap"))
    print(f"Gemini CLI told STOP: rc {p.returncode}, {len(sent)} requests, {took:.1f} s, stdout {p.stdout[-200:]!r}")
    assert p.returncode == 0 and TEXT in p.stdout and len(sent) == 1, (p.stdout[-2000:], p.stderr[-3000:])
    assert [t["outcome"] for t in json.loads(tk("log", "--ledger", str(ledger), "--json"))] == ["capped"]


def test_gemini_cli_told_max_tokens(tmp_path):
    """What Gemini CLI does with `finishReason: MAX_TOKENS` (a same-protocol endpoint: passed on
    as it came): measured for the docs."""
    gem = "protocol: gemini\n    url: {url}/v1beta"
    p, sent, _, took = _gemini_through(tmp_path, gem, _gemini_to_the_cap())
    print(f"Gemini CLI told MAX_TOKENS: rc {p.returncode}, {len(sent)} requests, {took:.1f} s, "
          f"stdout {p.stdout[-300:]!r}, stderr tail {p.stderr[-600:]!r}")
    assert p.returncode == 0 and TEXT in p.stdout and len(sent) == 1, (p.stdout[-2000:], p.stderr[-3000:])
