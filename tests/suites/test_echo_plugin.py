"""A fifth protocol shipped as its own package (issue 28): Echo Meter
(tests/plugins/tokunseba_echo_protocol, installed beside the test venv by scripts/setup.sh, on the
tests' path: tests/conftest.py) is
found through the entry-point group ``tokunseba.protocols`` and then detected, routed,
translated both ways (requests, whole replies, streams, errors), recorded with its own usage
counting and listed by `models`, `check`, `log` and `--help`, with no file in addon/ naming
it. The built-in four come in through the same group and the same seam.

tests/conftest.py sets ``TOKUNSEBA_PLUGINS=""`` so the rest of the suite sees the four built
in; here the plugin is loaded by name (``protocols.load_plugins(["echo"])``, the same
discovery), and the CLI runs as a process without the variable, as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

import pytest

from tests.support.planning import plan_request
from tokunseba import protocols, translate
from tokunseba.ledger import Ledger
from tokunseba.neutral.usage import COUNTINGS, Usage
from tokunseba.protocols import plugins
from tokunseba.protocols.detect import Detected, detect
from tokunseba.routing import load_rules
from tokunseba.sse import SSEDecoder

ROOT = Path(__file__).resolve().parents[2]
ADDON = ROOT / "addon" / "tokunseba"
PLUGIN = ROOT / "tests" / "plugins" / "tokunseba_echo_protocol"
TOKUNSEBA = Path(sys.executable).parent / "tokunseba"
ENV = {"TK_ECHO_KEY": "echo-endpoint-key-1", "TK_ANT_KEY": "sk-ant-endpoint-2"}
HOST = "api.echo.example"

METER = {"fresh": 120, "reused": 880, "made": 42}
ECHO_WHOLE = json.dumps({"id": "echo-r1", "model": "echo-small", "text": "hello from echo", "end": "done",
                         "meter": METER}).encode()
ECHO_STREAM = (b'event: start\ndata: {"id":"echo-r1","model":"echo-small"}\n\n'
               b'event: text\ndata: {"text":"hello "}\n\n'
               b'event: text\ndata: {"text":"from echo"}\n\n'
               b'event: end\ndata: {"end":"done","meter":{"fresh":120,"reused":880,"made":42}}\n\n')
ANT_USAGE = {"input_tokens": 5, "cache_read_input_tokens": 100, "output_tokens": 3}
ANT_WHOLE = json.dumps({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
                        "content": [{"type": "text", "text": "hello from claude"}], "stop_reason": "end_turn",
                        "stop_sequence": None, "usage": ANT_USAGE}).encode()


def _installed() -> bool:
    return any(ep.name == "echo" for ep in entry_points(group=plugins.GROUP))


pytestmark = pytest.mark.skipif(not _installed(), reason="the test plugin is not installed: run scripts/setup.sh")


@pytest.fixture
def echo():
    """Echo Meter loaded through its entry point (the suite's default loads no outside plugin)."""
    assert "echo" not in protocols.NAMES
    assert protocols.load_plugins(["echo"]) == []
    yield protocols.get("echo")
    protocols.unregister("echo")


@pytest.fixture
def rules(echo, tmp_path):
    path = tmp_path / "rules.yaml"
    path.write_text("""\
endpoints:
  ech:
    protocol: echo
    url: http://127.0.0.1:9/e1
    key_env: TK_ECHO_KEY
    count_tokens: none  # Echo has no counter: a count routed here is an error naming it
  ant:
    protocol: anthropic
    url: http://127.0.0.1:9/v1
    key_env: TK_ANT_KEY
    max_tokens: 256
routes:
  - name: claude-to-echo
    when: {client: anthropic}
    to: ech
    model: echo-small
  - name: echo-to-claude
    when: {client: echo}
    to: ant
    model: claude-x
""")
    r = load_rules(str(path))
    assert r.warnings == []
    return r


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """The real `tokunseba` command, as a user runs it: no TOKUNSEBA_PLUGINS, every installed plugin."""
    e = {k: v for k, v in os.environ.items() if k != plugins.ENV}
    return subprocess.run([str(TOKUNSEBA), *args], capture_output=True, text=True, timeout=120, env={**e, **(env or {})})


# ---- the seam and the discovery ----

def test_the_built_ins_are_declared_in_the_entry_point_group_as_plugins_list_them():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"][plugins.GROUP]
    assert declared == plugins.BUILTIN
    installed = {ep.name: ep.value for ep in entry_points(group=plugins.GROUP) if ep.name in plugins.BUILTIN}
    if installed != plugins.BUILTIN:  # a venv installed before the entry points: BUILTIN stands in (below)
        if os.environ.get("CI") == "true":
            pytest.fail(f"the installed entry points {installed} are not pyproject.toml's: setup.sh must reinstall")
        pytest.skip("this venv's tokunseba metadata predates its entry points: run scripts/setup.sh")
    for name in plugins.BUILTIN:
        assert protocols.origin(name) == "built in" and name in translate.CODECS


def test_a_checkout_without_package_metadata_loads_the_built_ins_from_their_own_lines(monkeypatch):
    """`mitmdump -s addon/tokunseba_addon.py` from a clone never installed: no entry points at
    all, and the four come from ``BUILTIN`` through the same ``EntryPoint.load``."""
    monkeypatch.setattr(plugins, "entry_points", lambda group: [])
    eps = plugins.discovered(None)
    assert [(ep.name, ep.value) for ep in eps] == list(plugins.BUILTIN.items())
    got: list[tuple[str, str]] = []
    assert plugins.load(lambda facts, codec, where: got.append((facts.name, codec, str(where))), None) == []
    assert [(name, where) for name, _, where in got] == [(n, "built in") for n in plugins.BUILTIN]
    assert all(codec.startswith("tokunseba.translate.") for _, codec, _ in got)  # imported when first used


def test_the_plugin_declares_itself_and_nothing_in_the_product_names_it():
    declared = tomllib.loads((PLUGIN / "pyproject.toml").read_text())["project"]["entry-points"][plugins.GROUP]
    assert declared == {"echo": "tokunseba_echo_protocol:register_protocols"}
    for f in ADDON.rglob("*.py"):
        text = f.read_text()
        assert "echo_protocol" not in text and HOST not in text and "echo-meter" not in text, f


def test_it_is_found_through_its_entry_point_with_its_own_counting(echo):
    assert list(protocols.NAMES) == ["anthropic", "openai", "openai-responses", "gemini", "echo"]
    assert protocols.origin("echo") == "plugin echo (tokunseba-echo-protocol 0.1.0)"
    assert translate.CODECS["echo"].protocol == "echo" and translate.pairs()[("echo", "gemini")] is None
    assert echo.usage_counting == "echo-meter" and COUNTINGS["echo-meter"] is echo.counting
    assert protocols.counting("echo") == "echo-meter"
    assert detect(HOST, "/e1/converse") == Detected("echo", "converse")
    assert detect(HOST, "/e1/models") is None  # not a turn: passed through untouched


def test_plugins_environment_variable_chooses_the_outside_ones():
    assert plugins.wanted(None if plugins.ENV not in os.environ else os.environ[plugins.ENV]) == frozenset()
    assert plugins.wanted("echo, other ,") == frozenset({"echo", "other"})
    names = [ep.name for ep in plugins.discovered(frozenset())]
    assert names == list(plugins.BUILTIN)  # the built-ins always, first, in their order
    assert [ep.name for ep in plugins.discovered(None)][4:] == ["echo"]


def test_a_broken_plugin_is_left_out_and_said_never_raised(monkeypatch):
    broken = [EntryPoint("nothere", "tokunseba_no_such_module:register_protocols", plugins.GROUP),
              EntryPoint("clash", "tokunseba.protocols.gemini:register_protocols", plugins.GROUP),
              EntryPoint("anthropic", "tokunseba.protocols.openai_chat:register_protocols", plugins.GROUP)]
    real = plugins.entry_points
    monkeypatch.setattr(plugins, "entry_points", lambda group: [*real(group=group), *broken])
    found = protocols.load_plugins(["nothere", "clash", "anthropic"])
    assert len(found) == 3
    posing, clash, nothere = found  # in the entry points' name order
    assert "'anthropic'" in posing and "protocol 'openai' is already registered (built in)" in posing  # not built in
    assert "'nothere'" in nothere and "ModuleNotFoundError" in nothere
    assert "'clash'" in clash and "protocol 'gemini' is already registered (built in)" in clash
    assert list(protocols.NAMES) == list(plugins.BUILTIN) and protocols.origin("gemini") == "built in"
    assert set(found) <= set(plugins.problems())


def test_register_refuses_a_codec_of_another_protocol(echo):
    facts = protocols.get("echo")
    with pytest.raises(ValueError, match="is for 'anthropic'"):
        protocols.register(facts, translate.CODECS["anthropic"])
    with pytest.raises(ValueError, match="'module:attr'"):
        protocols.register(facts, "tokunseba_echo_protocol.codec")
    assert translate.CODECS["echo"].protocol == "echo"
    protocols.register(facts, "tokunseba.translate.gemini:CODEC")  # named: checked when first used
    with pytest.raises(ValueError, match="is the codec of 'gemini', not of 'echo'"):
        translate.CODECS.get("echo")


def test_the_cli_that_never_translates_imports_no_codec():
    """A codec named "module:attr" is imported when first used: `tokunseba run` (its parser
    lists every protocol) starts without importing one (start-up time)."""
    code = ("import sys; from tokunseba.cli.main import build_parser; build_parser(only_run=True); "
            "from tokunseba import protocols; assert len(protocols.NAMES) >= 4; "
            "print(sorted(m for m in sys.modules if m.startswith('tokunseba.translate')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr


# ---- its own usage counting, converted through the common base ----

def test_its_meter_converts_to_every_client_and_back(echo):
    u = Usage("echo-meter", METER)
    assert u.fields() == {"input": 120, "output": 42, "cache_read": 880, "cache_write": None, "reasoning": None}
    assert u.to("anthropic") == {"input_tokens": 120, "cache_read_input_tokens": 880, "output_tokens": 42}
    assert u.to("openai") == {"prompt_tokens": 1000, "completion_tokens": 42, "total_tokens": 1042,
                              "prompt_tokens_details": {"cached_tokens": 880}}
    assert u.to("gemini") == {"promptTokenCount": 1000, "candidatesTokenCount": 42, "cachedContentTokenCount": 880,
                              "totalTokenCount": 1042}
    assert u.to("echo-meter") == METER and u.to("echo-meter") is not METER
    assert Usage("anthropic", ANT_USAGE).to("echo-meter") == {"fresh": 5, "reused": 100, "made": 3}
    assert Usage("openai", {"prompt_tokens": 50, "completion_tokens": 7, "total_tokens": 57,
                            "prompt_tokens_details": {"cached_tokens": 20}}).to("echo-meter") == \
        {"fresh": 30, "reused": 20, "made": 7}
    assert Usage("echo-meter", {"made": 3}).to("anthropic") == {"output_tokens": 3}  # missing stays absent


# ---- routed, translated, recorded ----

def _ant_request(stream: bool) -> bytes:
    return json.dumps({"model": "claude-sonnet", "max_tokens": 64, "stream": stream, "system": "be brief",
                       "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}).encode()


def _plan(rules, host, path, body, headers):
    return plan_request(rules, method="POST", host=host, port=443, path=path, body=body, env=ENV,
                        headers=[("content-type", "application/json"), *headers])


def test_a_claude_turn_is_routed_to_echo_translated_and_recorded_in_its_counting(rules, tmp_path):
    from tokunseba.turn.pump import Pump
    from tokunseba.turn import stream_translator, translate_whole

    turn = _plan(rules, "api.anthropic.com", "/v1/messages", _ant_request(True),
                 [("x-api-key", "sk-ant-CLIENT"), ("anthropic-version", "2023-06-01")])
    assert (turn.action, turn.client_protocol, turn.target_protocol) == ("translate", "anthropic", "echo")
    assert turn.url == "http://127.0.0.1:9/e1/converse"
    assert turn.set_headers["x-echo-key"] == ENV["TK_ECHO_KEY"]  # the facts' auth header, the endpoint's key
    assert "x-api-key" not in (turn.keep_headers or ())  # the client's key stays behind
    assert json.loads(turn.body) == {"turns": [{"speaker": "system", "text": "be brief"},
                                               {"speaker": "user", "text": "hi"}],
                                     "model": "echo-small", "limit": 64, "stream": True}
    pump = Pump(turn, stream_translator(turn))
    out = b"".join(b"".join(pump(ECHO_STREAM[i:i + 6])) for i in range(0, len(ECHO_STREAM), 6)) + b"".join(pump(b""))
    events = [json.loads(e.data) for e in SSEDecoder().feed(out)]
    assert [e["type"] for e in events][0] == "message_start" and events[-1]["type"] == "message_stop"
    assert "".join(e["delta"]["text"] for e in events if e["type"] == "content_block_delta") == "hello from echo"
    delta = next(e for e in events if e["type"] == "message_delta")
    assert delta["usage"] == {"input_tokens": 120, "cache_read_input_tokens": 880, "output_tokens": 42}
    outcome = pump.outcome(200)
    assert outcome.problem is None and outcome.usage.reported == METER and outcome.usage.counting == "echo-meter"
    ledger = Ledger(tmp_path / "ledger.db")
    try:
        ledger.start_turn(turn.request_id, started_at=turn.started_at, client_protocol=turn.client_protocol,
                          host=turn.host, path=turn.path, requested_model=turn.requested_model, stream=True)
        ledger.update_turn(turn.request_id, outcome="translated", status=200, usage_reported=outcome.usage.reported,
                           usage_protocol=outcome.usage.counting)
        row = ledger.get_turn(turn.request_id)
    finally:
        ledger.close()
    assert (row["usage_input"], row["usage_output"], row["usage_cache_read"], row["usage_protocol"]) == \
        (120, 42, 880, "echo-meter")
    status, _, body, rep = translate_whole(turn, 200, ECHO_WHOLE)
    doc = json.loads(body)
    assert status == 200 and doc["content"][0]["text"] == "hello from echo"
    assert doc["usage"] == {"input_tokens": 120, "cache_read_input_tokens": 880, "output_tokens": 42}
    assert rep.usage.reported == METER


def test_an_echo_turn_is_routed_to_an_anthropic_endpoint_and_answered_in_echo(rules):
    from tokunseba.turn import translate_whole

    body = json.dumps({"model": "echo-small", "turns": [{"speaker": "user", "text": "hi"}], "limit": 32}).encode()
    turn = _plan(rules, HOST, "/e1/converse", body, [("x-echo-key", "echo-CLIENT-key")])
    assert (turn.action, turn.client_protocol, turn.target_protocol) == ("translate", "echo", "anthropic")
    assert turn.set_headers["x-api-key"] == ENV["TK_ANT_KEY"]
    sent = json.loads(turn.body)
    assert sent["model"] == "claude-x" and sent["max_tokens"] == 32 and sent["messages"][0]["role"] == "user"
    status, _, out, rep = translate_whole(turn, 200, ANT_WHOLE)
    assert status == 200 and json.loads(out) == {"id": "msg_1", "model": "claude-x", "text": "hello from claude",
                                                 "end": "done", "meter": {"fresh": 5, "reused": 100, "made": 3}}
    st, _, err, _ = translate_whole(turn, 429, b'{"type":"error","error":{"type":"rate_limit_error","message":"slow"}}')
    assert st == 429 and json.loads(err) == {"echo_error": {"status": 429, "message": "slow"}}


# ---- listed by the CLI, as a user runs it ----

def test_help_check_models_and_log_show_it(tmp_path):
    rules = tmp_path / "rules.yaml"
    rules.write_text("endpoints:\n  ech:\n    protocol: echo\n    url: http://127.0.0.1:9/e1\n"
                     "routes:\n  - name: to-echo\n    when: {client: anthropic}\n    to: ech\n")
    help_ = _cli("--help")
    assert help_.returncode == 0 and "echo              Echo Meter" in help_.stdout, help_.stdout
    assert "plugin echo (tokunseba-echo-protocol" in help_.stdout
    check = _cli("check", "--rules", str(rules))
    assert check.returncode == 0 and "OK:" in check.stdout, check.stdout + check.stderr
    models = _cli("models", "--rules", str(rules), "--json")
    assert models.returncode == 0, models.stderr
    listed = json.loads(models.stdout)
    assert "echo" in json.dumps(listed)
    pairs = {(p["client"], p["endpoint"]): p["result"] for p in listed["pairs"]}
    assert pairs[("anthropic", "ech")] == "translated" and pairs[("echo", "anthropic")] == "translated"
    # a recorded echo turn, as `log` lists it
    ledger = tmp_path / "ledger.db"
    lg = Ledger(ledger)
    try:
        lg.start_turn("tk-echo-1", started_at=1.0, client_protocol="echo", host=HOST, path="/e1/converse",
                      requested_model="echo-small", stream=False)
        lg.update_turn("tk-echo-1", outcome="translated", status=200, usage_reported=METER,
                       usage_protocol="echo-meter")
    finally:
        lg.close()
    log = _cli("log", "--ledger", str(ledger), "--json")
    assert log.returncode == 0, log.stderr
    row = next(r for r in json.loads(log.stdout) if r["request_id"] == "tk-echo-1")
    assert row["client_protocol"] == "echo"
    text = _cli("log", "--ledger", str(ledger))
    assert "tk-echo-1" in text.stdout and "echo" in text.stdout
