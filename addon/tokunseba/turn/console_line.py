"""The proxy's console line for one provider turn, written when the turn ends.

One line says what happened to a turn, as the ledger records it: its request id, the
client (from its User-Agent, else its protocol), the model asked for, the route that took
it and where it went, the outcome and status, the tokens as the upstream reported them (its
own field names, top-level counts only), what they cost (turn/cost.py: ``$0.000123``,
``$0 local``, ``unpriced``; absent when no usage was reported), how long it took, and the
error when it failed:

    tk-1a2b3c4d5e6f7a8b9c0d1e2f claude-code claude-haiku-4-5 → claude-background → local · translated 200 · input_tokens=12 output_tokens=5 · $0 local · 1.42 s

Pure: no mitmproxy, no I/O. The client is named as the ledger names it
(``session_facts.client_of``: protocols/clients.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..outcomes import SERVED, client_label, head as outcome_head, outcome_class, route_text
from ..routing import client_of

ERROR_MAX = 160  # characters of an error shown on the line (the ledger keeps it whole)


def client_name(user_agent: str | None, protocol: str) -> str:
    """The client's name from its User-Agent (``client_of``), else its protocol (``openai client``),
    as ``log`` names it from the ledger (outcomes.client_label)."""
    try:
        name = client_of(user_agent)[0]
    except Exception:  # a name is never worth a failed line
        name = None
    return client_label(name, protocol)


def usage_text(reported: Mapping | None) -> str:
    """The top-level token counts as the upstream reported them, under its own names."""
    if not isinstance(reported, Mapping):
        return "no usage reported"
    parts = [f"{k}={v}" for k, v in reported.items() if isinstance(v, int) and not isinstance(v, bool)]
    return " ".join(parts) if parts else "no usage reported"


def turn_line(*, request_id: str, client: str, model: str | None, route: str | None, to: str,
              outcome: str, status: int | None, usage: Mapping | None, seconds: float,
              error: str | None = None, trace: Sequence | None = None, attempts: Sequence | None = None,
              cost: str | None = None) -> str:
    """One line for one ended turn (see the module docstring); ``to`` is the endpoint's name,
    or the host the turn passed through to. The route and the outcome are said in the one
    vocabulary of every view (outcomes.py): ``route X matched; endpoint Y unreachable``, never
    ``no route`` when a route matched (``trace``, ``attempts``: as the ledger records them);
    ``error 400`` for a translated turn answered 400; ``cost`` as pricing's ``cost_text`` says it."""
    cls = outcome_class(outcome, status, error)
    path = f"{model or '(no model)'} → {route_text(route, trace, attempts)} → {to}"
    head = outcome_head(cls, status)
    priced = f" · {cost}" if cost and cost != "-" else ""
    line = f"{request_id} {client} {path} · {head} · {usage_text(usage)}{priced} · {seconds:.2f} s"
    if error and cls not in SERVED:
        one = " ".join(error.split())
        line += f" · {one[:ERROR_MAX]}{'…' if len(one) > ERROR_MAX else ''}"
    return line
