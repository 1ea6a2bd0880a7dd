"""An endpoint whose protocol requires a maximum output (Anthropic ``max_tokens``) and sets no
default, taking clients that may omit one (Gemini CLI, Chat, Responses): ``tokunseba check``
warns at the route's FILE:LINE, and a turn that sends none is answered with a 400 in the
client's protocol naming the key to add (``max_tokens:`` on endpoint X). Before, check said OK
and the run-time error said only that "the endpoint configures no default"."""

from __future__ import annotations

import json

from tests.support.planning import plan_request
from tokunseba.cli.main import main
from tokunseba.routing import load_rules_text

RULES = """\
endpoints:
  claude:
    protocol: anthropic
    url: http://127.0.0.1:9/v1
  capped:
    protocol: anthropic
    url: http://127.0.0.1:9/v1
    max_tokens: 1024
routes:
  - name: claude-retarget
    when: {client: anthropic}
    to: claude
  - name: chat-capped
    when: {client: openai, model: "capped-*"}
    to: capped
  - name: others-to-claude
    to: claude
"""


def test_check_warns_at_the_route_line_for_clients_that_may_omit_it(tmp_path, capsys):
    path = tmp_path / "rules.yaml"
    path.write_text(RULES)
    assert main(["check", str(path)]) == 0
    out = capsys.readouterr().out
    warned = [line for line in out.splitlines() if "max_tokens" in line]
    assert warned == [f"{path}:16: warning: route 'others-to-claude' → claude (anthropic): Anthropic Messages "
                      f"requires max_tokens and endpoint claude sets no default; turns of openai, openai-responses, "
                      f"gemini clients that send none would fail: add `max_tokens:` to endpoint claude"]


def test_no_warning_when_the_endpoint_sets_it_or_only_its_own_clients_come():
    rules = load_rules_text(RULES.replace("  - name: others-to-claude\n    to: claude\n", ""), "r.yaml")
    assert rules.warnings == []


def test_the_run_time_error_names_the_key_and_the_endpoint():
    rules = load_rules_text(RULES, "r.yaml")
    body = json.dumps({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}).encode()
    turn = plan_request(rules, method="POST", host="generativelanguage.googleapis.com", port=443,
                        path="/v1beta/models/gemini-2.5-pro:generateContent", headers=[], body=body, env={})
    assert turn.local is not None and turn.local.status == 400
    err = json.loads(turn.local.body)["error"]
    assert err["status"] == "INVALID_ARGUMENT"  # in the Gemini client's own envelope
    assert "add `max_tokens:` to endpoint claude" in err["message"]
