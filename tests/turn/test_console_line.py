"""console_line: the proxy's one line per provider turn."""

from __future__ import annotations

from tokunseba.turn.console_line import client_name, turn_line, usage_text


def test_clients_named_by_their_user_agent():
    assert client_name("claude-cli/2.1.197 (external, sdk-cli)", "anthropic") == "claude-code"
    assert client_name("codex_exec/0.171.0 (Debian 12.0.0; x86_64) dumb (codex_exec; 0.171.0)", "openai-responses") == "codex"
    assert client_name("GeminiCLI-tui/0.61.0/gemini-2.5-pro (linux; x64; terminal)", "gemini") == "gemini-cli"
    assert client_name("Anthropic/Python 2.16.0", "anthropic") == "anthropic-python"
    assert client_name("OpenAI/Python 3.57.0", "openai") == "openai-python"
    assert client_name("google-genai-sdk/3.6.1 gl-python/3.12.1", "gemini") == "google-genai"
    assert client_name(None, "openai") == "openai client"
    assert client_name("", "gemini") == "gemini client"


def test_usage_as_reported_top_level_counts_only():
    assert usage_text({"input_tokens": 12, "output_tokens": 5, "cache_creation": {"ephemeral_5m_input_tokens": 0},
                       "service_tier": "standard"}) == "input_tokens=12 output_tokens=5"
    assert usage_text(None) == "no usage reported"
    assert usage_text({}) == "no usage reported"


def test_line_says_where_the_turn_went_and_how_it_ended():
    line = turn_line(request_id="tk-1", client="claude-code", model="claude-haiku-4-5", route="claude-background",
                     to="local", outcome="translated", status=200, usage={"prompt_tokens": 9, "completion_tokens": 2},
                     seconds=1.4151)
    assert line == ("tk-1 claude-code claude-haiku-4-5 → claude-background → local · translated 200 · "
                    "prompt_tokens=9 completion_tokens=2 · 1.42 s")
    err = turn_line(request_id="tk-2", client="codex", model=None, route=None, to="api.openai.com", outcome="error",
                    status=None, usage=None, seconds=0.5, error="upstream connection broke:\n" + "x" * 300)
    assert err.startswith("tk-2 codex (no model) → no route → api.openai.com · error no reply · no usage reported · 0.50 s · "
                          "upstream connection broke: xxx")
    assert err.endswith("…") and "\n" not in err


def test_line_says_what_the_turn_cost_after_its_usage():
    """turn/cost.py prices the turn as `log` prices its row; the line says it as `log` does."""
    import time

    from tokunseba.neutral.usage import Usage
    from tokunseba.pricing import cost_text, parse_prices
    from tokunseba.routing import BUILTIN_ENDPOINTS
    from tokunseba.states import Action
    from tokunseba.turn.cost import turn_cost

    class T:  # the facts turn_cost reads of a Turn
        request_id, host, requested_model, model_used, started_at = "tk-3", "api.anthropic.com", "claude-haiku-4-5", \
            None, time.time()
        endpoint, action = None, Action.PASS

    usage = Usage("anthropic", {"input_tokens": 1000, "output_tokens": 100, "cache_read_input_tokens": 10_000})
    passed = turn_cost(T(), usage, [])  # passed through to api.anthropic.com: the library's $1 / $5 / $0.1 per MTok
    line = turn_line(request_id="tk-3", client="claude-code", model="claude-haiku-4-5", route=None,
                     to="api.anthropic.com", outcome="pass_through", status=200, usage=usage.reported, seconds=2.0,
                     cost=cost_text(passed))
    assert line.endswith("input_tokens=1000 output_tokens=100 cache_read_input_tokens=10000 · $0.002500 · 2.00 s")
    T.endpoint, T.action = BUILTIN_ENDPOINTS["anthropic"], Action.RETARGET
    table = parse_prices("prices:\n  anthropic:claude-haiku-*: {input: 2, output: 10, cache_read: 0.2}\n")
    assert cost_text(turn_cost(T(), usage, table)) == "$0.005000"  # the user's table over the library
    assert cost_text(turn_cost(T(), None, table)) == "-"  # no usage: the line says no cost
    assert "·  ·" not in turn_line(request_id="tk-4", client="x", model=None, route=None, to="h", outcome="error",
                                   status=None, usage=None, seconds=0.1, cost="-")
