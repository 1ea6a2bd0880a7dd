"""Rules (routing/rules.py): the shipped examples routing real captured requests, turn facts from
them, and decide() with its trace. Reading the file is tested in test_rules_file.py, the text
`check` prints in test_rules_text.py."""

from __future__ import annotations

import copy
import json
import textwrap

import pytest
from hypothesis import given, settings, strategies as st

from tokunseba.routing import decide, load_rules, load_rules_text, Route, Rules, turn_facts, TurnFacts
from tokunseba.routing.endpoints import BUILTIN_ENDPOINTS

from tests.conftest import load_fixture
from tests.support.rules import facts, gemini_unregistered, RULES_DIR


def fixture_facts(name: str) -> TurnFacts:
    fx = load_fixture(name)
    body = fx["body"]
    return turn_facts("anthropic", body, len(json.dumps(body)), dict(fx["headers"]))


def test_easy_turns_example_routes_background_turns_only():
    rules = load_rules(RULES_DIR / "examples" / "easy-turns-local.yaml")
    title = decide(rules, fixture_facts("claude-code-title-haiku.json"))
    assert (title.action, title.route.name, title.endpoint.name, title.model) == (
        "route", "claude-background", "local", "gemma-3-270m")
    assert rules.endpoints["local"].max_tokens == 512
    assert rules.endpoints["local"].max_tokens_field == "max_tokens"
    main = decide(rules, fixture_facts("claude-code-print-main-turn.json"))
    assert (main.action, main.reason) == ("pass", "no route matched")
    small_chat = decide(rules, facts(client="openai", model="gpt-5.5", request_bytes=900))
    assert (small_chat.action, small_chat.route.name) == ("route", "small-toolless")
    big_chat = decide(rules, facts(client="openai", model="gpt-5.5", request_bytes=20001))
    assert big_chat.action == "pass"
    with_image = decide(rules, facts(model="claude-haiku-4-5", images=True))
    assert with_image.action == "pass"


def test_all_local_example():
    rules = load_rules(RULES_DIR / "examples" / "all-local.yaml")
    for client in ("anthropic", "openai", "openai-responses"):
        d = decide(rules, facts(client=client, tools=True, thinking=True, request_bytes=10**6))
        assert (d.action, d.endpoint.name) == ("route", "local")
    gemini = decide(rules, facts(client="gemini"))
    assert gemini.action == "pass"


def test_retarget_example_keeps_protocol_and_model():
    rules = load_rules(RULES_DIR / "examples" / "retarget-anthropic.yaml")
    d = decide(rules, fixture_facts("claude-code-print-main-turn.json"))
    assert (d.action, d.endpoint.protocol, d.endpoint.host, d.model) == ("route", "anthropic", "llm-gateway.example.com", None)
    assert d.endpoint.auth_headers({"GATEWAY_KEY": "g"}) == {"x-api-key": "g"}


# ---------------------------------------------------------------------------------------------
# Turn facts from real captured requests


def test_facts_of_claude_code_main_turn():
    f = fixture_facts("claude-code-print-main-turn.json")
    assert (f.client, f.model, f.tools, f.tool_count, f.thinking, f.images) == (
        "anthropic", "claude-opus-4-8", True, 9, True, False)  # thinking: {"type": "adaptive"}
    assert f.last_user_text.endswith("\nsay hi")  # system-reminder block, then the prompt
    assert f.headers["x-app"] == "cli" and "X-App" not in f.headers and "x-api-key" in f.headers
    assert f.request_bytes > 40000


def test_facts_of_claude_code_haiku_title():
    f = fixture_facts("claude-code-title-haiku.json")
    assert (f.model, f.tools, f.tool_count, f.thinking, f.images) == (
        "claude-haiku-4-5-20251001", False, 0, False, False)  # tools: [], thinking disabled
    assert f.request_bytes < 5000


@pytest.mark.parametrize("name,tools,thinking", [
    ("codex-responses-gpt55-tool-followup.json", 10, True),
    ("codex-responses-custom-provider.json", 13, True),  # reasoning: {"summary": "auto"}; a namespace of 5 counts 5
])
def test_facts_of_codex_turns(name, tools, thinking):
    body = load_fixture(name)["body"]
    f = turn_facts("openai-responses", body, 1, {})
    assert (f.tool_count, f.tools, f.thinking, f.images) == (tools, True, thinking, False)
    assert f.last_user_text == "TOOLTEST run echo"


PNG = {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}


@pytest.mark.parametrize(
    "messages,images",
    [
        ([{"role": "user", "content": [{"type": "image", "source": PNG}]}], True),
        # an MCP screenshot nested in a tool result (docs/dev/pitfalls.md 23)
        ([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                        "content": [{"type": "text", "text": "shot"},
                                                    {"type": "image", "source": PNG}]}]}], True),
        ([{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "draw",
                                             "input": {"type": "image", "content": [{"type": "image"}]}}]}], False),
        ([{"role": "user", "content": [{"type": "document", "source": {"type": "base64", "data": "x"}}]}], False),
        ([{"role": "user", "content": "an image of a cat"}], False),
    ],
    ids=["top-level", "inside-tool-result", "tool-input-is-not-content", "document-is-not-image", "text"],
)
def test_anthropic_images_anywhere(messages, images):
    assert turn_facts("anthropic", {"messages": messages}, 0, {}).images is images


@pytest.mark.parametrize(
    "body,thinking",
    [({"thinking": {"type": "enabled", "budget_tokens": 1024}}, True), ({"thinking": {"type": "adaptive"}}, True),
     ({"thinking": {"type": "disabled"}}, False), ({}, False), ({"thinking": "yes"}, False)],
)
def test_anthropic_thinking(body, thinking):
    assert turn_facts("anthropic", body, 0, {}).thinking is thinking


@pytest.mark.parametrize(
    "messages,text",
    [
        ([{"role": "user", "content": "first"}, {"role": "assistant", "content": "a"},
          {"role": "user", "content": [{"type": "text", "text": "x"}, {"type": "text", "text": "y"}]}], "x\ny"),
        # a mid-conversation system message after the user turn is not user text
        ([{"role": "user", "content": "q"}, {"role": "system", "content": "deferred tools"}], "q"),
        # a tool follow-up: the last user message holds only tool results
        ([{"role": "user", "content": "q"},
          {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "out"}]}], None),
        ([], None),
    ],
)
def test_anthropic_last_user_text(messages, text):
    assert turn_facts("anthropic", {"messages": messages}, 0, {}).last_user_text == text


def test_openai_chat_facts():
    body = {
        "model": "gpt-5.5",
        "reasoning_effort": "low",
        "tools": [{"type": "function", "function": {"name": "f"}}],
        "messages": [
            {"role": "system", "content": "s"},
            {"role": "user", "content": [{"type": "text", "text": "look"},
                                         {"type": "image_url", "image_url": {"url": "data:image/png;base64,x"}}]},
        ],
    }
    f = turn_facts("openai", body, 10, {"X-Req": "1"})
    assert (f.model, f.tools, f.tool_count, f.thinking, f.images, f.last_user_text, f.headers) == (
        "gpt-5.5", True, 1, True, True, "look", {"x-req": "1"})
    f = turn_facts("openai", body | {"reasoning_effort": "none", "tools": [], "messages": body["messages"][:1]}, 0, {})
    assert (f.tools, f.thinking, f.images, f.last_user_text) == (False, False, False, None)
    assert turn_facts("openai", {"functions": [{"name": "legacy"}]}, 0, {}).tools is True


def test_responses_image_in_function_call_output():
    body = {"input": [{"type": "function_call_output", "call_id": "c",
                       "output": [{"type": "input_image", "image_url": "data:image/png;base64,x"}]}]}
    assert turn_facts("openai-responses", body, 0, {}).images is True
    assert turn_facts("openai-responses", {"input": "hi"}, 0, {}).last_user_text == "hi"


def test_gemini_facts():
    body = {
        "contents": [{"role": "user", "parts": [{"text": "what is this"},
                                                {"inlineData": {"mimeType": "image/jpeg", "data": "x"}}]}],
        "tools": [{"functionDeclarations": [{"name": "a"}, {"name": "b"}]}, {"googleSearch": {}}],
        "generationConfig": {"thinkingConfig": {"thinkingBudget": 0}},
    }
    f = turn_facts("gemini", body, 0, {}, model="gemini-2.5-flash")
    assert (f.model, f.tool_count, f.thinking, f.images, f.last_user_text) == (
        "gemini-2.5-flash", 3, False, True, "what is this")


def _gemini_cli_turn(name: str, prompt: str | None = None) -> TurnFacts:
    """A recorded Gemini CLI request, its prompt (the last text part) replaced by ``prompt``."""
    fx = copy.deepcopy(load_fixture(name))
    body = fx["body"]
    if prompt is not None:
        body["contents"][-1]["parts"][-1]["text"] = prompt
    model = fx["url"].split("/models/")[1].split(":")[0]
    return turn_facts("gemini", body, len(json.dumps(body)), dict(fx["headers"]), model=model)


def test_gemini_cli_local_example_sends_question_prompts_and_the_router_call_local():
    """rules/examples/gemini-cli-local.yaml: the router call, and the main turn of a prompt that
    asks (its text after the <session_context> part), go to the local model; other prompts and
    a tool result's turn do not."""
    rules = load_rules(RULES_DIR / "examples" / "gemini-cli-local.yaml")
    router = decide(rules, _gemini_cli_turn("gemini-cli-router-classifier.json"))
    assert (router.action, router.route.name, router.endpoint.name) == ("route", "gemini-cli-router", "local")
    for prompt in ("say hi", "Say hello in French.", "  explain this folder", "What is 2+2?"):
        d = decide(rules, _gemini_cli_turn("gemini-cli-main-turn-yolo.json", prompt))
        assert (d.action, d.route.name, d.endpoint.name) == ("route", "gemini-cli-questions-local", "local"), prompt
    for prompt in ("GTOOL_SHELL:echo hi", "fix the bug, then say hi", "sayonara"):
        assert decide(rules, _gemini_cli_turn("gemini-cli-main-turn-yolo.json", prompt)).action == "pass", prompt
    # a word of the session context (the folder listing) at the start of a line is not the prompt
    listing = _gemini_cli_turn("gemini-cli-main-turn-yolo.json", "fix it")
    listing.last_user_text = listing.last_user_text.replace("<session_context>", "<session_context>\nwhat.txt")
    assert decide(rules, listing).action == "pass"
    assert decide(rules, _gemini_cli_turn("gemini-cli-tool-result-followup.json")).action == "pass"


# Realistic turns of each protocol; the fuzz test breaks them at random places.
SAMPLES = {
    "anthropic": {
        "model": "claude-haiku-4-5", "tools": [{"name": "Read", "input_schema": {}}],
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "Read", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t",
                 "content": [{"type": "text", "text": "r"}, {"type": "image", "source": PNG}]},
                {"type": "text", "text": "and?"}]},
        ],
    },
    "openai": {
        "model": "gpt-5.5", "reasoning_effort": "low", "tools": [{"type": "function", "function": {"name": "f"}}],
        "functions": [{"name": "g"}],
        "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": [
            {"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,x"}}]}],
    },
    "openai-responses": {
        "model": "gpt-5.5", "reasoning": {"effort": "low"}, "tools": [{"type": "function", "name": "f"}],
        "input": [
            {"type": "additional_tools", "role": "developer", "tools": [{"type": "function", "name": "exec"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
            {"type": "function_call_output", "call_id": "c", "output": [{"type": "input_image", "image_url": "x"}]},
        ],
    },
    "gemini": {
        "contents": [{"role": "user", "parts": [{"text": "what", "thought": False},
                                                {"inlineData": {"mimeType": "image/png", "data": "x"}}]}],
        "tools": [{"functionDeclarations": [{"name": "a"}]}, {"googleSearch": {}}],
        "generationConfig": {"thinkingConfig": {"thinkingBudget": 0}},
    },
}
ODD = st.none() | st.booleans() | st.integers() | st.text(max_size=3) | st.just([]) | st.just({}) | st.just([None])


def _paths(x, at=()):
    yield at
    items = x.items() if isinstance(x, dict) else enumerate(x) if isinstance(x, list) else ()
    for k, v in items:
        yield from _paths(v, (*at, k))


DELETE = object()


def _break(body, path, value):
    """A copy of body with the node at path replaced by value (or deleted, for DELETE)."""
    if not path:
        return value
    body = copy.deepcopy(body)
    *parent, last = path
    node = body
    for k in parent:
        node = node[k]
    if value is DELETE:
        del node[last]
    else:
        node[last] = value
    return body


@pytest.mark.parametrize("client", sorted(SAMPLES))
@settings(max_examples=120, deadline=None)
@given(data=st.data())
def test_turn_facts_never_raises_on_odd_bodies(client, data):
    body = SAMPLES[client]
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(list(_paths(body))))
        body = _break(body, path, data.draw(ODD | st.just(DELETE)) if path else data.draw(ODD))
    f = turn_facts(client, body, 0, {})
    assert isinstance(f.tools, bool) and isinstance(f.thinking, bool) and isinstance(f.images, bool)
    assert f.last_user_text is None or isinstance(f.last_user_text, str)
    assert f.model is None or isinstance(f.model, str)


@pytest.mark.parametrize("client", sorted(SAMPLES))
def test_samples_show_every_fact(client):
    f = turn_facts(client, SAMPLES[client], 0, {})
    assert (f.tools, f.images) == (True, True) and f.last_user_text
    assert f.thinking is (client != "gemini")  # gemini sample: thinkingBudget 0


# ---------------------------------------------------------------------------------------------
# decide(): first match wins, no match passes, refusals and unreachable endpoints are skipped

TWO = textwrap.dedent("""\
    endpoints:
      local: {protocol: openai, url: http://127.0.0.1:8000/v1, model: gemma}
      gem: {protocol: gemini, url: http://127.0.0.1:9000/v1beta}
      gateway: {protocol: anthropic, url: https://gw.example.com/v1}
    routes:
""")


def rules_of(routes: str) -> Rules:
    return load_rules_text(TWO + textwrap.indent(textwrap.dedent(routes), "  "), "d.yaml")


def test_first_match_wins():
    rules = rules_of("""\
        - name: haiku
          when: {model: "*haiku*"}
          to: local
          model: small
        - name: everything
          to: gateway
        """)
    d = decide(rules, facts(model="claude-haiku-4-5"))
    assert (d.action, d.route.name, d.endpoint.name, d.model, d.reason) == ("route", "haiku", "local", "small", "haiku → local")
    assert d.trace == [{"route": "haiku", "matched": True, "reasons": ["model 'claude-haiku-4-5' matches '*haiku*'"],
                        "refused": None, "unreachable": False}]
    d = decide(rules, facts(model="claude-opus-4-8"))
    assert (d.route.name, d.model) == ("everything", None)  # gateway has no model: keep the client's
    assert [t["matched"] for t in d.trace] == [False, True]
    assert d.trace[1]["reasons"] == ["no conditions: matches every turn"]


def test_no_match_passes_through_with_reasons():
    rules = rules_of("""\
        - name: easy
          when: {model: "*haiku*", tools: false}
          to: local
        """)
    d = decide(rules, fixture_facts("claude-code-print-main-turn.json"))
    assert (d.action, d.route, d.endpoint, d.model, d.reason) == ("pass", None, None, None, "no route matched")
    assert d.trace == [{
        "route": "easy", "matched": False,
        "reasons": ["model 'claude-opus-4-8' does not match '*haiku*'", "tools: request declares 9 tools, rule wants none"],
        "refused": None, "unreachable": False,
    }]


def test_refused_route_is_skipped_and_recorded(gemini_unregistered):
    rules = rules_of("""\
        - name: to-gemini
          to: gem
        - name: to-local
          to: local
        """)
    d = decide(rules, facts())
    assert (d.action, d.route.name, d.model) == ("route", "to-local", "gemma")
    assert d.trace[0]["refused"] == "no translator from anthropic to gemini"
    assert d.trace[0]["matched"] is True and d.trace[1]["refused"] is None


def test_on_refused_error(gemini_unregistered):
    rules = rules_of("""\
        - name: r1
          to: gem
          on_refused: error
        - name: r2
          to: local
        """)
    d = decide(rules, facts())
    assert (d.action, d.route.name, d.endpoint.name, d.reason) == (
        "error", "r1", "gem", "route r1 refused: no translator from anthropic to gemini")
    assert len(d.trace) == 1


def test_custom_refusal_and_unreachable():
    rules = rules_of("""\
        - name: a
          to: local
        - name: b
          to: gateway
        - name: c
          to: local
          model: other
        """)
    seen = []

    def refusal(route, ep):
        seen.append((route.name, ep.name))
        return "tool ids not accepted" if route.name == "a" else None

    d = decide(rules, facts(), refusal=refusal, reachable=lambda ep: ep.name != "gateway")
    assert (d.action, d.route.name, d.model) == ("route", "c", "other")
    assert seen == [("a", "local"), ("b", "gateway"), ("c", "local")]
    assert [(t["refused"], t["unreachable"]) for t in d.trace] == [
        ("tool ids not accepted", False), (None, True), (None, False)]
    d = decide(rules, facts(), reachable=lambda ep: False)
    assert d.action == "pass"
    assert d.reason == "no usable route: a: endpoint local unreachable; b: endpoint gateway unreachable; c: endpoint local unreachable"


def test_same_protocol_retarget_is_a_route():
    rules = rules_of("""\
        - name: gw
          when: {client: anthropic}
          to: gateway
        """)
    assert decide(rules, facts()).action == "route"
    assert decide(rules, facts(client="openai")).action == "pass"


COND = [
    ({"client": ["anthropic", "openai"]}, {"client": "openai"}, True, "client 'openai' is anthropic or openai"),
    ({"client": ["anthropic"]}, {"client": "gemini"}, False, "client 'gemini' is not anthropic"),
    ({"model": ["*haiku*", "*mini*"]}, {"model": "gpt-5-mini"}, True, "model 'gpt-5-mini' matches '*mini*'"),
    ({"model": ["*HAIKU*"]}, {"model": "claude-haiku"}, False, "model 'claude-haiku' does not match '*HAIKU*'"),
    ({"model": ["*"]}, {"model": None}, False, "request names no model, rule wants '*'"),
    ({"tools": True}, {"tools": True, "tool_count": 1}, True, "tools: request declares 1 tool, as the rule wants"),
    ({"tools": True}, {}, False, "tools: request declares no tools, rule wants some"),
    ({"thinking": False}, {"thinking": True}, False, "thinking: request asks for it, rule wants it off"),
    ({"thinking": True}, {}, False, "thinking: request does not ask for it, rule wants it on"),
    ({"images": False}, {}, True, "images: no images, as the rule wants"),
    ({"images": False}, {"images": True}, False, "images: request has images, rule wants none"),
    ({"max_request_bytes": 1000}, {"request_bytes": 1000}, True, "request is 1000 bytes, within the 1000 limit"),
    ({"max_request_bytes": 999}, {"request_bytes": 1000}, False, "request is 1000 bytes, over the 999 limit"),
    ({"last_user_matches": "(?i)summar"}, {"last_user_text": "please SUMMARISE this"}, True,
     "last user text matches /(?i)summar/"),
    ({"last_user_matches": "^summar"}, {"last_user_text": "please summarise"}, False,
     "last user text does not match /^summar/"),
    ({"last_user_matches": "x"}, {"last_user_text": None}, False, "no last user text to match /x/"),
    ({"header": {"x-app": "cli"}}, {"headers": {"x-app": "cli"}}, True, "header x-app is 'cli'"),
    ({"header": {"x-app": "cli"}}, {"headers": {"x-app": "CLI"}}, False, "header x-app is 'CLI', rule wants 'cli'"),
    ({"header": {"x-app": "cli", "x-b": "1"}}, {"headers": {"x-app": "cli"}}, False,
     "header x-app is 'cli'; header x-b absent"),
    # credential values never reach the trace (and so never the ledger)
    ({"header": {"x-api-key": "sk-a"}}, {"headers": {"x-api-key": "sk-b"}}, False,
     "header x-api-key does not have the rule's value"),
    ({"header": {"authorization": "Bearer sk-a"}}, {"headers": {"authorization": "Bearer sk-a"}}, True,
     "header authorization has the rule's value"),
]


@pytest.mark.parametrize("when,fact,matched,reason", COND, ids=[f"{next(iter(c[0]))}-{i}" for i, c in enumerate(COND)])
def test_each_condition_gives_a_reason(when, fact, matched, reason):
    rules = Rules(dict(BUILTIN_ENDPOINTS), [Route("r", when, "openai")], "t")
    d = decide(rules, facts(**fact), refusal=lambda r, e: None)
    assert d.trace[0]["matched"] is matched
    assert d.trace[0]["reasons"] == [reason]


def test_header_names_are_case_insensitive_from_file_to_request():
    rules = rules_of("""\
        - name: h
          when: {header: {X-App: cli}}
          to: local
        """)
    f = turn_facts("anthropic", {}, 0, {"X-APP": "cli"})
    assert decide(rules, f).action == "route"
    assert decide(rules, turn_facts("anthropic", {}, 0, {"x-app": "Cli"})).action == "pass"


def test_a_trace_entry_carries_its_endpoint_and_records_as_before():
    """A decision's trace is routing.rules.Tried entries: the endpoint itself for what reads it
    live, the same JSON as before for the ledger (the endpoint by name, only where skipped)."""
    from tokunseba.routing import Tried, records

    rules = load_rules_text("""
endpoints:
  oai: {protocol: openai, url: "http://127.0.0.1:1/v1"}
routes:
  - {name: first, when: {model: "claude-*"}, to: oai}
""")
    d = decide(rules, facts(client="anthropic", model="claude-x"), reachable=lambda ep: "cooling down (1 s left)")
    (t,) = d.trace
    assert isinstance(t, Tried) and t.endpoint is rules.endpoints["oai"] and t.unavailable.startswith("cooling")
    assert records(d.trace) == [{"route": "first", "matched": True, "reasons": [t.reasons[0]], "refused": None,
                                 "unreachable": True, "endpoint": "oai", "unavailable": "cooling down (1 s left)"}]
    assert t == records(d.trace)[0] and t["endpoint"] == "oai" and "unavailable" in t
