"""Issue 41 with the real local model: Claude Code's title turn (``output_config.format``: a JSON
object with a ``title`` string) translated to Chat for the shipped local endpoint (agents-local.yaml:
gemma-3-270m on llama-server, its stop strings; the cap lowered to keep this short) carries its
schema as ``response_format``, and the real llama-server, constrained by it, answers the schema's
object at the turn's own temperature 1, run after run. Before the schema crossed the base model
answered free text. The proxy never checks the answer: the server's grammar does the constraining;
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
    """The title of an answer that is the schema's object; for one the cap cut (finish "length"),
    of what it would be closed where the cut fell (inside the title, or after it). None: neither."""
    # a cut may also fall inside an escape (\\, \\uXXXX): closed before it
    closings = [text] if finish == "stop" else [text[:len(text) - k] + end for k in range(6) for end in ("", "}", '"}')]
    for closed in closings:
        try:
            doc = json.loads(closed)
        except ValueError:
            continue
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
    answers = [_answer(llama, rt.body) for _ in range(RUNS)]
    for text, finish in answers:  # the schema's object, every time: whole, or cut inside it by the cap
        assert finish in ("stop", "length") and _title(text, finish) is not None, (finish, text)
    whole = [text for text, finish in answers if finish == "stop"]
    print(f"\n{len(whole)}/{RUNS} answers whole within max_tokens {ENDPOINT['max_tokens']}; the rest cut by it "
          "inside the title string (a base model at temperature 1 can run a string on)")
    assert whole, "no answer closed its object within the cap"
