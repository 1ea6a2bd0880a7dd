"""A turn as a sequence of attempts (issue 19): what the next attempt after a failure is.

When an attempt fails before any byte of its reply reached the client (turn/failover.py), the
turn is planned again from the client's own request (``Prepared``), through the same
``decide_request`` / ``build_turn`` as its first attempt: the next route whose ``when``
matches after the failed one (``decide(after=...)``), else what ``unmatched`` says. Nothing
of the previous attempt is reused: its translated body, its headers and its endpoint key
stay with it. ``next_turn`` returns the new plan, or None when the client should get the
failure as it came (``on_failure: error``, no route left under ``unmatched: refuse``, a
next route that refuses the turn). ``attempt_headers`` rebuilds the headers of an attempt
from the client's own headers, as the first attempt's were (only the allow-listed ones
to another host, plus that endpoint's own key). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..neutral.error import UpstreamError
from ..routing.endpoints import Endpoint
from .failover import Failure
from ..routing.rules import Rules
from .plan import Prepared, Turn, build_turn, decide_request
from ..states import Decided


@dataclass
class Attempted:
    """One attempt that failed: what ``explain`` and ``stats`` show, and the ledger keeps."""

    route: str | None
    endpoint: str | None  # None: the host the client asked for (unmatched: pass)
    kind: str  # failover.KINDS
    status: int | None
    why: str
    ms: float  # how long the attempt took, from its start to its failure
    cooled_s: float = 0.0  # the endpoint's cooldown from its retry-after / rate-limit hint
    backoff_s: float = 0.0  # the passive health back-off it started (no hint)
    host: str | None = None  # where it went: the endpoint's host, or the client's own host (passed on)
    retry_after_s: float | None = None  # how long the endpoint asked to be left alone (its hint, uncapped)
    error: UpstreamError | None = None  # the endpoint's error as it said it (a reply with a status)
    told: bool = False  # the client got this attempt's failure (turn/last_word.py: it said most)

    @property
    def name(self) -> str:
        """The attempt's endpoint, else the host it was passed on to."""
        return self.endpoint or self.host or "the original host"

    def record(self) -> dict:
        return {"route": self.route, "endpoint": self.endpoint, "kind": self.kind, "status": self.status,
                "why": self.why, "ms": round(self.ms, 3), "cooled_s": round(self.cooled_s, 3),
                "backoff_s": round(self.backoff_s, 3),
                **({"host": self.host} if self.endpoint is None and self.host else {}),
                **({"retry_after_s": round(self.retry_after_s, 3)} if self.retry_after_s is not None else {}),
                **({"told": True} if self.told else {})}


@dataclass
class Chain:
    """What a flow keeps to plan its next attempt."""

    prep: Prepared
    client_url: str
    client_fields: tuple  # the client's header fields, raw (name, value) bytes
    failed: list[Attempted] = field(default_factory=list)
    trace: list[dict] = field(default_factory=list)  # the decisions' traces, attempt after attempt
    gave_up: bool = False  # the last failure went to the client (no next attempt)
    told: Any = None  # what the client is told instead of the last failure as it came (turn/last_word.py)

    def text(self, last: str | None) -> str:
        """``small (503) → big`` for the mitmweb comment and the log."""
        parts = [f"{a.endpoint or a.host or 'original host'} ({_short(a)})" for a in self.failed]
        return " → ".join([*parts, last or "original host"])


    def failed_text(self) -> str:
        """``local (429) → api.anthropic.com (unreachable)``: every attempt, all of them failed."""
        return " → ".join(f"{a.name} ({_short(a)})" for a in self.failed)


def _short(a: Attempted) -> str:
    return Failure(a.kind, a.why, a.status).short()


def may_fail_over(turn: Turn) -> bool:
    """Whether a failure of this attempt moves the turn on (its route says on_failure: next)."""
    route = turn.decision.route if turn.decision is not None else None
    return route is not None and route.to is not None and route.on_failure == "next"


def next_turn(rules: Rules, chain: Chain, failed: Turn, *, reachable: Callable[[Endpoint], bool | str | None],
              env: Mapping[str, str]) -> Turn | None:
    """The plan of the next attempt after ``failed`` failed, or None (the client gets the failure)."""
    route = failed.decision.route if failed.decision is not None else None
    if not may_fail_over(failed) or chain.prep.req is None or route is None:
        return None
    plan = decide_request(rules, chain.prep, reachable, after=route.name)
    decision = plan.decision
    if decision.action == Decided.ERROR or (decision.action == Decided.PASS and rules.unmatched == "refuse"):
        return None
    turn = build_turn(rules, chain.prep, plan, env=env, now=failed.started_at)
    if turn.local is not None:  # refused, invalid for that target...: the client gets the failure it had
        return None
    turn.request_id, turn.may_shadow = failed.request_id, failed.may_shadow
    if turn.capture is not None:  # the provider state this attempt's reply carries is this turn's
        turn.capture.request_id = failed.request_id
    return turn


def attempt_url(turn: Turn, chain: Chain) -> str:
    """Where the attempt goes: its endpoint's URL, or the client's own (passed through)."""
    return turn.url or chain.client_url


RELAY_SETS = {b"host", b"content-length", b"transfer-encoding"}  # the relay writes these for the attempt


def attempt_headers(turn: Turn, chain: Chain) -> list[tuple[bytes, bytes]]:
    """The attempt's request headers, from the client's own: the allow-listed ones when the
    endpoint is another host (``keep_headers``), then the endpoint's own ``set_headers``."""
    keep = turn.keep_headers
    drop = {k.lower().encode() for k in turn.set_headers} | RELAY_SETS
    out = [(k.lower(), v) for k, v in chain.client_fields  # lower-case, as the relay reads mitmproxy's
           if (keep is None or k.decode("latin-1").lower() in keep) and k.lower() not in drop]
    out += [(k.encode(), v.encode()) for k, v in turn.set_headers.items()]
    return out


def attempt_body(turn: Turn, chain: Chain) -> bytes:
    return turn.body if turn.body is not None else chain.prep.body
