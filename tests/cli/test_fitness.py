"""A local model's fitness in numbers: `models --probe`'s context window (llama-server's /props)
and prompt throughput against a scripted server on loopback (the server's own timings, and usage
over wall clock where it reports none), and `env --rules`' Claude Code context settings for the
smallest window a rule may send main turns to."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tokunseba.cli.fitness import probe_fitness
from tokunseba.routing import load_rules_text

from tests.support.upstream import Recorded, Reply, Upstream


def llama_like(rec: Recorded) -> Reply:
    """A scripted llama-server: /props with n_ctx; Chat replies with timings, Messages without."""
    if rec.method == "GET" and rec.path == "/props":
        return Reply.json({"default_generation_settings": {"n_ctx": 8192, "params": {}}, "total_slots": 1})
    if rec.method == "GET":
        return Reply.json({"object": "list", "data": [{"id": "gemma-3-270m", "object": "model"}]})
    body = rec.json()
    if rec.path.endswith("/chat/completions"):
        assert body["max_tokens"] == 1 and not body.get("stream")
        return Reply.json({"id": "c", "object": "chat.completion", "created": 1, "model": "m",
                           "choices": [{"index": 0, "finish_reason": "length", "message": {"role": "assistant",
                                                                                          "content": "x"}}],
                           "usage": {"prompt_tokens": 912, "completion_tokens": 1, "total_tokens": 913},
                           "timings": {"prompt_n": 912, "prompt_ms": 2605.7, "prompt_per_second": 350.0}})
    return Reply.json({"id": "msg", "type": "message", "role": "assistant", "model": "m", "stop_reason": "max_tokens",
                       "stop_sequence": None, "content": [{"type": "text", "text": "x"}],
                       "usage": {"input_tokens": 910, "output_tokens": 1}})


RULES = """\
endpoints:
  chat: {{protocol: openai, url: "{url}/v1", model: gemma-3-270m}}
  msgs: {{protocol: anthropic, url: "{url}/v1", max_tokens: 64}}
"""


@pytest.fixture
def server():
    with Upstream() as up:
        up.responder = llama_like
        yield up


def test_context_window_and_server_timings(server):
    rules = load_rules_text(RULES.format(url=server.url))
    f = probe_fitness(rules.endpoints["chat"], {}, 5)
    assert f["context_tokens"] == 8192 and f["context_from"] == "llama-server /props"
    assert (f["prompt_tokens"], f["prompt_tokens_per_s"], f["measured_by"]) == (912, 350.0, "llama-server timings")
    assert f["seconds_before_first_token_at_20k"] == pytest.approx(57.1)
    sent = [r for r in server.requests if r.method == "POST"][-1].json()
    assert sent["model"] == "gemma-3-270m" and sent["messages"][0]["content"].startswith("Probe ")
    assert len(sent["messages"][0]["content"].split()) > 700  # a long prompt: prefill dominates


def test_reported_usage_over_wall_clock_where_no_timings(server):
    rules = load_rules_text(RULES.format(url=server.url))
    f = probe_fitness(rules.endpoints["msgs"], {}, 5)
    assert f["prompt_tokens"] == 910 and f["prompt_tokens_per_s"] > 0
    assert f["measured_by"] == "reported prompt tokens / wall clock (one output token included)"
    assert [r for r in server.requests if r.method == "POST"][-1].path == "/v1/messages"


def test_probes_no_provider():
    assert probe_fitness(load_rules_text("").endpoints["anthropic"], {}, 1) is None


def test_a_server_that_does_not_say_its_window():
    with Upstream() as up:
        up.responder = lambda rec: Reply.json({"detail": "Not Found"}, 404) if rec.method == "GET" else llama_like(rec)
        f = probe_fitness(load_rules_text(RULES.format(url=up.url)).endpoints["chat"], {}, 5)
    assert f["context_tokens"] is None and f["context_from"].startswith("the server does not say (/props: 404")
    assert f["prompt_tokens_per_s"] == 350.0


def test_models_probe_prints_the_fitness_table(server, tmp_path):
    rules = tmp_path / "r.yaml"
    rules.write_text(RULES.format(url=server.url))
    p = subprocess.run([sys.executable, "-m", "tokunseba.cli", "models", "--rules", str(rules), "--probe", "--prefill"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "PROMPT TOK/S" in p.stdout and "llama-server timings" in p.stdout
    j = subprocess.run([sys.executable, "-m", "tokunseba.cli", "models", "--rules", str(rules), "--probe", "--prefill", "--json"],
                       capture_output=True, text=True, timeout=60)
    eps = {e["name"]: e for e in json.loads(j.stdout)["endpoints"]}
    assert eps["chat"]["fitness"]["context_tokens"] == 8192 and "fitness" not in eps["anthropic"]


def test_probe_alone_reads_the_window_and_sends_no_prompt(server, tmp_path):
    rules = tmp_path / "r.yaml"
    rules.write_text(RULES.format(url=server.url))
    j = subprocess.run([sys.executable, "-m", "tokunseba.cli", "models", "--rules", str(rules), "--probe", "--json"],
                       capture_output=True, text=True, timeout=60)
    f = {e["name"]: e for e in json.loads(j.stdout)["endpoints"]}["chat"]["fitness"]
    assert f["context_tokens"] == 8192 and f["prompt_tokens_per_s"] is None
    assert f["error"] == "not measured (models --probe --prefill)"
    assert not [r for r in server.requests if r.method == "POST"]
