"""Loops finish where they started (docs/dev/architecture.md §4b; issue 18): a request whose last turn
answers tool calls that a translated reply made goes to the endpoint and model that made them,
so the provider state kept for that loop (reasoning/store.py) can come back to its origin.

Pure: the store is read through ``lookup`` (call keys -> records, reasoning.state.Record).
``follow_loop`` returns the Decision to follow the loop, or None and a trace note saying why
not, when the rules' own order must decide:

- the rules say ``tool_loops: route``, the request answers no tool calls, or none of the
  answered calls is known (not made by a translated reply, or forgotten): None, no note;
- no route to that endpoint takes this client any more (the rules changed), the endpoint is
  gone from the rules, unavailable (down, cooling, full) or refuses the turn: None and a note;
  the state then stays behind (withheld, recorded by the restore step).

A route "takes this client" when its ``when.client`` (if any) names the client's protocol:
the loop overrides the turn-shape conditions (tools, model, size...) that would move its
middle elsewhere, never the choice of which clients may use an endpoint.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from .. import protocols
from ..routing import Decision, Endpoint, Route, Rules, ToolLoops, Tried
from .state import Record, call_key
from ..states import Decided

Lookup = Callable[[Iterable[str]], Mapping[str, list[Record]]]


def _takes_client(route: Route, client: str) -> bool:
    want = route.when.get("client")
    return want is None or client in ([want] if isinstance(want, str) else want)


def loop_origin(client: str, body: dict, lookup: Lookup) -> tuple[list[str], Record] | None:
    """The calls a request answers and the newest record of the reply that made them."""
    facts = protocols.find(client)
    shape = facts.rule_shape if facts is not None else None
    ids = shape.answered_calls(body) if shape is not None else []
    if not ids:
        return None
    try:
        found = lookup([call_key(i) for i in ids])
    except Exception:  # a broken store: the rules decide (the restore step records the problem)
        return None
    recs = [r for rs in found.values() for r in rs]
    return (ids, max(recs, key=lambda r: r.at)) if recs else None


def follow_loop(rules: Rules, client: str, body: dict, lookup: Lookup, *,
                refused: Callable[[Endpoint, str], str | None],
                reachable: Callable[[Endpoint], bool | str | None] | None) -> tuple[Decision | None, Tried | None]:
    """(the decision that follows the loop, None) or (None, a trace note or None)."""
    if rules.tool_loops != ToolLoops.FOLLOW:
        return None, None
    origin = loop_origin(client, body, lookup)
    if origin is None:
        return None, None
    ids, rec = origin
    what = f"tool loop: {', '.join(ids)} made by {rec.endpoint}/{rec.model} ({rec.request_id})"
    ep = rules.endpoints.get(rec.endpoint)
    route = next((r for r in rules.routes if r.to == rec.endpoint and _takes_client(r, client)), None)
    why = None
    if ep is None or route is None:
        why = f"no route to {rec.endpoint} takes {client} clients now"
    elif ep.protocol != rec.protocol:
        why = f"{rec.endpoint} now speaks {ep.protocol}, not {rec.protocol}"
    elif (no := refused(ep, rec.model)) is not None:
        why = f"{rec.endpoint} refuses this turn: {no}"
    elif reachable is not None and (ok := reachable(ep)) is not True and ok is not None:
        why = f"{rec.endpoint} is {'unreachable' if ok is False else ok}"
    if why is not None:
        return None, not_followed(rec.endpoint, what, why)
    assert ep is not None and route is not None
    entry = Tried(route.name, True, [f"follows its {what}, not the turn's own conditions"], endpoint=ep, loop=what)
    return Decision(Decided.ROUTE, route, ep, rec.model, [entry],
                    f"{route.name} → {ep.name}: follows its tool loop ({rec.request_id})"), None


def not_followed(endpoint: str, what: str, why: str) -> Tried:
    """The trace note of a tool loop (``what``) made at ``endpoint`` and not followed: the routes decide."""
    return Tried(f"(tool loop → {endpoint})", False, [f"{what}; not followed: {why}; the routes decide"], loop=what)
