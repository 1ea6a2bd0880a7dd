"""Keep-alives through a real mitmdump (issue 10 item 3): the official SDKs with a 3 s read
timeout against an upstream that stalls mid-stream for longer than that.

- silent for 5 s (after its first events), with the relay's keep-alive after 0.5 s of
  silence (``tokunseba_keepalive_s=0.5``): the relay's SSE comment reaches the client as its
  protocol's keep-alive (translated) or as the comment itself (retargeted);
- sending its own keep-alives every 1 s (Chat / Responses an SSE comment, Anthropic a
  ``ping``) with the relay's keep-alive off (``tokunseba_keepalive_s=0``): the upstream's
  keep-alives alone cross the translation.

Each way, for the anthropic, openai Chat and openai Responses clients, translated and
retargeted: the turn completes with the upstream's text, recorded as a clean turn."""

from __future__ import annotations

import sqlite3

import anthropic
import httpx2
import pytest

from .conftest import Mitmdump, ledger_settled
from .test_codex_e2e import responses_stream
from .test_crash_e2e import ant_text_stream
from .test_proxy_e2e import ant_client, chat_text_stream, oai_client
from tests.support.upstream import Reply, Upstream

pytestmark = pytest.mark.e2e

READ_TIMEOUT = 3.0
SILENCE = 5.0  # longer than the client's read timeout
UPSTREAM_BEAT = 1.0  # the upstream's own keep-alive period, shorter than it

RULES = """\
endpoints:
  oai:
    protocol: openai
    url: {url}/v1
    key_env: TK_TEST_OAI_KEY
  ant:
    protocol: anthropic
    url: {url}/v1
    key_env: TK_TEST_ANT_KEY
    max_tokens: 1024
  resp:
    protocol: openai-responses
    url: {url}/v1
    key_env: TK_TEST_OAI_KEY
routes:
  - name: ant-retarget
    when: {{client: anthropic, model: "retarget-*"}}
    to: ant
  - name: chat-retarget
    when: {{client: openai, model: "retarget-*"}}
    to: oai
  - name: resp-retarget
    when: {{client: openai-responses, model: "retarget-*"}}
    to: resp
  - name: a2o
    when: {{client: anthropic}}
    to: oai
  - name: o2a
    when: {{client: openai}}
    to: ant
  - name: r2o
    when: {{client: openai-responses}}
    to: oai
"""
KEYS = {"TK_TEST_OAI_KEY": "sk-endpoint-oai-0001", "TK_TEST_ANT_KEY": "sk-endpoint-ant-0002"}

# upstream protocol -> (its stream, its own keep-alive)
STREAMS = {
    "openai": (chat_text_stream("chatcmpl-KeepAlive", ("Hel", "lo ", "after ", "a stall")), b": keep-alive\n\n"),
    "anthropic": (ant_text_stream(4), b'event: ping\ndata: {"type": "ping"}\n\n'),
    "openai-responses": (responses_stream(["Hel", "lo ", "after ", "a stall"]), b": keep-alive\n\n"),
}
TEXT = {"openai": "Hello after a stall", "anthropic": "w0 w1 w2 w3 ", "openai-responses": "Hello after a stall"}
# (client, model) -> the upstream protocol its turn goes to, and the outcome
CASES = {
    ("anthropic", "claude-ka"): ("openai", "translated"),
    ("openai", "gpt-ka"): ("anthropic", "translated"),
    ("openai-responses", "gpt-ka"): ("openai", "translated"),
    ("anthropic", "retarget-ka"): ("anthropic", "retargeted"),
    ("openai", "retarget-ka"): ("openai", "retargeted"),
    ("openai-responses", "retarget-ka"): ("openai-responses", "retargeted"),
}


@pytest.fixture(scope="module")
def ka_upstream():
    with Upstream() as up:
        yield up


def _proxy(tmp_path_factory, up: Upstream, keepalive_s: str):
    work = tmp_path_factory.mktemp(f"ka{keepalive_s}")
    rules = work / "rules.yaml"
    rules.write_text(RULES.format(url=up.url))
    return Mitmdump(work, rules, env=KEYS, extra=["--set", f"tokunseba_keepalive_s={keepalive_s}"])


@pytest.fixture(scope="module")
def relay_ka_proxy(ka_upstream, tmp_path_factory):
    m = _proxy(tmp_path_factory, ka_upstream, "0.5")
    yield m
    m.stop()


@pytest.fixture(scope="module")
def no_relay_ka_proxy(ka_upstream, tmp_path_factory):
    m = _proxy(tmp_path_factory, ka_upstream, "0")
    yield m
    m.stop()


def _stalling(events: list[bytes], beats: list[bytes], silence: float = SILENCE) -> Reply:
    """The first two events, then silence (or ``beats``), then the rest (the upstream waits
    ``delay`` between pieces: one silence, not two)."""
    head, rest = b"".join(events[:2]), b"".join(events[2:])
    if beats:
        return Reply.sse([head] + beats + [rest], delay=UPSTREAM_BEAT)
    return Reply.sse([head, rest], delay=silence)


def _turn(client: str, model: str, proxy: Mitmdump, monkeypatch, read_timeout: float = READ_TIMEOUT) -> str:
    for k, v in proxy.client_env().items():
        monkeypatch.setenv(k, v)
    for k in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(k, raising=False)
    timeout = httpx2.Timeout(10.0, read=read_timeout)
    msgs = [{"role": "user", "content": "hi"}]
    if client == "anthropic":
        with ant_client(timeout=timeout).messages.stream(model=model, max_tokens=50, messages=msgs) as s:
            text = "".join(s.text_stream)
            assert s.get_final_message().stop_reason == "end_turn"
        return text
    if client == "openai":
        chunks = oai_client(timeout=timeout).chat.completions.create(model=model, messages=msgs, stream=True)
        return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    events = list(oai_client(timeout=timeout).responses.create(model=model, input="hi", stream=True))
    assert events[-1].type == "response.completed"
    return "".join(e.delta for e in events if e.type == "response.output_text.delta")


def _last_turn(proxy: Mitmdump) -> tuple:
    ledger_settled(proxy.ledger)
    con = sqlite3.connect(proxy.ledger)
    try:
        return con.execute("SELECT outcome, status, error FROM turns ORDER BY rowid DESC LIMIT 1").fetchone()
    finally:
        con.close()


@pytest.mark.parametrize("client, model", list(CASES))
def test_a_silent_upstream_is_kept_alive_by_the_relay(client, model, relay_ka_proxy, ka_upstream, monkeypatch):
    upstream, outcome = CASES[(client, model)]
    ka_upstream.script(_stalling(STREAMS[upstream][0], []))
    assert _turn(client, model, relay_ka_proxy, monkeypatch) == TEXT[upstream]
    assert _last_turn(relay_ka_proxy) == (outcome, 200, None)


@pytest.mark.parametrize("client, model", list(CASES))
def test_an_upstreams_own_keep_alives_cross_to_the_client(client, model, no_relay_ka_proxy, ka_upstream, monkeypatch):
    upstream, outcome = CASES[(client, model)]
    events, beat = STREAMS[upstream]
    ka_upstream.script(_stalling(events, [beat] * 4))
    assert _turn(client, model, no_relay_ka_proxy, monkeypatch) == TEXT[upstream]
    assert _last_turn(no_relay_ka_proxy) == (outcome, 200, None)


def test_without_keep_alives_the_client_times_out(no_relay_ka_proxy, ka_upstream, monkeypatch):
    """The scenario is real: with the relay's keep-alive off, a silent upstream trips the
    client's read timeout."""
    ka_upstream.script(_stalling(STREAMS["openai"][0], []))
    with pytest.raises((anthropic.APITimeoutError, httpx2.ReadTimeout)):  # mid-stream: the transport's own
        _turn("anthropic", "claude-ka", no_relay_ka_proxy, monkeypatch)


def test_at_full_scale_with_the_default_keep_alive(ka_upstream, tmp_path_factory, monkeypatch):
    """The issue's own figures, once, with no option set: an upstream silent for 45 s, a
    client whose read timeout is 20 s, the relay's default keep-alive (10 s). Claude Code's
    case: an Anthropic client translated to a Chat upstream. (The tests above prove every
    client and route with the times scaled down; this one proves the default.)"""
    work = tmp_path_factory.mktemp("ka-default")
    rules = work / "rules.yaml"
    rules.write_text(RULES.format(url=ka_upstream.url))
    proxy = Mitmdump(work, rules, env=KEYS)
    try:
        ka_upstream.script(_stalling(STREAMS["openai"][0], [], silence=45.0))
        assert _turn("anthropic", "claude-ka", proxy, monkeypatch, read_timeout=20.0) == TEXT["openai"]
        assert _last_turn(proxy) == ("translated", 200, None)
    finally:
        proxy.stop()
