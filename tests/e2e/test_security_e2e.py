"""Issue 8 end to end: a real mitmdump with the addon, scripted upstreams on loopback and the
official SDKs. A canary credential rides in every header, cookie and query parameter the
client sends; it must reach no host but the client's original one, and neither it nor an
endpoint key may show in the ledger file, the CLI's output, mitmdump's output (default and
debug verbosity, every flow_detail) or the error bodies the client gets. Also: the README's
direct mitmdump command listens on loopback only, and the all-local example fails closed."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import time
from pathlib import Path

import anthropic
import httpx
import openai
import pytest

from .conftest import BIN, ROOT, Mitmdump
from .test_proxy_e2e import chat_text_stream
from tests.support.upstream import Reply, Upstream, closed_port

pytestmark = pytest.mark.e2e

CANARY = "CANARY-e2e-5b8d0f2a71"
KEYS = {"TK_SEC_OAI_KEY": "sk-endpoint-oai-SECRET-e2e-91", "TK_SEC_ANT_KEY": "sk-endpoint-ant-SECRET-e2e-92"}
CANARY_HEADERS = {
    "cookie": f"session={CANARY}; other={CANARY}", "cf-aig-authorization": f"Bearer {CANARY}",
    "helicone-auth": f"Bearer {CANARY}", "x-portkey-api-key": CANARY, "x-auth-token": CANARY,
    "x-acme-token": CANARY, "x-goog-api-key": CANARY, "openai-organization": CANARY, "openai-project": CANARY,
}
CANARY_QUERY = {"key": CANARY, "api_key": CANARY, "access_token": CANARY, "token": CANARY}

RULES = """\
endpoints:
  oai:
    protocol: openai
    url: {oai}/v1
    key_env: TK_SEC_OAI_KEY
  ant2:
    protocol: anthropic
    url: {ant2}/v1
    key_env: TK_SEC_ANT_KEY
routes:
  - name: translate
    when: {{client: anthropic, model: "claude-*"}}
    to: oai
  - name: retarget
    when: {{client: anthropic, model: "retarget-*"}}
    to: ant2
  - name: chat-to-ant
    when: {{client: openai, model: "gpt-*"}}
    to: ant2
"""

ANT_REPLY = {"id": "msg_sec", "type": "message", "role": "assistant", "model": "m", "stop_reason": "end_turn",
             "stop_sequence": None, "content": [{"type": "text", "text": "ok"}],
             "usage": {"input_tokens": 3, "output_tokens": 1}}


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "tokunseba"), *args], capture_output=True, text=True, timeout=60)


def echo_error(protocol: str, key: str) -> Reply:
    """An upstream 401 that quotes the key it was sent (some gateways do)."""
    if protocol == "anthropic":
        return Reply.json({"type": "error", "error": {"type": "authentication_error",
                                                      "message": f"invalid x-api-key: {key}"}}, 401)
    return Reply.json({"error": {"message": f"Incorrect API key provided: {key}", "type": "invalid_request_error",
                                 "param": None, "code": "invalid_api_key"}}, 401)


@pytest.fixture(scope="module")
def sec_upstreams():
    with Upstream() as orig_ant, Upstream() as orig_oai, Upstream() as oai, Upstream() as ant2:
        yield {"orig_ant": orig_ant, "orig_oai": orig_oai, "oai": oai, "ant2": ant2}


def start(ups: dict, work: Path, *extra: str) -> Mitmdump:
    rules = work / "rules.yaml"
    rules.write_text(RULES.format(oai=ups["oai"].url, ant2=ups["ant2"].url))
    hosts = [f"127.0.0.1:{ups['orig_ant'].port}=anthropic", f"127.0.0.1:{ups['orig_oai'].port}=openai"]
    return Mitmdump(work, rules, env=KEYS, extra=["--set", f"tokunseba_provider_hosts={hosts[0]}",
                                                  "--set", f"tokunseba_provider_hosts={hosts[1]}",
                                                  "--set", "tokunseba_ledger_bodies=true", *extra])


def use_proxy(proxy: Mitmdump, monkeypatch) -> None:
    for k, v in proxy.client_env().items():
        monkeypatch.setenv(k, v)


def canary_clients(proxy: Mitmdump, ups: dict, monkeypatch) -> tuple[anthropic.Anthropic, openai.OpenAI]:
    use_proxy(proxy, monkeypatch)
    a = anthropic.Anthropic(api_key=CANARY, base_url=ups["orig_ant"].url, max_retries=0,
                            default_headers={**CANARY_HEADERS, "authorization": f"Bearer {CANARY}"},
                            default_query=CANARY_QUERY)
    o = openai.OpenAI(api_key=CANARY, base_url=ups["orig_oai"].url + "/v1", max_retries=0,
                      default_headers={**CANARY_HEADERS, "x-api-key": CANARY}, default_query=CANARY_QUERY)
    return a, o


def drive_turns(a: anthropic.Anthropic, o: openai.OpenAI, ups: dict) -> list[str]:
    """Every kind of turn with canary credentials; returns the error texts the client got."""
    msgs = [{"role": "user", "content": "hi"}]
    errors: list[str] = []
    ups["oai"].script(Reply.sse(chat_text_stream("chatcmpl-sec-1")))
    with a.messages.stream(model="claude-haiku-4-5", max_tokens=20, messages=msgs) as s:  # translated stream
        assert s.get_final_message().content[0].text == "Hello wörld!"
    ups["oai"].script(echo_error("openai", KEYS["TK_SEC_OAI_KEY"]))  # translated, key echoed back
    with pytest.raises(anthropic.AuthenticationError) as ei:
        a.messages.create(model="claude-haiku-4-5", max_tokens=20, messages=msgs)
    errors.append(ei.value.response.text)
    ups["ant2"].script(Reply.json(ANT_REPLY))  # retargeted to another host
    assert a.messages.create(model="retarget-1", max_tokens=20, messages=msgs).content[0].text == "ok"
    ups["ant2"].script(echo_error("anthropic", KEYS["TK_SEC_ANT_KEY"]))  # retargeted, key echoed back
    with pytest.raises(anthropic.AuthenticationError) as ei:
        a.messages.create(model="retarget-1", max_tokens=20, messages=msgs)
    errors.append(ei.value.response.text)
    ups["ant2"].script(Reply.sse([b"event: error\ndata: " + json.dumps({"type": "error", "error": {
        "type": "authentication_error", "message": "bad key " + KEYS["TK_SEC_ANT_KEY"]}}).encode() + b"\n\n"]))
    with pytest.raises(anthropic.APIStatusError) as ei:  # retargeted stream that echoes the key
        with a.messages.stream(model="retarget-1", max_tokens=20, messages=msgs) as s:
            s.get_final_message()
    errors.append(str(ei.value.body))
    ups["ant2"].script(Reply.json(ANT_REPLY))  # openai chat -> anthropic endpoint
    assert o.chat.completions.create(model="gpt-4.1", max_tokens=20, messages=msgs).choices[0].message.content == "ok"
    with pytest.raises(anthropic.BadRequestError) as ei:  # refused before sending: what Anthropic forbids
        a.messages.create(model="claude-haiku-4-5", max_tokens=-1, messages=msgs)
    errors.append(ei.value.response.text)
    ups["orig_ant"].script(Reply.json(ANT_REPLY))  # pass-through: the original host may see the canary
    assert a.messages.create(model="pass-1", max_tokens=20, messages=msgs).content[0].text == "ok"
    return errors


@pytest.mark.parametrize("verbosity", [[], ["--set", "termlog_verbosity=debug", "--set", "flow_detail=4"]],
                         ids=["default", "debug-flow-detail-4"])
def test_canary_reaches_only_the_original_host_and_is_shown_nowhere(sec_upstreams, tmp_path, verbosity, monkeypatch):
    ups = sec_upstreams
    proxy = start(ups, tmp_path, *verbosity)
    try:
        a, o = canary_clients(proxy, ups, monkeypatch)
        errors = drive_turns(a, o, ups)
    finally:
        proxy.stop()
    secrets = [CANARY, *KEYS.values()]
    # other hosts: no canary, anywhere in what they received; the endpoint's own key did arrive
    for name in ("oai", "ant2"):
        for rec in ups[name].requests:
            seen = rec.path + repr(rec.headers) + rec.body.decode("utf-8", "replace")
            assert CANARY not in seen, (name, seen)
    assert ups["oai"].requests[0].headers["authorization"] == f"Bearer {KEYS['TK_SEC_OAI_KEY']}"
    assert ups["ant2"].requests[0].headers["x-api-key"] == KEYS["TK_SEC_ANT_KEY"]
    assert CANARY in repr(ups["orig_ant"].requests[-1].headers), ups["orig_ant"].requests[-1].headers  # its own business
    # the client's error bodies: keys echoed back are redacted, and the 400 names its JSON path
    assert len(errors) == 4 and "max_tokens" in errors[-1]
    for text in errors:
        assert not any(s in text for s in secrets), text
    assert "<redacted>" in errors[0] and "<redacted>" in errors[1] and "<redacted>" in errors[2]
    # the ledger file's bytes (bodies stored too), and everything the CLI prints
    ledger = proxy.ledger
    raw = b"".join(p.read_bytes() for p in ledger.parent.glob(ledger.name + "*"))
    assert not any(s.encode() in raw for s in secrets)
    log = json.loads(cli("log", "--ledger", str(ledger), "--json").stdout)
    outputs = [cli("log", "--ledger", str(ledger)).stdout, json.dumps(log),
               cli("stats", "--ledger", str(ledger)).stdout, cli("stats", "--ledger", str(ledger), "--json").stdout]
    for turn in log:
        outputs += [cli("explain", turn["request_id"], "--ledger", str(ledger)).stdout,
                    cli("explain", turn["request_id"], "--ledger", str(ledger), "--json").stdout]
    assert len(log) == 8 and all(outputs)
    for out in outputs:
        assert not any(s in out for s in secrets), out
    left = [e for t in log for e in json.loads(cli("explain", t["request_id"], "--ledger", str(ledger), "--json")
                                               .stdout)["events"] if e["kind"] == "left_behind"]
    assert left and all("cf-aig-authorization" in e["data"]["headers"] for e in left)
    # mitmdump's own output
    out = proxy.log()
    assert "POST" in out
    assert not any(s in out for s in secrets), [line for line in out.splitlines() if any(s in line for s in secrets)]


# ---------------------------------------------------------------- loopback only


def docs_mitmdump_command() -> list[str]:
    text = (ROOT / "docs/guide/clients.md").read_text()  # where the docs run mitmdump directly
    m = re.search(r"^\.venv/bin/mitmdump .*?(?<!\\)$", text, re.S | re.M)
    assert m, "docs/guide/clients.md has no direct mitmdump command"
    return shlex.split(m.group(0).replace("\\\n", " "))


def listening_addresses(pid: int) -> set[str]:
    """host:port of every listening TCP socket the process holds (from /proc)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    out = set()
    for table, width in (("tcp", 8), ("tcp6", 32)):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            f = line.split()
            if f[3] != "0A" or f[9] not in inodes:  # 0A: LISTEN
                continue
            hexaddr, hexport = f[1].split(":")
            raw = bytes.fromhex(hexaddr)
            words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
            import ipaddress

            addr = ipaddress.ip_address(words) if width == 32 else ipaddress.ip_address(raw[::-1])
            out.add(f"{addr}:{int(hexport, 16)}")
    return out


def test_docs_mitmdump_command_listens_on_loopback_only(tmp_path):
    cmd = docs_mitmdump_command()
    assert cmd[0] == ".venv/bin/mitmdump" and "--listen-host" in cmd
    cmd = [str(BIN / "mitmdump"), *cmd[1:]]
    cmd = [str(ROOT / c) if c.startswith(("addon/", "rules/")) else c for c in cmd]
    cmd = [f"tokunseba_rules={ROOT / c.split('=', 1)[1]}" if c.startswith("tokunseba_rules=") else c for c in cmd]
    cmd += ["-p", "0", "--set", f"confdir={tmp_path / 'conf'}", "--set", f"tokunseba_ledger={tmp_path / 'l.db'}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    try:
        deadline, seen = time.time() + 30, []
        while time.time() < deadline:
            line = proc.stdout.readline()
            seen.append(line)
            if "proxy listening at" in line or (not line and proc.poll() is not None):
                break
        assert any("proxy listening at" in s for s in seen), "".join(seen)
        addrs = listening_addresses(proc.pid)
        assert addrs and all(a.startswith("127.0.0.1:") for a in addrs), addrs
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ---------------------------------------------------------------- all-local fails closed


def test_all_local_example_refuses_instead_of_reaching_the_original_host(sec_upstreams, tmp_path, monkeypatch):
    orig = sec_upstreams["orig_ant"]
    orig.script(Reply.json(ANT_REPLY))
    text = (ROOT / "rules" / "examples" / "all-local.yaml").read_text()
    rules = tmp_path / "all-local.yaml"
    rules.write_text(text.replace("http://127.0.0.1:28431/v1", f"http://127.0.0.1:{closed_port()}/v1"))
    proxy = Mitmdump(tmp_path, rules, extra=["--set", f"tokunseba_provider_hosts=127.0.0.1:{orig.port}=anthropic"])
    try:
        use_proxy(proxy, monkeypatch)
        client = anthropic.Anthropic(api_key=CANARY, base_url=orig.url, max_retries=0)
        with pytest.raises(anthropic.APIStatusError) as ei:  # the local server is down: on_unreachable: error
            client.messages.create(model="claude-haiku-4-5", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
        assert ei.value.status_code == 503 and ei.value.body["type"] == "error"
        assert "unreachable" in ei.value.body["error"]["message"]
        for body in (b"this is { not json", b"", b"\xff\xfe", b"[" * 5000 + b"]" * 5000):  # unmatched: refuse
            with httpx.Client(proxy=proxy.url, trust_env=False) as c:
                r = c.post(f"{orig.url}/v1/messages", content=body,
                           headers={"x-api-key": CANARY, "content-type": "application/json"})
            assert r.status_code == 400 and r.json()["type"] == "error", r.text
            assert "unmatched: refuse" in r.json()["error"]["message"]
    finally:
        proxy.stop()
    assert orig.requests == []  # nothing reached the original host
