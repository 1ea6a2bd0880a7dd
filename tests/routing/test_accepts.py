"""Endpoints say what they take (issue 32): ``accepts``, the ``documents:`` and ``server_tools:``
predicates, and a turn its endpoint cannot take refused before sending, the next route tried."""

from __future__ import annotations

import json

import pytest

from tests.conftest import load_fixture
from tests.support.planning import plan_request
from tokunseba.routing.accepts import default_accepts, is_loopback
from tokunseba.routing.endpoints import BUILTIN_ENDPOINTS
from tokunseba.routing import RulesError, accepts_lines, check_file, load_rules_text, turn_facts

ENV = {"CLOUD_KEY": "sk-cloud"}
PDF = {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjQK"}}
PNG = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
# Claude Code's WebSearch request: its own turn, whose only tool is Anthropic's server-run web_search
WEB_SEARCH = {"type": "web_search_20250305", "name": "web_search", "max_uses": 8}

RULES = """\
endpoints:
  local: {protocol: openai, url: "http://127.0.0.1:9101/v1", max_tokens_field: max_tokens}
  vision: {protocol: openai, url: "http://127.0.0.1:9102/v1", accepts: [text, images, documents], key_env: CLOUD_KEY}
  ant: {protocol: anthropic, url: "http://127.0.0.1:9103/v1", accepts: [text, images, documents, server_tools]}
routes:
  - name: to-local
    to: local
  - name: to-vision
    to: vision
  - name: to-ant
    to: ant
"""


@pytest.fixture(scope="module")
def rules():
    return load_rules_text(RULES, "accepts.yaml")


def anthropic_turn(content, tools=None) -> dict:
    body = {"model": "claude-sonnet-4-6", "max_tokens": 256, "stream": True,
            "messages": [{"role": "user", "content": content}]}
    if tools:
        body["tools"] = tools
    return body


def plan(rules, body: dict):
    return plan_request(rules, method="POST", host="api.anthropic.com", port=443, path="/v1/messages",
                        headers=[("content-type", "application/json"), ("x-api-key", "sk-ant-CLIENT")],
                        body=json.dumps(body).encode(), env=ENV)


def refusals(turn) -> dict[str, str]:
    return {d["rule"]: d["reason"] for kind, d in turn.events if kind == "route_refused"}


def test_a_pdf_turn_is_refused_by_the_text_only_endpoint_and_translated_for_one_that_reads_documents(rules):
    t = plan(rules, anthropic_turn([{"type": "text", "text": "Summarise this."}, PDF]))
    assert refusals(t) == {"to-local": "the turn has documents; endpoint local takes text "
                                       "(a local server unless it says accepts: …)"}
    assert (t.decision.route.name, t.outcome, t.target_protocol) == ("to-vision", "translated", "openai")
    sent = json.loads(t.body)
    (part,) = [p for p in sent["messages"][-1]["content"] if p["type"] == "file"]
    assert part["file"]["file_data"].startswith("data:application/pdf;base64,")  # the document, carried
    assert t.url == "http://127.0.0.1:9102/v1/chat/completions"


def test_an_image_turn_is_refused_by_the_text_only_endpoint_and_translated_for_one_that_sees(rules):
    t = plan(rules, anthropic_turn([{"type": "text", "text": "What is this?"}, PNG]))
    assert list(refusals(t)) == ["to-local"] and "the turn has images" in refusals(t)["to-local"]
    assert (t.decision.route.name, t.outcome) == ("to-vision", "translated")
    assert any(p.get("type") == "image_url" for p in json.loads(t.body)["messages"][-1]["content"])


def test_an_image_inside_a_tool_result_counts_too(rules):
    body = anthropic_turn("hi")
    body["messages"] = [
        {"role": "user", "content": "look"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "shot", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [PNG]}]}]
    body["tools"] = [{"name": "shot", "input_schema": {"type": "object"}}]
    t = plan(rules, body)
    assert "to-local" in refusals(t) and t.decision.route.name == "to-vision"


def test_claude_codes_web_search_turn_goes_only_where_the_search_runs(rules):
    t = plan(rules, anthropic_turn("Perform a web search for the query: mitmproxy 12 release", [WEB_SEARCH]))
    why = refusals(t)
    assert why["to-local"] == ("the turn has provider-run tools (web_search); endpoint local takes text "
                               "(a local server unless it says accepts: …)")
    assert why["to-vision"] == "the turn has provider-run tools (web_search); endpoint vision takes text, images, documents"
    # the endpoint that runs it speaks the client's protocol: the turn goes there byte for byte
    assert (t.decision.route.name, t.outcome) == ("to-ant", "retargeted") and t.body is None


def test_a_search_is_never_translated_away_even_where_the_endpoint_runs_its_own():
    r = load_rules_text("endpoints:\n  resp: {protocol: openai-responses, url: 'https://api.example.com/v1'}\n"
                        "routes:\n  - {name: r, to: resp}\n", "r.yaml")
    assert r.endpoints["resp"].takes == ("text", "images", "documents", "server_tools")
    t = plan(r, anthropic_turn("search the web for x", [WEB_SEARCH]))
    assert refusals(t) == {"r": "the turn relies on provider-run tools (web_search), which run only at an endpoint "
                                "of its own protocol (anthropic); no translation to openai-responses carries them"}
    assert t.outcome == "pass_through"  # no other route: unmatched: pass, to the client's own host


def test_a_server_tool_offered_beside_the_clients_own_tools_is_not_relied_on(rules):
    # Codex declares web_search on every turn beside its function tools: left behind (recorded), never refused
    fx = load_fixture("codex-responses-gpt55-tool-followup.json")
    facts = turn_facts("openai-responses", fx["body"], 1, {})
    assert facts.server_tools == () and facts.tools
    alone = {"model": "gpt-5.5", "input": "search", "tools": [{"type": "web_search"}]}
    assert turn_facts("openai-responses", alone, 1, {}).server_tools == ("web_search",)
    forced = {**fx["body"], "tool_choice": {"type": "web_search"}}
    assert turn_facts("openai-responses", forced, 1, {}).server_tools == ("web_search",)


@pytest.mark.parametrize("client,body,documents,server_tools", [
    ("anthropic", anthropic_turn([PDF, {"type": "text", "text": "x"}]), True, ()),
    ("anthropic", anthropic_turn("x", [WEB_SEARCH, {"name": "ls", "input_schema": {}}]), False, ()),
    ("anthropic", {**anthropic_turn("x", [WEB_SEARCH, {"name": "ls", "input_schema": {}}]),
                   "tool_choice": {"type": "tool", "name": "web_search"}}, False, ("web_search",)),
    ("anthropic", anthropic_turn("x", [{"type": "bash_20250124", "name": "bash"}]), False, ()),  # client-run
    ("openai", {"messages": [{"role": "user", "content": [{"type": "file", "file": {"file_id": "f"}}]}]}, True, ()),
    ("openai", {"messages": [{"role": "user", "content": "x"}], "web_search_options": {}}, False,
     ("web_search_options",)),
    ("openai-responses", {"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]}, True, ()),
    ("gemini", {"contents": [{"parts": [{"inlineData": {"mimeType": "application/pdf", "data": "JVBE"}}]}]}, True, ()),
    ("gemini", {"contents": [{"parts": [{"inlineData": {"mimeType": "image/png", "data": "iVBO"}}]}]}, False, ()),
    ("gemini", {"contents": [{"parts": [{"text": "x"}]}], "tools": [{"googleSearch": {}}]}, False, ("googleSearch",)),
    ("gemini", {"contents": [{"parts": [{"text": "x"}]}],
                "tools": [{"googleSearch": {}}, {"functionDeclarations": [{"name": "ls"}]}]}, False, ()),
])
def test_each_protocol_says_where_its_documents_and_provider_run_tools_are(client, body, documents, server_tools):
    f = turn_facts(client, body, 1, {})
    assert (f.documents, f.server_tools) == (documents, server_tools)


def test_the_documents_and_server_tools_predicates_route_by_them():
    r = load_rules_text(RULES.replace("routes:\n", "routes:\n  - {name: searches, when: {server_tools: true}, to: ant}\n"
                                      "  - {name: pdfs, when: {documents: true, server_tools: false}, to: vision}\n"), "p.yaml")
    assert plan(r, anthropic_turn("search x", [WEB_SEARCH])).decision.route.name == "searches"
    t = plan(r, anthropic_turn([PDF, {"type": "text", "text": "x"}]))
    assert t.decision.route.name == "pdfs"
    assert "documents: request has documents, as the rule wants" in t.decision.trace[1]["reasons"]
    assert plan(r, anthropic_turn("plain")).decision.route.name == "to-local"


def test_defaults_are_the_providers_and_loopback_is_text_only():
    for ep in BUILTIN_ENDPOINTS.values():
        assert ep.takes == ("text", "images", "documents", "server_tools"), ep.name
    assert default_accepts("openai", "127.0.0.1") == ("text",) == default_accepts("anthropic", "localhost")
    assert is_loopback("[::1]") and is_loopback("127.3.4.5") and not is_loopback("10.0.0.2")
    assert default_accepts("openai", "gpu-box.lan") == ("text", "images", "documents", "server_tools")


@pytest.mark.parametrize("value,want", [
    ("[text, pdf]", "accepts.yaml:3: endpoint 'e': accepts: unknown kind 'pdf' (expected some of: text, images, "
                    "documents, server_tools)"),
    ("[images]", "accepts.yaml:3: endpoint 'e': accepts must include text"),
    ("yes", "accepts.yaml:3: endpoint 'e': accepts must be a string or a list of strings, got 'yes'"),
])
def test_a_bad_accepts_is_an_error_with_its_line(value, want):
    text = f"endpoints:\n  e:\n    accepts: {value}\n    protocol: openai\n    url: http://127.0.0.1:1/v1\n"
    with pytest.raises(RulesError) as e:
        load_rules_text(text, "accepts.yaml")
    assert str(e.value).startswith(want)


def test_check_names_the_routes_that_could_receive_turns_their_endpoint_cannot_take(tmp_path, rules):
    lines = accepts_lines(rules)
    assert lines == [
        "accepts: route 'to-local' → local takes text by default (an endpoint on loopback: a local server): turns "
        "with images, documents or provider-run tools are refused there before sending and go on to the next route",
        "accepts: route 'to-vision' → vision takes text, images, documents: turns with provider-run tools are "
        "refused there before sending and go on to the next route",
        "accepts: route 'to-ant' → ant takes text, images, documents, server_tools: turns of openai, "
        "openai-responses, gemini clients relying on provider-run tools (no translation to anthropic carries them) "
        "are refused there before sending and go on to the next route",
    ]
    path = tmp_path / "r.yaml"
    path.write_text(RULES.replace("  - name: to-local\n    to: local\n",
                                  "  - name: to-local\n    when: {images: false, documents: false, server_tools: false}\n"
                                  "    to: local\n    on_refused: error\n"))
    ok, out = check_file(path)
    assert ok and not [x for x in out if x.startswith("accepts:") and "'to-local'" in x]  # its when keeps them off


def test_a_shadow_or_replay_of_a_turn_its_endpoint_cannot_take_is_refused_before_sending(rules):
    from tokunseba.errors import Refused
    from tokunseba.shadow.turns import build_request

    body = json.dumps(anthropic_turn([{"type": "text", "text": "read"}, PDF])).encode()
    with pytest.raises(Refused) as e:
        build_request("anthropic", "messages", body, rules.endpoints["local"], {})
    assert e.value.message == "the turn has documents; endpoint local takes text (a local server unless it says accepts: …)"
    out = build_request("anthropic", "messages", body, rules.endpoints["vision"], {})
    assert any(p.get("type") == "file" for p in json.loads(out.body)["messages"][-1]["content"])
