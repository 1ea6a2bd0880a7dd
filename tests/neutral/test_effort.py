"""Reasoning effort across protocols (issue 18, neutral/effort.py): every spelling reaches every
other through the neutral level, recorded as converted; disabled stays disabled; an Anthropic
budget fits under max_tokens without raising it; nothing is made up when no effort was named."""

from __future__ import annotations

import json

import pytest

from tokunseba import protocols, translate
from tokunseba.neutral.effort import BUDGETS, LEVELS, level_for_budget

MSG = [{"role": "user", "content": "hi"}]
GEM_PATH = "/v1beta/models/gemini-2.5-pro:generateContent"


def chat(**kw):
    return {"model": "m", "messages": MSG, **kw}


def ant(**kw):
    return {"model": "m", "max_tokens": kw.pop("max_tokens", 32000), "messages": MSG, **kw}


def resp(**kw):
    return {"model": "m", "input": "hi", **kw}


def gem(**gc):
    return {"contents": [{"role": "user", "parts": [{"text": "hi"}]}], "generationConfig": gc}


def test_the_tables_are_complete_with_a_reason_per_row():
    assert set(BUDGETS) == set(LEVELS)
    spellings = {f"{name} {spelling}": row for name in list(protocols.NAMES)[:4]
                 for spelling, row in protocols.get(name).effort_spellings.items()}
    assert len(spellings) == 7 and all(how and why for how, why in spellings.values())  # each protocol's, with it
    assert all(protocols.get(name).effort_fields for name in list(protocols.NAMES)[:4])
    assert all(why for _, why in BUDGETS.values())
    budgets = [BUDGETS[level][0] for level in LEVELS]
    assert budgets == sorted(budgets) and budgets[0] == 0 and budgets[1] == 1024
    for level in LEVELS:
        assert level_for_budget(BUDGETS[level][0]) == level  # each budget reads back as its level
    assert level_for_budget(1) == "minimal" and level_for_budget(31999) == "high"


@pytest.mark.parametrize("level", ["minimal", "low", "medium", "high", "xhigh"])
def test_chat_effort_to_anthropic_budget_and_back(level):
    rt = translate.request("openai", "anthropic", chat(reasoning_effort=level, max_completion_tokens=100_000))
    assert rt.body["thinking"] == {"type": "enabled", "budget_tokens": BUDGETS[level][0]}
    assert f"reasoning_effort {level!r} -> thinking.budget_tokens {BUDGETS[level][0]}" in rt.converted
    back = translate.request("anthropic", "openai", rt.body)
    assert back.body["reasoning_effort"] == level


def test_an_off_is_never_turned_on_and_goes_on_only_where_it_can_be_said():
    # an OpenAI client's own 'none': Anthropic's thinking disabled
    assert translate.request("openai", "anthropic", chat(reasoning_effort="none", max_tokens=100)).body["thinking"] == {
        "type": "disabled"}
    # Anthropic's disabled / Gemini's 0 budget: no level every target takes: dropped, recorded, nothing turned on
    rt = translate.request("anthropic", "openai", ant(thinking={"type": "disabled"}))
    assert "reasoning_effort" not in rt.body and "thinking" in rt.dropped and rt.warnings
    g = translate.request("anthropic", "gemini", ant(thinking={"type": "disabled"}))
    assert "thinkingConfig" not in g.body.get("generationConfig", {})
    z = translate.request("gemini", "openai", gem(thinkingConfig={"thinkingBudget": 0}), path=GEM_PATH)
    assert "reasoning_effort" not in z.body and "generationConfig.thinkingConfig.thinkingBudget" in z.dropped
    a = translate.request("gemini", "anthropic", {**gem(thinkingConfig={"thinkingBudget": 0}),
                                                  "generationConfig": {"thinkingConfig": {"thinkingBudget": 0},
                                                                       "maxOutputTokens": 500}}, path=GEM_PATH)
    assert "thinking" not in a.body  # Anthropic's own default: no thinking


def test_claude_codes_adaptive_effort_reaches_responses_and_gemini():
    body = ant(thinking={"type": "adaptive"}, output_config={"effort": "max"})
    r = translate.request("anthropic", "openai-responses", body)
    assert r.body["reasoning"] == {"effort": "xhigh"} and "thinking" in r.dropped
    g = translate.request("anthropic", "gemini", body)
    assert g.body["generationConfig"]["thinkingConfig"] == {"thinkingBudget": 32768}


def test_responses_and_gemini_levels_cross():
    rt = translate.request("openai-responses", "anthropic", resp(reasoning={"effort": "low", "summary": "auto"},
                                                                max_output_tokens=20000))
    assert rt.body["thinking"] == {"type": "enabled", "budget_tokens": 4096} and "reasoning.summary" in rt.dropped
    g = translate.request("gemini", "openai-responses", gem(thinkingConfig={"thinkingLevel": "HIGH",
                                                                           "includeThoughts": True}), path=GEM_PATH)
    assert g.body["reasoning"] == {"effort": "high"}
    assert "generationConfig.thinkingConfig.includeThoughts" in g.dropped


def test_gemini_dynamic_budget_names_no_level():
    rt = translate.request("gemini", "anthropic", {**gem(thinkingConfig={"thinkingBudget": -1}),
                                                   "generationConfig": {"thinkingConfig": {"thinkingBudget": -1},
                                                                        "maxOutputTokens": 5000}}, path=GEM_PATH)
    assert "thinking" not in rt.body and "generationConfig.thinkingConfig.thinkingBudget" in rt.dropped


def test_no_effort_named_no_effort_sent():
    for src, body in (("openai", chat(max_tokens=100)), ("anthropic", ant()), ("openai-responses", resp())):
        for dst in ("openai", "anthropic", "openai-responses", "gemini"):
            if src == dst:
                continue
            out = translate.request(src, dst, body, max_tokens=1000).body
            assert not ({"thinking", "reasoning", "reasoning_effort"} & set(out))
            assert "thinkingConfig" not in out.get("generationConfig", {})


def test_anthropic_budget_fits_under_max_tokens_never_raising_it():
    rt = translate.request("openai", "anthropic", chat(reasoning_effort="xhigh", max_completion_tokens=6000))
    assert rt.body["max_tokens"] == 6000 and rt.body["thinking"]["budget_tokens"] == 3000
    small = translate.request("openai", "anthropic", chat(reasoning_effort="high", max_completion_tokens=1500))
    assert "thinking" not in small.body and "reasoning_effort" in small.dropped
    assert any("leaves no room" in w for w in small.warnings)


def test_anthropic_thinking_gives_way_to_a_forced_tool_and_drops_what_it_rejects():
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    forced = translate.request("openai", "anthropic", chat(reasoning_effort="high", max_tokens=30000, tools=tools,
                                                           tool_choice="required"))
    assert "thinking" not in forced.body and any("forces a tool" in w for w in forced.warnings)
    warm = translate.request("openai", "anthropic", chat(reasoning_effort="high", max_tokens=30000, temperature=0.3,
                                                         top_p=0.5))
    assert warm.body["thinking"]["type"] == "enabled"
    assert "temperature" not in warm.body and "top_p" not in warm.body
    assert {"temperature", "top_p"} <= set(warm.dropped)


def test_an_unknown_level_is_dropped_and_said():
    rt = translate.request("openai", "anthropic", chat(reasoning_effort="turbo", max_tokens=3000))
    assert "thinking" not in rt.body and "reasoning_effort" in rt.dropped and rt.warnings


def test_an_endpoint_pins_caps_or_omits_the_effort_recorded():
    from tokunseba.routing import load_rules_text
    from tokunseba.turn.plan import translate_for_endpoint

    rules = load_rules_text("endpoints:\n"
                            "  pin: {protocol: anthropic, url: 'http://127.0.0.1:9/v1', max_tokens: 40000, effort: low}\n"
                            "  cap: {protocol: anthropic, url: 'http://127.0.0.1:9/v1', max_tokens: 40000, max_effort: medium}\n"
                            "  quiet: {protocol: openai, url: 'http://127.0.0.1:9/v1', effort: omit}\n")
    body = chat(reasoning_effort="xhigh")
    pinned = translate_for_endpoint("openai", rules.endpoints["pin"], body, None)
    assert pinned.body["thinking"] == {"type": "enabled", "budget_tokens": 4096}
    assert "reasoning_effort 'xhigh' -> 'low' (pinned by endpoint pin)" in pinned.converted
    assert translate_for_endpoint("openai", rules.endpoints["pin"], chat(), None).body["thinking"]["budget_tokens"] == 4096
    capped = translate_for_endpoint("openai", rules.endpoints["cap"], body, None)
    assert capped.body["thinking"]["budget_tokens"] == 10240 and any("capped by endpoint cap" in c for c in capped.converted)
    low = translate_for_endpoint("openai", rules.endpoints["cap"], chat(reasoning_effort="low"), None)
    assert low.body["thinking"]["budget_tokens"] == 4096  # under the cap: untouched
    omitted = translate_for_endpoint("anthropic", rules.endpoints["quiet"], ant(output_config={"effort": "high"}), None)
    assert "reasoning_effort" not in omitted.body and "output_config.effort" in omitted.dropped
    assert body == chat(reasoning_effort="xhigh")  # the client's body untouched


def test_a_bad_effort_setting_is_a_load_error_with_its_line():
    from tokunseba.routing import RulesError, load_rules_text

    with pytest.raises(RulesError) as e:
        load_rules_text("endpoints:\n  x: {protocol: openai, url: 'http://127.0.0.1:9/v1', effort: turbo}\n", "r.yaml")
    assert "r.yaml:2" in str(e.value) and "effort must be one of: none, minimal, low, medium, high, xhigh, omit" in str(e.value)


@pytest.mark.parametrize("client", ["anthropic", "openai", "openai-responses", "gemini"])
def test_an_endpoint_refusing_the_carried_effort_says_what_to_do_after_its_own_words(client):
    from tokunseba.routing import load_rules_text
    from tokunseba.turn.plan import build_turn, decide_request, prepare_request
    from tokunseba.turn.reply import translate_whole

    rules = load_rules_text("endpoints:\n  gpt41: {protocol: openai-responses, url: 'http://127.0.0.1:9/v1'}\n"
                            "  c: {protocol: openai, url: 'http://127.0.0.1:9/v1'}\n"
                            "routes:\n  - {name: r, to: gpt41, when: {client: [anthropic, gemini, openai]}}\n"
                            "  - {name: s, to: c, when: {client: openai-responses}}\n")
    bodies = {"anthropic": ("/v1/messages", ant(thinking={"type": "adaptive"}, output_config={"effort": "high"})),
              "openai": ("/v1/chat/completions", chat(reasoning_effort="high")),
              "openai-responses": ("/v1/responses", resp(reasoning={"effort": "high"})),
              "gemini": ("/v1beta/models/g:generateContent", gem(thinkingConfig={"thinkingLevel": "HIGH"}))}
    path, body = bodies[client]
    host = {"anthropic": "api.anthropic.com", "gemini": "generativelanguage.googleapis.com"}.get(client, "api.openai.com")
    prep = prepare_request(method="POST", host=host, port=443, path=path, headers=[], body=json.dumps(body).encode())
    turn = build_turn(rules, prep, decide_request(rules, prep), env={})
    upstream = json.dumps({"error": {"message": "Unsupported parameter: 'reasoning_effort' is not supported with "
                                                "this model.", "type": "invalid_request_error",
                                     "param": "reasoning_effort", "code": "unsupported_parameter"}}).encode()
    if turn.target_protocol == "openai-responses":
        upstream = upstream.replace(b"'reasoning_effort'", b"'reasoning.effort'")
    status, _, out, _ = translate_whole(turn, 400, upstream)
    msg = json.loads(out)["error"]["message"]
    assert status == 400 and msg.startswith("Unsupported parameter") and "`effort: omit`" in msg
    other, _, plain, _ = translate_whole(turn, 400, json.dumps({"error": {"message": "bad tool schema"}}).encode())
    assert "tokunseba" not in json.loads(plain)["error"]["message"]


@pytest.mark.parametrize("target", ["openai", "openai-responses", "anthropic", "gemini"])
def test_a_400_about_reasoning_to_a_request_that_carried_an_effort_gets_the_hint(target):
    """Each target's own effort fields (its facts' effort_fields) say whether the translated
    request carried one; the hint follows the endpoint's words only then (turn/reply.py)."""
    from tokunseba.turn.reply import refusal_hint, sent_effort

    client = "openai-responses" if target == "openai" else "openai"
    asked = {"model": "m", "max_completion_tokens": 4000, "reasoning_effort": "high",
             "messages": [{"role": "user", "content": "hi"}]} if client == "openai" else \
        {"model": "m", "max_output_tokens": 4000, "reasoning": {"effort": "high"}, "input": "hi"}
    with_effort = translate.request(client, target, asked, model="m", max_tokens=4000).body
    plain = {k: v for k, v in asked.items() if k not in ("reasoning_effort", "reasoning")}
    without = translate.request(client, target, plain, model="m", max_tokens=4000).body
    assert sent_effort(target, with_effort) and not sent_effort(target, without)
    said = b'{"error": {"message": "Unsupported parameter: reasoning_effort for this model"}}'
    hint = refusal_hint(target, with_effort, "box", 400, said)
    assert hint is not None and "endpoint box, which refused it: `effort: omit` or `max_effort:`" in hint
    assert refusal_hint(target, without, "box", 400, said) is None  # it carried none: not ours to explain
    assert refusal_hint(target, with_effort, "box", 400, b'{"error": {"message": "bad temperature"}}') is None
    assert refusal_hint(target, with_effort, "box", 500, said) is None
