"""Subscription windows through a real mitmdump (issue 42): scripted Anthropic and ChatGPT-backend-style
upstreams send the window headers in the formats the clients' own sources read (Claude Code's
cli.js: shares 0..1 and Unix-second resets; openai/codex rate_limits.rs: percents, window minutes,
reset-at); the ledger and `tokunseba quota --json` hold each window per account, two accounts
never mix, a malformed header is skipped and said, the client's bytes are never altered; a
``quota`` rule sends easy turns local while a window reads above its threshold and back after
the reset; a rejected window moves the turn to the next route; `explain` and `stats` say why."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from .conftest import BIN, Mitmdump, ledger_settled
from .test_proxy_e2e import chat_chunk, chat_reply
from tests.support.upstream import Recorded, Reply, Upstream

pytestmark = pytest.mark.e2e

U = "anthropic-ratelimit-unified-"


def ant_reply(text: str = "hi") -> dict:
    return {"id": "msg_quota01", "type": "message", "role": "assistant", "model": "claude-haiku-4-5",
            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 9, "output_tokens": 1}}


def windows(five: str, seven: str = "0.2", status: str = "allowed", reset: float | None = None,
            claim: str = "five_hour") -> dict[str, str]:
    reset = reset if reset is not None else time.time() + 3600
    return {U + "status": status, U + "reset": str(int(reset)), U + "representative-claim": claim,
            U + "5h-utilization": five, U + "5h-reset": str(int(reset)), U + "5h-status": status,
            U + "7d-utilization": seven, U + "7d-reset": str(int(time.time() + 5 * 86400)), U + "7d-status": "allowed",
            U + "overage-status": "rejected", U + "overage-disabled-reason": "org_level_disabled"}


def ant_json(headers: dict[str, str], status: int = 200, body: dict | None = None) -> Reply:
    return Reply(status, {"content-type": "application/json", **headers},
                 [json.dumps(body if body is not None else ant_reply()).encode()])


def codex_headers() -> dict[str, str]:
    return {"x-codex-primary-used-percent": "42.5", "x-codex-primary-window-minutes": "300",
            "x-codex-primary-reset-at": str(int(time.time() + 7200)),
            "x-codex-secondary-used-percent": "13", "x-codex-secondary-window-minutes": "10080",
            "x-codex-secondary-reset-at": str(int(time.time() + 6 * 86400))}


RESPONSES_REPLY = {"id": "resp_quota01", "object": "response", "created_at": 1767225600, "status": "completed",
                   "model": "gpt-5.2-codex", "output": [{"type": "message", "id": "msg_1", "role": "assistant",
                                                         "status": "completed",
                                                         "content": [{"type": "output_text", "text": "hi",
                                                                      "annotations": []}]}],
                   "usage": {"input_tokens": 7, "output_tokens": 1, "total_tokens": 8}}


def messages(client: httpx.Client, url: str, auth: dict[str, str], model: str = "claude-haiku-4-5") -> httpx.Response:
    return client.post(f"{url}/v1/messages", headers={"anthropic-version": "2023-06-01", **auth},
                       json={"model": model, "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]})


def quota_json(ledger: Path) -> dict:
    out = subprocess.run([str(BIN / "tokunseba"), "quota", "--json", "--ledger", str(ledger)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def cli(*args: str) -> str:
    out = subprocess.run([str(BIN / "tokunseba"), *args], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def by_window(account: dict) -> dict[str, dict]:
    return {w["window"]: w for w in account["windows"]}


def test_each_window_is_recorded_per_account_and_accounts_never_mix(tmp_path):
    with Upstream() as ant, Upstream() as chat:
        def answer(rec: Recorded) -> Reply:  # each account's own windows, by the credential it sent
            if rec.headers.get("authorization") == "Bearer sk-ant-oat01-account-a":
                return ant_json(windows("0.42"))
            if rec.headers.get("x-api-key") == "sk-ant-api-account-b":
                return ant_json({**windows("0.91", status="allowed_warning"), U + "7d-utilization": "lots"})
            return ant_json({}, 401, {"type": "error", "error": {"type": "authentication_error", "message": "who?"}})
        ant.responder = answer
        chat.script(Reply(200, {"content-type": "application/json", **codex_headers()},
                          [json.dumps(RESPONSES_REPLY).encode()]))
        proxy = Mitmdump(tmp_path, None, extra=["--set", f"tokunseba_provider_hosts=127.0.0.1:{ant.port}=anthropic",
                                                "--set", f"tokunseba_provider_hosts=127.0.0.1:{chat.port}=openai-responses"])
        try:
            with httpx.Client(proxy=proxy.url, trust_env=False, timeout=30) as c:
                a = messages(c, ant.url, {"authorization": "Bearer sk-ant-oat01-account-a"})
                b1 = messages(c, ant.url, {"x-api-key": "sk-ant-api-account-b"})
                b2 = messages(c, ant.url, {"x-api-key": "sk-ant-api-account-b"})
                g = c.post(f"{chat.url}/v1/responses", json={"model": "gpt-5.2-codex", "input": "hi"},
                           headers={"authorization": "Bearer chatgpt-access-token", "chatgpt-account-id": "acct-9"})
            assert [r.status_code for r in (a, b1, b2, g)] == [200, 200, 200, 200]
            # the client's bytes as the upstream sent them: the headers and the body untouched
            assert a.headers[U + "5h-utilization"] == "0.42" and b1.headers[U + "7d-utilization"] == "lots"
            assert a.json() == ant_reply() and g.headers["x-codex-primary-used-percent"] == "42.5"
            ledger_settled(proxy.ledger, 20, *(r.headers["x-tokunseba-request-id"] for r in (a, b1, b2, g)))
        finally:
            proxy.stop()
    rep = quota_json(proxy.ledger)
    accounts = {(x["provider"], by_window(x).get("5h", {}).get("used")): x for x in rep["accounts"]}
    assert len(rep["accounts"]) == 3, rep
    acc_a, acc_b, acc_c = accounts[("anthropic", 0.42)], accounts[("anthropic", 0.91)], accounts[("chatgpt", None)]
    assert len({acc_a["account"], acc_b["account"], acc_c["account"]}) == 3
    wa, wb, wc = by_window(acc_a), by_window(acc_b), by_window(acc_c)
    assert (wa["5h"]["status"], wa["5h"]["binding"], wa["7d"]["used"]) == ("allowed", True, 0.2)
    assert wa["overage"]["status"] == "rejected" and wa["overage"]["used"] is None
    assert wb["5h"]["status"] == "allowed_warning" and "7d" in wb and wb["7d"]["used"] is None  # skipped, not guessed
    assert (acc_a["by"], acc_b["by"], acc_c["by"]) == ("authorization", "x-api-key", "chatgpt-account-id")
    assert (wc["primary"]["used"], wc["primary"]["minutes"]) == (0.425, 300)
    assert (wc["secondary"]["used"], wc["secondary"]["minutes"]) == (0.13, 10080)
    assert 7000 < wc["primary"]["resets_in_s"] <= 7200 and wc["primary"]["status"] is None
    # the ledger holds hashes, never a credential
    con = sqlite3.connect(proxy.ledger)
    dump = "\n".join(con.iterdump())
    skipped = con.execute("SELECT count(*) FROM events WHERE kind = 'quota_header_skipped'").fetchone()[0]
    con.close()
    for secret in ("sk-ant-oat01-account-a", "sk-ant-api-account-b", "chatgpt-access-token", "acct-9"):
        assert secret not in dump
    assert skipped == 2  # each reply that carried it
    log = proxy.log()
    assert log.count(f"reply header {U}7d-utilization skipped: 'lots'") == 1, log  # said once
    text = cli("quota", "--ledger", str(proxy.ledger))
    assert acc_a["account"] in text and "42%" in text and "91%" in text and "allowed_warning" in text


EASY_RULES = """\
endpoints:
  local:
    protocol: openai
    url: {local}/v1
    model: small-local
routes:
  - name: easy-local-when-busy
    when: {{client: anthropic, model: "*haiku*", quota: {{above: 0.8}}}}
    to: local
"""


def test_easy_turns_go_local_above_the_threshold_and_come_back_after_the_reset(tmp_path):
    state = {"five": "0.5", "reset": time.time() + 3600}
    with Upstream() as ant, Upstream() as local:
        ant.responder = lambda rec: ant_json(windows(state["five"], reset=state["reset"]))
        local.script(Reply.json(chat_reply("chatcmpl-quota", "local")))
        rules = tmp_path / "rules.yaml"
        rules.write_text(EASY_RULES.format(local=local.url))
        proxy = Mitmdump(tmp_path, rules, extra=["--set", f"tokunseba_provider_hosts=127.0.0.1:{ant.port}=anthropic"])
        me = {"authorization": "Bearer sk-ant-oat01-me"}
        try:
            with httpx.Client(proxy=proxy.url, trust_env=False, timeout=30) as c:
                first = messages(c, ant.url, me)  # nothing known yet: passed through; the reply reads 0.5
                second = messages(c, ant.url, me)  # 0.5: still passed through
                state["five"], state["reset"] = "0.85", time.time() + 4
                reset85 = state["reset"]
                third = messages(c, ant.url, me)  # 0.5 known when it was decided: passed through, reads 0.85
                fourth = messages(c, ant.url, me)  # 0.85 > 0.8: local
                other = messages(c, ant.url, {"authorization": "Bearer sk-ant-oat01-someone-else"})
                main = messages(c, ant.url, me, model="claude-opus-4-8")  # not an easy turn: the provider
                state["five"], state["reset"] = "0.05", time.time() + 3600
                time.sleep(max(0.0, reset85 - time.time() + 1.0))
                fifth = messages(c, ant.url, me)  # the window reset: passed through again
            turns = [first, second, third, fourth, other, main, fifth]
            assert [r.status_code for r in turns] == [200] * 7
            ids = [r.headers["x-tokunseba-request-id"] for r in turns]
            ledger_settled(proxy.ledger, 20, *ids)
        finally:
            proxy.stop()
    con = sqlite3.connect(proxy.ledger)
    rows = {rid: con.execute("SELECT outcome, endpoint FROM turns WHERE request_id = ?", (rid,)).fetchone()
            for rid in ids}
    con.close()
    assert [rows[i] for i in ids] == [("pass_through", None), ("pass_through", None), ("pass_through", None),
                                      ("translated", "local"), ("pass_through", None), ("pass_through", None),
                                      ("pass_through", None)]
    assert fourth.json()["content"][0]["text"] == "local"
    log = proxy.log()
    crossed = [ln for ln in log.splitlines() if "window 5h is 85% used, past the 0.8 a rule names" in ln]
    assert len(crossed) == 2 and len({ln.split("account ")[1][:12] for ln in crossed}) == 2, log  # once per account
    explain = cli("explain", ids[3], "--ledger", str(proxy.ledger))
    assert "quota: account" in explain and "5h 85% used, allowed" in explain and "ago" in explain, explain
    assert "not above 0.8" in cli("explain", ids[1], "--ledger", str(proxy.ledger))
    after = cli("explain", ids[6], "--ledger", str(proxy.ledger))
    assert "not above 0.8 (5h reset since it was seen)" in after, after
    stats = cli("stats", "--ledger", str(proxy.ledger))
    assert "quota: 1 turn went elsewhere because of a subscription window" in stats, stats
    assert "unknown and never estimated" in stats
    assert "quota: 1 turn went elsewhere because of a subscription window" in cli("sessions", "--ledger",
                                                                                str(proxy.ledger))


def pg_turn_settled(url: str, request_id: str, timeout: float = 20.0) -> None:
    """Wait until the turn ``request_id`` has ended in the PostgreSQL ledger at ``url``."""
    import psycopg

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with psycopg.connect(url) as c:
                if c.execute("SELECT 1 FROM turns WHERE request_id = %s AND outcome IS NOT NULL",
                             (request_id,)).fetchone():
                    return
        except psycopg.errors.UndefinedTable:
            pass
        time.sleep(0.1)
    raise AssertionError(f"turn {request_id} not ended in the ledger after {timeout} s")


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_restarted_proxy_knows_the_windows_its_ledger_holds(tmp_path, kind, request):
    """A proxy that starts reads the windows its ledger holds before its first turn: on a SQLite
    file, and on a team's shared PostgreSQL ledger (what another proxy recorded there)."""
    url = None
    if kind == "postgresql":
        pg = request.getfixturevalue("pg_server")
        url = pg.url(db=pg.fresh_db())

    def settled(m: Mitmdump, rid: str) -> None:
        ledger_settled(m.ledger, 20, rid) if url is None else pg_turn_settled(url, rid)

    with Upstream() as ant, Upstream() as local:
        ant.responder = lambda rec: ant_json(windows("0.85"))
        local.script(Reply.json(chat_reply("chatcmpl-quota", "local")))
        rules = tmp_path / "rules.yaml"
        rules.write_text(EASY_RULES.format(local=local.url))
        me = {"authorization": "Bearer sk-ant-oat01-me"}
        hosts = ["--set", f"tokunseba_provider_hosts=127.0.0.1:{ant.port}=anthropic"]
        first = Mitmdump(tmp_path, rules, extra=hosts, ledger=url)
        try:
            with httpx.Client(proxy=first.url, trust_env=False, timeout=30) as c:
                seen = messages(c, ant.url, me)  # nothing known: passed through; it reads 85%
            settled(first, seen.headers["x-tokunseba-request-id"])
        finally:
            first.stop()
        again = Mitmdump(tmp_path, rules, extra=hosts, ledger=url)  # the same ledger
        try:
            with httpx.Client(proxy=again.url, trust_env=False, timeout=30) as c:
                asked = len(ant.requests)
                after = messages(c, ant.url, me)  # its first turn: local, from what the ledger said
                assert len(ant.requests) == asked
            settled(again, after.headers["x-tokunseba-request-id"])
        finally:
            again.stop()
    assert after.json()["content"][0]["text"] == "local"
    assert "5h 85% used" in cli("explain", after.headers["x-tokunseba-request-id"], "--ledger", str(again.ledger))


def test_codex_on_a_chatgpt_login_has_its_windows_recorded_per_account_id(tmp_path):
    """chatgpt.com played by a scripted server (its /backend-api/codex/responses turn path): the
    account is the ChatGPT-Account-ID, so a refreshed access token is still the same account."""
    from .conftest import ROOT

    used = iter(["42.5", "57"])
    with Upstream() as chat:
        chat.responder = lambda rec: Reply(200, {"content-type": "application/json", **codex_headers(),
                                                 "x-codex-primary-used-percent": next(used)},
                                           [json.dumps(RESPONSES_REPLY).encode()])
        proxy = Mitmdump(tmp_path, None, env={"TK_TEST_POINT": f"chatgpt.com=http://127.0.0.1:{chat.port}"},
                         extra=["-s", str(ROOT / "tests" / "support" / "point_hosts.py")])
        try:
            with httpx.Client(proxy=proxy.url, verify=str(proxy.ca), trust_env=False, timeout=30) as c:
                got = [c.post("https://chatgpt.com/backend-api/codex/responses",
                              json={"model": "gpt-5.2-codex", "input": "hi", "stream": False},
                              headers={"authorization": f"Bearer {token}", "chatgpt-account-id": "acct-42"})
                       for token in ("access-token-before-refresh", "access-token-after-refresh")]
            assert [r.status_code for r in got] == [200, 200]
            assert [r.headers["x-codex-primary-used-percent"] for r in got] == ["42.5", "57"]  # as they came
            ledger_settled(proxy.ledger, 20, *(r.headers["x-tokunseba-request-id"] for r in got))
        finally:
            proxy.stop()
    (acct,) = quota_json(proxy.ledger)["accounts"]
    assert (acct["host"], acct["by"], acct["provider"]) == ("chatgpt.com", "chatgpt-account-id", "chatgpt")
    assert by_window(acct)["primary"]["used"] == 0.57 and by_window(acct)["secondary"]["used"] == 0.13


REJECT_RULES = """\
endpoints:
  own:
    protocol: anthropic
    url: {ant}/v1
  local:
    protocol: openai
    url: {local}/v1
    model: small-local
routes:
  - name: main-on-subscription
    when: {{client: anthropic}}
    to: own
  - name: local-when-rejected
    when: {{client: anthropic}}
    to: local
"""


def test_a_rejected_window_moves_the_turn_to_the_next_route(tmp_path):
    state = {"reject_until": 0.0}

    def answer(rec: Recorded) -> Reply:
        if time.time() < state["reject_until"] and rec.headers.get("authorization") == "Bearer sk-ant-oat01-me":
            return ant_json(windows("1.0", status="rejected", reset=state["reject_until"]), 429,
                            {"type": "error", "error": {"type": "rate_limit_error",
                                                        "message": "This request would exceed your rate limit."}})
        return ant_json(windows("0.3"))

    with Upstream() as ant, Upstream() as local:
        ant.responder = answer
        local.script(Reply.json(chat_reply("chatcmpl-quota", "local")))
        rules = tmp_path / "rules.yaml"
        rules.write_text(REJECT_RULES.format(ant=ant.url, local=local.url))
        proxy = Mitmdump(tmp_path, rules, extra=["--set", f"tokunseba_provider_hosts=127.0.0.1:{ant.port}=anthropic"])
        me = {"authorization": "Bearer sk-ant-oat01-me"}
        try:
            with httpx.Client(proxy=proxy.url, trust_env=False, timeout=30) as c:
                ok = messages(c, ant.url, me)  # the subscription takes it
                state["reject_until"] = time.time() + 7
                failed_over = messages(c, ant.url, me)  # 429 rejected: held, moved on to local
                time.sleep(2.5)  # past the endpoint's 2 s back-off after the 429: only the window keeps it out
                asked = len(ant.requests)
                skipped = messages(c, ant.url, me)  # the window says rejected: local, the provider not asked
                assert len(ant.requests) == asked
                other = messages(c, ant.url, {"authorization": "Bearer sk-ant-oat01-other"})  # another account
                time.sleep(max(0.0, state["reject_until"] - time.time() + 0.5))
                back = messages(c, ant.url, me)  # reset: the subscription again
            turns = [ok, failed_over, skipped, other, back]
            ids = [r.headers["x-tokunseba-request-id"] for r in turns]
            assert [r.status_code for r in turns] == [200] * 5
            ledger_settled(proxy.ledger, 20, *ids)
        finally:
            proxy.stop()
    con = sqlite3.connect(proxy.ledger)
    rows = [con.execute("SELECT endpoint FROM turns WHERE request_id = ?", (rid,)).fetchone()[0] for rid in ids]
    rejected = con.execute("SELECT count(*) FROM quota_windows WHERE status = 'rejected' AND window_name = '5h'"
                           ).fetchone()[0]
    con.close()
    assert rows == ["own", "local", "local", "own", "own"]
    assert rejected == 1  # the held 429's windows were recorded
    explain = cli("explain", ids[2], "--ledger", str(proxy.ledger))
    assert "main-on-subscription" in explain and "quota: account" in explain and "rejected" in explain, explain
    stats = cli("stats", "--ledger", str(proxy.ledger))
    assert "quota: 1 turn went elsewhere" in stats, stats  # the one skipped (the 429 moved the other)


def test_quota_help_teaches():
    out = cli("quota", "--help")
    for words in ("anthropic-ratelimit-unified", "x-codex", "quota: {window: 5h, above: 0.8}", "rejected",
                  "never the credential"):
        assert words in out, words



# ---- the real Claude Code on a subscription-style login

CC_RULES = """\
endpoints:
  local:
    protocol: openai
    url: {local}/v1
    model: small-local
    max_tokens: 512
routes:
  - name: titles-local-when-busy
    when: {{client: anthropic, model: "*haiku*", tools: false, quota: {{window: 5h, above: 0.8}}}}
    to: local
"""
OAUTH = "sk-ant-oat01-tokunseba-test-subscription-0123456789"


def ant_sse(text: str, model: str) -> list[bytes]:
    def ev(name: str, obj: dict) -> bytes:
        return f"event: {name}\ndata: {json.dumps(obj)}\n\n".encode()
    return [ev("message_start", {"type": "message_start", "message": {
                "id": "msg_quotacc", "type": "message", "role": "assistant", "model": model, "content": [],
                "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 30, "output_tokens": 1}}}),
            ev("content_block_start", {"type": "content_block_start", "index": 0,
                                       "content_block": {"type": "text", "text": ""}}),
            ev("content_block_delta", {"type": "content_block_delta", "index": 0,
                                       "delta": {"type": "text_delta", "text": text}}),
            ev("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ev("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                                 "usage": {"output_tokens": 5}}),
            ev("message_stop", {"type": "message_stop"})]


def test_claude_code_on_a_subscription_sends_its_title_turn_local_once_the_window_is_above(tmp_path):
    from .conftest import ROOT
    from .test_claude_code_e2e import need_claude
    import os

    claude = need_claude()
    reset = time.time() + 3600

    def answer(rec: Recorded) -> Reply:  # api.anthropic.com as a subscription login sees it
        if rec.method != "POST" or "/v1/messages" not in rec.path or "count_tokens" in rec.path:
            return Reply.json({"type": "error", "error": {"type": "not_found_error", "message": "scripted"}}, 404)
        body = rec.json()
        text = '{"title": "Greeting"}' if "haiku" in body.get("model", "") else "Hello from the subscription."
        hdrs = windows("0.85", reset=reset)
        if body.get("stream"):
            return Reply(200, {"content-type": "text/event-stream", **hdrs}, ant_sse(text, body["model"]), 0.05,
                         "chunked")
        reply = {**ant_reply(text), "model": body.get("model")}
        return ant_json(hdrs, 200, reply)

    with Upstream() as ant, Upstream() as local:
        ant.responder = answer
        local.script(Reply.sse([chat_chunk("chatcmpl-title", {"role": "assistant", "content": ""}),
                                chat_chunk("chatcmpl-title", {"content": '{"title": "List comprehensions"}'}),
                                chat_chunk("chatcmpl-title", {}, "stop"), b"data: [DONE]\n\n"]))  # the title streams
        rules = tmp_path / "rules.yaml"
        rules.write_text(CC_RULES.format(local=local.url))
        proxy = Mitmdump(tmp_path, rules, env={"TK_TEST_POINT": f"api.anthropic.com=http://127.0.0.1:{ant.port}"},
                         extra=["-s", str(ROOT / "tests" / "support" / "point_hosts.py")])
        home, work = tmp_path / "home", tmp_path / "work"
        home.mkdir()
        work.mkdir()
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "TERM": "dumb",
               "HTTPS_PROXY": proxy.url, "HTTP_PROXY": proxy.url, "NODE_EXTRA_CA_CERTS": str(proxy.ca),
               "CLAUDE_CODE_OAUTH_TOKEN": OAUTH, "DISABLE_AUTOUPDATER": "1"}  # not DISABLE_NONESSENTIAL: it stops the title
        runs = []
        try:
            for _ in range(2):  # the first run's replies say 85% used; the second run's title goes local
                # a real first prompt: Claude Code 2.1.197 sends no title turn for "say hi"
                runs.append(subprocess.run([claude, "-p", "Explain what a Python list comprehension is, in one sentence."], cwd=work, env=env,
                                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180))
                ledger_settled(proxy.ledger, 30)
        finally:
            proxy.stop()
        for p in runs:
            assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-2000:], proxy.log()[-3000:])
            assert "Hello from the subscription." in p.stdout  # the main turn reached the provider
        sent = [r for r in ant.requests if r.method == "POST" and r.path.startswith("/v1/messages")
                and "count_tokens" not in r.path]
        assert all(r.headers.get("authorization") == f"Bearer {OAUTH}" for r in sent)  # the login, as the client sent it
        local_titles = [r.json() for r in local.requests]
    log = json.loads(cli("log", "--ledger", str(proxy.ledger), "--json", "--limit", "100"))
    titles = [t for t in log if "haiku" in (t["requested_model"] or "")]
    mains = [t for t in log if t["requested_model"] and "haiku" not in t["requested_model"]
             and t["path"].startswith("/v1/messages") and "count_tokens" not in t["path"]]
    # the main turns reach the provider, each run
    assert mains and all(t["outcome"] == "pass_through" and t["host"] == "api.anthropic.com" for t in mains), mains
    # the first run's title went out before any reply had said a thing: to the provider; once a reply
    # said 85% used, the second run's title went local
    assert [(t["outcome"], t["endpoint"], t["status"]) for t in reversed(titles)] == [("pass_through", None, 200),
                                                                                      ("translated", "local", 200)], titles
    assert titles[0]["rule"] == "titles-local-when-busy"
    assert "5h 85% used" in cli("explain", titles[0]["request_id"], "--ledger", str(proxy.ledger))
    assert local_titles and local_titles[0]["model"] == "small-local" and "tools" not in local_titles[0]
    rep = quota_json(proxy.ledger)
    (acct,) = rep["accounts"]
    assert acct["by"] == "authorization" and by_window(acct)["5h"]["used"] == 0.85
    con = sqlite3.connect(proxy.ledger)
    dump = "\n".join(con.iterdump())
    con.close()
    assert OAUTH not in dump
