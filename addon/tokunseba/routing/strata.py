"""The stratum of a turn: the kind of turn a shadow comparison is kept under, and an earned
route earns turn by turn kind (routing/earn.py).

A stratum is the route that took the turn and what the turn itself says of its kind, each
read from ``TurnFacts`` (routing/facts.py), never guessed:

- ``client``: the client's protocol;
- ``agent``: ``background`` (a side query: Claude Code's title turn), else ``main`` or
  ``subagent`` where the client says (routing/session_facts.py), else ``unknown``;
- ``tools``: ``none``, or the tool set: how many tools and a short stable hash of their sorted
  names (``12:3f9a0c1e``), so the same client's main turns share one stratum while a turn
  offered other tools (an MCP server added) starts its own;
- ``thinking``: on or off;
- ``size``: a bucket of the request's bytes (``SIZE_BUCKETS``): a long prompt is another kind
  of turn for a small model (its window, its prefill).

``key`` is the stratum as one line, the same in the ledger (a shadow row's comparison),
``explain``, ``tokunseba shadow`` and ``tokunseba earn``. Pure.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass

from .facts import TurnFacts

# request bytes -> bucket; a turn above the last limit is "over 256KB"
SIZE_BUCKETS: tuple[tuple[int, str], ...] = (
    (4 * 1024, "≤4KB"),  # a title or a classifier turn
    (32 * 1024, "≤32KB"),  # a short conversation
    (128 * 1024, "≤128KB"),  # a working session
    (256 * 1024, "≤256KB"),
)
OVER = ">256KB"


def size_bucket(request_bytes: int) -> str:
    return next((name for limit, name in SIZE_BUCKETS if request_bytes <= limit), OVER)


def tool_set(names: tuple[str, ...] | list[str]) -> str:
    """``none``, or ``N:hash``: the number of distinct tools and 8 hex digits of a SHA-256 of their
    sorted names (stable across order and across runs)."""
    unique = sorted(set(names))
    if not unique:
        return "none"
    return f"{len(unique)}:{hashlib.sha256(chr(10).join(unique).encode()).hexdigest()[:8]}"


def agent_kind(facts: TurnFacts) -> str:
    if facts.who.background:
        return "background"
    return facts.who.agent or "unknown"


@dataclass(frozen=True)
class Stratum:
    route: str
    client: str
    agent: str
    tools: str
    thinking: bool
    size: str

    @property
    def key(self) -> str:
        return (f"route={self.route} client={self.client} agent={self.agent} tools={self.tools} "
                f"thinking={'on' if self.thinking else 'off'} size={self.size}")

    def record(self) -> dict:
        return {"key": self.key, **asdict(self)}


def stratum_of(route: str, facts: TurnFacts) -> Stratum:
    """The stratum of a turn taken by ``route``."""
    tools = tool_set(facts.tool_names) if facts.tool_names or not facts.tools else f"{facts.tool_count}:unnamed"
    return Stratum(route, facts.client, agent_kind(facts), tools, facts.thinking,
                   size_bucket(facts.request_bytes))
