"""Rules on who is talking: `when: background / agent / session`, header values by glob or
regex, load-time errors for them, and `check` saying which clients can say each key."""

from __future__ import annotations

import textwrap

import pytest

from tests.conftest import load_fixture
from tokunseba.routing.endpoints import BUILTIN_ENDPOINTS
from tokunseba.routing import Route, Rules, RulesError, check_file, decide, load_rules_text, turn_facts

LOCAL = """\
endpoints:
  local:
    protocol: openai
    url: http://127.0.0.1:8000/v1
"""


def request(name: str, **headers: str) -> tuple[str, dict, dict]:
    f = load_fixture(name + ".json")
    protocol = ("gemini" if "gemini" in name or "genai" in name else
                "openai-responses" if "codex" in name else "anthropic")
    return protocol, {k.lower(): v for k, v in f["headers"]} | headers, f["body"]


def facts_of(name: str, **headers: str):
    protocol, h, body = request(name, **headers)
    return turn_facts(protocol, body, 1000, h)


def trace(when: dict, f) -> tuple[bool, list[str]]:
    rules = Rules(dict(BUILTIN_ENDPOINTS), [Route("r", when, "openai")], "t")
    d = decide(rules, f, refusal=lambda r, e: None)
    return d.trace[0]["matched"], d.trace[0]["reasons"]


SUB = {"x-claude-code-agent-id": "a52cbb60ec2510ca8"}

CASES = [
    ({"background": True}, ("claude-code-title-haiku", {}), True,
     "background: background turn (declares no tools (a side query)), as the rule wants"),
    ({"background": True}, ("claude-code-print-main-turn", {}), False,
     "background: not a background turn (x-app: cli, declares tools), rule wants true"),
    ({"background": True}, ("claude-code-print-main-turn", {"x-app": "cli-bg"}), True,
     "background: background turn (x-app: cli-bg), as the rule wants"),
    ({"background": False}, ("codex-responses-gpt55-tool-followup", {}), False,
     "background: codex does not say (only claude-code can), so the rule does not match"),
    ({"background": False}, ("gemini-cli-main-turn-yolo", {}), False,
     "background: gemini-cli does not say (only claude-code can), so the rule does not match"),
    ({"agent": "subagent"}, ("claude-code-print-main-turn", SUB), True,
     "agent: subagent a52cbb60ec2510ca8, as the rule wants"),
    ({"agent": "main"}, ("claude-code-print-main-turn", SUB), False, "agent: subagent a52cbb60ec2510ca8, rule wants main"),
    ({"agent": "main"}, ("claude-code-print-main-turn", {}), True, "agent: main, as the rule wants"),
    ({"agent": "main"}, ("codex-responses-gpt55-tool-followup", {}), True, "agent: main, as the rule wants"),
    ({"agent": "main"}, ("google-genai-py-tool-followup", {}), False,
     "agent: google-genai does not say (only claude-code, codex can), so the rule does not match"),
    ({"session": ["01a2370a-*"]}, ("codex-responses-gpt55-tool-followup", {}), True,
     "session '01a2370a-63bf-7eb1-bc1c-415c0e59d641' matches '01a2370a-*'"),
    ({"session": ["abc"]}, ("claude-code-print-main-turn", {"x-claude-code-session-id": "abd"}), False,
     "session 'abd' does not match 'abc'"),
    ({"header": {"user-agent": "claude-cli/2.*"}}, ("claude-code-print-main-turn", {}), True,
     "header user-agent is 'claude-cli/2.1.197 (external, sdk-cli)', matches glob 'claude-cli/2.*'"),
    ({"header": {"user-agent": "/sdk-(cli|py)\\)$/"}}, ("claude-code-print-main-turn", {}), True,
     "header user-agent is 'claude-cli/2.1.197 (external, sdk-cli)', matches regex '/sdk-(cli|py)\\\\)$/'"),
    ({"header": {"x-app": "/^cli$/"}}, ("claude-code-print-main-turn", {"x-app": "cli-bg"}), False,
     "header x-app is 'cli-bg', does not match regex '/^cli$/'"),
    ({"header": {"x-app": "cli"}}, ("claude-code-print-main-turn", {"x-app": "cli-bg"}), False,
     "header x-app is 'cli-bg', rule wants 'cli'"),  # no glob characters: exact, as before
]


@pytest.mark.parametrize("when,req,matched,reason", CASES, ids=[f"{next(iter(c[0]))}-{i}" for i, c in enumerate(CASES)])
def test_each_who_condition_gives_a_reason(when, req, matched, reason):
    assert trace(when, facts_of(req[0], **req[1])) == (matched, [reason])


def test_a_gemini_fingerprint_can_be_matched_as_a_session():
    f = facts_of("gemini-cli-main-turn-yolo")
    ok, (why,) = trace({"session": ["fp-*"]}, f)
    assert ok and why.startswith("fingerprint 'fp-")


def test_a_huge_header_value_is_bounded_in_the_trace():
    ok, (why,) = trace({"header": {"x-app": "cli*"}}, facts_of("claude-code-print-main-turn", **{"x-app": "cli" + "j" * 10_000}))
    assert ok and len(why) < 250 and "(10003 chars)" in why


def rules_of(routes: str) -> Rules:
    return load_rules_text(LOCAL + "routes:\n" + textwrap.indent(textwrap.dedent(routes), "  "), "r.yaml")


def test_routes_by_agent_and_background_from_a_file():
    rules = rules_of("""\
        - name: bg
          when: {background: true}
          to: local
        - name: sub
          when: {agent: subagent}
          to: local
        - name: main-loop
          when: {agent: main, background: false}
          to: openai
        """)
    assert decide(rules, facts_of("claude-code-title-haiku")).route.name == "bg"
    assert decide(rules, facts_of("claude-code-print-main-turn", **SUB)).route.name == "sub"
    assert decide(rules, facts_of("claude-code-print-main-turn")).route.name == "main-loop"
    # a client that cannot say matches none of them
    assert decide(rules, facts_of("gemini-cli-main-turn-yolo")).action == "pass"


@pytest.mark.parametrize("when,line,msg", [
    ("{agent: helper}", 7, "when.agent must be one of: main, subagent; got 'helper'"),
    ("{background: yes-please}", 7, "when.background must be true or false"),
    ("{header: {x-app: '/(unclosed/'}}", 7, "when.header.x-app: bad regex '(unclosed': missing ), unterminated subpattern"),
    ("{session: []}", 7, "when.session must not be an empty list"),
])
def test_bad_who_conditions_are_one_line_errors(when, line, msg):
    with pytest.raises(RulesError) as e:
        rules_of(f"- name: r\n  when: {when}\n  to: local\n")
    assert e.value.errors[0].startswith(f"r.yaml:{line}:") and msg in e.value.errors[0], e.value.errors


def test_check_says_which_clients_can_say_each_key(tmp_path):
    p = tmp_path / "r.yaml"
    p.write_text(LOCAL + "routes:\n  - name: bg\n    when: {background: true}\n    to: local\n"
                 "  - name: sub\n    when: {agent: subagent}\n    to: local\n"
                 "  - name: one\n    when: {session: 'fp-*'}\n    to: local\n")
    ok, lines = check_file(p)
    assert ok
    bg, = [ln for ln in lines if ln.startswith("when.background")]
    assert "(route bg)" in bg and "claude-code: x-app: cli-bg" in bg and "does not match its turns" in bg
    agent, = [ln for ln in lines if ln.startswith("when.agent")]
    assert "claude-code: x-claude-code-agent-id" in agent and "codex: x-codex-turn-metadata agent_name" in agent
    session, = [ln for ln in lines if ln.startswith("when.session")]
    assert "fingerprint" in session
    p.write_text(LOCAL + "routes:\n  - name: plain\n    when: {tools: false}\n    to: local\n")
    assert not [ln for ln in check_file(p)[1] if ln.startswith("when.")]
