"""A failed attempt of a turn and what follows it, as one object the adapter drives (sans-IO,
as ``Planning`` is for the first attempt).

The adapter (proxy/route.py ``failover``, the relay's call when an attempt failed before any
byte reached the client) makes a ``FailedAttempt`` (``of``: the attempt noted, its endpoint
cooled or backed off, added to the flow's chain: turn/failover.py ``note_attempt``; the slot it
held given back, by whatever holds it: ``HoldsSlot``), asks it
round after round for the next attempt the rules choose among the endpoints available now
(``candidate``; the adapter waits for a slot there, and notes in ``full`` an endpoint found
full after its ``queue_s``), and ends with ``settle``: the chain moved on to that attempt
(its log line, its ``attempt_failed`` record, the attempt as the relay sends it), or given up,
with what the client is told instead (``chain.told``: turn/last_word.py ``final``). Each
round rules out one more endpoint, so there are at most ``rounds``. No I/O, no asyncio.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from ..routing import EndpointHealth, Rules
from .failover import (Attempted, Capacity, Chain, Failure, MovedOn, Slot, available, may_fail_over, move_on,
                       next_turn, note_attempt)
from .last_word import final
from .plan import Turn


class HoldsSlot(Protocol):
    """What holds an attempt's endpoint slot (an HTTPS flow's ``FlowState``, a WebSocket turn's
    ``Planning``)."""

    slot: Slot | None


@dataclass
class FailedAttempt:
    turn: Turn  # the attempt that failed
    chain: Chain
    failure: Failure
    tried: Attempted  # as noted (turn/failover.py ``Attempted``)
    rules: Rules
    health: EndpointHealth
    capacity: Capacity
    env: Mapping[str, str]
    full: set[str] = field(default_factory=set)  # endpoints found full (after their queue_s) for the next attempt

    @classmethod
    def of(cls, turn: Turn, chain: Chain, failure: Failure, headers: Iterable[tuple[str, str]], *, ms: float,
           now: float, rules: Rules, health: EndpointHealth, capacity: Capacity,
           env: Mapping[str, str], held: HoldsSlot | None = None) -> FailedAttempt:
        """``turn``'s attempt failed after ``ms`` (``headers``: its reply's, a retry hint among
        them): noted, and added to ``chain``; the slot it held (``held.slot``) given back."""
        tried = note_attempt(turn, chain, failure, headers, ms=ms, now=now, capacity=capacity, health=health)
        if held is not None and held.slot is not None:
            held.slot.release()
            held.slot = None
        return cls(turn, chain, failure, tried, rules, health, capacity, env)

    @property
    def rounds(self) -> int:
        """How many times ``candidate`` may be asked: each round rules out one more endpoint."""
        return 2 * len(self.rules.endpoints) + 1

    def candidate(self) -> Turn | None:
        """The next attempt the rules choose among the endpoints available now (not down, not
        cooling, not found ``full``), or None: the turn does not fail over (its route says
        otherwise, or nothing is left)."""
        if not may_fail_over(self.turn):
            return None
        return next_turn(self.rules, self.chain, self.turn, reachable=available(self.health, self.capacity, self.full),
                         env=self.env)

    def settle(self, nxt: Turn | None) -> MovedOn:
        """The chain moved on to ``nxt``, or given up (None): then what the client is told
        instead of the last failure as it came is ``chain.told``."""
        moved = move_on(self.turn, self.chain, self.tried, self.failure, nxt)
        if nxt is None:
            self.chain.told = final(self.turn.client_protocol, self.chain.failed, self.turn.request_id)
        return moved
