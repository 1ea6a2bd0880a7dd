"""The proxy's spending caps: opened with the rules, admitted as a turn is planned (route.py),
settled as it ends (record.py), their leases kept alive and the dead ones swept.

- ``open_caps``: the caps of the rules in force over the ledger's database (a SQLite path or a
  postgresql:// URL: the same one the turns are written to), priced as every turn is (pricing/:
  the rules file's ``prices:`` over the price library, local endpoints at 0); said once at
  start (how many caps, where they are counted, what a turn does when that ledger cannot be
  reached). None when the rules state no budget.
- ``keep_leases``: every third of the lease, this proxy's holds in flight are renewed and every
  proxy's expired ones (a proxy killed mid-turn) are charged at their declared amount.
- ``admit_now``: a turn's admission without waiting (a WebSocket message's hook): one atomic
  hold per cap, a budget's ``on_limit: reroute`` handing it to the next route (``rerouted_to``,
  shared with route.py's awaited admission), the same verdict an HTTPS turn gets;
  ``admit_off_loop`` the same with the store's calls in a thread, for caps counted in
  PostgreSQL (``admits_off_loop``): a round trip never holds the event loop;
- ``settle``: a finished turn's holds become its charges, from its reported usage.

Plain Python (no mitmproxy); a SQLite store's calls are short statements on the event loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Any

from ..budgets import BudgetStore, Caps, LedgerAway, Spent, Verdict, pricing_cost
from ..pricing import Price
from ..credentials import split_url_password
from ..ledger import default_instance, default_ledger_target
from ..routing import BUILTIN_ENDPOINTS, OnLedgerUnavailable, OnLimit, Rules
from ..states import Action
from ..turn import Turn
from ..turn import Planning

log = logging.getLogger("tokunseba")


def open_caps(rules: Rules, *, ledger: str | None, instance: str, owner: str, lease_s: float,
              prices: list[Price], previous: Caps | None = None) -> Caps | None:
    """The caps of ``rules`` (None: it states none); ``previous``' store is reused when it counts
    in the same ledger (a reload keeps the holds in flight)."""
    settings = rules.budgets
    if not settings.budgets:
        if previous is not None and previous.store is not None and not previous.store.mine:
            previous.store.close()
        return None
    target = ledger or str(default_ledger_target())
    store = previous.store if previous is not None and previous.store is not None \
        and previous.store.target == target else BudgetStore(target, owner=owner, lease_s=lease_s)
    store.lease_s = lease_s
    caps = Caps(settings, store, instance=instance, cost=pricing_cost(prices))
    where = split_url_password(target)[0]
    names = ", ".join(b.name + (" (shared)" if b.shared else "") for b in settings.budgets)
    log.warning(f"tokunseba: budgets: {len(settings.budgets)} cap{'s' * (len(settings.budgets) != 1)} ({names}), "
                f"counted in {where}; when it cannot be reached, turns under a cap are "
                f"{'refused' if settings.on_ledger_unavailable == OnLedgerUnavailable.REFUSE else 'served without a hold'} "
                f"(on_ledger_unavailable: {settings.on_ledger_unavailable})")
    try:
        if swept := store.sweep(time.time()):
            log.warning(f"tokunseba: budgets: {swept} hold{'s' * (swept != 1)} of proxies gone mid-turn charged at "
                        "their declared amount")
    except LedgerAway as e:
        log.warning(f"tokunseba: budgets: {e}")
    return caps


async def keep_leases(get_caps: Any) -> None:
    """Renew this proxy's holds and sweep the expired ones, every third of the lease."""
    while True:
        caps: Caps | None = get_caps()
        await asyncio.sleep(caps.store.lease_s / 3 if caps is not None and caps.store is not None else 5.0)
        caps = get_caps()
        if caps is None or caps.store is None:
            continue
        try:
            now = time.time()
            caps.store.renew(now)
            if swept := caps.store.sweep(now):
                log.warning(f"tokunseba: budgets: {swept} expired hold{'s' * (swept != 1)} (a proxy gone mid-turn) "
                            "charged at their declared amount")
        except LedgerAway as e:
            log.warning(f"tokunseba: budgets: {e}")
        except Exception:
            log.exception("tokunseba: budgets: could not renew or sweep holds")


def rerouted_to(planning: Planning, verdict: Verdict, event: dict[str, Any]) -> bool:
    """A budget's reroute, once the rules decided again (``planning.next``): the event names the
    route the turn went to (said on the console); True when none took it: the cap stops the
    turn (the verdict's budget then answers as ``on_limit: refuse``)."""
    d = planning.plan.decision if planning.plan is not None else None
    event["to_route"] = d.route.name if d is not None and d.route is not None and d.action == "route" else None
    log.warning(f"tokunseba: {event['why']}: {event['from_route']} → {event['to_route'] or 'no route'}")
    if event["to_route"] is not None:
        return False
    verdict.refused = verdict.refused and dataclasses.replace(
        verdict.refused, budget=dataclasses.replace(verdict.refused.budget, on_limit=OnLimit.REFUSE))
    return True


def admit_now(caps: Caps, planning: Planning, connected: tuple[Any, Any] | None,
              choose: Callable[[], tuple[Any, Any] | None]) -> tuple[Verdict, tuple[Any, Any] | None]:
    """The turn's holds under the caps that apply to its decision, taken without waiting (a
    WebSocket message is planned in its hook: a SQLite ledger's short transaction; a PostgreSQL
    one is admitted ``admit_off_loop``). ``connected``: the endpoint chosen and its slot;
    ``choose``: the rules' next choice with a free slot (after a reroute). The verdict and the
    endpoint and slot the turn holds then."""
    steps = _admission(planning, connected, choose)
    facts = next(steps)
    try:
        while True:
            facts = steps.send(caps.admit(facts, request_id=planning.request_id, now=time.time()))
    except StopIteration as done:
        return done.value


async def admit_off_loop(caps: Caps, planning: Planning, connected: tuple[Any, Any] | None,
                         choose: Callable[[], tuple[Any, Any] | None]) -> tuple[Verdict, tuple[Any, Any] | None]:
    """``admit_now`` with each of the store's admissions in a thread: a PostgreSQL ledger's round
    trip does not hold the event loop (every other flow) while it waits. The rest (the rules'
    next choice, the slots) stays on the loop."""
    steps = _admission(planning, connected, choose)
    facts = next(steps)
    try:
        while True:
            verdict = await asyncio.to_thread(caps.admit, facts, request_id=planning.request_id, now=time.time())
            facts = steps.send(verdict)
    except StopIteration as done:
        return done.value


def admits_off_loop(caps: Caps | None) -> bool:
    """Whether a turn's admission under ``caps`` is a round trip to wait for off the event loop
    (its caps are counted in PostgreSQL), not a short local transaction (SQLite)."""
    return caps is not None and caps.store is not None and caps.store.pg


def _admission(planning: Planning, connected: tuple[Any, Any] | None, choose: Callable[[], tuple[Any, Any] | None]):
    """One admission's steps, whoever runs the store's calls: yields the facts to admit, is sent
    their verdict; a reroute decides again and yields again; returns the verdict and the
    endpoint and slot the turn holds."""
    events: list[tuple[str, dict]] = []
    while True:
        verdict: Verdict = yield planning.budget_facts()
        if not verdict.reroutes or (event := planning.reroute(verdict)) is None:
            break
        if connected is not None:
            connected[1].release()
        connected = choose()
        events.append(("budget_rerouted", event))
        if rerouted_to(planning, verdict, event):
            break
    verdict.events[:0] = events
    return verdict, connected


def settle(caps: Caps | None, turn: Turn, usage: Any, now: float, status: int | None) -> dict[str, Any] | None:
    """The turn's holds become its charges: its reported cost, or its hold when nothing was
    reported (a cut stream); an error reply that reported no usage gives its holds back (the
    upstream refused the turn: nothing was generated). What was done, for the ledger's
    ``budget_settled`` event (None: the turn held nothing)."""
    v = turn.budget
    if caps is None or v is None or not v.held:
        return None
    if usage is None and status is not None and status >= 400:
        names = [a.budget.name for a in v.held]
        caps.release(v)
        return {"released": names, "why": f"an error reply ({status}) that reported no usage"}
    routed = turn.endpoint is not None and turn.action != Action.PASS  # where it was served (as turn/cost.py says)
    ep = turn.endpoint.name if routed and turn.endpoint is not None else \
        next((e.name for e in BUILTIN_ENDPOINTS.values() if e.host == turn.host), turn.host)
    url = turn.endpoint.url if routed and turn.endpoint is not None else f"https://{turn.host}" if turn.host else None
    charged = caps.settle(v, Spent(ep, turn.model_used or turn.requested_model, url, usage, turn.started_at),
                          request_id=turn.request_id, now=now)
    kept = [name for name, amount in charged.items() if amount is None]
    if kept:
        log.info(f"tokunseba: {turn.request_id} nothing priced was reported: budget{'s' * (len(kept) > 1)} "
                 f"{', '.join(kept)} keep{'s' * (len(kept) == 1)} the turn's declared hold as its charge")
    return {"charged": {name: amount for name, amount in charged.items() if amount is not None},
            "kept_hold": kept}
