"""The real local model (Gemma 3 270M) behind real servers, through a real mitmdump with the
addon: llama.cpp's llama-server (reports usage in streams) and llama-cpp-python's server
(never reports usage in streams; grammar-constrained named tool calls). Installed and
started by scripts/localmodel.sh. Assertions are on structure, never on model text."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

import anthropic
import httpx
import pytest

import tokunseba.protocols  # noqa: F401  (registers each protocol's usage counting, which Usage.to reads)
from tokunseba.neutral.usage import Usage

from .conftest import BIN, CACHE, ROOT, Mitmdump, ledger_settled
from .test_claude_code_e2e import result_json, run_claude
from tests.support.upstream import Reply, Upstream, closed_port, free_port

pytestmark = [pytest.mark.e2e, pytest.mark.localmodel]

SCRIPT = ROOT / "scripts" / "localmodel.sh"
CLIENT_KEY = "sk-ant-client-key-for-local-tests"
WEATHER = {"name": "get_weather", "description": "Get the weather for a city",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"},
                                                             "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                            "required": ["city", "unit"]}}


def _installed(kind: str) -> bool:
    if kind == "llama-server":
        return (CACHE / "bin" / "llama-server").exists() and (CACHE / "models" / "gemma-3-270m-q4_k_m.gguf").exists()
    # `install --with-python-server` (a plain install has the venv but not llama_cpp)
    return any((CACHE / "venv-localmodel" / "lib").glob("python*/site-packages/llama_cpp/server"))


def _start(kind: str, state: Path) -> str:
    if not _installed(kind):
        if os.environ.get("CI"):
            pytest.fail(f"{kind} is not installed: .ci/run must run scripts/ci-extras.sh "
                        "(scripts/localmodel.sh install --with-python-server)")
        pytest.skip(f"{kind} not installed (scripts/localmodel.sh install --with-python-server)")
    env = {**os.environ, "LOCALMODEL_STATE_DIR": str(state)}
    port = free_port()  # a free port, passed as the README does (`start --port P`)
    p = subprocess.run([str(SCRIPT), "start", "--server", kind, "--port", str(port)], capture_output=True, text=True,
                       env=env, timeout=180)
    assert p.returncode == 0, p.stderr[-3000:]
    url = p.stdout.strip().splitlines()[-1]
    assert url == f"http://127.0.0.1:{port}/v1"
    return url


def _stop(kind: str, state: Path) -> None:
    subprocess.run([str(SCRIPT), "stop", "--server", kind], capture_output=True, text=True, timeout=60,
                   env={**os.environ, "LOCALMODEL_STATE_DIR": str(state)})


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    state = tmp_path_factory.mktemp("localmodel-state")
    started: dict[str, str] = {}
    try:
        for kind in ("llama-server", "llama-cpp-python"):
            started[kind] = _start(kind, state)
        yield started
    finally:
        for kind in started:
            _stop(kind, state)


RULES = """\
endpoints:
  llama:
    protocol: openai
    url: {llama}
    model: gemma-3-270m
    max_tokens: 48
    max_tokens_field: max_tokens
    stop: ["<|im_end|>"]
  llama-cc:                # Claude Code: the shipped example's cap, so the base model has room to reach
    protocol: openai        # its end marker (else Claude Code's max_tokens continuation loop gives up)
    url: {llama}
    model: gemma-3-270m
    max_tokens: 512
    max_tokens_field: max_tokens
    stop: ["<|im_end|>"]
  lcp:
    protocol: openai
    url: {lcp}
    model: gemma-3-270m
    max_tokens: 48
    max_tokens_field: max_tokens
routes:
  - name: to-lcp
    when: {{client: anthropic, model: "lcp-*"}}
    to: lcp
  - name: claude-code
    when: {{client: anthropic, model: "claude-opus-*"}}
    to: llama-cc
  - name: to-llama
    when: {{client: anthropic}}
    to: llama
"""


@pytest.fixture(scope="module")
def local_proxy(servers, tmp_path_factory):
    work = tmp_path_factory.mktemp("local-proxy")
    rules = work / "rules.yaml"
    rules.write_text(RULES.format(llama=servers["llama-server"], lcp=servers["llama-cpp-python"]))
    m = Mitmdump(work, rules)
    yield m
    m.stop()


@pytest.fixture
def sdk(local_proxy, monkeypatch):
    for k, v in local_proxy.client_env().items():
        monkeypatch.setenv(k, v)
    return anthropic.Anthropic(api_key=CLIENT_KEY, max_retries=0, timeout=120)


def ledger_turn(proxy: Mitmdump, request_id: str) -> dict:
    ledger_settled(proxy.ledger)
    con = sqlite3.connect(proxy.ledger)
    con.row_factory = sqlite3.Row
    try:
        row = con.execute("SELECT * FROM turns WHERE request_id = ?", (request_id,)).fetchone()
    finally:
        con.close()
    assert row is not None, request_id
    return dict(row)


def reported(row: dict) -> dict | None:
    return json.loads(row["usage_reported"]) if row["usage_reported"] else None


def usage_dict(u) -> dict:
    return {k: v for k, v in u.model_dump().items() if v is not None and isinstance(v, (int, dict))}


def test_llama_server_non_streamed_text_usage_as_reported(sdk, local_proxy):
    raw = sdk.messages.with_raw_response.create(model="claude-haiku-4-5", max_tokens=200, extra_body={"temperature": 0},
                                                messages=[{"role": "user", "content": "Say hello."}])
    msg = raw.parse()
    assert msg.content and msg.content[0].type == "text" and msg.stop_reason in ("end_turn", "max_tokens")
    row = ledger_turn(local_proxy, raw.headers["x-tokunseba-request-id"])
    rep = reported(row)
    assert rep and rep["prompt_tokens"] > 0 and rep["completion_tokens"] > 0
    # the client's usage is exactly llama-server's, re-based per docs/dev/protocols.md E.4
    assert usage_dict(msg.usage) == Usage("openai", rep).to("anthropic")
    assert row["usage_input"] == rep["prompt_tokens"] and row["usage_output"] == rep["completion_tokens"]
    assert json.loads(row["usage_client"]) == Usage("openai", rep).to("anthropic")


def test_llama_server_streamed_text_usage_as_reported(sdk, local_proxy):
    with sdk.messages.with_streaming_response.create(
            model="claude-haiku-4-5", max_tokens=200, extra_body={"temperature": 0}, stream=True,
            messages=[{"role": "user", "content": "Count to five."}]) as resp:
        rid = resp.headers["x-tokunseba-request-id"]
        events = []
        for line in resp.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line[6:]))
    kinds = [e["type"] for e in events]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    assert kinds.count("content_block_start") == kinds.count("content_block_stop")  # the model may say nothing
    delta = next(e for e in events if e["type"] == "message_delta")
    row = ledger_turn(local_proxy, rid)
    rep = reported(row)
    assert rep and rep["prompt_tokens"] > 0  # llama-server streams usage when include_usage is asked
    assert delta["usage"] == Usage("openai", rep).to("anthropic")
    # and the SDK's own accumulator agrees
    with sdk.messages.stream(model="claude-haiku-4-5", max_tokens=200, extra_body={"temperature": 0},
                             messages=[{"role": "user", "content": "Count to five."}]) as s:
        final = s.get_final_message()
    assert final.usage.output_tokens > 0 and final.stop_reason in ("end_turn", "max_tokens")


@pytest.mark.parametrize("stream", [False, True])
def test_named_tool_call_arguments_parse(sdk, stream):
    """llama-cpp-python constrains a named tool call by grammar (llama-server ignores tools
    with this model): the tool_use input must be the parsed arguments."""
    kw = dict(model="lcp-haiku", max_tokens=200, extra_body={"temperature": 0}, tools=[WEATHER],
              tool_choice={"type": "tool", "name": "get_weather"},
              messages=[{"role": "user", "content": "What is the weather in Paris?"}])
    if stream:
        with sdk.messages.stream(**kw) as s:
            msg = s.get_final_message()
    else:
        msg = sdk.messages.create(**kw)
    tool = [b for b in msg.content if b.type == "tool_use"]
    assert len(tool) == 1 and tool[0].name == "get_weather"
    assert isinstance(tool[0].input, dict) and set(tool[0].input) <= {"city", "unit"}
    assert msg.stop_reason == "tool_use"


def test_llama_cpp_server_stream_has_no_usage_and_ledger_says_null(sdk, local_proxy):
    with sdk.messages.with_streaming_response.create(
            model="lcp-text", max_tokens=50, extra_body={"temperature": 0}, stream=True,
            messages=[{"role": "user", "content": "Say hello."}]) as resp:
        rid = resp.headers["x-tokunseba-request-id"]
        events = [json.loads(ln[6:]) for ln in resp.iter_lines() if ln.startswith("data: ")]
    assert events[-1]["type"] == "message_stop"
    delta = next(e for e in events if e["type"] == "message_delta")
    assert delta["usage"] == {}  # nothing reported: absent, never zero
    row = ledger_turn(local_proxy, rid)
    assert row["usage_reported"] is None and row["usage_input"] is None and row["usage_output"] is None
    # the endpoint's max_tokens (48) is below the client's 50: a reply that runs to it is `capped`
    assert row["status"] == 200 and row["outcome"] in ("translated", "capped")


def test_claude_code_turn_served_by_the_local_model(local_proxy, tmp_path):
    p = run_claude(local_proxy, tmp_path, "say hi", timeout=400)
    res = result_json(p)
    assert p.returncode == 0 and res["is_error"] is False, (res.get("result"), p.stderr[-2000:])
    ledger_settled(local_proxy.ledger)
    log = json.loads(subprocess.run([str(BIN / "tokunseba"), "log", "--ledger", str(local_proxy.ledger), "--json",
                                     "--limit", "1"], capture_output=True, text=True).stdout)
    assert log[0]["endpoint"] == "llama-cc" and log[0]["outcome"] in ("translated", "capped") and log[0]["status"] == 200


def test_easy_turns_example_main_turn_passes_haiku_title_goes_local(servers, tmp_path):
    """rules/examples/easy-turns-local.yaml with its local endpoint on the real llama-server:
    Claude Code's main turn (captured fixture) passes through untouched to a scripted
    Anthropic upstream; its Haiku title turn is answered by the local model."""
    from tests.conftest import load_fixture

    example = (ROOT / "rules" / "examples" / "easy-turns-local.yaml").read_text()
    rules = tmp_path / "easy.yaml"
    rules.write_text(example.replace("http://127.0.0.1:28431/v1", servers["llama-server"]))
    main = load_fixture("claude-code-print-main-turn.json")
    title = load_fixture("claude-code-title-haiku.json")
    main_body = json.dumps(main["body"]).encode()
    title_body = json.dumps(title["body"]).encode()
    with Upstream() as ant:
        ant.script(Reply.sse(b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_main","type":'
                             b'"message","role":"assistant","model":"claude-opus-4-8","content":[],"stop_reason":null,'
                             b'"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1}}}\n\n'
                             b'event: message_stop\ndata: {"type":"message_stop"}\n\n'))
        m = Mitmdump(tmp_path, rules, extra=["--set", f"tokunseba_provider_hosts=127.0.0.1:{ant.port}=anthropic"])
        try:
            with httpx.Client(proxy=m.url, trust_env=False, timeout=120) as c:
                hdrs = {"x-api-key": CLIENT_KEY, "content-type": "application/json", "anthropic-version": "2023-06-01"}
                r1 = c.post(f"{ant.url}/v1/messages?beta=true", content=main_body, headers=hdrs)
                r2 = c.post(f"{ant.url}/v1/messages?beta=true", content=title_body, headers=hdrs)
        finally:
            m.stop()
        assert r1.status_code == 200 and r2.status_code == 200, (r1.text[:300], r2.text[:300])
        assert len(ant.requests) == 1 and ant.requests[0].body == main_body  # only the main turn, untouched
        assert ant.requests[0].headers["x-api-key"] == CLIENT_KEY
    assert b"event: message_stop" in r2.content and b"event: message_start" in r2.content
    log = json.loads(subprocess.run([str(BIN / "tokunseba"), "log", "--ledger", str(m.ledger), "--json"],
                                    capture_output=True, text=True).stdout)
    by_id = {t["request_id"]: t for t in log}
    t_main, t_title = by_id[r1.headers["x-tokunseba-request-id"]], by_id[r2.headers["x-tokunseba-request-id"]]
    assert t_main["outcome"] == "pass_through" and t_main["rule"] is None
    # a title asks for JSON: one the base model runs on ends on the endpoint's cap (`capped`)
    assert t_title["outcome"] in ("translated", "capped") and t_title["rule"] == "claude-background"
    assert t_title["endpoint"] == "local"
    text_log = subprocess.run([str(BIN / "tokunseba"), "log", "--ledger", str(m.ledger)], capture_output=True, text=True)
    assert "claude-background → local" in text_log.stdout


def test_models_probe_confirms_both_real_servers_answer(servers, tmp_path):
    """`tokunseba models --probe`, as the README tells a user with a server of their own: each
    real server is reachable and serves the model the rules name; a closed port is not."""
    closed = closed_port()
    rules = tmp_path / "probe.yaml"
    gone = f"  gone:\n    protocol: openai\n    url: http://127.0.0.1:{closed}/v1\nroutes:"
    rules.write_text(RULES.format(llama=servers["llama-server"], lcp=servers["llama-cpp-python"])
                     .replace("routes:", gone))
    probe = [str(BIN / "tokunseba"), "models", "--rules", str(rules), "--probe", "--timeout", "10"]
    ok = subprocess.run([*probe, "--endpoint", "llama", "--endpoint", "lcp", "--json"], capture_output=True,
                        text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    eps = {e["name"]: e["probe"] for e in json.loads(ok.stdout)["endpoints"]}
    for name, url in (("llama", servers["llama-server"]), ("lcp", servers["llama-cpp-python"])):
        assert eps[name]["reachable"] and eps[name]["ok"] and eps[name]["status"] == 200, eps[name]
        assert eps[name]["url"] == f"{url}/models"
        assert "gemma-3-270m" in eps[name]["models"] and eps[name]["not_served"] == []
    text = subprocess.run([*probe, "--endpoint", "llama", "--endpoint", "gone"], capture_output=True, text=True,
                          timeout=60)
    assert text.returncode == 1  # one probed endpoint gave no models list
    probed = text.stdout[text.stdout.index("ENDPOINT  PROBED"):].split("\n\n")[0]  # the fitness table follows
    rows = {line.split()[0]: line for line in probed.splitlines()[1:] if line.strip()}
    assert "reachable, " in rows["llama"] and "gemma-3-270m" in rows["llama"]
    assert "unreachable: connection refused" in rows["gone"]


def test_start_right_after_stop_on_the_same_port(tmp_path):
    """Issue 41: `stop` then `start --port P` said "port P ... is already in use" for up to a
    minute. The real llama-server, a kept-alive connection to it (as the proxy keeps one): stopped,
    the server closes that connection first, which leaves it in TIME_WAIT on P; `start --port P`
    right after takes P again."""
    state = tmp_path / "state"
    url = _start("llama-server", state)
    port = int(url.split(":")[2].split("/")[0])
    client = httpx.Client(trust_env=False, timeout=30)
    try:
        for _ in range(3):  # one connection, kept alive
            assert client.get(f"http://127.0.0.1:{port}/health").status_code == 200
        _stop("llama-server", state)
        client.close()  # the server's side, closed first, now waits out TIME_WAIT
        waiting = subprocess.run(["ss", "-Htan", f"sport = :{port}"], capture_output=True, text=True)
        p = subprocess.run([str(SCRIPT), "start", "--server", "llama-server", "--port", str(port)], capture_output=True,
                           text=True, env={**os.environ, "LOCALMODEL_STATE_DIR": str(state)}, timeout=180)
        print(f"sockets on {port} at the restart: {waiting.stdout.strip() or '(ss found none)'}")
        assert p.returncode == 0 and "already in use" not in p.stderr, p.stderr[-3000:]
        assert p.stdout.strip().splitlines()[-1] == url
    finally:
        client.close()
        _stop("llama-server", state)
