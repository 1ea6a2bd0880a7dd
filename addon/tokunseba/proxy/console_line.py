"""The proxy's console line for one provider turn, written when the turn ends.

One line says what happened to a turn, as the ledger records it: its request id, the
client (from its User-Agent, else its protocol), the model asked for, the route that took
it and where it went, the outcome and status, the tokens as the upstream reported them (its
own field names, top-level counts only), how long it took, and the error when it failed:

    tk-1a2b3c4d5e6f7a8b9c0d1e2f claude-code claude-haiku-4-5 → claude-background → local · translated 200 · input_tokens=12 output_tokens=5 · 1.42 s

Pure: no mitmproxy, no I/O. The client is named as the ledger names it
(``session_facts.client_of``: protocols/clients.py).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..routing.session_facts import client_of

ERROR_MAX = 160  # characters of an error shown on the line (the ledger keeps it whole)


def client_name(user_agent: str | None, protocol: str) -> str:
    """The client's name from its User-Agent (``client_of``), else its protocol (``openai client``)."""
    try:
        name = client_of(user_agent)[0]
    except Exception:  # a name is never worth a failed line
        name = None
    return name or f"{protocol} client"


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
