"""Issue 19 end to end: a real mitmdump, scripted upstreams on loopback. An attempt that
fails before any byte reached the client (503, 429, 529, 500, a context-window error, a
reset, no status line within first_byte_timeout_s) moves the turn to the next route; a
plain 400 does not; retry-after keeps the endpoint out of the next turn; max_concurrency
spills a second concurrent turn to the next route; a failure after the first byte is an
error in the client's protocol, not retried; a client that goes away leaves no upstream
connection open. Clients: Anthropic Messages, Chat Completions, Responses and Gemini, as
raw HTTPS requests through the proxy (translated, or retargeted for Chat), whole and
streamed."""

from __future__ import annotations

import json
import select
import socket
import sqlite3
import ssl
import threading
import time

import httpx
import pytest
from pathlib import Path

from .conftest import Mitmdump, ledger_settled
from tests.support.upstream import Reply, Upstream, closed_port

pytestmark = pytest.mark.e2e

KEYS = {"TK_SMALL_KEY": "sk-small-endpoint-0001", "TK_BIG_KEY": "sk-big-endpoint-0002"}

RULES = """\
endpoints:
  small:
    protocol: openai
    url: {small}/v1
    key_env: TK_SMALL_KEY
    max_tokens: 256
{small_extra}
  big:
    protocol: openai
    url: {big}/v1
    key_env: TK_BIG_KEY
    max_tokens: 256
routes:
  - name: easy
    when: {{model: ["claude-*", "gpt-*", "gemini-*"]}}
    to: small
{easy_extra}
  - name: other
    when: {{model: "nothing-*"}}
    to: small
  - name: spill
    when: {{model: ["claude-*", "gpt-*", "gemini-*"]}}
    to: big
unmatched: refuse
"""


def chat_reply(cid: str, text: str = "ok") -> bytes:
    return json.dumps({"id": cid, "object": "chat.completion", "created": 1767225600, "model": "m",
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": text}}],
                       "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}}).encode()


def chat_stream(cid: str, text=("Hel", "lo")) -> list[bytes]:
    def chunk(delta, finish=None, usage=None, choices=True):
        obj = {"id": cid, "object": "chat.completion.chunk", "created": 1767225600, "model": "m",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}] if choices else []}
        if usage:
            obj["usage"] = usage
        return b"data: " + json.dumps(obj).encode() + b"\n\n"
    return ([chunk({"role": "assistant", "content": ""})] + [chunk({"content": t}) for t in text]
            + [chunk({}, "stop"), chunk({}, usage={"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
                                        choices=False), b"data: [DONE]\n\n"])


def whole_ok(cid):
    return Reply(200, {"content-type": "application/json"}, [chat_reply(cid)])


def stream_ok(cid, delay=0.0):
    return Reply.sse(chat_stream(cid), delay=delay)


OAI_ERR = lambda msg, code=None, etype="server_error": json.dumps(  # noqa: E731
    {"error": {"message": msg, "type": etype, "param": None, "code": code}}).encode()

FAILURES = {
    "503": lambda: Reply(503, {"content-type": "application/json"}, [OAI_ERR("Loading model")]),
    "429": lambda: Reply(429, {"content-type": "application/json"}, [OAI_ERR("Rate limit", "rate_limit_exceeded")]),
    "529": lambda: Reply(529, {"content-type": "application/json"},
                         [b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}']),
    "500": lambda: Reply(500, {"content-type": "text/html"}, [b"<html>boom</html>"]),
    "context-openai": lambda: Reply(400, {"content-type": "application/json"}, [OAI_ERR(
        "This model's maximum context length is 4096 tokens.", "context_length_exceeded", "invalid_request_error")]),
    "context-llama": lambda: Reply(400, {"content-type": "application/json"}, [json.dumps({"error": {
        "code": 400, "message": "the request exceeds the available context size, try increasing it",
        "type": "exceed_context_size_error", "n_prompt_tokens": 5000, "n_ctx": 4096}}).encode()]),
    "reset": Reply.reset,
}


@pytest.fixture
def ups():
    with Upstream() as small, Upstream() as big:
        yield small, big


def start(tmp_path, small, big, *, small_extra="", easy_extra="") -> Mitmdump:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES.format(small=small.url, big=big.url, small_extra=small_extra, easy_extra=easy_extra))
    return Mitmdump(tmp_path, rules, env=KEYS)


class Client:
    """Raw requests of each client protocol through the proxy (its CA trusted)."""

    def __init__(self, proxy: Mitmdump):
        self.proxy = proxy
        self.http = httpx.Client(proxy=proxy.url, verify=ssl.create_default_context(cafile=str(proxy.ca)), timeout=30)

    def ask(self, protocol: str, stream: bool, model: str | None = None):
        if protocol == "anthropic":
            body = {"model": model or "claude-x", "max_tokens": 50, "stream": stream,
                    "messages": [{"role": "user", "content": "hi"}]}
            return self.http.post("https://api.anthropic.com/v1/messages", json=body,
                                  headers={"x-api-key": "sk-ant-client-DO-NOT-LEAK", "anthropic-version": "2023-06-01"})
        if protocol == "openai":
            body = {"model": model or "gpt-x", "stream": stream, "messages": [{"role": "user", "content": "hi"}]}
            return self.http.post("https://api.openai.com/v1/chat/completions", json=body,
                                  headers={"authorization": "Bearer sk-oai-client-DO-NOT-LEAK"})
        if protocol == "openai-responses":
            body = {"model": model or "gpt-x", "stream": stream, "input": "hi"}
            return self.http.post("https://api.openai.com/v1/responses", json=body,
                                  headers={"authorization": "Bearer sk-oai-client-DO-NOT-LEAK"})
        kind = "streamGenerateContent?alt=sse" if stream else "generateContent"
        return self.http.post(f"https://generativelanguage.googleapis.com/v1beta/models/{model or 'gemini-x'}:{kind}",
                              json={"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
                              headers={"x-goog-api-key": "AIza-client-DO-NOT-LEAK"})


def rows(proxy, sql, *args, n: int = 1):
    """The query's rows once the ledger holds at least ``n`` turns, none of them open (a turn's
    records are written by the ledger's thread just after its reply: wait for them)."""
    deadline = time.monotonic() + 20
    while True:
        ledger_settled(proxy.ledger)
        con = sqlite3.connect(proxy.ledger)
        con.row_factory = sqlite3.Row
        try:
            have = con.execute("SELECT count(*) FROM turns").fetchone()[0]
            if have >= n or time.monotonic() > deadline:
                return [dict(r) for r in con.execute(sql, args)]
        except sqlite3.OperationalError:  # not created yet
            if time.monotonic() > deadline:
                raise
        finally:
            con.close()
        time.sleep(0.05)


def served_text(protocol: str, stream: bool, r: httpx.Response) -> str:
    """The reply as the client reads it: its text (a stream's deltas joined)."""
    assert r.status_code == 200, r.text
    if not stream:
        d = r.json()
        return {"anthropic": lambda: d["content"][0]["text"], "openai": lambda: d["choices"][0]["message"]["content"],
                "openai-responses": lambda: d["output"][0]["content"][0]["text"],
                "gemini": lambda: d["candidates"][0]["content"]["parts"][0]["text"]}[protocol]()
    out = []
    for line in r.text.splitlines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        ev = json.loads(line[6:])
        if protocol == "anthropic" and ev.get("type") == "content_block_delta":
            out.append(ev["delta"].get("text", ""))
        elif protocol == "openai" and ev.get("choices"):
            out.append(ev["choices"][0]["delta"].get("content") or "")
        elif protocol == "openai-responses" and ev.get("type") == "response.output_text.delta":
            out.append(ev["delta"])
        elif protocol == "gemini":
            for c in ev.get("candidates", []):
                out += [p.get("text", "") for p in c.get("content", {}).get("parts", [])]
    return "".join(out)


@pytest.mark.parametrize("protocol", ["anthropic", "openai", "openai-responses", "gemini"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_each_failure_kind_moves_the_turn_to_the_next_route(tmp_path, ups, protocol, stream):
    small, big = ups
    proxy = start(tmp_path, small, big)
    try:
        c = Client(proxy)
        for n, (name, failure) in enumerate(FAILURES.items()):
            small.script(failure())
            big.script(stream_ok(f"chatcmpl-big{n}") if stream else whole_ok(f"chatcmpl-big{n}"))
            r = c.ask(protocol, stream)
            assert served_text(protocol, stream, r) == ("Hello" if stream else "ok"), name
            # (a reset on a reused connection is tried once more on a fresh one: the endpoint may have
            # closed it while idle; that is the relay's, before failover)
            assert len(small.requests) == (len(small.requests) if name == "reset" else 1) and len(big.requests) == 1, name
            # each endpoint got its own key, never the client's nor the other endpoint's
            assert small.requests[0].headers["authorization"] == f"Bearer {KEYS['TK_SMALL_KEY']}"
            got = big.requests[0]
            assert got.headers["authorization"] == f"Bearer {KEYS['TK_BIG_KEY']}"
            assert b"DO-NOT-LEAK" not in got.body and not any("DO-NOT-LEAK" in v for v in got.headers.values())
            assert got.json()["messages"][-1]["content"] in ("hi", [{"type": "text", "text": "hi"}])
            # a failure without retry-after backs small off for 2 s: after it, a turn small answers
            # (its failures in a row start again); context-window errors do not back it off
            time.sleep(2.2 if name not in ("context-openai", "context-llama") else 0)
            small.script(whole_ok("chatcmpl-small-again"))
            assert c.ask(protocol, False).status_code == 200
        turns = rows(proxy, "SELECT request_id, rule, endpoint, outcome, status, attempts FROM turns ORDER BY started_at",
                     n=2 * len(FAILURES))
        assert [t["endpoint"] for t in turns[1::2]] == ["small"] * len(FAILURES)  # the turns small answered between
        turns = turns[0::2]
        assert len(turns) == len(FAILURES)
        for t, name in zip(turns, FAILURES):
            assert (t["rule"], t["endpoint"], t["status"]) == ("spill", "big", 200), name
            attempts = json.loads(t["attempts"])
            assert [a["endpoint"] for a in attempts] == ["small", "big"], name
            want = {"reset": "reset", "context-openai": "context_window", "context-llama": "context_window"}
            assert attempts[0]["kind"] == want.get(name, "status") and attempts[1]["kind"] == "answered"
            assert attempts[0]["ms"] >= 0
    finally:
        proxy.stop()


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_plain_400_is_answered_not_failed_over(tmp_path, ups, stream):
    small, big = ups
    proxy = start(tmp_path, small, big)
    try:
        small.script(Reply(400, {"content-type": "application/json"},
                           [OAI_ERR("Invalid value for 'temperature'", None, "invalid_request_error")]))
        big.script(whole_ok("chatcmpl-never"))
        r = Client(proxy).ask("anthropic", stream)
        assert r.status_code == 400 and "temperature" in r.json()["error"]["message"]
        assert r.json()["error"]["type"] == "invalid_request_error"
        assert big.requests == []
        (t,) = rows(proxy, "SELECT endpoint, attempts FROM turns")
        assert t["endpoint"] == "small" and t["attempts"] is None
    finally:
        proxy.stop()


def test_retry_after_keeps_the_endpoint_from_the_next_turn(tmp_path, ups):
    small, big = ups
    proxy = start(tmp_path, small, big)
    try:
        small.script(Reply(429, {"content-type": "application/json", "retry-after": "30"}, [OAI_ERR("slow down")]))
        big.script(whole_ok("chatcmpl-big"))
        c = Client(proxy)
        r = c.ask("anthropic", False)
        assert r.status_code == 200, r.text
        assert len(small.requests) == 1
        for _ in range(3):  # the next turns: small is cooling down, never asked
            r = c.ask("anthropic", False)
            assert r.json().get("id") == "chatcmpl-big", r.text
        assert len(small.requests) == 1 and len(big.requests) == 4
        turns = rows(proxy, "SELECT trace, attempts FROM turns ORDER BY started_at", n=4)
        assert json.loads(turns[0]["attempts"])[0]["cooled_s"] == 30
        # the console line names the chain (the mitmweb comment ends with the same words)
        assert "→ big (failed over: small (429) → big) · translated 200" in proxy.log()
        assert "small (route easy) failed: HTTP 429: slow down; cooled for 30 s; next: big" in proxy.log()
        trace = json.loads(turns[1]["trace"])
        assert trace[0]["route"] == "easy" and trace[0]["unavailable"].startswith("cooling down (HTTP 429, retry-after")
    finally:
        proxy.stop()


def test_first_byte_timeout_moves_on_in_about_that_time(tmp_path, ups):
    """small accepts the connection and says nothing (a raw socket that never answers)."""
    _, big = ups
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES.format(small=f"http://127.0.0.1:{srv.getsockname()[1]}", big=big.url,
                                  small_extra="    first_byte_timeout_s: 2", easy_extra=""))
    proxy = Mitmdump(tmp_path, rules, env=KEYS)
    try:
        big.script(whole_ok("chatcmpl-after-silence"))
        t0 = time.monotonic()
        r = Client(proxy).ask("openai", False)
        took = time.monotonic() - t0
        assert r.json()["id"] == "chatcmpl-after-silence"
        assert 2 <= took < 20  # moved on after the 2 s, not after the client's own timeout
        (t,) = rows(proxy, "SELECT attempts FROM turns")
        first = json.loads(t["attempts"])[0]
        assert first["kind"] == "timeout" and first["ms"] >= 2000 and "first_byte_timeout_s" in first["why"]
    finally:
        proxy.stop()
        srv.close()


def test_max_concurrency_spills_the_second_concurrent_stream(tmp_path, ups):
    small, big = ups
    proxy = start(tmp_path, small, big, small_extra="    max_concurrency: 1")
    try:
        small.script(stream_ok("chatcmpl-small", delay=0.4))
        big.script(stream_ok("chatcmpl-big", delay=0.1))
        c = Client(proxy)
        results = {}

        def ask(i):
            results[i] = served_text("anthropic", True, c.ask("anthropic", True))

        first = threading.Thread(target=ask, args=(1,))
        first.start()
        deadline = time.monotonic() + 10
        while not small.requests and time.monotonic() < deadline:
            time.sleep(0.02)
        ask(2)
        first.join(20)
        assert results == {1: "Hello", 2: "Hello"}
        assert len(small.requests) == 1 and len(big.requests) == 1
        turns = rows(proxy, "SELECT endpoint, trace FROM turns ORDER BY started_at", n=2)
        assert [t["endpoint"] for t in turns] == ["small", "big"]
        assert json.loads(turns[1]["trace"])[0]["unavailable"].startswith("full (1 of max_concurrency 1")
    finally:
        proxy.stop()


def test_a_failure_after_the_first_byte_is_an_error_not_retried(tmp_path, ups):
    small, big = ups
    proxy = start(tmp_path, small, big)
    try:
        small.script(Reply.sse(chat_stream("chatcmpl-cut", text=("a", "b", "c")), delay=0.05, die_after=2))
        big.script(whole_ok("chatcmpl-never"))
        r = Client(proxy).ask("anthropic", True)
        assert r.status_code == 200
        assert "event: error" in r.text
        assert big.requests == []
        (t,) = rows(proxy, "SELECT outcome, attempts FROM turns")
        assert t["outcome"] == "error" and t["attempts"] is None
    finally:
        proxy.stop()


def test_on_failure_error_answers_the_failure(tmp_path, ups):
    small, big = ups
    proxy = start(tmp_path, small, big, easy_extra="    on_failure: error")
    try:
        small.script(FAILURES["503"]())
        big.script(whole_ok("chatcmpl-never"))
        r = Client(proxy).ask("anthropic", False)
        assert r.status_code >= 500 and "Loading model" in r.text
        assert big.requests == []
        (t,) = rows(proxy, "SELECT endpoint, attempts FROM turns")
        assert t["endpoint"] == "small" and [a["kind"] for a in json.loads(t["attempts"])] == ["status"]
    finally:
        proxy.stop()


def test_all_local_never_reaches_the_cloud(tmp_path, ups):
    """unmatched: refuse and one route: the failure reaches the client; nothing else is asked."""
    small, big = ups
    rules = tmp_path / "rules.yaml"
    example = (Path(__file__).resolve().parents[2] / "rules" / "examples" / "all-local.yaml").read_text()
    rules.write_text(example.replace("http://127.0.0.1:28431/v1", f"{small.url}/v1"))
    proxy = Mitmdump(tmp_path, rules)
    try:
        small.script(FAILURES["503"]())
        r = Client(proxy).ask("anthropic", False)
        assert r.status_code >= 500 and "Loading model" in r.text
        assert len(small.requests) == 1
        deadline = time.monotonic() + 20  # the attempts are written with the turn's end, in a later batch
        while (t := rows(proxy, "SELECT host, endpoint, attempts FROM turns")[0])["attempts"] is None \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        assert t["endpoint"] == "local"
        assert [a["endpoint"] for a in json.loads(t["attempts"])] == ["local"]
    finally:
        proxy.stop()


def test_a_client_that_goes_away_leaves_no_upstream_connection(tmp_path):
    """The endpoint sends its first events, then thinks in silence; the client hangs up
    after the first bytes: within 0.5 s the endpoint's connection is closed (before, the
    relay noticed only at the endpoint's next bytes or its keep-alive tick)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    closed_at = []

    def serve():
        conn, _ = srv.accept()
        buf = b""
        while b"\r\n\r\n" not in buf:
            buf += conn.recv(65536)
        head, _, rest = buf.partition(b"\r\n\r\n")
        n = int([l.split(b":")[1] for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")][0])
        while len(rest) < n:
            rest += conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        for i, piece in enumerate(chat_stream("chatcmpl-slow", text=tuple("abcdefghijklmnopqrstuvwxyz"))):
            try:
                conn.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
                # three pieces at once, then silence (a slow model thinking): only the close is awaited
                readable, _, _ = select.select([conn], [], [], 0.01 if i < 3 else 8)
                if readable and not conn.recv(65536):
                    closed_at.append(time.monotonic())
                    return
            except OSError:
                closed_at.append(time.monotonic())
                return

    threading.Thread(target=serve, daemon=True).start()
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES.format(small=f"http://127.0.0.1:{srv.getsockname()[1]}", big=f"http://127.0.0.1:{closed_port()}",
                                  small_extra="", easy_extra=""))
    proxy = Mitmdump(tmp_path, rules, env=KEYS)
    try:
        c = Client(proxy)
        body = {"model": "claude-x", "max_tokens": 50, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        with c.http.stream("POST", "https://api.anthropic.com/v1/messages", json=body,
                           headers={"x-api-key": "k", "anthropic-version": "2023-06-01"}) as r:
            next(r.iter_bytes())
            left_at = time.monotonic()
        c.http.close()
        deadline = time.monotonic() + 5
        while not closed_at and time.monotonic() < deadline:
            time.sleep(0.01)
        assert closed_at and closed_at[0] - left_at < 0.5
        (t,) = rows(proxy, "SELECT outcome FROM turns")
        assert t["outcome"] == "cancelled"
    finally:
        proxy.stop()
        srv.close()


def test_a_shadow_never_fails_over(tmp_path, ups):
    """The route's shadow endpoint answers 503: the shadow is recorded as it came, never sent
    anywhere else; the primary turn fails over on its own (small 503 -> big)."""
    small, big = ups
    with Upstream() as shade:
        rules = tmp_path / "rules.yaml"
        rules.write_text(RULES.format(small=small.url, big=big.url, small_extra="",
                                      easy_extra=f"    shadow: shade\n").replace(
            "routes:", f"  shade:\n    protocol: openai\n    url: {shade.url}/v1\n    max_tokens: 256\nroutes:"))
        proxy = Mitmdump(tmp_path, rules, env=KEYS)
        try:
            small.script(FAILURES["503"]())
            big.script(whole_ok("chatcmpl-big"))
            shade.script(FAILURES["503"]())
            r = Client(proxy).ask("anthropic", False)
            assert r.json()["id"] == "chatcmpl-big"
            deadline = time.monotonic() + 20
            shadows = []
            while time.monotonic() < deadline and not shadows:
                shadows = rows(proxy, "SELECT kind, endpoint, status FROM shadows") if proxy.ledger.exists() else []
                time.sleep(0.1)
            assert shadows == [{"kind": "shadow", "endpoint": "shade", "status": 503}]
            assert len(shade.requests) == 1 and len(small.requests) == 1 and len(big.requests) == 1
        finally:
            proxy.stop()


def test_the_chain_ends_at_the_clients_own_host_with_its_own_key(tmp_path, ups):
    """unmatched: pass: after the last route failed, the turn goes to the host the client asked
    for (here a loopback Anthropic-shaped host declared a provider), unchanged, with the
    client's own key; no endpoint key goes there, and no client key to the endpoints."""
    small, big = ups
    with Upstream() as own:
        rules = tmp_path / "rules.yaml"
        rules.write_text(RULES.format(small=small.url, big=big.url, small_extra="", easy_extra="")
                         .replace("unmatched: refuse\n", "unmatched: pass\n"))
        proxy = Mitmdump(tmp_path, rules, env=KEYS,
                         extra=["--set", f"tokunseba_provider_hosts=127.0.0.1:{own.port}=anthropic"])
        try:
            small.script(FAILURES["503"]())
            big.script(FAILURES["529"]())
            own.script(Reply.json({"id": "msg_own_host", "type": "message", "role": "assistant", "model": "claude-x",
                                   "content": [{"type": "text", "text": "from the client's own host"}],
                                   "stop_reason": "end_turn", "stop_sequence": None,
                                   "usage": {"input_tokens": 3, "output_tokens": 5}}))
            body = {"model": "claude-x", "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]}
            raw = json.dumps(body).encode()
            with httpx.Client(proxy=proxy.url, timeout=30) as c:
                r = c.post(f"{own.url}/v1/messages", content=raw,
                           headers={"x-api-key": "sk-ant-client-DO-NOT-LEAK", "anthropic-version": "2023-06-01",
                                    "content-type": "application/json"})
            assert r.status_code == 200 and r.json()["id"] == "msg_own_host"
            (got,) = own.requests
            assert got.headers["x-api-key"] == "sk-ant-client-DO-NOT-LEAK" and got.body == raw  # unchanged
            assert not any(k in v for v in got.headers.values() for k in KEYS.values())
            for up, key in ((small, "TK_SMALL_KEY"), (big, "TK_BIG_KEY")):
                (rec,) = up.requests
                assert rec.headers["authorization"] == f"Bearer {KEYS[key]}"
                assert "DO-NOT-LEAK" not in json.dumps(rec.headers) and b"DO-NOT-LEAK" not in rec.body
            (t,) = rows(proxy, "SELECT rule, endpoint, outcome, attempts FROM turns")
            assert t["rule"] is None and t["endpoint"] is None and t["outcome"] == "pass_through"
            assert [(a["endpoint"], a["kind"]) for a in json.loads(t["attempts"])] == [
                ("small", "status"), ("big", "status"), (None, "answered")]
        finally:
            proxy.stop()


def test_queue_s_waits_for_the_slot_first(tmp_path, ups):
    """max_concurrency: 1 with queue_s: the second concurrent turn waits for small's slot (freed
    when the first stream ends) instead of going to the next route."""
    small, big = ups
    proxy = start(tmp_path, small, big, small_extra="    max_concurrency: 1\n    queue_s: 20")
    try:
        small.script(stream_ok("chatcmpl-small", delay=0.3))
        big.script(stream_ok("chatcmpl-never"))
        c = Client(proxy)
        results = {}

        def ask(i):
            results[i] = served_text("anthropic", True, c.ask("anthropic", True))

        first = threading.Thread(target=ask, args=(1,))
        first.start()
        deadline = time.monotonic() + 10
        while not small.requests and time.monotonic() < deadline:
            time.sleep(0.02)
        ask(2)
        first.join(20)
        assert results == {1: "Hello", 2: "Hello"}
        assert len(small.requests) == 2 and big.requests == []
        turns = rows(proxy, "SELECT endpoint FROM turns ORDER BY started_at", n=2)
        assert [t["endpoint"] for t in turns] == ["small", "small"]
    finally:
        proxy.stop()


def test_mitmweb_comment_names_the_chain(tmp_path):
    """In mitmweb, the failed-over flow's comment ends its decision with the chain of attempts."""
    from .test_mitmweb_e2e import Mitmweb, poll

    template = """\
endpoints:
  small:
    protocol: openai
    url: {oai}/small/v1
  big:
    protocol: openai
    url: {oai}/v1
routes:
  - name: easy
    to: small
  - name: spill
    to: big
"""
    with Mitmweb.serving(tmp_path, template, {}) as web:
        web.upstream.script(FAILURES["503"](), whole_ok("chatcmpl-web-big"))
        with httpx.Client(proxy=web.url, verify=ssl.create_default_context(cafile=str(web.confdir / "mitmproxy-ca-cert.pem")),
                          timeout=30) as c:
            r = c.post("https://api.anthropic.com/v1/messages", headers={"x-api-key": "k", "anthropic-version": "2023-06-01"},
                       json={"model": "claude-x", "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]})
        assert r.status_code == 200 and r.json()["id"] == "chatcmpl-web-big"
        paths = [q.path for q in web.upstream.requests]
        assert paths == ["/small/v1/chat/completions", "/v1/chat/completions"]

        def done():
            fl = [f for f in web.flows() if f["request"]["path"] == "/v1/messages" and f.get("response")]
            return fl[0] if fl and "failed over" in fl[0]["comment"] else None

        f = poll(done, "the failed-over flow's final comment")
        assert "spill → big" in f["comment"] and "failed over: small (503) → big" in f["comment"]
        assert f["response"]["status_code"] == 200
