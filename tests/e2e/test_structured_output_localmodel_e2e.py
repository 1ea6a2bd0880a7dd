"""Issue 41 with the real local model: Claude Code's title turn (``output_config.format``: a JSON
object with a ``title`` string) translated to Chat for the shipped local endpoint (agents-local.yaml:
gemma-3-270m on llama-server, its stop strings; the cap lowered to keep this short) carries its
schema as ``response_format``, and the real llama-server, constrained by it, answers the schema's
object, closed within the cap, 20 runs of 20 at the turn's own temperature 1. Before the schema
crossed the base model answered free text. The grammar alone does not bound the title string: with
llama-server's own sampler defaults the model ran it on to the cap in 1 to 4 answers of 20; the
defaults scripts/localmodel.sh starts it with (min-p 0.8: the server's, applied where a
request sets nothing; the request keeps only the client's temperature) close it every time
(docs/dev/protocols.md §F). The proxy never checks the answer: the server's grammar does the constraining;
this test checks that what tokunseba sends makes it do so."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.conftest import load_fixture
from tokunseba import translate

from .test_localmodel_e2e import _start, _stop

pytestmark = [pytest.mark.e2e, pytest.mark.localmodel]

RUNS = 20
# agents-local.yaml's endpoint (where Claude Code's title turns go) with its cap lowered from 512 to 128
ENDPOINT = {"model": "gemma-3-270m", "max_tokens": 128, "max_tokens_field": "max_tokens",
            "stop": ["<|im_end|>", "\n\n"], "endpoint": "local"}


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    state = tmp_path_factory.mktemp("localmodel-state")
    url = _start("llama-server", state)
    try:
        yield url
    finally:
        _stop("llama-server", state)


def _answer(url: str, body: dict) -> tuple[str, str | None]:
    """The streamed reply's text and finish reason (the title turn streams)."""
    text, finish = [], None
    with httpx.stream("POST", f"{url}/chat/completions", json=body, timeout=300) as r:
        assert r.status_code == 200, r.read()[:500]
        for line in r.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                for choice in json.loads(line[6:]).get("choices") or ():
                    text.append((choice.get("delta") or {}).get("content") or "")
                    finish = choice.get("finish_reason") or finish
    return "".join(text), finish


def _title(text: str, finish: str | None) -> str | None:
    """The title of an answer that is the schema's whole object, closed by the model within the cap
    (finish "stop"); None for anything else (one the cap cut, finish "length", included)."""
    if finish != "stop":
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    if isinstance(doc, dict) and set(doc) == {"title"} and isinstance(doc["title"], str):
        return doc["title"]
    return None


def test_the_title_turn_s_schema_constrains_the_real_server(llama):
    body = load_fixture("claude-code-title-haiku.json")["body"]
    assert body["temperature"] == 1 and body["stream"] is True
    rt = translate.request("anthropic", "openai", body, **ENDPOINT)
    assert rt.body["response_format"]["json_schema"]["schema"] == body["output_config"]["format"]["schema"]
    assert rt.body["temperature"] == 1
    assert "stop" not in rt.body  # the endpoint's would cut the object: "\n\n" between tokens, "<|im_end|>" in a string
    # nothing of the sampler but the client's temperature: the rest is the server's own defaults,
    # which scripts/localmodel.sh sets (min-p 0.8: docs/dev/protocols.md §F)
    assert not {"top_k", "top_p", "min_p", "dry_multiplier", "repeat_penalty"} & set(rt.body)
    params = httpx.get(llama.removesuffix("/v1") + "/props", timeout=30).json()["default_generation_settings"]["params"]
    assert params["min_p"] == pytest.approx(0.8) and params["dry_multiplier"] == 0, params
    answers = [_answer(llama, rt.body) for _ in range(RUNS)]
    titles = [_title(text, finish) for text, finish in answers]
    print(f"\n{sum(t is not None for t in titles)}/{RUNS} answers the schema's whole object within max_tokens "
          f"{ENDPOINT['max_tokens']}")
    for (text, finish), title in zip(answers, titles):  # every time: closed by the model, within the cap
        assert title is not None, (finish, text)
