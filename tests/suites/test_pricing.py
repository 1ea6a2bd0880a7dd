"""What a turn costs (pricing/, issue 40): the price library's list prices for a Claude Code turn
with cache reads and for a Chat turn whose prompt_tokens include the cached ones, the
long-context tier, an unknown model unpriced, the user's table over the library, a local
endpoint at 0, exact money, and no network. The expected figures are computed here from the
library's own published per-token rates (its bundled data), never from pricing/'s code."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from genai_prices.data import providers
from genai_prices.types import TieredPrices

from tokunseba.pricing import (
    PricesError, Source, billed_of, cost_of, cost_text, library_version, parse_prices, rules_prices, total,
)

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


def priced(counting: str, usage: dict, model: str, url: str | None, endpoint: str | None = None,
           table: list | None = None):
    return cost_of(model=model, endpoint=endpoint, url=url, billed=billed_of(counting, usage), at=time.time(),
                   table=table or [])


def test_a_claude_code_turn_with_cache_reads_at_the_librarys_rates():
    r = rates("anthropic", "claude-sonnet-4-5")
    u = CLAUDE_CODE_USAGE  # Anthropic's input_tokens exclude the cache: each count at its own rate
    want = (u["input_tokens"] * r["input"] + u["cache_read_input_tokens"] * r["cache_read"]
            + u["cache_creation_input_tokens"] * r["cache_write"] + u["output_tokens"] * r["output"]) / MTOK
    cost = priced("anthropic", u, "claude-sonnet-4-5-20250929", ANTHROPIC, "anthropic")
    assert cost.kind is Source.LIBRARY and cost.usd == want
    assert cost.source == f"genai-prices {library_version()} (anthropic claude-sonnet-4-5)"
    assert cost.parts == {"input": 4 * r["input"] / MTOK, "cache_read": 23_890 * r["cache_read"] / MTOK,
                          "cache_write": 1_536 * r["cache_write"] / MTOK, "output": 412 * r["output"] / MTOK}
    assert sum(cost.parts.values()) == cost.usd


def test_the_long_context_tier_applies_to_the_whole_input_as_the_library_says():
    u = {"input_tokens": 150_000, "cache_read_input_tokens": 60_000, "output_tokens": 1_000}
    r = rates("anthropic", "claude-sonnet-4-5", tier_input=210_000)  # input + cache read pass 200K
    assert r["input"] > rates("anthropic", "claude-sonnet-4-5")["input"]
    want = (150_000 * r["input"] + 60_000 * r["cache_read"] + 1_000 * r["output"]) / MTOK
    assert priced("anthropic", u, "claude-sonnet-4-5", ANTHROPIC).usd == want


def test_a_chat_turn_whose_prompt_tokens_include_the_cached_ones():
    r = rates("openai", "gpt-4o-mini")
    u = {"prompt_tokens": 2_000, "completion_tokens": 100, "total_tokens": 2_100,
         "prompt_tokens_details": {"cached_tokens": 1_500}, "completion_tokens_details": {"reasoning_tokens": 0}}
    want = ((2_000 - 1_500) * r["input"] + 1_500 * r["cache_read"] + 100 * r["output"]) / MTOK
    cost = priced("openai", u, "gpt-4o-mini", OPENAI, "openai")
    assert cost.usd == want and cost.parts["input"] == 500 * r["input"] / MTOK  # the cached part priced once


def test_an_unknown_model_is_unpriced_never_guessed():
    cost = priced("openai", {"prompt_tokens": 10, "completion_tokens": 2}, "my-finetune-7", OPENAI, "openai")
    assert (cost.kind, cost.usd) == (Source.UNPRICED, None)
    assert cost.source == "unpriced: no price for my-finetune-7 at openai"
    # a host the library does not know: not priced by the model's name alone
    cost = priced("openai", {"prompt_tokens": 10, "completion_tokens": 2}, "gpt-4o-mini",
                  "https://llm.corp.example/v1", "corp")
    assert cost.kind is Source.UNPRICED and cost_text(cost) == "unpriced"


def test_the_users_table_overrides_the_library():
    table = parse_prices("prices:\n  local:*: {input: 0.05, output: 0.1}\n"
                         "  anthropic:claude-sonnet-*: {input: 2.5, output: 12.5, cache_read: 0.25, cache_write: 3}\n",
                         "prices.yaml")
    cost = priced("anthropic", CLAUDE_CODE_USAGE, "claude-sonnet-4-5", ANTHROPIC, "anthropic", table)
    assert cost.kind is Source.TABLE and cost.source == "your table: prices.yaml line 3"
    assert cost.usd == (4 * Decimal("2.5") + 412 * Decimal("12.5") + 23_890 * Decimal("0.25") + 1_536 * 3) / MTOK
    # a reported count the row has no price for: listed, not guessed
    cost = priced("anthropic", CLAUDE_CODE_USAGE, "qwen3", "http://127.0.0.1:8080/v1", "local", table)
    assert cost.kind is Source.TABLE and cost.unpriced_tokens == {"cache_read": 23_890, "cache_write": 1_536}
    assert cost_text(cost) == "$0.000041+"  # 4 × 0.05 + 412 × 0.1 per million, and tokens left unpriced


@pytest.mark.parametrize("url", ["http://127.0.0.1:8080/v1", "http://localhost:11434/v1", "http://[::1]:8000/v1"])
def test_a_local_endpoint_costs_nothing_unless_priced(url):
    cost = priced("openai", {"prompt_tokens": 900, "completion_tokens": 50}, "gpt-4o-mini", url, "local")
    assert (cost.kind, cost.usd, cost.source, cost_text(cost)) == (Source.LOCAL, 0, "local: 0", "$0 local")


def test_no_usage_reported_is_no_cost():
    cost = cost_of(model="gpt-4o", endpoint="openai", url=OPENAI, billed=billed_of("openai", {}), at=0, table=[])
    assert cost.kind is Source.NO_USAGE and cost_text(cost) == "-"


def test_money_is_summed_exactly():
    """A thousand turns of 7 input tokens at $0.15 / MTok add up to exactly 1000 × their cost:
    decimals, never floats summed."""
    one = priced("openai", {"prompt_tokens": 7, "completion_tokens": 0}, "gpt-4o-mini", OPENAI)
    usd, n, unpriced = total([one] * 1000)
    assert usd == 1000 * one.usd == Decimal("0.00105") and (n, unpriced) == (1000, 0)
    assert isinstance(one.usd, Decimal) and isinstance(usd, Decimal)


def test_a_rules_files_prices_are_read_with_their_lines(tmp_path):
    rules = tmp_path / "rules.yaml"
    rules.write_text("endpoints:\n  local: {protocol: openai, url: 'http://127.0.0.1:9/v1'}\nroutes: []\n"
                     "prices:\n  local:*: {input: 0.1}\n")
    (price,) = rules_prices(rules)
    assert price.where() == f"your table: {rules} line 5" and price.per_million == {"input": Decimal("0.1")}
    assert rules_prices(None) == [] and rules_prices(_write(tmp_path / "none.yaml", "routes: []\n")) == []
    with pytest.raises(PricesError) as ei:
        rules_prices(_write(tmp_path / "bad.yaml", "routes: []\nprices:\n  local: {input: 1}\n"))
    assert str(ei.value) == (f"{tmp_path / 'bad.yaml'}:3: prices: key 'local' must be ENDPOINT:MODEL_GLOB "
                             "(e.g. anthropic:claude-haiku-*)")


def test_check_says_a_price_mistake_in_the_rules_file(tmp_path):
    from tokunseba.cli.main import main

    bad = _write(tmp_path / "bad.yaml", "routes: []\nprices:\n  local:*: {input: cheap}\n")
    assert main(["check", str(bad)]) == 1


def _write(path, text):
    path.write_text(text)
    return path


def test_pricing_never_reaches_the_network():
    """Importing the library and pricing turns with it, in a process where any connection or
    name lookup raises: the bundled data only (no UpdatePrices, no custom snapshot)."""
    code = textwrap.dedent("""
        import socket, time
        def refuse(*a, **k):
            raise AssertionError("network used")
        socket.socket.connect = socket.socket.connect_ex = refuse
        socket.getaddrinfo = socket.create_connection = refuse
        from tokunseba.pricing import billed_of, cost_of, warm_library
        warm_library()
        c = cost_of(model="claude-haiku-4-5", endpoint="anthropic", url="https://api.anthropic.com/v1",
                    billed=billed_of("anthropic", {"input_tokens": 10, "output_tokens": 2}), at=time.time(), table=[])
        import genai_prices.data_snapshot as snap
        assert snap._custom_snapshot is None and not snap.get_snapshot().from_auto_update
        print(c.kind, c.usd)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.split() == ["library", "0.00002"], out.stderr


# ---------------------------------------------------------------- the read commands, over a ledger written here


def _cc_session(path) -> str:
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


def _cli(capsys, *argv):
    from tokunseba.cli.main import main

    rc = main(list(argv))
    out, err = capsys.readouterr()
    assert (rc, err) == (0, ""), err
    return out


@pytest.fixture
def no_env_rules(monkeypatch):
    monkeypatch.delenv("TOKUNSEBA_RULES", raising=False)


def test_log_shows_each_turns_cost_and_its_json_the_exact_figure(capsys, tmp_path, no_env_rules):
    from tokunseba import jsonc

    want = _cc_session(tmp_path / "l.db")
    lines = _cli(capsys, "log", "--ledger", str(tmp_path / "l.db")).splitlines()
    head = lines[0].split("  ")
    assert "COST" in [h.strip() for h in head if h.strip()]
    row = {ln.split()[2]: ln for ln in lines[1:]}
    assert f"  {want}" in row["tk-main"] and "  $0 local" in row["tk-bg"] and "  -  " in row["tk-529"]
    doc = {t["request_id"]: t["cost"] for t in jsonc.loads(_cli(capsys, "log", "--json", "--ledger",
                                                                  str(tmp_path / "l.db")))}
    assert doc["tk-main"]["kind"] == "library" and f"${Decimal(doc['tk-main']['usd']).quantize(Decimal('0.000001'))}" == want
    assert doc["tk-bg"] == {"usd": "0", "kind": "local", "source": "local: 0", "parts": {}, "unpriced_tokens": {}}
    assert doc["tk-529"]["kind"] == "no_usage" and doc["tk-529"]["usd"] is None


def test_explain_names_the_price_source(capsys, tmp_path, no_env_rules):
    _cc_session(tmp_path / "l.db")
    out = _cli(capsys, "explain", "tk-main", "--ledger", str(tmp_path / "l.db"))
    (cost,) = [ln for ln in out.splitlines() if ln.startswith("cost ")]
    assert " = input $" in cost and " + cache read $" in cost and " + cache write $" in cost and " + output $" in cost
    assert f"price        genai-prices {library_version()} (anthropic claude-sonnet-4-5): $3/input MTok" in out
    prices = _write(tmp_path / "prices.yaml", "prices:\n  anthropic:claude-sonnet-*: {input: 1, output: 1}\n")
    out = _cli(capsys, "explain", "tk-main", "--ledger", str(tmp_path / "l.db"), "--prices", str(prices))
    assert f"price        your table: {prices} line 2" in out
    assert "not priced (no price in your row): cache read 23890, cache write 1536" in out
    out = _cli(capsys, "explain", "tk-bg", "--ledger", str(tmp_path / "l.db"))
    assert "cost         $0\nprice        local: 0\n" in out


def test_stats_and_sessions_show_cost_per_group_and_in_total(capsys, tmp_path, monkeypatch):
    want = _cc_session(tmp_path / "l.db")
    monkeypatch.setenv("TOKUNSEBA_RULES", str(_write(tmp_path / "r.yaml", "routes: []\n")))  # no prices: the library's
    out = _cli(capsys, "stats", "--ledger", str(tmp_path / "l.db"))
    assert f"  turns served: {want}" in out
    (row,) = [ln for ln in out.splitlines() if ln.startswith("  anthropic  claude-sonnet-4-5-20250929")]
    assert want in row and f"genai-prices {library_version()}" in row
    (local,) = [ln for ln in out.splitlines() if ln.startswith("  local ")]
    assert "local: 0" in local
    out = _cli(capsys, "sessions", "--ledger", str(tmp_path / "l.db"))
    head, row = out.splitlines()[:2]
    assert head.split()[-4:] == ["COST", "ERRORS", "REFUSED", "FAILOVERS"] and row.split()[-4] == want
    out = _cli(capsys, "stats", "--by", "agent", "--ledger", str(tmp_path / "l.db"))
    (head, main_row) = [ln for ln in out.splitlines() if ln.startswith(("AGENT ", "main "))]
    assert head.split()[-2:] == ["COST", "FAILOVERS"] and main_row.split()[-2] == want
    # the rules file's own prices: override the library for every read command
    monkeypatch.setenv("TOKUNSEBA_RULES", str(_write(tmp_path / "r.yaml", "prices:\n  anthropic:*: {input: 0}\n")))
    out = _cli(capsys, "sessions", "--ledger", str(tmp_path / "l.db"))
    assert want not in out and "$0.000000" in out


@pytest.mark.parametrize("provider,url", [("anthropic", ANTHROPIC), ("openai", OPENAI),
                                          ("google", "https://generativelanguage.googleapis.com/v1beta")])
def test_every_models_price_is_the_librarys_own_calc_price(provider, url):
    """pricing/library.py adds the four counts' parts itself where they say all of a price (the
    library's calc takes ~0.3 ms at every turn's end); for every model of these providers, at
    three sizes (below and above the long-context tiers), its total is the library's own."""
    import genai_prices

    from tokunseba.pricing.library import library_price

    models = next(p for p in providers if p.id == provider).models
    assert len(models) > 20
    for m in models:
        for billed in (billed_of("anthropic", {"input_tokens": 900, "output_tokens": 80, "cache_read_input_tokens": 4000,
                                               "cache_creation_input_tokens": 300}),
                       billed_of("openai", {"prompt_tokens": 250_000, "completion_tokens": 3_000,
                                            "prompt_tokens_details": {"cached_tokens": 200_000}}),
                       billed_of("gemini", {"promptTokenCount": 12, "candidatesTokenCount": 3})):
            counts = {"input_tokens": billed.input, "output_tokens": billed.output,
                      "cache_read_tokens": billed.cache_read, "cache_write_tokens": billed.cache_write}
            try:
                want = genai_prices.calc_price(genai_prices.Usage(**{k: v for k, v in counts.items() if v is not None}),
                                               m.id, provider_api_url=url).total_price
            except (LookupError, ValueError):
                want = None
            got = library_price(m.id, url, billed, time.time())
            assert (got and got.total) == want, (m.id, billed)


def test_check_and_run_read_the_rules_files_prices(tmp_path, capsys):
    from tokunseba.cli.main import main

    ok = _write(tmp_path / "ok.yaml", "routes: []\nprices:\n  local:*: {input: 0.05, output: 0.1}\n")
    assert main(["check", str(ok)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == ("prices: 1 of your own, over the price library's list prices "
                                                       "(first match wins: local:*)")
    bad = _write(tmp_path / "bad.yaml", "routes: []\nprices:\n  local: {input: 1}\n")
    with pytest.raises(SystemExit) as ei:  # run stops before starting mitmdump, with the line
        main(["run", "--dry-run", "--rules", str(bad)])
    assert str(ei.value) == f"error: {bad}:3: prices: key 'local' must be ENDPOINT:MODEL_GLOB (e.g. anthropic:claude-haiku-*)"
