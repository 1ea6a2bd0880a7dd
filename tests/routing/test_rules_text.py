"""The text `check` prints of a rules file (routing/rules_text.py): the counts line, the policies,
what a local endpoint accepts, and the warnings."""

from __future__ import annotations

from tokunseba.routing import check_file

from tests.support.rules import LOCAL


def test_check_file_ok(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text(LOCAL + "routes:\n  - name: r\n    when: {client: anthropic}\n    to: local\n")
    assert check_file(path) == (True, [
        "OK: 1 endpoint declared (+3 built in), 1 route",
        "unmatched: pass (turns no route takes, unparseable ones included: pass through to the host the client asked for)",
        "on_failure: next for every route (an endpoint unreachable, cooling down, full, or failing before the reply's first byte: the next route whose when matches, then unmatched)",
        "tool_loops: follow (a turn answering tool calls: goes to the endpoint and model that made them, while a route to that endpoint takes its client)",
        "accepts: route 'r' → local takes text by default (an endpoint on loopback: a local server): turns with "
        "images, documents or provider-run tools are refused there before sending and go on to the next route",
        f"{path}:6: warning: route 'r' → local (openai): count requests of anthropic clients follow their turns "
        "there and get an error (OpenAI Chat Completions has no token counter): give it count_tokens: probe (each "
        "count is one turn of at most 1 output token), the protocol whose counter the same server serves "
        "(llama-server: count_tokens: anthropic), or count_tokens: none"])
