"""Cache intent across protocols, end to end (issue 32): a real mitmdump with the addon on a free
loopback port; Codex-shaped turns (the openai SDK streaming Responses turns of one session, the
second answering the first's tool call) routed to scripted Anthropic upstreams that bill prompt
caching like Anthropic (tests/support/cache_billing.py).

- to the endpoint with ``cache: auto`` the turns carry breakpoints on their stable prefix; the
  first turn writes the cache, the second reads it: the client sees ``cached_tokens`` and the
  ledger stores the cache read and write as reported;
- to the same upstream without the option nothing is placed and nothing is read;
- a third turn whose instructions were edited reads less: ``explain`` names the block where its
  prefix first changed (``system[0]``), and ``stats`` shows the share of input read from cache.
"""

from __future__ import annotations

import copy
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import openai
import pytest

from tests.support.cache_billing import AnthropicCache
from tests.conftest import load_fixture

from .conftest import Mitmdump, ledger_settled
from tests.support.upstream import Recorded, Reply, Upstream

RULES = """\
endpoints:
  claude-cached: {{protocol: anthropic, url: "{cached}/v1", max_tokens: 1024, cache: auto}}
  claude-plain: {{protocol: anthropic, url: "{plain}/v1", max_tokens: 1024}}
routes:
  - name: cached
    when: {{client: openai-responses, model: "cached-*"}}
    to: claude-cached
    model: claude-sonnet-4-6
  - name: plain
    when: {{client: openai-responses}}
    to: claude-plain
    model: claude-sonnet-4-6
unmatched: refuse
"""


def sse(event: str, data: dict) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


class Billing:
    """An Anthropic upstream whose stream reports the usage its cache bills for the request."""

    def __init__(self) -> None:
        self.cache = AnthropicCache()

    def __call__(self, rec: Recorded) -> Reply:
        usage = {**self.cache.bill(rec.json()), "output_tokens": 1}
        return Reply.sse([
            sse("message_start", {"type": "message_start", "message": {
                "id": "msg_c", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6", "content": [],
                "stop_reason": None, "stop_sequence": None, "usage": usage}}),
            sse("content_block_start", {"type": "content_block_start", "index": 0,
                                        "content_block": {"type": "text", "text": ""}}),
            sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                        "delta": {"type": "text_delta", "text": "done"}}),
            sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
            sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                                  "usage": {"output_tokens": 1}}),
            sse("message_stop", {"type": "message_stop"})])


@pytest.fixture(scope="module")
def ups():
    with Upstream() as cached, Upstream() as plain:
        cached.responder, plain.responder = Billing(), Billing()
        yield {"cached": cached, "plain": plain}


@pytest.fixture(scope="module")
def proxy(ups, tmp_path_factory):
    work = tmp_path_factory.mktemp("cache-proxy")
    rules = work / "rules.yaml"
    rules.write_text(RULES.format(cached=ups["cached"].url, plain=ups["plain"].url))
    m = Mitmdump(work, rules)
    yield m
    m.stop()


@pytest.fixture
def client(proxy, monkeypatch):
    for k, v in proxy.client_env().items():
        monkeypatch.setenv(k, v)
    for k in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(k, raising=False)
    return openai.OpenAI(api_key="sk-codex-client-cache-SECRET", max_retries=0)


def session_turns(model: str) -> list[dict]:
    """Two turns of one Codex session (its own request fixture): before and after its tool call."""
    second = load_fixture("codex-responses-gpt55-tool-followup.json")["body"]
    second = {k: v for k, v in second.items() if k not in ("stream",)}
    second["model"] = model
    first = copy.deepcopy(second)
    first["input"] = [i for i in first["input"] if i.get("type", "message") == "message"]
    return [first, second]


def run_turn(client, body: dict) -> tuple[dict, str]:
    """One streamed turn: the usage the client saw and the request id."""
    kwargs = {k: v for k, v in body.items() if k not in ("model", "input")}
    extra = {k: kwargs.pop(k) for k in list(kwargs) if k in ("client_metadata",)}
    with client.responses.with_streaming_response.create(model=body["model"], input=body["input"], stream=True,
                                                         extra_body=extra or None, **kwargs) as raw:
        rid = raw.headers["x-tokunseba-request-id"]
        done = [e for e in raw.parse() if e.type == "response.completed"]
    return done[-1].response.usage.model_dump(), rid


def ledger_usage(proxy: Mitmdump, rid: str) -> tuple:
    ledger_settled(proxy.ledger, 20.0, rid)
    with sqlite3.connect(proxy.ledger) as db:
        return db.execute("SELECT usage_cache_read, usage_cache_write, usage_input FROM turns WHERE request_id = ?",
                          (rid,)).fetchone()


def breakpoints(rec: Recorded) -> int:
    body = rec.json()
    n = sum("cache_control" in t for t in body.get("tools") or ())
    n += sum("cache_control" in b for b in body["system"]) if isinstance(body.get("system"), list) else 0
    return n + sum("cache_control" in b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"])


def test_codex_turns_to_anthropic_with_cache_auto_read_the_cache_from_the_second_turn(client, proxy, ups):
    first, second = session_turns("cached-gpt-5.5")
    u1, r1 = run_turn(client, first)
    u2, r2 = run_turn(client, second)
    recs = ups["cached"].requests[-2:]
    assert [breakpoints(r) for r in recs] == [4, 4]  # tools, system, the last turn, the previous user turn
    assert u1["input_tokens_details"]["cached_tokens"] == 0
    assert u2["input_tokens_details"]["cached_tokens"] > 0.8 * u2["input_tokens"]  # most of it read from cache
    read1, write1, _ = ledger_usage(proxy, r1)
    read2, write2, input2 = ledger_usage(proxy, r2)
    assert (read1, read2) == (0, u2["input_tokens_details"]["cached_tokens"]) and write1 > 0
    assert input2 + read2 + write2 == u2["input_tokens"]  # Anthropic's parts; the client's input includes them


def test_the_same_turns_without_the_option_read_nothing(client, proxy, ups):
    for body in session_turns("gpt-5.5"):
        usage, rid = run_turn(client, body)
        assert usage["input_tokens_details"]["cached_tokens"] == 0
        assert ledger_usage(proxy, rid)[:2] == (0, 0)
    assert [breakpoints(r) for r in ups["plain"].requests[-2:]] == [0, 0]


def tokunseba(proxy: Mitmdump, *args: str) -> str:
    out = subprocess.run([str(Path(sys.executable).parent / "tokunseba"), *args, "--ledger", str(proxy.ledger)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_explain_names_the_block_that_changed_when_the_system_prompt_is_edited_mid_session(client, proxy, ups):
    first, second = session_turns("cached-gpt-5.5")
    run_turn(client, first)
    run_turn(client, second)
    third = copy.deepcopy(second)
    dev = third["input"][0]  # Codex's first developer message: the system prompt's first part
    dev["content"][0]["text"] = "Edited mid-session. " + dev["content"][0]["text"]
    usage, rid = run_turn(client, third)
    read, write, _ = ledger_usage(proxy, rid)
    assert 0 < read < write  # the tools were still read; the rest written again
    said = tokunseba(proxy, "explain", rid)
    assert "read less than the previous turn of the session left cached" in said
    assert "the prefix first changed at system[0]" in said, said
    facts = json.loads(tokunseba(proxy, "explain", rid, "--json"))["cache"]
    assert facts["changed"]["now"] == "system[0]" and facts["read"] == read
    stats = tokunseba(proxy, "stats")
    assert "INPUT FROM CACHE" in stats
    line = next(x for x in stats.splitlines() if x.startswith("claude-cached"))
    assert line.rstrip().endswith("%")


class CodexSession:
    """An Anthropic upstream that bills like Anthropic and plays one Codex session: the first
    request gets a call of Codex's namespaced ``clock`` ``sleep``, the next the final text."""

    def __init__(self) -> None:
        self.cache, self.n = AnthropicCache(), 0

    def __call__(self, rec: Recorded) -> Reply:
        usage = {**self.cache.bill(rec.json()), "output_tokens": 1}
        self.n += 1
        start = sse("message_start", {"type": "message_start", "message": {
            "id": f"msg_s{self.n}", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
            "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage}})
        if self.n == 1:
            block = [sse("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {
                         "type": "tool_use", "id": "toolu_cache_sleep1", "name": "clock__sleep", "input": {}}}),
                     sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {
                         "type": "input_json_delta", "partial_json": '{"duration_ms": 10}'}})]
            stop = "tool_use"
        else:
            block = [sse("content_block_start", {"type": "content_block_start", "index": 0,
                                                 "content_block": {"type": "text", "text": ""}}),
                     sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                 "delta": {"type": "text_delta", "text": "Slept, cached."}})]
            stop = "end_turn"
        return Reply.sse([start, *block, sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
                          sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop,
                                                "stop_sequence": None}, "usage": {"output_tokens": 1}}),
                          sse("message_stop", {"type": "message_stop"})])


@pytest.mark.claudecode
@pytest.mark.parametrize("cache", ["auto", "off"])
def test_the_real_codex_session_routed_to_anthropic_reads_its_cache_only_with_cache_auto(tmp_path, cache):
    """The real Codex, default model: a turn and its tool loop's next request, routed to a
    scripted Anthropic upstream that bills caching like Anthropic. With ``cache: auto`` the
    second request reads the prefix the first wrote (the ledger keeps the read as reported);
    without it both pay their whole input."""
    from .test_codex_default_e2e import run_codex

    with Upstream() as up:
        up.responder = CodexSession()
        rules = tmp_path / "rules.yaml"
        rules.write_text("endpoints:\n  claude:\n    protocol: anthropic\n    url: " + up.url + "/v1\n"
                         "    max_tokens: 1024\n    cache: " + cache + "\nroutes:\n  - name: codex-to-claude\n"
                         "    when: {client: openai-responses}\n    to: claude\n    model: claude-sonnet-4-6\n")
        m = Mitmdump(tmp_path, rules)
        try:
            p, _ = run_codex(m, tmp_path, "sleep a little")
            ledger_settled(m.ledger)
        finally:
            m.stop()
        assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-3000:])
        assert "Slept, cached." in p.stdout
        posts = [r for r in up.requests if r.method == "POST"]
        assert len(posts) == 2
    with sqlite3.connect(m.ledger) as db:
        rows = db.execute("SELECT usage_cache_read, usage_cache_write FROM turns WHERE client_protocol = "
                          "'openai-responses' ORDER BY started_at").fetchall()
    assert len(rows) == 2
    if cache == "auto":
        assert [breakpoints(r) > 0 for r in posts] == [True, True]
        assert not rows[0][0] and rows[0][1] > 0  # the first writes
        assert rows[1][0] > 0  # the second reads what the first wrote
    else:
        assert [breakpoints(r) for r in posts] == [0, 0]
        assert all(not read for read, _ in rows)
