"""One outcome vocabulary for every view of a turn: the console line, ``log``, ``stats``,
``sessions``, ``explain`` and mitmweb's comment read a turn through these functions, so the
same turn has the same class, status word, route and client everywhere.

Contract (pure: no I/O, no imports of the rest of the package):

- ``outcome_class(outcome, status, error)`` puts every turn in exactly one of ``CLASSES``:
  ``refused`` / ``cancelled`` / ``interrupted`` stay themselves; any other turn with a status
  >= 400 or an error is an ``error`` (a translated turn the endpoint answered 400 included);
  an open turn (outcome NULL) is ``unfinished``; else it was served: ``translated``,
  ``retargeted``, ``pass_through``, or ``capped``: a translated turn whose reply the
  endpoint's own ``max_tokens`` (not the client's limit) ended (``CAPPED``; turn/cap_note.py),
  served but counted apart from the clean ones. ``stats`` headline classes therefore add up
  to the turns, and ``SERVED`` never counts an error.
- ``label(cls)`` is how a class is written (``pass-through``); ``head(cls, status)`` is the
  outcome and status word (``error 502``, ``translated 200``, ``cancelled no reply``).
- ``route_text(rule, trace, attempts)`` is the route a turn took, said the same way
  everywhere: the rule that took it; else ``route X matched; endpoint Y unreachable`` when
  routes matched but were skipped (cooling down, full, unreachable, refused) or failed over
  to the client's own host; ``no route`` only when no route matched.
- ``route_group(rule, trace, attempts)``: the route a turn is counted under (``stats`` by
  route, ``sessions``): its rule; else ``X (matched, skipped)`` / ``X (failed over)`` for a
  route that matched but did not take it; None (no route) only when none matched.
- ``client_label(name, protocol)``: the client as the console names it (its User-Agent's
  product, else ``<protocol> client``).
- ``seconds(ms)``: durations as the console shows them (``1.42 s``).
- ``was_sent(row)``: whether anything of a recorded turn went upstream (``sessions`` and
  ``stats`` count an endpoint or host only then).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Any


class TurnOutcome(StrEnum):
    """A turn's outcome, its value the word the ledger stores (``outcome`` column) and every view
    reads; ``UNFINISHED`` is the class of a turn still open (outcome NULL). A member is its
    string (it compares equal to the ledger's word and formats as it), as ``states.py``'s modes are."""

    TRANSLATED = "translated"
    CAPPED = "capped"  # translated, and the endpoint's own cap (not the client's limit) ended its reply
    RETARGETED = "retargeted"
    PASS_THROUGH = "pass_through"
    ERROR = "error"
    REFUSED = "refused"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"
    UNFINISHED = "unfinished"


CAPPED = "capped"  # translated, and the endpoint's own cap (not the client's limit) ended its reply
SERVED = ("translated", "retargeted", "pass_through", CAPPED)  # a reply the client could use
NOT_SENT_OR_FAILED = ("error", "refused", "cancelled", "interrupted", "unfinished")
CLASSES = (*SERVED, *NOT_SENT_OR_FAILED)  # every turn is in exactly one


def outcome_class(outcome: str | None, status: int | None = None, error: str | None = None) -> str:
    """The one class of a turn (see the module's contract)."""
    if outcome in ("refused", "cancelled", "interrupted"):
        return outcome
    if outcome == "error" or (status or 0) >= 400 or error:
        return "error"
    if outcome is None:
        return "unfinished"
    return outcome if outcome in SERVED else "error"


def served(cls: str) -> bool:
    return cls in SERVED


def label(cls: str | None) -> str:
    """``pass_through`` -> ``pass-through``; None -> ``-``."""
    return (cls or "-").replace("_", "-")


def head(cls: str, status: int | None) -> str:
    """The outcome and status word: ``translated 200``, ``error 502``, ``cancelled no reply``."""
    return f"{label(cls)} {status if status is not None else 'no reply'}"


def client_label(name: str | None, protocol: str | None) -> str:
    """The client as the console names it: its own name, else ``<protocol> client``."""
    return name or f"{protocol or 'unknown'} client"


def seconds(ms: float | None) -> str:
    """A duration recorded in milliseconds, as the console shows it: ``1.42 s``."""
    return "-" if ms is None else f"{ms / 1000:.2f} s"


def was_sent(row: Mapping[str, Any]) -> bool:
    """Whether anything of a recorded turn was sent upstream: not for a refused turn, nor for
    one answered before it was sent (its ``attempts`` recorded as ``[]``: busy, its host
    unreachable, an invalid request)."""
    if outcome_class(row.get("outcome"), row.get("status"), row.get("error")) == TurnOutcome.REFUSED:
        return False
    attempts = row.get("attempts")
    return attempts not in ([], "[]")  # parsed, or JSON text as a plain query returns it


def _skipped(trace: Iterable[Any]) -> list[str]:
    """``endpoint local unreachable`` for each route that matched and was skipped."""
    out = []
    for t in trace or ():
        if not isinstance(t, Mapping) or not t.get("matched") or t.get("loop"):
            continue
        ep = t.get("endpoint")
        where = f"endpoint {ep}" if ep else "its endpoint"
        if t.get("refused"):
            out.append(f"route {t.get('route')} matched; {where} refused it ({t['refused']})")
        elif t.get("unreachable"):
            out.append(f"route {t.get('route')} matched; {where} {t.get('unavailable') or 'unreachable'}")
    return out


def route_text(rule: str | None, trace: Iterable[Any] | None = None, attempts: Iterable[Any] | None = None) -> str:
    """The route a turn took (see the module's contract)."""
    if rule:
        return rule
    tried = [a for a in attempts or () if isinstance(a, Mapping) and a.get("route")]
    if tried:  # failed over past its routes to the client's own host
        return f"route {tried[0]['route']} matched"
    skipped = _skipped(trace or ())
    if skipped:
        return "; ".join(skipped)
    return "no route"


def _json(value: Any) -> Any:
    if isinstance(value, (str, bytes)):
        try:
            import json

            return json.loads(value)
        except ValueError:
            return None
    return value


def route_group(rule: str | None, trace: Any = None, attempts: Any = None) -> str | None:
    """The route a turn is counted under (see the module's contract); ``trace`` and
    ``attempts`` as the ledger holds them (JSON text or parsed)."""
    if rule:
        return rule
    for a in _json(attempts) or ():
        if isinstance(a, Mapping) and a.get("route"):
            return f"{a['route']} (failed over)"
    for t in _json(trace) or ():
        if isinstance(t, Mapping) and t.get("matched") and not t.get("loop") and (t.get("unreachable")
                                                                                 or t.get("refused")):
            return f"{t.get('route')} (matched, skipped)"
    return None
