"""endpoint_startup: what the proxy says at start about an endpoint it cannot reach."""

from __future__ import annotations

from tokunseba.proxy.provider_reach import endpoints_in_use, unreachable_line
from tokunseba.routing import load_rules_text

RULES = """\
endpoints:
  local:
    protocol: openai
    url: http://127.0.0.1:9/v1
  judge:
    protocol: openai
    url: http://127.0.0.1:10/v1
  unused:
    protocol: openai
    url: http://127.0.0.1:11/v1
routes:
  - name: small
    when: {client: anthropic, model: "claude-haiku-*"}
    to: local
  - name: strict
    when: {client: openai}
    to: local
    on_failure: error
  - name: watched
    when: {client: gemini}
    to: local
    shadow: judge
"""


def test_only_the_endpoints_routes_use_are_checked_in_route_order():
    rules = load_rules_text(RULES, "r.yaml")
    assert [e.name for e in endpoints_in_use(rules)] == ["local", "judge"]


def test_the_line_says_why_and_what_each_route_does_meanwhile():
    rules = load_rules_text(RULES, "/etc/tk/r.yaml")
    line = unreachable_line(rules, rules.endpoints["local"], "connection refused", cli="/p/.venv/bin/tokunseba")
    assert line == ("tokunseba: endpoint local (http://127.0.0.1:9/v1) cannot be reached now: connection refused. "
                    "Until it can: turns of routes small, watched go to the next route whose when matches, else pass "
                    "through to their provider; turns of route strict get an error in their client's protocol "
                    "(on_failure: error). Check it with: /p/.venv/bin/tokunseba models --rules /etc/tk/r.yaml --probe "
                    "--endpoint local")
    shadow = unreachable_line(rules, rules.endpoints["judge"], "the name does not resolve")
    assert "Until it can: the shadows of route watched fail (recorded)." in shadow


def test_unmatched_refuse_is_said():
    rules = load_rules_text("unmatched: refuse\n" + RULES, "r.yaml")
    assert "else are refused (unmatched: refuse)" in unreachable_line(rules, rules.endpoints["local"], "x")
