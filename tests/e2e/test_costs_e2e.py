"""What turns cost, through the real `tokunseba run` (issue 40): a Claude Code-like turn passed
through to api.anthropic.com (a scripted provider on loopback that reports cache reads) is
priced at the price library's rates, a translated turn to the rules file's own endpoint at the
rules file's `prices:`; the console line says each cost as the turn ends, and `tokunseba log
--json` says the same figures from the ledger."""

from __future__ import annotations

import json
import re
import subprocess
from decimal import Decimal

import anthropic
import pytest

from .conftest import BIN, ledger_settled
from .test_console_e2e import HERE, Run
from .test_proxy_e2e import chat_text_stream
from tests.support.upstream import Reply, Upstream

pytestmark = pytest.mark.e2e

RULES = """\
endpoints:
  scripted:
    protocol: openai
    url: {oai}/v1
routes:
  - name: haiku-scripted
    when: {{client: anthropic, model: "claude-haiku-*"}}
    to: scripted
prices:
  scripted:*: {{input: 2.0, output: 8.0, cache_read: 0.5}}
"""
USAGE = {"input_tokens": 4, "cache_creation_input_tokens": 1_536, "cache_read_input_tokens": 23_890,
         "output_tokens": 412}
ANT_REPLY = {"id": "msg_costs01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
             "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn", "stop_sequence": None,
             "usage": USAGE}


def library_rates() -> dict[str, Decimal]:
    """claude-sonnet-4-5's rates as the library publishes them (its bundled data; below 200K input)."""
    from datetime import UTC, datetime

    from genai_prices.data import providers
    from genai_prices.types import TieredPrices

    model = next(m for p in providers if p.id == "anthropic" for m in p.models if m.id == "claude-sonnet-4-5")
    price = model.get_prices(datetime.now(UTC))
    out = {}
    for f in ("input", "output", "cache_read", "cache_write"):
        v = getattr(price, f"{f}_mtok")
        out[f] = v.base if isinstance(v, TieredPrices) else v
    return out


def test_the_console_line_and_log_say_what_each_turn_cost(tmp_path, monkeypatch):
    with Upstream() as oai, Upstream() as ant:
        rules = tmp_path / "rules.yaml"
        rules.write_text(RULES.format(oai=oai.url))
        run = Run(tmp_path, "--rules", str(rules), "--", "-s", str(HERE.parent / "support" / "point_hosts.py"),
                  env={"TK_TEST_POINT": f"api.anthropic.com=http://127.0.0.1:{ant.port}"})
        for k, v in {"HTTPS_PROXY": run.url, "HTTP_PROXY": run.url, "NO_PROXY": "",
                     "SSL_CERT_FILE": str(run.conf / "mitmproxy-ca-cert.pem")}.items():
            monkeypatch.setenv(k, v)
        oai.script(Reply.sse(chat_text_stream()))
        ant.script(Reply.json(ANT_REPLY))
        c = anthropic.Anthropic(api_key="sk-ant-costs", max_retries=0)
        with c.messages.with_streaming_response.create(model="claude-haiku-4-5", max_tokens=64, stream=True,
                                                       messages=[{"role": "user", "content": "hi"}]) as r:
            r.read()
            translated = r.headers["x-tokunseba-request-id"]
        r = c.messages.with_raw_response.create(model="claude-sonnet-4-5-20250929", max_tokens=64,
                                                messages=[{"role": "user", "content": "hi"}])
        passed = r.headers["x-tokunseba-request-id"]
        ledger_settled(run.ledger)
        out = run.stop()

    rate = library_rates()
    want = (4 * rate["input"] + 23_890 * rate["cache_read"] + 1_536 * rate["cache_write"] + 412 * rate["output"]) / 10**6
    # the scripted endpoint's stream reports prompt_tokens=2610 (2048 of them cached: Chat counts them in the
    # prompt) and completion_tokens=58 (tests/e2e/test_proxy_e2e.py's chat_text_stream)
    table = ((2610 - 2048) * Decimal("2.0") + 2048 * Decimal("0.5") + 58 * Decimal("8.0")) / 10**6
    line = {rid: next(ln for ln in out.splitlines() if rid in ln and "→" in ln) for rid in (translated, passed)}
    assert re.search(rf"· input_tokens=4 .* · \${want.quantize(Decimal('0.000001'))} · \d+\.\d\d s$", line[passed]), out
    assert re.search(rf"total_tokens=2668 · \${table.quantize(Decimal('0.000001'))} · \d+\.\d\d s$", line[translated]), out

    log = subprocess.run([str(BIN / "tokunseba"), "log", "--json", "--ledger", str(run.ledger), "--prices", str(rules)],
                         capture_output=True, text=True, timeout=60)
    assert log.returncode == 0, log.stderr
    cost = {t["request_id"]: t["cost"] for t in json.loads(log.stdout)}
    assert cost[passed]["kind"] == "library" and Decimal(cost[passed]["usd"]) == want
    assert cost[passed]["source"].startswith("genai-prices ")
    assert cost[translated]["kind"] == "table" and Decimal(cost[translated]["usd"]) == table
    assert cost[translated]["source"] == f"your table: {rules} line 10"
