"""Issue 41 with the real local model: Claude Code's title turn (``output_config.format``: a JSON
object with a ``title`` string) translated to Chat carries its schema as ``response_format``, and
the real llama-server (Gemma 3 270M, started by scripts/localmodel.sh), constrained by it, answers
valid JSON with a ``title`` string every time at the turn's own temperature 1. Before the schema
crossed, the base model answered free text. The proxy never checks the answer: the server's
grammar does the constraining; this test checks that what tokunseba sends makes it do so."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.conftest import load_fixture
from tokunseba import translate

from .test_localmodel_e2e import _start, _stop

pytestmark = [pytest.mark.e2e, pytest.mark.localmodel]

RUNS = 20
# the shipped agents-local.yaml endpoint (where Claude Code's title turns go), its cap at 64 to keep this short
ENDPOINT = {"model": "gemma-3-270m", "max_tokens": 64, "max_tokens_field": "max_tokens",
            "stop": ["<|im_end|>", "\n\n"], "endpoint": "local"}


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    state = tmp_path_factory.mktemp("localmodel-state")
    url = _start("llama-server", state)
    try:
        yield url
    finally:
        _stop("llama-server", state)


def _answer(url: str, body: dict) -> str:
    """The streamed reply's text (the title turn streams)."""
    text = []
    with httpx.stream("POST", f"{url}/chat/completions", json=body, timeout=120) as r:
        assert r.status_code == 200, r.read()[:500]
        for line in r.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                for choice in json.loads(line[6:]).get("choices") or ():
                    text.append((choice.get("delta") or {}).get("content") or "")
    return "".join(text)


def test_the_title_turn_s_schema_constrains_the_real_server(llama):
    body = load_fixture("claude-code-title-haiku.json")["body"]
    assert body["temperature"] == 1 and body["stream"] is True
    rt = translate.request("anthropic", "openai", body, **ENDPOINT)
    assert rt.body["response_format"]["json_schema"]["schema"] == body["output_config"]["format"]["schema"]
    assert rt.body["temperature"] == 1
    answers = [_answer(llama, rt.body) for _ in range(RUNS)]
    titles = []
    for a in answers:
        doc = json.loads(a)  # valid JSON, every time
        assert isinstance(doc, dict) and set(doc) == {"title"} and isinstance(doc["title"], str), a
        titles.append(doc["title"])
    assert len(titles) == RUNS
