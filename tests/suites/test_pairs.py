"""Every cross pair among Anthropic Messages, Chat Completions and Responses, proven on the
stream fixtures of every upstream protocol (issue 9 §3):

- the official SDK's accumulator of the client's protocol takes each translated stream, and
  its final object equals the whole-reply translation of the same reply (decode -> Message
  -> encode), field by field;
- the output is byte-identical at every single split point of the input;
- usage is converted only where definitions differ (OpenAI-family input includes cached
  tokens; Anthropic's does not), never zero-filled;
- errors come back in the client's envelope with the upstream's text.
"""

from __future__ import annotations

import json

import pytest

from tests.translate.openai_responses.test_stream import check_responses_grammar, response_view, responses_events, responses_final
from tests.suites.test_sdk_accumulators import WITH_REPLY, _anthropic_view, _chat_view, anthropic_final, openai_final
from tests.translate.openai_chat.test_stream import (
    CREATED,
    FAILING,
    FIXTURES,
    anthropic_events,
    chat_chunks,
    check_anthropic_grammar,
    raw,
    reply_json,
    translate,
    upstream_of,
)
from tokunseba import translate as tr
from tokunseba.neutral.usage import Usage
from tokunseba.protocols.anthropic import COUNTING_NAME as ANTHROPIC
from tokunseba.protocols.openai_chat import COUNTING_NAME as OPENAI

THREE = ("anthropic", "openai", "openai-responses")
PAIRS = [(u, c) for u in THREE for c in THREE if u != c]
STREAM_CASES = [(n, c) for n in FIXTURES for c in THREE if c != upstream_of(n)]
REPLY_CASES = [(n, c) for n, c in STREAM_CASES if n in WITH_REPLY and n not in FAILING]


def test_the_registry_translates_every_cross_pair_of_the_four():
    pairs = tr.pairs()
    assert all(pairs[p] is None for p in PAIRS)
    assert all(pairs[(c, c)] is None for c in tr.PROTOCOLS)  # same protocol: pass-through / retarget
    assert {p: why for p, why in pairs.items() if why} == {}  # Gemini's codec registered (issue 11)
    assert len(pairs) == 16


def test_every_upstream_protocol_has_fixtures():
    assert {upstream_of(n) for n in FIXTURES} == set(THREE)
    assert {upstream_of(n) for n, _ in REPLY_CASES} == set(THREE)


def _final_view(client: str, out: bytes, upstream: str) -> dict:
    """The client SDK's final object of a translated stream, as a comparable view."""
    if client == "anthropic":
        check_anthropic_grammar(anthropic_events(out))
        return _anthropic_view(anthropic_final(out).model_dump(mode="json"))
    if client == "openai":
        assert chat_chunks(out)[-1] == "[DONE]"
        return _chat_view(openai_final(out).model_dump(mode="json"))
    check_responses_grammar(responses_events(out))
    return response_view(responses_final(out).model_dump(mode="json"), raw_arguments=upstream != "anthropic")


def _whole_view(client: str, body: bytes, upstream: str) -> dict:
    doc = json.loads(body)
    if client == "anthropic":
        return _anthropic_view(doc)
    if client == "openai":
        return _chat_view(doc)
    return response_view(doc, raw_arguments=upstream != "anthropic")


@pytest.mark.parametrize(("name", "client"), REPLY_CASES, ids=[f"{n}->{c}" for n, c in REPLY_CASES])
def test_sdk_accumulates_the_stream_into_the_whole_reply(name, client):
    upstream = upstream_of(name)
    out, t = translate(name, upstream, client)
    rep = tr.reply(upstream, client, reply_json(name), created=CREATED)
    assert _final_view(client, out, upstream) == _whole_view(client, rep.body, upstream)
    assert t.report.completed and not t.report.errors
    assert t.report.stop_reason == rep.stop_reason
    assert t.client_usage == rep.client_usage
    assert t.report.usage == rep.usage  # the upstream's own usage, as reported, on both paths
    assert sorted({p.replace(".delta.", ".message.") for p in t.report.dropped}) == sorted(set(rep.dropped))


@pytest.mark.parametrize(("name", "client"), STREAM_CASES, ids=[f"{n}->{c}" for n, c in STREAM_CASES])
def test_output_is_the_same_at_every_split_point(name, client):
    upstream = upstream_of(name)
    whole, t = translate(name, upstream, client)
    report = t.report
    data = raw(name)
    step = 1 if upstream == "openai-responses" or len(data) < 4000 else 7  # every cut of the new pairs
    for cut in range(0, len(data) + 1, step):
        out, t2 = translate(name, upstream, client, cuts=[cut])
        assert (out, t2.report) == (whole, report), f"differs when cut at byte {cut}"


# Kimi's "functions.x:0" ids fail only where the client's protocol rejects them (Anthropic)
FAILING_CASES = [(n, c) for n, c in STREAM_CASES if n in FAILING and (n != "chat_kimi_bad_id.sse" or c == "anthropic")]


@pytest.mark.parametrize(("name", "client"), FAILING_CASES, ids=[f"{n}->{c}" for n, c in FAILING_CASES])
def test_a_failing_upstream_ends_in_the_clients_error(name, client):
    out, t = translate(name, upstream_of(name), client)
    assert t.report.errors and not t.report.completed
    if client == "anthropic":
        assert anthropic_events(out)[-1][0] == "error"
    elif client == "openai":
        assert "error" in chat_chunks(out)[-1]
    else:
        assert responses_events(out)[-1]["type"] == "response.failed"


# ---- usage: converted only where definitions differ --------------------------------------

def _convention(protocol: str) -> str:
    return ANTHROPIC if protocol == "anthropic" else OPENAI


@pytest.mark.parametrize(("name", "client"), REPLY_CASES, ids=[f"{n}->{c}" for n, c in REPLY_CASES])
def test_usage_is_converted_only_where_definitions_differ(name, client):
    upstream = upstream_of(name)
    rep = tr.reply(upstream, client, reply_json(name), created=CREATED)
    if rep.usage is None:
        assert rep.client_usage is None or rep.client_usage == {}
        return
    up = rep.usage.fields()
    if rep.client_usage is None:  # Responses needs input and output; a partial report is sent as null
        assert client == "openai-responses" and None in (up["input"], up["output"])
        return
    got = Usage(_convention(client), rep.client_usage).fields()
    assert got["output"] == up["output"]
    assert got["cache_read"] == up["cache_read"] and got["cache_write"] == up["cache_write"]
    same = _convention(client) == _convention(upstream)
    cached = (up["cache_read"] or 0) + (up["cache_write"] or 0)
    if up["input"] is None:
        assert got["input"] is None
    elif same:
        assert got["input"] == up["input"]
    elif client == "anthropic":  # OpenAI input includes the cache; Anthropic's does not
        assert got["input"] == up["input"] - cached
    else:
        assert got["input"] == up["input"] + cached


# ---- errors: the client's envelope, the upstream's text ------------------------------------

UPSTREAM_ERRORS = {
    "anthropic": (529, b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}', "Overloaded"),
    "openai": (429, b'{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}',
               "Rate limit reached"),
    "openai-responses": (400, b'{"error":{"message":"Your input exceeds the context window of this model.",'
                              b'"type":"invalid_request_error","code":"context_length_exceeded"}}',
                         "Your input exceeds the context window"),
}


@pytest.mark.parametrize(("upstream", "client"), PAIRS)
def test_errors_come_back_in_the_clients_envelope(upstream, client):
    status, body, text = UPSTREAM_ERRORS[upstream]
    st, out = tr.error(upstream, client, status, body)
    doc = json.loads(out)
    if client == "anthropic":
        assert doc["type"] == "error" and text in doc["error"]["message"]
        if upstream == "openai-responses":  # a context overflow is what Claude Code compacts on
            assert (st, doc["error"]["type"]) == (400, "invalid_request_error")
            assert "prompt is too long" in doc["error"]["message"]
    else:
        assert set(doc) == {"error"} and text in doc["error"]["message"]
        if upstream == "anthropic":
            assert st == 503  # no 529 in OpenAI
        else:
            assert doc["error"]["code"] == json.loads(body)["error"]["code"]  # the code clients act on
