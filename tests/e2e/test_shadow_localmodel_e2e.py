"""Issue 12 with the real local model: the easy-turns example with a shadow-only route for the
main turns produces shadow rows answered by llama-server (Gemma 3 270M). Skipped when
scripts/localmodel.sh has not built it; fails under CI=true, as the other local-model tests.
Assertions are on structure and on usage as the server reported it, never on model text."""

from __future__ import annotations

import json
import sqlite3
import time

import httpx
import pytest

from ..conftest import load_fixture
from .conftest import ROOT, Mitmdump
from .test_localmodel_e2e import CLIENT_KEY, WEATHER, _start, _stop
from tests.support.upstream import Reply, Upstream

pytestmark = [pytest.mark.e2e, pytest.mark.localmodel]

COMMENTED = "  # - name: main-turns\n  #   when:\n  #     client: anthropic\n  #   shadow: local\n"
ANT_SSE = (b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_main","type":"message",'
           b'"role":"assistant","model":"claude-opus-4-8","content":[],"stop_reason":null,"stop_sequence":null,'
           b'"usage":{"input_tokens":10,"output_tokens":1}}}\n\n'
           b'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n'
           b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"ok"}}\n\n'
           b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
           b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},'
           b'"usage":{"output_tokens":2}}\n\n'
           b'event: message_stop\ndata: {"type":"message_stop"}\n\n')


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    state = tmp_path_factory.mktemp("shadow-localmodel-state")
    url = _start("llama-server", state)
    try:
        yield url
    finally:
        _stop("llama-server", state)


def test_easy_turns_example_with_shadowed_main_turns_records_llama_server_replies(llama, tmp_path):
    example = (ROOT / "rules" / "examples" / "easy-turns-local.yaml").read_text()
    rules = tmp_path / "easy-shadow.yaml"
    assert COMMENTED in example  # the example's own shadow route, uncommented
    rules.write_text(example.replace("http://127.0.0.1:28431/v1", llama).replace(COMMENTED, COMMENTED.replace("# ", "")))
    main = load_fixture("claude-code-print-main-turn.json")["body"]  # 48 KB: more than the 4096-token context
    small = {"model": "claude-sonnet-4-5", "max_tokens": 64, "stream": True, "tools": [WEATHER],
             "messages": [{"role": "user", "content": "What is the weather in Paris?"}]}
    with Upstream() as ant:
        ant.script(Reply.sse(ANT_SSE))
        m = Mitmdump(tmp_path, rules, extra=["--set", f"tokunseba_provider_hosts=127.0.0.1:{ant.port}=anthropic"])
        try:
            hdrs = {"x-api-key": CLIENT_KEY, "content-type": "application/json", "anthropic-version": "2023-06-01"}
            with httpx.Client(proxy=m.url, trust_env=False, timeout=120) as c:
                replies = [c.post(f"{ant.url}/v1/messages", content=json.dumps(b).encode(), headers=hdrs)
                           for b in (main, small)]
            ids = [r.headers["x-tokunseba-request-id"] for r in replies]
            deadline, rows = time.time() + 150, []
            while len(rows) < 2 and time.time() < deadline:
                time.sleep(0.5)
                con = sqlite3.connect(m.ledger)
                con.row_factory = sqlite3.Row
                rows = [dict(r) for r in con.execute("SELECT * FROM shadows ORDER BY id")]
                con.close()
        finally:
            m.stop()
        assert all(r.status_code == 200 and r.content == replies[0].content for r in replies)  # served as without
        assert len(ant.requests) == 2 and all(rec.headers["x-api-key"] == CLIENT_KEY for rec in ant.requests)
    by_id = {r["request_id"]: r for r in rows}
    assert set(by_id) == set(ids) and {r["kind"] for r in rows} == {"shadow"}
    assert all(r["endpoint"] == "local" and r["route"] == "main-turns" for r in rows)
    assert by_id[ids[0]]["status"] is not None, by_id[ids[0]]["error"]  # llama-server answered (4096-token context)
    small_row = by_id[ids[1]]
    assert small_row["status"] == 200 and small_row["error"] is None, small_row["error"]
    usage = json.loads(small_row["usage_reported"])  # as llama-server reported it
    assert small_row["usage_input"] == usage["prompt_tokens"] > 0 and small_row["usage_output"] == usage["completion_tokens"]
    comparison = json.loads(small_row["comparison"])
    assert comparison["compared"] and comparison["text"]["primary_chars"] == 2
    assert comparison["stop_reason"]["shadow"] in ("end_turn", "max_tokens", "tool_use")
