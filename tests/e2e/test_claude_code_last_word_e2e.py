"""The real Claude Code after a chain of attempts (issue 29): its turn goes to a local endpoint
first, which answers a context-window error; the next hop, Anthropic itself, cannot be reached.
Claude Code must hear "prompt is too long" (the wording it compacts on, the local endpoint's text
kept), never a 502 saying the turn was not sent; the ledger names both attempts."""

from __future__ import annotations

import json
import subprocess

import pytest

from .conftest import BIN, Mitmdump, ledger_settled
from .test_claude_code_e2e import result_json, run_claude
from .test_unreachable_e2e import HERE, HOSTS
from tests.support.upstream import Reply, Upstream, closed_port

pytestmark = [pytest.mark.e2e, pytest.mark.claudecode]

RULES = """\
endpoints:
  local:
    protocol: openai
    url: {url}/v1
    max_tokens: 4096
routes:
  - name: local-first
    when: {{client: anthropic}}
    to: local
"""
OVERFLOW = {"error": {"message": "This model's maximum context length is 4096 tokens. However, you requested "
                                 "9000 tokens.", "type": "invalid_request_error", "code": "context_length_exceeded"}}


def test_a_context_window_error_then_an_unreachable_provider_reaches_claude_code_as_prompt_too_long(tmp_path):
    with Upstream() as local:
        local.script(Reply.json(OVERFLOW, status=400))
        rules = tmp_path / "rules.yaml"
        rules.write_text(RULES.format(url=local.url))
        point = ";".join(f"{h}=127.0.0.1:{closed_port()}" for h in HOSTS)  # the provider: nobody listens
        m = Mitmdump(tmp_path, rules, env={"TK_TEST_POINT": point}, extra=["-s", str(HERE.parent / "support" / "point_hosts.py")])
        try:
            p = run_claude(m, tmp_path, "say hi", timeout=120)
            ledger_settled(m.ledger)
        finally:
            m.stop()
        assert any(r.path == "/v1/chat/completions" for r in local.requests)
    said = p.stdout + p.stderr
    assert "prompt is too long" in said.lower(), said[-3000:]
    result = result_json(p)  # Claude Code read it as its own context-window error (it compacts on it)
    assert result["api_error_status"] == 400 and result["terminal_reason"] == "prompt_too_long", result
    assert "not sent" not in said and "502" not in said, said[-3000:]
    log = json.loads(subprocess.run([str(BIN / "tokunseba"), "log", "--ledger", str(m.ledger), "--json"],
                                    capture_output=True, text=True, check=True).stdout)
    main = [t for t in log if t["client_protocol"] == "anthropic" and t["status"] == 400]
    assert main, log
    assert all(t["outcome"] == "error" for t in main)


def _provider_away(tmp_path, rules_text: str | None = None) -> Mitmdump:
    point = ";".join(f"{h}=127.0.0.1:{closed_port()}" for h in HOSTS)
    rules = None
    if rules_text is not None:
        rules = tmp_path / "rules.yaml"
        rules.write_text(rules_text)
    return Mitmdump(tmp_path, rules, env={"TK_TEST_POINT": point}, extra=["-s", str(HERE.parent / "support" / "point_hosts.py")])


def _turns(m: Mitmdump, client: str) -> list[dict]:
    log = json.loads(subprocess.run([str(BIN / "tokunseba"), "log", "--ledger", str(m.ledger), "--json", "--limit", "200"],
                                    capture_output=True, text=True, check=True).stdout)
    return [t for t in log if t["client_protocol"] == client]


def _one_request_and_its_retries(turns: list[dict]) -> tuple[list[dict], list[dict]]:
    """(the first requests, their retries): every retry names a first request of the ledger."""
    firsts = [t for t in turns if t.get("retry_of") is None]
    retries = [t for t in turns if t.get("retry_of") is not None]
    ids = {t["request_id"] for t in firsts}
    assert all(t["retry_of"] in ids for t in retries), [t.get("retry_of") for t in turns]
    return firsts, retries


def test_claude_codes_retries_with_the_provider_away_are_recorded_as_retries(tmp_path):
    """Claude Code retries a failed turn (CLAUDE_CODE_MAX_RETRIES=2) with the same body: each
    attempt is a turn of its own, recorded as a retry of the first request, and `log` folds them."""
    m = _provider_away(tmp_path)
    try:
        p = run_claude(m, tmp_path, "say hi", timeout=180, env_extra={"CLAUDE_CODE_MAX_RETRIES": "2"})
        ledger_settled(m.ledger)
    finally:
        m.stop()
    assert p.returncode != 0
    firsts, retries = _one_request_and_its_retries(_turns(m, "anthropic"))
    assert len(firsts) == 1 and len(retries) == 2, (firsts, retries)
    out = subprocess.run([str(BIN / "tokunseba"), "log", "--ledger", str(m.ledger)], capture_output=True, text=True,
                         check=True).stdout
    assert "+2 retries" in out, out


def test_codexs_retries_with_the_provider_away_are_recorded_as_retries(tmp_path):
    """Codex retries a turn that failed with a 502 (5 times, 6 requests in all, the same body):
    the ledger records one request and its retries, each naming the first."""
    from .test_codex_e2e import codex_exec

    m = _provider_away(tmp_path)
    try:
        p, _ = codex_exec(m, tmp_path, "say hi", "-c", "model=gpt-5.5", timeout=240)
        ledger_settled(m.ledger)
    finally:
        m.stop()
    assert p.returncode != 0
    turns = _turns(m, "openai-responses")
    firsts, retries = _one_request_and_its_retries(turns)
    assert retries and len(firsts) < len(turns) / 2, (len(firsts), len(turns))  # most of them are retries


def test_gemini_clis_retries_with_the_provider_away_are_recorded_as_retries(tmp_path):
    """Gemini CLI (maxAttempts 3) retries its failed turn with the same body: recorded as retries."""
    from .test_gemini_e2e import run_gemini_cli

    m = _provider_away(tmp_path)
    try:
        r = run_gemini_cli(m, tmp_path, "say hi", extra_settings={"general": {
            "enableAutoUpdate": False, "enableAutoUpdateNotification": False, "maxAttempts": 3}}, timeout=180)
        ledger_settled(m.ledger)
    finally:
        m.stop()
    assert r.returncode != 0
    firsts, retries = _one_request_and_its_retries(_turns(m, "gemini"))
    assert retries, (firsts, retries)
