"""Issue 29 end to end: what the client hears after a chain of attempts, with a real mitmdump
and scripted loopback upstreams. The local endpoint answers 429 with retry-after (or a
context-window error), then the turn moves on to the provider's own host, which cannot be
reached: the client gets the 429 with its retry-after (or its own "prompt is too long"), and a
message naming both attempts, never a 502 saying the turn was not sent. The next turn, with
the local endpoint cooling and the provider still away, is a 429 with retry-after, never a
400. The ledger says the same."""

from __future__ import annotations

import json
import sqlite3

import httpx
import pytest

from .conftest import Mitmdump, ledger_settled
from tests.support.upstream import Reply, Upstream, closed_port

pytestmark = pytest.mark.e2e

KEYS = {"TK_LOCAL_KEY": "sk-local-0001"}

RULES = """\
endpoints:
  local:
    protocol: openai
    url: {local}/v1
    key_env: TK_LOCAL_KEY
    max_tokens: 256
routes:
  - name: small
    when: {{model: "claude-*"}}
    to: local
unmatched: {unmatched}
"""


def oai_err(msg, code=None, etype="server_error"):
    return json.dumps({"error": {"message": msg, "type": etype, "param": None, "code": code}}).encode()


RATE_LIMITED = Reply(429, {"content-type": "application/json", "retry-after": "7"},
                     [oai_err("Rate limit reached", "rate_limit_exceeded", "rate_limit_error")])
TOO_LONG = Reply(400, {"content-type": "application/json"}, [json.dumps({"error": {
    "code": 400, "message": "the request exceeds the available context size, try increasing it",
    "type": "exceed_context_size_error", "n_prompt_tokens": 5000, "n_ctx": 4096}}).encode()])


def start(tmp_path, local: Upstream, provider_port: int, unmatched="pass") -> Mitmdump:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES.format(local=local.url, unmatched=unmatched))
    return Mitmdump(tmp_path, rules, env=KEYS, extra=["--set", f"tokunseba_provider_hosts=127.0.0.1:{provider_port}=anthropic"])


def ask(proxy: Mitmdump, port: int, stream: bool = False, text: str = "hi") -> httpx.Response:
    body = {"model": "claude-x", "max_tokens": 50, "stream": stream, "messages": [{"role": "user", "content": text}]}
    with httpx.Client(proxy=proxy.url, timeout=30) as c:
        return c.post(f"http://127.0.0.1:{port}/v1/messages", json=body,
                      headers={"x-api-key": "sk-ant-client-DO-NOT-LEAK", "anthropic-version": "2023-06-01"})


def rows(proxy: Mitmdump, sql: str) -> list[dict]:
    ledger_settled(proxy.ledger)
    con = sqlite3.connect(proxy.ledger)
    con.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in con.execute(sql)]
    finally:
        con.close()


@pytest.mark.parametrize("stream", [False, True])
def test_a_429_then_an_unreachable_provider_is_the_429_with_its_retry_after(tmp_path, stream):
    gone = closed_port()
    with Upstream() as local:
        local.script(RATE_LIMITED)
        proxy = start(tmp_path, local, gone)
        try:
            r = ask(proxy, gone, stream)
            assert r.status_code == 429, r.text
            assert r.headers["retry-after"] == "7"
            err = r.json()
            assert err["type"] == "error" and err["error"]["type"] == "rate_limit_error"
            msg = err["error"]["message"]
            assert msg.startswith("tokunseba: local answered 429 (retry after 7 s): Rate limit reached; then ")
            assert f"127.0.0.1 could not be reached: cannot connect to 127.0.0.1:{gone}" in msg
            assert "not sent" not in msg and "endpoint ?" not in msg
            rid = r.headers["x-tokunseba-request-id"]
            assert rid in msg
            # the next turn: local cools down (7 s), the provider is still away: busy, not 400 / 502
            r2 = ask(proxy, gone, stream)
            assert r2.status_code == 429, r2.text
            assert 1 <= int(r2.headers["retry-after"]) <= 7
            msg2 = r2.json()["error"]["message"]
            assert "route small: local is cooling down (HTTP 429" in msg2
            assert f"then 127.0.0.1 could not be reached" in msg2
            assert len(local.requests) == 1  # the cooling endpoint was left alone
            t1, t2 = rows(proxy, "SELECT request_id, outcome, status, error, attempts, rule FROM turns ORDER BY started_at")
            assert (t1["request_id"], t1["outcome"], t1["status"]) == (rid, "error", 429)
            assert t1["error"] == msg
            assert [(a["endpoint"], a.get("host"), a["kind"], a["status"]) for a in json.loads(t1["attempts"])] == [
                ("local", None, "status", 429), (None, "127.0.0.1", "unreachable", None)]
            assert json.loads(t1["attempts"])[0]["retry_after_s"] == 7
            assert json.loads(t1["attempts"])[0]["told"] is True and "told" not in json.loads(t1["attempts"])[1]
            (told,) = rows(proxy, f"SELECT data FROM events WHERE request_id = '{rid}' AND kind = 'failover_answer'")
            assert json.loads(told["data"])["chosen"] == 0
            assert (t2["outcome"], t2["status"], t2["rule"]) == ("error", 429, None)
            assert ": local (route small) failed: HTTP 429: Rate limit reached; cooled for 7 s; next: 127.0.0.1" in proxy.log()
        finally:
            proxy.stop()


@pytest.mark.parametrize("stream", [False, True])
def test_a_context_window_error_then_an_unreachable_provider_is_prompt_is_too_long(tmp_path, stream):
    gone = closed_port()
    with Upstream() as local:
        local.script(TOO_LONG)
        proxy = start(tmp_path, local, gone)
        try:
            r = ask(proxy, gone, stream)
            assert r.status_code == 400, r.text
            err = r.json()["error"]
            assert err["type"] == "invalid_request_error" and "prompt is too long" in err["message"].lower()
            assert "exceeds the available context size" in err["message"]
            assert "127.0.0.1 could not be reached" in err["message"]
            assert "retry-after" not in r.headers
        finally:
            proxy.stop()


def test_every_route_busy_under_refuse_is_429_not_400(tmp_path):
    gone = closed_port()
    with Upstream() as local:
        local.script(RATE_LIMITED)
        proxy = start(tmp_path, local, gone, unmatched="refuse")
        try:
            r = ask(proxy, gone)
            assert r.status_code == 429 and r.headers["retry-after"] == "7"  # the only route: as it came
            r2 = ask(proxy, gone)
            assert r2.status_code == 429, r2.text
            assert 1 <= int(r2.headers["retry-after"]) <= 7
            assert r2.json()["error"]["type"] == "rate_limit_error"
            assert "no endpoint can take this turn now" in r2.json()["error"]["message"]
        finally:
            proxy.stop()


def chat_reply(text="ok") -> Reply:
    return Reply.json({"id": "chatcmpl-1", "object": "chat.completion", "created": 1767225600, "model": "m",
                       "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant",
                                                                                     "content": text}}],
                       "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}})


ANT_REPLY = {"id": "msg_own", "type": "message", "role": "assistant", "model": "other-x",
             "content": [{"type": "text", "text": "own host"}], "stop_reason": "end_turn", "stop_sequence": None,
             "usage": {"input_tokens": 3, "output_tokens": 2}}


def test_a_mixed_ledger_every_view_says_the_same(tmp_path, capsys):
    """Translated, a translated turn answered 400, passed through, refused, failed over to the
    client's own host: the console line, `log`, `explain` and `stats` agree turn by turn, and
    the stats classes add up to the turns."""
    from tokunseba.cli.main import main

    with Upstream() as local, Upstream() as own:
        proxy = start(tmp_path, local, own.port)
        try:
            local.script(chat_reply(), Reply(400, {"content-type": "application/json"},
                                             [oai_err("temperature: out of range", None, "invalid_request_error")]),
                         Reply(503, {"content-type": "application/json"}, [oai_err("Loading model")]))
            own.script(Reply.json(ANT_REPLY))
            got = {}
            got["translated"] = ask(proxy, own.port, text="one")  # three requests, not retries of one
            got["error"] = ask(proxy, own.port, text="two")
            with httpx.Client(proxy=proxy.url, timeout=30) as c:
                hdrs = {"x-api-key": "sk-ant-client-DO-NOT-LEAK", "anthropic-version": "2023-06-01"}
                got["pass_through"] = c.post(f"http://127.0.0.1:{own.port}/v1/messages", headers=hdrs, json={
                    "model": "other-x", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})
                got["refused"] = c.post(f"http://127.0.0.1:{own.port}/v1/messages/count_tokens", headers=hdrs, json={
                    "model": "claude-x", "messages": [{"role": "user", "content": "hi"}]})
            got["failed_over"] = ask(proxy, own.port, text="three")  # local 503 -> the client's own host answers
            assert [r.status_code for r in got.values()] == [200, 400, 200, 400, 200], [r.text for r in got.values()]
            rids = {k: r.headers["x-tokunseba-request-id"] for k, r in got.items()}
            ledger_settled(proxy.ledger)
            want = {"translated": "translated 200", "error": "error 400", "pass_through": "pass-through 200",
                    "refused": "refused 400", "failed_over": "pass-through 200"}
            console = {line.split(" tk-")[1].split()[0]: line for line in proxy.log().splitlines()
                       if " tk-" in line and " · " in line and "failed:" not in line}
            capsys.readouterr()
            assert main(["log", "--ledger", str(proxy.ledger)]) == 0
            log = {line.split()[2]: line for line in capsys.readouterr().out.splitlines()[1:]}
            for k, rid in rids.items():
                c_line, l_line = console[rid[3:]], log[rid]
                assert f" · {want[k]} · " in c_line, (k, c_line)
                cls, status = want[k].split()
                assert f" {cls} " in l_line and f" {status} " in l_line, (k, l_line)
                assert " → no route → " not in c_line or k == "pass_through"
                assert main(["explain", rid, "--ledger", str(proxy.ledger)]) == 0
                decision = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("decision"))
                if k != "pass_through" and k != "failed_over":
                    assert cls in decision, (k, decision)
            assert "route small matched → 127.0.0.1" in console[rids["failed_over"][3:]]
            assert "route small matched → 127.0.0.1" in log[rids["failed_over"]]
            assert main(["stats", "--ledger", str(proxy.ledger), "--json"]) == 0
            st = json.loads(capsys.readouterr().out)
            assert st["turns"] == 5 and sum(st[k] for k in ("translated", "retargeted", "pass_through", "errors",
                                                             "refused", "cancelled", "interrupted", "unfinished")) == 5
            assert (st["translated"], st["errors"], st["pass_through"], st["refused"], st["served"]) == (1, 1, 2, 1, 3)
        finally:
            proxy.stop()


def test_codexs_websocket_upgrade_to_an_unreachable_host_is_answered_in_its_envelope(tmp_path):
    """No route takes Responses turns, so Codex's WebSocket upgrade passes through; its host
    cannot be reached: the answer is a 426 in the OpenAI envelope naming the host (Codex falls
    back to HTTPS, whose turn is answered and recorded), not mitmproxy's HTML 502 page."""
    gone = closed_port()
    rules = tmp_path / "rules.yaml"
    rules.write_text("routes: []\n")
    proxy = Mitmdump(tmp_path, rules, extra=["--set", f"tokunseba_provider_hosts=127.0.0.1:{gone}=openai-responses"])
    try:
        with httpx.Client(proxy=proxy.url, timeout=30) as c:
            r = c.get(f"http://127.0.0.1:{gone}/v1/responses",
                      headers={"upgrade": "websocket", "connection": "Upgrade", "sec-websocket-version": "13",
                               "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==", "authorization": "Bearer sk-x"})
        assert r.status_code == 426, r.text
        assert r.headers["content-type"] == "application/json" and "<html" not in r.text
        err = r.json()["error"]
        assert set(err) == {"message", "type", "param", "code"}
        assert f"cannot reach 127.0.0.1:{gone}: connection refused" in err["message"]
        assert "WebSocket upgrade declined; send the turn over HTTPS" in err["message"]
    finally:
        proxy.stop()


def test_a_clients_retries_are_recognised(tmp_path, capsys):
    """The same request sent again (the provider away, as a client retries it) is recorded as a
    retry of the first; another request is not; `log` folds them, `stats` counts them apart."""
    from tokunseba.cli.main import main

    gone = closed_port()
    with Upstream() as local:
        local.script(Reply(503, {"content-type": "application/json"}, [oai_err("Loading model")]))
        proxy = start(tmp_path, local, gone)
        try:
            first, again, third = ask(proxy, gone), ask(proxy, gone), ask(proxy, gone)
            other = ask(proxy, gone, stream=True)  # another body: another request
            rids = [r.headers["x-tokunseba-request-id"] for r in (first, again, third, other)]
            got = {t["request_id"]: t["retry_of"] for t in rows(proxy, "SELECT request_id, retry_of FROM turns")}
            assert [got[r] for r in rids] == [None, rids[0], rids[0], None]
            capsys.readouterr()
            assert main(["log", "--ledger", str(proxy.ledger)]) == 0
            out = capsys.readouterr().out
            assert rids[1] not in out and rids[2] not in out and "+2 retries, the last error" in out
            assert main(["stats", "--ledger", str(proxy.ledger), "--json"]) == 0
            st = json.loads(capsys.readouterr().out)
            assert (st["turns"], st["requests"], st["retries"]) == (4, 2, 2)
        finally:
            proxy.stop()


def test_a_retargeted_stream_that_is_not_utf8_ends_with_an_error_event_and_is_recorded(tmp_path, monkeypatch):
    """The Anthropic SDK decodes a stream as strict UTF-8: bytes that are not end the stream
    with an error event in its protocol (the SDK raises an API error, not a UnicodeDecodeError),
    and the ledger records an error, not a clean retarget."""
    import anthropic

    ant = [b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message",'
           b'"role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,'
           b'"usage":{"input_tokens":7,"output_tokens":1}}}\n\n',
           b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
           b'"content_block":{"type":"text","text":""}}\n\n',
           b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
           b'"delta":{"type":"text_delta","text":"H\xff\xfei"}}\n\n',
           b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n',
           b'event: message_stop\ndata: {"type":"message_stop"}\n\n']
    with Upstream() as up:
        up.script(Reply.sse(ant, delay=0.05))
        rules = tmp_path / "rules.yaml"
        rules.write_text(f"endpoints:\n  ant:\n    protocol: anthropic\n    url: {up.url}\n    key_env: TK_LOCAL_KEY\n"
                         "routes:\n  - name: same\n    when: {model: \"claude-*\"}\n    to: ant\n")
        gone = closed_port()
        proxy = Mitmdump(tmp_path, rules, env=KEYS,
                         extra=["--set", f"tokunseba_provider_hosts=127.0.0.1:{gone}=anthropic"])
        try:
            for k, v in proxy.client_env().items():
                monkeypatch.setenv(k, v)
            c = anthropic.Anthropic(api_key="sk-ant-client", base_url=f"http://127.0.0.1:{gone}", max_retries=0)
            with pytest.raises(anthropic.APIError) as ei:
                with c.messages.stream(model="claude-x", max_tokens=5, messages=[{"role": "user", "content": "hi"}]) as s:
                    for _ in s:
                        pass
            assert "not valid UTF-8" in str(ei.value)
            (t,) = rows(proxy, "SELECT outcome, status, error FROM turns")
            assert t["outcome"] == "error" and "not valid UTF-8" in t["error"]
        finally:
            proxy.stop()


def test_local_down_and_the_provider_away_is_503_naming_both(tmp_path):
    """The local endpoint is down (refused connect, before anything is sent) and the provider
    host cannot be reached: 503 with retry-after (nothing was rate-limited), the message names
    the local endpoint and the host; the console says the route matched, never 'no route'."""
    gone, local_gone = closed_port(), closed_port()

    class Down:
        url = f"http://127.0.0.1:{local_gone}"
    proxy = start(tmp_path, Down, gone)  # type: ignore[arg-type]
    try:
        r = ask(proxy, gone)
        assert r.status_code == 503, r.text
        assert int(r.headers["retry-after"]) >= 1
        msg = r.json()["error"]["message"]
        assert "route small: local is unreachable" in msg and "then 127.0.0.1 could not be reached" in msg
        rid = r.headers["x-tokunseba-request-id"]
        (t,) = rows(proxy, "SELECT outcome, status, attempts FROM turns")
        assert (t["outcome"], t["status"], json.loads(t["attempts"])) == ("error", 503, [])  # nothing was sent
        line = next(ln for ln in proxy.log().splitlines() if rid in ln and " · " in ln)
        assert "route small matched; endpoint local unreachable → 127.0.0.1 (not sent) · error 503" in line, line
    finally:
        proxy.stop()


SPILL_RULES = """\
endpoints:
  local:
    protocol: openai
    url: {local}/v1
    key_env: TK_LOCAL_KEY
    max_tokens: 256
  big:
    protocol: anthropic
    url: http://127.0.0.1:{big}
    key_env: TK_LOCAL_KEY
routes:
  - name: small
    when: {{model: "claude-*"}}
    to: local
  - name: spill
    when: {{model: "claude-*"}}
    to: big
unmatched: refuse
"""


@pytest.mark.parametrize("stream", [False, True])
def test_a_context_window_error_with_the_next_hop_known_down_is_kept(tmp_path, stream):
    """unmatched: refuse; the next route's endpoint is known down (the proxy's startup check
    found it unreachable): it is not tried, and the client gets local's context-window error as
    it came, "prompt is too long" (as before issue 29: kept)."""
    big = closed_port()
    with Upstream() as local:
        local.script(TOO_LONG)
        rules = tmp_path / "rules.yaml"
        rules.write_text(SPILL_RULES.format(local=local.url, big=big))
        gone = closed_port()
        proxy = Mitmdump(tmp_path, rules, env=KEYS, extra=["--set", f"tokunseba_provider_hosts=127.0.0.1:{gone}=anthropic"])
        try:
            for text in ("one", "two"):
                r = ask(proxy, gone, stream, text=text)
                assert r.status_code == 400, r.text
                err = r.json()["error"]
                assert err["type"] == "invalid_request_error" and "prompt is too long" in err["message"].lower()
                assert "exceeds the available context size" in err["message"] and "big" not in err["message"]
            assert len(local.requests) == 2
        finally:
            proxy.stop()
