"""The real Codex CLI as shipped — its default model (no ``-c model=``), whose tools come in an
``additional_tools`` item grouped in namespaces with the freeform ``exec`` tool — through a real
mitmdump with the addon, to an Anthropic, a Chat Completions and a Gemini endpoint (scripted
loopback upstreams whose replies are rendered by each protocol's own stream encoder), and to
the real llama-server (issue 27).

The model calls ``exec`` with JavaScript that runs ``tools.apply_patch(...)``: the file appears
on disk, the result goes back with the same call id, Codex prints the model's final text. A
namespaced function (``clock`` ``sleep``) round-trips with its namespace: Codex runs it (it
answers a call that lost its namespace with "unsupported call"). A tool of a small stdio MCP
server the test starts (the default model reaches MCP tools as ``exec``'s nested tools:
``tools.mcp__notes__read_note(...)``, its namespace deferred) answers through the routed turn."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tokunseba import translate as tr
from tokunseba.neutral.events import BlockDelta, BlockStart, BlockStop, MessageStart, MessageStop
from tokunseba.neutral.report import ReplyReport
from tokunseba.neutral.tools import freeform_arguments
from tokunseba.neutral.usage import Usage
from tokunseba.protocols.openai_chat import COUNTING_NAME as OPENAI

from .conftest import BIN, Mitmdump, ledger_settled
from .test_codex_e2e import DUMMY as CODEX_DUMMY, codex_exec
from tests.support.upstream import Reply, Upstream

pytestmark = [pytest.mark.e2e, pytest.mark.claudecode]

ENDPOINT_KEY = "sk-endpoint-key-for-codex-default"
PATCH = "*** Begin Patch\n*** Add File: hello.txt\n+hi from the routed model\n*** End Patch\n"
JS = "const r = await tools.apply_patch(" + json.dumps(PATCH) + ");\ntext(r);"
FINAL = "Patched: hello.txt is written."
ENDPOINTS = {
    "anthropic": "protocol: anthropic\n    url: {url}/v1\n    max_tokens: 8192",
    "openai": "protocol: openai\n    url: {url}/v1\n    max_tokens: 8192",
    "gemini": "protocol: gemini\n    url: {url}/v1beta\n    max_tokens: 8192",
}
RULES = """\
endpoints:
  target:
    {endpoint}
    key_env: TK_TEST_CODEX_KEY
routes:
  - name: codex-default-elsewhere
    when: {{client: openai-responses}}
    to: target
    model: {model}
"""
MODELS = {"anthropic": "claude-sonnet-4-5", "openai": "local-model", "gemini": "gemini-2.5-flash"}


def rendered(protocol: str, events: list) -> Reply:
    """A reply as ``protocol``'s endpoint streams it (its own stream encoder), in pieces."""
    enc = tr.CODECS[protocol].stream_encoder(ReplyReport(), True, 1767225600)
    pieces = [b for b in (enc.encode(e) for e in events) if b]
    return Reply.sse(pieces, delay=0.01)


def call_reply(protocol: str, call_id: str, name: str, args: str) -> Reply:
    step = 23
    return rendered(protocol, [
        MessageStart("msg_codexdefault1", MODELS[protocol]),
        BlockStart(0, "tool_use", id=call_id, name=name),
        *[BlockDelta(0, args[k:k + step]) for k in range(0, len(args), step)],
        BlockStop(0),
        MessageStop("tool_use", None, Usage(OPENAI, {"prompt_tokens": 9000, "completion_tokens": 60})),
    ])


def text_reply(protocol: str, text: str) -> Reply:
    return rendered(protocol, [
        MessageStart("msg_codexdefault2", MODELS[protocol]), BlockStart(0, "text"), BlockDelta(0, text), BlockStop(0),
        MessageStop("end_turn", None, Usage(OPENAI, {"prompt_tokens": 9100, "completion_tokens": 9})),
    ])


def run_codex(m: Mitmdump, tmp_path: Path, prompt: str, *extra: str) -> tuple[subprocess.CompletedProcess, Path]:
    """Codex as shipped (no -c model=), free to write its working folder."""
    return codex_exec(m, tmp_path, prompt, "--dangerously-bypass-approvals-and-sandbox", *extra)


def tool_results(protocol: str, body: dict) -> list[tuple[str, str]]:
    """(call id, result text) of every tool result in a request of ``protocol``."""
    if protocol == "anthropic":
        return [(b["tool_use_id"], json.dumps(b["content"])) for m in body["messages"] if isinstance(m["content"], list)
                for b in m["content"] if b.get("type") == "tool_result"]
    if protocol == "openai":
        return [(m["tool_call_id"], m["content"]) for m in body["messages"] if m["role"] == "tool"]
    return [(p["functionResponse"].get("id"), json.dumps(p["functionResponse"]["response"]))
            for c in body["contents"] for p in c["parts"] if "functionResponse" in p]


def declared(protocol: str, body: dict) -> list[str]:
    if protocol == "anthropic":
        return [t["name"] for t in body["tools"]]
    if protocol == "openai":
        return [t["function"]["name"] for t in body["tools"]]
    return [f["name"] for t in body["tools"] for f in t.get("functionDeclarations", [])]


def patched_through(tmp_path: Path, up: Upstream, endpoint: str, model: str) -> tuple[Mitmdump, dict, dict]:
    """Codex asked to create hello.txt through a route to ``endpoint`` (its rules text, ``up``
    scripted with the call and the final text): the file is written and the final text printed;
    (the proxy, the first and the second request's body)."""
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES.format(endpoint=endpoint.format(url=up.url), model=model))
    m = Mitmdump(tmp_path, rules, env={"TK_TEST_CODEX_KEY": ENDPOINT_KEY})
    try:
        p, work = run_codex(m, tmp_path, "create hello.txt")
        ledger_settled(m.ledger)
    finally:
        m.stop()
    assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-3000:])
    assert (work / "hello.txt").read_text() == "hi from the routed model\n"
    assert FINAL in p.stdout
    first, second = (r.json() for r in up.requests if r.method == "POST")
    return m, first, second


@pytest.mark.parametrize("protocol", ["anthropic", "openai", "gemini"])
def test_default_codex_applies_a_patch_through_exec_on_another_protocol(tmp_path, protocol):
    call_id = f"call_exec_{protocol}_01"
    with Upstream() as up:
        up.script(call_reply(protocol, call_id, "exec", freeform_arguments(JS)), text_reply(protocol, FINAL))
        m, first, second = patched_through(tmp_path, up, ENDPOINTS[protocol], MODELS[protocol])
        names = declared(protocol, first)
        assert names[0] == "exec" and "clock__sleep" in names and "collaboration__spawn_agent" in names
        results = tool_results(protocol, second)
        assert [r[0] for r in results] == [call_id] and "Script completed" in results[0][1]
        assert all(CODEX_DUMMY not in v for r in up.requests for v in r.headers.values())
    log = json.loads(subprocess.run([str(BIN / "tokunseba"), "log", "--ledger", str(m.ledger), "--json"],
                                    capture_output=True, text=True, check=True).stdout)
    turns = [t for t in log if t["client_protocol"] == "openai-responses"]
    assert len(turns) == 2 and all(t["outcome"] == "translated" and t["target_protocol"] == protocol for t in turns)


def test_default_codex_runs_a_namespaced_tool_routed_to_anthropic(tmp_path):
    with Upstream() as up:
        up.script(call_reply("anthropic", "toolu_sleep01", "clock__sleep", '{"duration_ms": 20}'),
                  text_reply("anthropic", "Slept."))
        rules = tmp_path / "rules.yaml"
        rules.write_text(RULES.format(endpoint=ENDPOINTS["anthropic"].format(url=up.url), model=MODELS["anthropic"]))
        m = Mitmdump(tmp_path, rules, env={"TK_TEST_CODEX_KEY": ENDPOINT_KEY})
        try:
            p, _ = run_codex(m, tmp_path, "sleep a little")
        finally:
            m.stop()
        assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-3000:])
        assert "Slept." in p.stdout
        posts = [r for r in up.requests if r.method == "POST"]
        (result,) = tool_results("anthropic", posts[1].json())
        assert result[0] == "toolu_sleep01"
        assert "unsupported call" not in result[1] and "Sleep completed" in result[1]


def test_default_codex_reaches_an_mcp_servers_tool_through_exec_routed_to_anthropic(tmp_path):
    server = Path(__file__).resolve().parent.parent / "support" / "mcp_notes_server.py"
    js = 'const r = await tools.mcp__notes__read_note({name: "greeting"});\ntext(r);'
    with Upstream() as up:
        up.script(call_reply("anthropic", "toolu_mcp01", "exec", freeform_arguments(js)),
                  text_reply("anthropic", "The note says hello."))
        rules = tmp_path / "rules.yaml"
        rules.write_text(RULES.format(endpoint=ENDPOINTS["anthropic"].format(url=up.url), model=MODELS["anthropic"]))
        m = Mitmdump(tmp_path, rules, env={"TK_TEST_CODEX_KEY": ENDPOINT_KEY})
        try:
            p, _ = run_codex(m, tmp_path, "read the greeting note", "-c", 'mcp_servers.notes.command="python3"',
                             "-c", f'mcp_servers.notes.args=["{server}"]')
        finally:
            m.stop()
        assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-3000:])
        assert "The note says hello." in p.stdout
        first, second = (r.json() for r in up.requests if r.method == "POST")
        assert "mcp__notes" in json.dumps(first)  # Codex named the deferred namespace to the model
        (result,) = tool_results("anthropic", second)
        assert result[0] == "toolu_mcp01" and "hello from the MCP note" in result[1]


def custom_call_reply(call_id: str, name: str, text: str) -> Reply:
    """OpenAI's own Chat stream of a custom (freeform) call, in the reported chunk shape
    (``delta.tool_calls[{index, id, type: custom, custom: {name, input}}]``), input in pieces."""
    def chunk(delta: dict, finish: str | None = None) -> bytes:
        return b"data: " + json.dumps({"id": "chatcmpl-native1", "object": "chat.completion.chunk",
                                       "created": 1767225600, "model": "gpt-5.5",
                                       "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}).encode() + b"\n\n"
    pieces = [chunk({"role": "assistant", "tool_calls": [{"index": 0, "id": call_id, "type": "custom",
                                                           "custom": {"name": name, "input": ""}}]})]
    pieces += [chunk({"tool_calls": [{"index": 0, "custom": {"input": text[k:k + 17]}}]}) for k in range(0, len(text), 17)]
    pieces.append(chunk({}, "tool_calls"))
    pieces.append(b"data: " + json.dumps({"id": "chatcmpl-native1", "object": "chat.completion.chunk", "choices": [],
                                          "usage": {"prompt_tokens": 9000, "completion_tokens": 60}}).encode() + b"\n\n")
    return Reply.sse([*pieces, b"data: [DONE]\n\n"], delay=0.01)


def test_default_codex_exec_as_a_native_custom_tool_at_a_chat_endpoint_that_takes_them(tmp_path):
    """An OpenAI-style Chat endpoint that takes custom tools (``custom_tools: native``, the default
    at api.openai.com): ``exec`` arrives as Chat's own custom tool with its lark grammar, the
    model's custom call (streamed as OpenAI streams it) reaches Codex as a custom_tool_call, the
    patch is applied, and the follow-up carries the call back as a custom call with its input
    byte for byte."""
    call_id = "call_native_exec01"
    endpoint = ENDPOINTS["openai"] + "\n    custom_tools: native"
    with Upstream() as up:
        up.script(custom_call_reply(call_id, "exec", JS), text_reply("openai", FINAL))
        _, first, second = patched_through(tmp_path, up, endpoint, "gpt-5.5")
        (exec_tool,) = [t for t in first["tools"] if t["type"] == "custom"]
        assert exec_tool["custom"]["name"] == "exec"
        assert exec_tool["custom"]["format"]["type"] == "grammar"
        assert exec_tool["custom"]["format"]["grammar"]["syntax"] == "lark"
        assert "clock__sleep" in [t["function"]["name"] for t in first["tools"] if t["type"] == "function"]
        calls = [tc for msg in second["messages"] for tc in msg.get("tool_calls") or ()]
        assert calls == [{"id": call_id, "type": "custom", "custom": {"name": "exec", "input": JS}}]
        (result,) = tool_results("openai", second)
        assert result[0] == call_id and "Script completed" in result[1]


# a model provider of Codex's own at OpenAI's URL (through the proxy as before): Codex then
# compacts a long session with an ordinary turn instead of its remote compaction
OWN_PROVIDER = ("-c", 'model_providers.tk.name="tk"', "-c", 'model_providers.tk.base_url="https://api.openai.com/v1"',
                "-c", 'model_providers.tk.env_key="CODEX_API_KEY"', "-c", 'model_providers.tk.wire_api="responses"',
                "-c", "model_provider=tk")


@pytest.mark.parametrize("own_provider", [False, True])
def test_a_long_routed_codex_session_compacts_on_its_endpoint_with_a_provider_of_its_own(tmp_path, own_provider):
    """Past ``model_auto_compact_token_limit`` Codex compacts. With its built-in provider that is
    its remote compaction (an encrypted item only OpenAI makes): refused for the route, so it
    goes to OpenAI — unreachable here, so Codex says so and the routed endpoint never sees it.
    With a provider of its own (same URL, same proxy) Codex compacts locally: an ordinary turn
    asking for a summary, routed like any other, and the session goes on on its endpoint."""
    with Upstream() as up:
        up.script(call_reply("anthropic", "toolu_compact01", "clock__sleep", '{"duration_ms": 10}'),
                  text_reply("anthropic", "SUMMARY-OF-THE-SESSION"), text_reply("anthropic", FINAL))
        rules = tmp_path / "rules.yaml"
        rules.write_text(RULES.format(endpoint=ENDPOINTS["anthropic"].format(url=up.url), model=MODELS["anthropic"]))
        m = Mitmdump(tmp_path, rules, env={"TK_TEST_CODEX_KEY": ENDPOINT_KEY})
        try:
            p, _ = run_codex(m, tmp_path, "sleep a little, then say done", "-c", "model_auto_compact_token_limit=5000",
                             *(OWN_PROVIDER if own_provider else ()))
            ledger_settled(m.ledger)
        finally:
            m.stop()
        bodies = [json.dumps(r.json()) for r in up.requests if r.method == "POST"]
        assert not any("compaction_trigger" in b for b in bodies)  # never sent to another endpoint
        if not own_provider:
            assert "Error running remote compact task" in p.stderr
            log = subprocess.run([str(BIN / "tokunseba"), "log", "--ledger", str(m.ledger)], capture_output=True,
                                 text=True, check=True).stdout
            assert "compaction_trigger item" in log and "-c model_provider=" in log  # the refusal names what to set
            assert len(bodies) == 1
            return
        assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-3000:])
        assert "context compacted" in p.stderr + p.stdout and FINAL in p.stdout
        assert len(bodies) == 3
        assert "CONTEXT CHECKPOINT COMPACTION" in bodies[1]  # Codex's own summary turn, routed
        assert "SUMMARY-OF-THE-SESSION" in bodies[2]  # the session goes on from its summary, same endpoint


LOCAL_RULES = """\
endpoints:
  local:
    protocol: openai
    url: {url}
    model: gemma-3-270m
    max_tokens: 256
    max_tokens_field: max_tokens
    stop: ["<|im_end|>"]
routes:
  - name: codex-local
    when: {{client: openai-responses}}
    to: local
"""


@pytest.mark.localmodel
def test_default_codex_turn_served_by_the_real_llama_server(tmp_path):
    """The real llama-server (gemma-3-270m, started with the 16384-token context Codex's turn
    needs: `scripts/localmodel.sh start --ctx 16384`) answers Codex's default-model turn,
    translated: Codex exits 0 and the ledger has the turn translated to the local endpoint.
    Assertions are on structure, never on the model's text."""
    from .test_localmodel_e2e import SCRIPT, _installed

    if not _installed("llama-server"):
        if os.environ.get("CI"):
            pytest.fail("llama-server is not installed: .ci/run must run scripts/ci-extras.sh")
        pytest.skip("llama-server not installed (scripts/localmodel.sh install)")
    state = tmp_path / "localmodel-state"
    env = {**os.environ, "LOCALMODEL_STATE_DIR": str(state)}
    p = subprocess.run([str(SCRIPT), "start", "--ctx", "16384"], capture_output=True, text=True, env=env, timeout=180)
    assert p.returncode == 0, p.stderr[-3000:]
    url = p.stdout.strip().splitlines()[-1]
    try:
        rules = tmp_path / "rules.yaml"
        rules.write_text(LOCAL_RULES.format(url=url))
        m = Mitmdump(tmp_path, rules)
        try:
            p, _ = run_codex(m, tmp_path, "say hi")
            ledger_settled(m.ledger)
        finally:
            m.stop()
    finally:
        subprocess.run([str(SCRIPT), "stop"], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-3000:])
    log = json.loads(subprocess.run([str(BIN / "tokunseba"), "log", "--ledger", str(m.ledger), "--json"],
                                    capture_output=True, text=True, check=True).stdout)
    turns = [t for t in log if t["client_protocol"] == "openai-responses"]
    assert turns and all(t["outcome"] == "translated" and t["endpoint"] == "local" and t["status"] == 200
                         for t in turns), turns
