"""The proxy's console line for one provider turn, written when the turn ends.

One line says what happened to a turn, as the ledger records it: its request id, the
client (from its User-Agent, else its protocol), the model asked for, the route that took
it and where it went, the outcome and status, the tokens as the upstream reported them (its
own field names, top-level counts only), how long it took, and the error when it failed:

    tk-1a2b3c4d5e6f7a8b9c0d1e2f claude-code claude-haiku-4-5 → claude-background → local · translated 200 · input_tokens=12 output_tokens=5 · 1.42 s

Pure: no mitmproxy, no I/O. ``CLIENTS`` names the clients by the start of their User-Agent,
one row per client with the reason it is recognised so.
"""

from __future__ import annotations

from collections.abc import Mapping

# User-Agent prefix (lower case) -> the client's name on the console
CLIENTS: tuple[tuple[str, str], ...] = (
    ("claude-cli/", "claude-code"),        # Claude Code 2.x: `claude-cli/2.1.197 (external, cli)`
    ("claude-code/", "claude-code"),       # its settings/policy calls
    ("codex_exec/", "codex"),              # `codex exec`
    ("codex_cli_rs/", "codex"),            # interactive Codex
    ("codex", "codex"),
    ("geminicli", "gemini-cli"),           # Gemini CLI: `GeminiCLI-tui/0.61.0/<model> (linux; x64; terminal)`
    ("anthropic/python", "anthropic-sdk"),  # Stainless SDKs: `Anthropic/Python 2.16.0`
    ("anthropic/js", "anthropic-sdk"),
    ("openai/python", "openai-sdk"),
    ("openai/js", "openai-sdk"),
    ("google-genai-sdk/", "genai-sdk"),    # google-genai: `google-genai-sdk/1.x gl-python/3.13`
    ("curl/", "curl"),
)
ERROR_MAX = 160  # characters of an error shown on the line (the ledger keeps it whole)


def client_name(user_agent: str | None, protocol: str) -> str:
    """The client's name from its User-Agent (``CLIENTS``), else its protocol (``openai client``)."""
    ua = (user_agent or "").strip().lower()
    for prefix, name in CLIENTS:
        if ua.startswith(prefix):
            return name
    return f"{protocol} client"


def usage_text(reported: Mapping | None) -> str:
    """The top-level token counts as the upstream reported them, under its own names."""
    if not isinstance(reported, Mapping):
        return "no usage reported"
    parts = [f"{k}={v}" for k, v in reported.items() if isinstance(v, int) and not isinstance(v, bool)]
    return " ".join(parts) if parts else "no usage reported"


def turn_line(*, request_id: str, client: str, model: str | None, route: str | None, to: str,
              outcome: str, status: int | None, usage: Mapping | None, seconds: float,
              error: str | None = None) -> str:
    """One line for one ended turn (see the module docstring); ``to`` is the endpoint's name,
    or the host the turn passed through to."""
    path = f"{model or '(no model)'} → {route or 'no route'} → {to}"
    head = f"{outcome} {status if status is not None else 'no reply'}"
    line = f"{request_id} {client} {path} · {head} · {usage_text(usage)} · {seconds:.2f} s"
    if error:
        one = " ".join(error.split())
        line += f" · {one[:ERROR_MAX]}{'…' if len(one) > ERROR_MAX else ''}"
    return line
