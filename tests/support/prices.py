"""The price library's own published rates (its bundled data, read here, never through pricing/'s
code), a Claude Code turn's reported usage, the providers' API URLs, and a file writer: shared by
the pricing tests; and a Claude Code session in a ledger with the CLI that reads it, shared by
the read commands' cost tests (tests/cli/)."""

from __future__ import annotations

import time
from datetime import datetime, UTC
from decimal import Decimal

import pytest
from genai_prices.data import providers
from genai_prices.types import TieredPrices

MTOK = 10**6
# a Claude Code main turn as the Messages API reports it: most of the prompt read from the cache
CLAUDE_CODE_USAGE = {"input_tokens": 4, "cache_creation_input_tokens": 1_536, "cache_read_input_tokens": 23_890,
                     "output_tokens": 412, "service_tier": "standard"}
ANTHROPIC = "https://api.anthropic.com/v1"
OPENAI = "https://api.openai.com/v1"


def rates(provider: str, model: str, tier_input: int = 0) -> dict[str, Decimal]:
    """The library's published USD-per-million rates of ``model`` today (a tier's price once the
    whole input passes its start, as the library's data says of Anthropic's long context)."""
    p = next(p for p in providers if p.id == provider)
    m = next(m for m in p.models if m.id == model)
    price = m.get_prices(datetime.now(UTC))
    out = {}
    for field in ("input", "output", "cache_read", "cache_write"):
        v = getattr(price, f"{field}_mtok")
        if isinstance(v, TieredPrices):
            v = next((t.price for t in reversed(v.tiers) if tier_input > t.start), v.base)
        if v is not None:
            out[field] = v
    return out


def written(path, text):
    path.write_text(text)
    return path



# ---------------------------------------------------------------- the read commands, over a ledger written here


def cc_session(path) -> str:
    """A Claude Code session: a main turn passed through to api.anthropic.com (the library's
    price) and a background turn routed to a local llama-server (0); a turn with no usage."""
    from tokunseba.ledger import Ledger
    from tokunseba.routing.session_facts import Speaker

    main_ = Speaker("claude-code", "2.1.197", "sess-cc", False, "header", "main", None, False)
    bg = Speaker("claude-code", "2.1.197", "sess-cc", False, "header", "main", None, True, "declares no tools")
    now = time.time()
    with Ledger(path) as led:
        led.start_turn("tk-main", started_at=now - 60, client_protocol="anthropic", host="api.anthropic.com",
                       path="/v1/messages", requested_model="claude-sonnet-4-5-20250929", stream=True)
        led.update_turn("tk-main", outcome="pass_through", model_used="claude-sonnet-4-5-20250929", status=200,
                        usage_protocol="anthropic", usage_reported=CLAUDE_CODE_USAGE, **main_.ledger_fields())
        led.start_turn("tk-bg", started_at=now - 50, client_protocol="anthropic", host="api.anthropic.com",
                       path="/v1/messages", requested_model="claude-haiku-4-5", stream=True)
        led.update_turn("tk-bg", rule="background-local", endpoint="local", target_protocol="openai",
                        model_used="qwen3", outcome="translated", status=200, usage_protocol="openai",
                        usage_reported={"prompt_tokens": 300, "completion_tokens": 12}, **bg.ledger_fields())
        led.event("tk-bg", "routed", {"decision": "route", "rule": "background-local", "endpoint": "local",
                                      "url": "http://127.0.0.1:8080/v1", "model": "qwen3"}, ts=now - 50)
        led.start_turn("tk-529", started_at=now - 40, client_protocol="anthropic", host="api.anthropic.com",
                       path="/v1/messages", requested_model="claude-sonnet-4-5", stream=True)
        led.update_turn("tk-529", outcome="pass_through", status=529, error="upstream 529: Overloaded",
                        **main_.ledger_fields())
    r = rates("anthropic", "claude-sonnet-4-5")
    u = CLAUDE_CODE_USAGE
    want = (u["input_tokens"] * r["input"] + u["cache_read_input_tokens"] * r["cache_read"]
            + u["cache_creation_input_tokens"] * r["cache_write"] + u["output_tokens"] * r["output"]) / MTOK
    return f"${want.quantize(Decimal('0.000001'))}"


def cli(capsys, *argv):
    from tokunseba.cli.main import main

    rc = main(list(argv))
    out, err = capsys.readouterr()
    assert (rc, err) == (0, ""), err
    return out


@pytest.fixture
def no_env_rules(monkeypatch):
    monkeypatch.delenv("TOKUNSEBA_RULES", raising=False)
