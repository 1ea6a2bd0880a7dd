"""The console says when the endpoint's own cap, not the client's, ended a reply (issue 31):
the real `tokunseba run`, a scripted Chat endpoint with `max_tokens: 8` that ends its stream
`finish_reason: length`, and a real Anthropic SDK client that asked for 1000, told `end_turn` (the
turn `capped`: issue 41); then the same endpoint ending `stop`: no such line."""

from __future__ import annotations

import json
import subprocess

import anthropic

from .conftest import BIN, ledger_settled
from .test_console_e2e import Run
from .test_proxy_e2e import CHAT_USAGE, chat_chunk
from tests.support.upstream import Reply, Upstream

import pytest

pytestmark = pytest.mark.e2e

RULES = """\
endpoints:
  small:
    protocol: openai
    url: {url}/v1
    max_tokens: 8
routes:
  - name: capped
    when: {{client: anthropic}}
    to: small
"""


def _stream(cid: str, finish: str) -> list[bytes]:
    return [chat_chunk(cid, {"role": "assistant", "content": ""}), chat_chunk(cid, {"content": "one two three"}),
            chat_chunk(cid, {}, finish), chat_chunk(cid, usage=CHAT_USAGE, choices=False), b"data: [DONE]\n\n"]


def test_the_console_says_the_endpoints_cap_ended_the_reply(tmp_path, monkeypatch):
    with Upstream() as up:
        rules = tmp_path / "rules.yaml"
        rules.write_text(RULES.format(url=up.url))
        run = Run(tmp_path, "--rules", str(rules))
        try:
            for k, v in {"HTTPS_PROXY": run.url, "NO_PROXY": "",
                         "SSL_CERT_FILE": str(run.conf / "mitmproxy-ca-cert.pem")}.items():
                monkeypatch.setenv(k, v)
            up.script(Reply.sse(_stream("chatcmpl-cap1", "length")), Reply.sse(_stream("chatcmpl-cap2", "stop")))
            c = anthropic.Anthropic(api_key="sk-ant-cap", max_retries=0)
            ids = []
            for _ in range(2):
                with c.messages.stream(model="claude-opus-4-8", max_tokens=1000,
                                       messages=[{"role": "user", "content": "count"}]) as s:
                    msg = s.get_final_message()
                    ids.append((s.response.headers["x-tokunseba-request-id"], msg.stop_reason))
            assert up.requests[0].json()["max_completion_tokens"] == 8  # the endpoint's cap was sent
            ledger_settled(run.ledger)
        finally:
            out = run.stop()
    (cut, cut_reason), (ended, ended_reason) = ids
    # the client's own limit (1000) was never reached: it is told the turn ended (issue 41), and the
    # ledger keeps the endpoint's max_tokens, with the conversion, under the outcome capped
    assert (cut_reason, ended_reason) == ("end_turn", "end_turn")
    turns = {t["request_id"]: t for t in json.loads(subprocess.run(
        [str(BIN / "tokunseba"), "log", "--ledger", str(run.ledger), "--json"], capture_output=True, text=True,
        timeout=60).stdout)}
    assert (turns[cut]["outcome"], turns[ended]["outcome"]) == ("capped", "translated")
    said = [ln for ln in out.splitlines() if "the reply was cut by endpoint" in ln]
    assert len(said) == 1 and said[0].endswith(
        f"tokunseba: {cut} the reply was cut by endpoint small's cap (max_tokens 8; the client asked for 1000), "
        "not by the client's own limit: the client was told end_turn. Give the endpoint stop strings "
        "that end its turns, or raise its max_tokens"), out
    assert ended not in said[0]
