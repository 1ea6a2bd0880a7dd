"""Reasoning effort across protocols (docs/dev/architecture.md rule 1; issue 18): one table.

The neutral request names effort as Chat does, ``reasoning_effort``, one of ``LEVELS``. Every
protocol's spelling converts to and from it in that codec's own field table (a row each); each
protocol's facts say, per spelling, how it maps and why (``Protocol.effort_spellings``: the
table of record lives with the protocol, so this module names none). ``BUDGETS`` gives each
level its thinking budget in tokens, for the protocols that speak budgets, and
``level_for_budget`` reads a budget back as the largest level it covers. Converted values are
recorded as converted; a client's "off" is never turned on: the level ``none`` goes on (each
target writes its own off), while an off spelled as a disabled switch or a zero budget names no
level (there is no "off" every target takes) and is dropped, recorded; a request that names no
effort gets none (the target's default), never one made up.
"""

from __future__ import annotations

from .conversation import Conversation

LEVELS = ("none", "minimal", "low", "medium", "high", "xhigh")

# level -> (thinking budget in tokens, why that budget)
BUDGETS: dict[str, tuple[int, str]] = {
    "none": (0, "no thinking, as the neutral level says it; a protocol of budgets writes it as its off"),
    "minimal": (1024, "the smallest budget every budget-speaking provider takes (the largest of their minimums)"),
    "low": (4096, "a few steps of thought; between minimal and medium"),
    "medium": (10240, "a typical coding step; the middle of the 128..32768 budgets in log scale"),
    "high": (24576, "long deliberation; coding agents' own high budgets are in this range"),
    "xhigh": (32768, "the largest budget the budget-speaking providers take; their 'max' effort"),
}

def level_for_budget(budget: int) -> str:
    """The largest level whose budget ``budget`` covers (0: none; 1..1023: minimal)."""
    if budget <= 0:
        return "none"
    best = "minimal"
    for level in LEVELS[1:]:
        if budget >= BUDGETS[level][0]:
            best = level
    return best


def budget_for(level: str) -> int:
    return BUDGETS[level][0]


# an endpoint's rule keys (routing/endpoints.py): ``effort`` pins every turn's level ("omit": send none),
# ``max_effort`` lowers a higher one; each change recorded as converted (or dropped), in the
# client's own path
EFFORT_PINS = (*LEVELS, "omit")


def apply_endpoint(conv: Conversation, effort: str | None, max_effort: str | None, endpoint: str | None) -> None:
    """The endpoint's ``effort`` / ``max_effort`` applied to a decoded (neutral) conversation
    before it is encoded. The neutral body is replaced, never mutated (a Chat client's body is
    shared by the translations for other endpoints)."""
    if effort is None and max_effort is None:
        return
    body = conv.body
    have = body.get("reasoning_effort")
    name = f"endpoint {endpoint}" if endpoint else "the endpoint"
    path = conv.client_path("reasoning_effort") if have is not None else "reasoning_effort"
    want = have
    if effort == "omit":
        want = None
    elif effort is not None:
        want = effort
    elif isinstance(have, str) and have in LEVELS and max_effort in LEVELS \
            and LEVELS.index(have) > LEVELS.index(max_effort):
        want = max_effort
    if want == have:
        return
    new = {k: v for k, v in body.items() if k != "reasoning_effort"}
    if want is None:
        conv.dropped.append(path)
        conv.warnings.append(f"{path}: {name} says effort: omit")
    else:
        new["reasoning_effort"] = want
        how = "pinned by" if effort is not None else "capped by"
        conv.converted.append(f"{path} {have!r} -> {want!r} ({how} {name})" if have is not None
                              else f"reasoning_effort {want!r} ({how} {name}: the client named none)")
    conv.body = new
