"""The cost of a ledger row — a turn, a shadow or a replay — from what the ledger records.

The endpoint a row was served by is its route's endpoint, else (a turn passed through) the
built-in endpoint of the host the client asked for. Its URL is the one the turn was routed to
(the ``routed`` event of that endpoint: ``routed_url``), else a built-in endpoint's, else
``https://HOST`` of a turn passed through; a shadow's is its endpoint's when built in (a shadow
to an endpoint of the user's is priced by the user's table, or is unpriced).
"""

from __future__ import annotations

from typing import Any

from ..routing import BUILTIN_ENDPOINTS
from .billed import billed_of_row
from .table import Price
from .turn_cost import Cost, cost_of


def endpoint_of(row: dict) -> str | None:
    """The endpoint that served a turn: its route's, else the built-in one of the host it went to."""
    if row.get("endpoint"):
        return row["endpoint"]
    host = row.get("host")
    return next((name for name, ep in BUILTIN_ENDPOINTS.items() if ep.host == host), host)


def routed_url(events: list[dict], endpoint: str | None) -> str | None:
    """The URL the turn was sent to at ``endpoint`` (its last ``routed`` event there)."""
    for e in reversed(events):
        d = e.get("data")
        if e.get("kind") == "routed" and isinstance(d, dict) and d.get("endpoint") == endpoint and d.get("url"):
            return str(d["url"])
    return None


def url_of(row: dict, routed: str | None = None) -> str | None:
    if routed:
        return routed
    ep = BUILTIN_ENDPOINTS.get(row.get("endpoint") or "")
    if ep is not None:
        return ep.url
    if not row.get("endpoint") and row.get("host"):
        return f"https://{row['host']}"
    return None


def model_of(row: dict) -> str | None:
    return row.get("model_used") or row.get("requested_model")


def row_cost(row: dict, table: list[Price], routed: str | None = None, model: Any = None) -> Cost:
    """The cost of a turn's row (``model``: another model than the row's, for a shadow)."""
    return cost_of(model=model or model_of(row), endpoint=endpoint_of(row), url=url_of(row, routed),
                   billed=billed_of_row(row), at=float(row.get("started_at") or 0), table=table)


def shadow_cost(row: dict, table: list[Price]) -> Cost:
    """The cost of a shadow's or a replay's call (``LedgerReader.shadows`` rows)."""
    return row_cost({**row, "host": None}, table, model=row.get("model") or row.get("primary_requested_model"))
