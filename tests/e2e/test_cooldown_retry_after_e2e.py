"""A cooled endpoint is said with its retry-after, end to end: a real mitmdump, a scripted
upstream on loopback, the official anthropic SDK (and a raw Chat client).

A route with ``on_failure: error`` whose endpoint answered a 429 or 503 with a hint
(``retry-after`` seconds, ``retry-after-ms``, or a used-up rate limit's reset) cools that
endpoint; the next turns are answered 503 in the client's protocol without asking it, and
that 503 now carries ``retry-after: <seconds left, rounded up>``, so that a client (the
SDKs honour it) waits instead of asking again at once into the same 503.
"""

from __future__ import annotations

import json
import math
import sqlite3
import ssl
import time

import anthropic
import httpx
import pytest

from .conftest import Mitmdump, ledger_settled
from tests.support.upstream import Reply, Upstream

pytestmark = pytest.mark.e2e

KEYS = {"TK_SMALL_KEY": "sk-small-endpoint-0001"}
CLIENT_KEY = "sk-ant-client-DO-NOT-LEAK"

RULES = """\
endpoints:
  small:
    protocol: openai
    url: {small}/v1
    key_env: TK_SMALL_KEY
    max_tokens: 256
routes:
  - name: easy
    when: {{model: ["claude-*", "gpt-*"]}}
    to: small
    on_failure: error
unmatched: refuse
"""


def oai_err(msg: str, code: str | None = None) -> bytes:
    return json.dumps({"error": {"message": msg, "type": "server_error", "param": None, "code": code}}).encode()


def chat_reply(text: str) -> bytes:
    return json.dumps({"id": "chatcmpl-small", "object": "chat.completion", "created": 1767225600, "model": "small-m",
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": text}}],
                       "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}}).encode()


@pytest.fixture
def small():
    with Upstream() as up:
        yield up


def start(tmp_path, small: Upstream) -> Mitmdump:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES.format(small=small.url))
    return Mitmdump(tmp_path, rules, env=KEYS)


def sdk(proxy: Mitmdump, *, max_retries: int = 0, seen: list | None = None) -> anthropic.Anthropic:
    """The official anthropic SDK through the proxy (its CA trusted); ``seen`` collects every
    reply's (status, retry-after) as the SDK received it."""
    hooks = {"response": [lambda r: seen.append((r.status_code, r.headers.get("retry-after")))]} if seen is not None else {}
    http_client = anthropic.DefaultHttpxClient(proxy=proxy.url, timeout=30, event_hooks=hooks,
                                               verify=ssl.create_default_context(cafile=str(proxy.ca)))
    return anthropic.Anthropic(api_key=CLIENT_KEY, max_retries=max_retries, http_client=http_client)


def ask_raw(proxy: Mitmdump, protocol: str) -> httpx.Response:
    with httpx.Client(proxy=proxy.url, verify=ssl.create_default_context(cafile=str(proxy.ca)), timeout=30) as c:
        if protocol == "anthropic":
            return c.post("https://api.anthropic.com/v1/messages",
                          json={"model": "claude-x", "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]},
                          headers={"x-api-key": CLIENT_KEY, "anthropic-version": "2023-06-01"})
        return c.post("https://api.openai.com/v1/chat/completions",
                      json={"model": "gpt-x", "messages": [{"role": "user", "content": "hi"}]},
                      headers={"authorization": "Bearer sk-oai-client-DO-NOT-LEAK"})


# status, the hint's headers, the seconds it asks for
HINTS = {
    "429 retry-after seconds": (429, {"retry-after": "30"}, 30.0),
    "503 retry-after seconds": (503, {"retry-after": "25"}, 25.0),
    "429 retry-after-ms": (429, {"retry-after-ms": "20500"}, 20.5),
    "429 rate-limit reset": (429, {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "12.5s"}, 12.5),
}


@pytest.mark.parametrize("hint", sorted(HINTS))
def test_a_cooling_endpoints_503_says_retry_after_the_seconds_left(tmp_path, small, hint):
    status, headers, asked = HINTS[hint]
    proxy = start(tmp_path, small)
    try:
        small.script(Reply(status, {"content-type": "application/json", **headers}, [oai_err("slow down")]),
                     Reply(200, {"content-type": "application/json"}, [chat_reply("never")]))
        t0 = time.monotonic()
        first = ask_raw(proxy, "anthropic")  # on_failure: error: the client gets the endpoint's failure
        t1 = time.monotonic()
        assert first.status_code >= 400 and "slow down" in first.text
        assert len(small.requests) == 1

        client = sdk(proxy)
        t2 = time.monotonic()
        with pytest.raises(anthropic.APIStatusError) as caught:
            client.messages.create(model="claude-x", max_tokens=50, messages=[{"role": "user", "content": "hi"}])
        t3 = time.monotonic()
        e = caught.value
        assert e.status_code == 503, e
        assert len(small.requests) == 1  # cooling: not asked
        said = e.response.headers.get("retry-after")
        assert said is not None and said.isdigit(), dict(e.response.headers)
        # the cooldown began while the first turn was answered (between t0 and t1) and was read
        # while the second was (between t2 and t3): the seconds left, rounded up, lie between
        low, high = math.ceil(asked - (t3 - t0)), math.ceil(asked - (t2 - t1))
        assert low <= int(said) <= high, (said, low, high)
        # the 503 is in the client's protocol (Anthropic's envelope) and says why
        body = e.response.json()
        assert body["type"] == "error" and "cooling down" in body["error"]["message"], body
        assert e.response.headers.get("x-tokunseba-request-id", "").startswith("tk-")

        # a Chat client of the same route is told the same, in its own envelope
        t4 = time.monotonic()
        r = ask_raw(proxy, "openai")
        t5 = time.monotonic()
        assert r.status_code == 503 and "cooling down" in r.json()["error"]["message"], r.text
        said = r.headers.get("retry-after")
        assert said is not None and math.ceil(asked - (t5 - t0)) <= int(said) <= math.ceil(asked - (t4 - t1))
        assert len(small.requests) == 1
        # recorded: the endpoint's failure, then two turns answered 503 while it cooled (waited for
        # by request id: the writer may not have written a turn's start yet)
        rids = [x.headers["x-tokunseba-request-id"] for x in (first, e.response, r)]
        ledger_settled(proxy.ledger, 20.0, *rids)
        con = sqlite3.connect(proxy.ledger)
        try:
            turns = con.execute("SELECT outcome, status, endpoint, error FROM turns ORDER BY started_at").fetchall()
        finally:
            con.close()
        assert [(o, s, ep) for o, s, ep, _ in turns][1:] == [("error", 503, "small")] * 2, turns
        assert all("cooling down" in err for *_, err in turns[1:]), turns
    finally:
        proxy.stop()


def test_the_sdk_waits_the_retry_after_and_its_retry_is_answered(tmp_path, small):
    """The anthropic SDK (max_retries=1) honours the header: it waits the seconds said and
    retries once the endpoint has cooled, and that retry is answered by the endpoint."""
    proxy = start(tmp_path, small)
    try:
        small.script(Reply(429, {"content-type": "application/json", "retry-after-ms": "1500"}, [oai_err("slow down")]),
                     Reply(200, {"content-type": "application/json"}, [chat_reply("cooled and answered")]))
        assert ask_raw(proxy, "anthropic").status_code == 429
        seen: list = []
        client = sdk(proxy, max_retries=1, seen=seen)
        msg = client.messages.create(model="claude-x", max_tokens=50, messages=[{"role": "user", "content": "hi"}])
        assert msg.content[0].text == "cooled and answered"
        # what the SDK saw: the 503 with retry-after (1.5 s cooldown, read after it began: 1 or 2
        # whole seconds), then, after waiting that long, the endpoint's answer
        assert [s for s, _ in seen] == [503, 200], seen
        assert seen[0][1] in ("1", "2"), seen
        assert len(small.requests) == 2
    finally:
        proxy.stop()
