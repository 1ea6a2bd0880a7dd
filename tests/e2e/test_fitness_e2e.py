"""`tokunseba models --probe` against the real llama-server (scripts/localmodel.sh): its
context window as /props says it, and its prompt throughput by its own timings (OpenAI Chat) and
by its reported usage over wall clock (its Anthropic Messages route)."""

from __future__ import annotations

import json
import subprocess

import pytest

from .conftest import BIN
from .test_localmodel_e2e import _start, _stop

pytestmark = [pytest.mark.e2e, pytest.mark.localmodel]


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    state = tmp_path_factory.mktemp("fitness-state")
    url = _start("llama-server", state)
    try:
        yield url
    finally:
        _stop("llama-server", state)


def test_models_probe_reads_the_window_and_measures_prefill(llama, tmp_path):
    rules = tmp_path / "r.yaml"
    rules.write_text(f"endpoints:\n  llama: {{protocol: openai, url: '{llama}', model: gemma-3-270m}}\n"
                     f"  llama-msgs: {{protocol: anthropic, url: '{llama}', max_tokens: 64}}\n")
    p = subprocess.run([str(BIN / "tokunseba"), "models", "--rules", str(rules), "--probe", "--prefill", "--json"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    eps = {e["name"]: e for e in json.loads(p.stdout)["endpoints"]}
    chat, msgs = eps["llama"]["fitness"], eps["llama-msgs"]["fitness"]
    # scripts/localmodel.sh starts it with a 4096-token context
    assert chat["context_tokens"] == msgs["context_tokens"] == 4096 and chat["context_from"] == "llama-server /props"
    assert chat["measured_by"] == "llama-server timings" and chat["prompt_tokens"] > 700
    assert chat["prompt_tokens_per_s"] > 0 and chat["seconds_before_first_token_at_20k"] > 0
    assert msgs["measured_by"].startswith("reported prompt tokens / wall clock") and msgs["prompt_tokens"] > 700
