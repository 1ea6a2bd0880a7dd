"""Reasoning effort across protocols (docs/architecture.md rule 1; issue 18): one table.

The neutral request names effort as Chat does, ``reasoning_effort``, one of ``LEVELS``. Every
protocol's spelling converts to and from it in that codec's own field table (a row each),
through the two tables here: ``SPELLINGS`` says, for each protocol spelling, how it maps and
why; ``BUDGETS`` gives each level its thinking budget in tokens, for the protocols that speak
budgets (Anthropic ``thinking.budget_tokens``, Gemini ``thinkingBudget``), and
``level_for_budget`` reads a budget back as the largest level it covers. Converted values are
recorded as converted; a client's "off" is never turned on: an OpenAI client's ``none`` goes
on (Anthropic: thinking disabled), while Anthropic's ``disabled`` and Gemini's budget 0 name
no level (there is no "off" every target takes) and are dropped, recorded; a request that
names no effort gets none (the target's default), never one made up.
"""

from __future__ import annotations

from typing import Any

from .conversation import Conversation

LEVELS = ("none", "minimal", "low", "medium", "high", "xhigh")

# level -> (thinking budget in tokens, why that budget)
BUDGETS: dict[str, tuple[int, str]] = {
    "none": (0, "no thinking, as an OpenAI-speaking client says it: Anthropic thinking.type disabled, Gemini "
                "thinkingBudget 0"),
    "minimal": (1024, "Anthropic's smallest budget_tokens (1024)"),
    "low": (4096, "a few steps of thought; between Anthropic's minimum and medium"),
    "medium": (10240, "a typical coding step; the middle of Gemini 2.5's 128..32768 range in log scale"),
    "high": (24576, "long deliberation; Claude Code's own high budgets are in this range"),
    "xhigh": (32768, "Gemini 2.5 Pro's largest thinkingBudget; Anthropic 'max' effort"),
}

# protocol spelling -> (how it maps to the neutral level, why)
SPELLINGS: dict[str, tuple[str, str]] = {
    "openai reasoning_effort": ("the level itself", "Chat is the neutral vocabulary"),
    "openai-responses reasoning.effort": ("the level itself", "Responses and Chat share OpenAI's levels"),
    "anthropic thinking {type: enabled, budget_tokens: N}": (
        "level_for_budget(N); written as BUDGETS[level], at most max_tokens // 2 (dropped, recorded, when that is "
        "below 1024)", "Anthropic requires 1024 <= budget_tokens < max_tokens and counts thinking inside max_tokens: "
        "half stays for the answer and its tool calls; the client's max_tokens is never raised"),
    "anthropic thinking {type: disabled}": (
        "names no level (dropped, recorded); written for none",
        "no 'off' every target takes (gpt-5 and non-reasoning models reject 'none', Gemini 2.5 Pro and 3 a 0 "
        "budget): the target's default applies, never a level made up; Anthropic's own default is no thinking"),
    "anthropic thinking {type: adaptive} + output_config.effort": (
        "low / medium / high as named, max -> xhigh; adaptive without an effort names no level",
        "adaptive thinking lets the model choose how much within the effort"),
    "gemini thinkingConfig.thinkingBudget": (
        "N > 0 -> level_for_budget(N); 0 (off) and -1 (dynamic) name no level (dropped, recorded); written as "
        "BUDGETS[level]",
        "a budget is Gemini 2.5's spelling, and Gemini 3 still takes it"),
    "gemini thinkingConfig.thinkingLevel": ("minimal / low / medium / high as named (any case)",
                                            "Gemini 3's levels are OpenAI's names"),
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


_EFFORT_WORDS = (b"reasoning", b"thinking", b"effort")


def sent_effort(body: dict[str, Any]) -> bool:
    """Whether a translated request carries an effort, in any protocol's spelling."""
    gc = body.get("generationConfig")
    return bool(body.get("reasoning_effort") or body.get("thinking") or body.get("reasoning")
                or (isinstance(gc, dict) and gc.get("thinkingConfig")))


def refusal_hint(sent: dict[str, Any], endpoint: str, status: int, upstream_body: bytes) -> str | None:
    """When an endpoint answers 400 about reasoning to a translated request that carried an
    effort, what to do about it (said after the upstream's own words, never instead)."""
    if status != 400 or not sent_effort(sent):
        return None
    low = upstream_body[:4096].lower()
    if not any(w in low for w in _EFFORT_WORDS):
        return None
    return (f"(tokunseba carried the client's reasoning effort to endpoint {endpoint}, which refused it: "
            f"`effort: omit` or `max_effort:` on that endpoint in the rules)")
