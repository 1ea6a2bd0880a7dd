"""Issue 19 with the real local model: llama-server started by scripts/localmodel.sh with one
slot (``-np 1``) behind an endpoint with ``max_concurrency: 1``, and a second route to a
scripted Chat upstream. Two Claude Code runs at once: the one that finds the local slot
taken spills to the next route; both are answered and every turn is recorded."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import threading
import time

import pytest

from .conftest import Mitmdump, ledger_settled
from .test_claude_code_e2e import result_json, run_claude
from .test_localmodel_e2e import _start, _stop
from .test_proxy_e2e import chat_chunk
from tests.support.upstream import Reply, Upstream

pytestmark = [pytest.mark.e2e, pytest.mark.localmodel]

RULES = """\
endpoints:
  llama:
    protocol: openai
    url: {llama}
    model: gemma-3-270m
    max_tokens: 512
    max_tokens_field: max_tokens
    stop: ["<|im_end|>"]
    max_concurrency: 1       # llama-server -np 1: one turn at a time
  spill:
    protocol: openai
    url: {spill}/v1
routes:
  - name: local-first
    when: {{client: anthropic}}
    to: llama
  - name: spill
    when: {{client: anthropic}}
    to: spill
"""


def test_two_claude_code_runs_at_once_one_spills(tmp_path):
    state = tmp_path / "localmodel-state"
    state.mkdir()
    llama = _start("llama-server", state)
    try:
        with Upstream() as spill:
            cid = "chatcmpl-spilled"
            spill.script(Reply.sse([chat_chunk(cid, {"role": "assistant", "content": ""}),
                                    chat_chunk(cid, {"content": "hi from the spill route"}), chat_chunk(cid, {}, "stop"),
                                    chat_chunk(cid, usage={"prompt_tokens": 9, "completion_tokens": 5,
                                                           "total_tokens": 14}, choices=False),
                                    b"data: [DONE]\n\n"], delay=0.05))
            rules = tmp_path / "rules.yaml"
            rules.write_text(RULES.format(llama=llama, spill=spill.url))
            (tmp_path / "proxy").mkdir()
            proxy = Mitmdump(tmp_path / "proxy", rules)
            try:
                done: dict[int, subprocess.CompletedProcess] = {}

                def claude(i: int) -> None:
                    (tmp_path / f"cc{i}").mkdir()
                    done[i] = run_claude(proxy, tmp_path / f"cc{i}", "say hi", timeout=400)

                first = threading.Thread(target=claude, args=(1,))
                first.start()
                # the first run's turn holds the local slot: wait until it is in flight there
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline:
                    con = sqlite3.connect(proxy.ledger)
                    try:
                        busy = con.execute("SELECT count(*) FROM turns WHERE outcome IS NULL AND endpoint = 'llama'"
                                           ).fetchone()[0]
                    except sqlite3.OperationalError:
                        busy = 0
                    finally:
                        con.close()
                    if busy:
                        break
                    time.sleep(0.05)
                claude(2)
                first.join(400)
                for i in (1, 2):
                    res = result_json(done[i])
                    assert done[i].returncode == 0 and res["is_error"] is False, (i, res.get("result"),
                                                                                  done[i].stderr[-2000:])
                assert "hi from the spill route" in {result_json(done[i])["result"] for i in (1, 2)}
                ledger_settled(proxy.ledger)
                con = sqlite3.connect(proxy.ledger)
                con.row_factory = sqlite3.Row
                turns = [dict(r) for r in con.execute("SELECT endpoint, outcome, status, trace FROM turns")]
                con.close()
                assert all(t["outcome"] == "translated" and t["status"] == 200 for t in turns), turns
                assert {t["endpoint"] for t in turns} == {"llama", "spill"}
                spilled = [t for t in turns if t["endpoint"] == "spill"]
                assert all(json.loads(t["trace"])[0]["unavailable"].startswith("full (1 of max_concurrency 1")
                           for t in spilled)
                assert len(spill.requests) == len(spilled)
            finally:
                proxy.stop()
    finally:
        _stop("llama-server", state)
