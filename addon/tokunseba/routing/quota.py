"""Subscription windows as routing sees them: whose account a turn spends, the last state seen
of each of its windows, and the rule predicate ``quota`` (docs/guide/quota.md).

- ``account_of(host, headers)``: the account a request spends, known before it is sent: a
  one-way hash (SHA-256) of its credential header (protocols/limits.ACCOUNT_HEADERS), or of the
  provider's account id header where the client sends one (it outlives a refreshed token); the
  credential itself is never kept. ``Account.short`` is what people see (12 hex digits).
- ``QuotaBoard``: the last state seen of each window of each account (in memory, fed by every
  reply that reports them: protocols/limits.read_windows; ``load``: what a ledger holds, at
  start), and the thresholds rules name, said once on the console when a window crosses one.
- ``check_quota(want, facts)``: the predicate ``when: {quota: {above: 0.8}}`` (any window of
  the turn's account) or ``{quota: {window: 5h, above: 0.8}}``: true when the last state seen
  says so and the window has not reset since (a state whose reset time has passed says
  nothing any more). ``quota_problem(value)`` is ``check``'s validation of it.
- ``rejected_window`` / ``gate``: a window whose status says rejected (and has not reset) makes
  the endpoints that would spend that account unavailable, as a cooling endpoint is: the turn
  moves on to the next route instead of failing.

Plain Python: no I/O; the board is in-memory state on the proxy's event loop.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..protocols import ACCOUNT_HEADERS, ACCOUNT_ID_HEADERS, Reading, WindowState, window_names

SHORT = 12  # hex digits of an account's hash people see


@dataclass(frozen=True)
class Account:
    """An account as tokunseba knows it: ``key`` (SHA-256 hex of the provider's host and the
    credential, or of the account id), ``host`` (where it spends), ``by``: which header named it."""

    key: str
    host: str
    by: str

    @property
    def short(self) -> str:
        return self.key[:SHORT]


def _hash(*parts: str) -> str:
    h = hashlib.sha256(b"tokunseba-account\0")
    for p in parts:
        h.update(p.encode("utf-8", "surrogateescape") + b"\0")
    return h.hexdigest()


def account_of(host: str, headers: Iterable[tuple[Any, Any]] | Mapping[str, str]) -> Account | None:
    """The account a request to ``host`` spends, from its headers (str or bytes); None: it carries
    no credential tokunseba reads."""
    items = headers.items() if isinstance(headers, Mapping) else headers
    found: dict[str, str] = {}
    for k, v in items:
        name = (k.decode("latin-1") if isinstance(k, bytes) else str(k)).lower()
        if (name in ACCOUNT_HEADERS or name in ACCOUNT_ID_HEADERS) and name not in found:
            found[name] = (v.decode("latin-1") if isinstance(v, bytes) else str(v)).strip()
    for name in ACCOUNT_ID_HEADERS:
        if found.get(name):
            return Account(_hash(host.lower(), name, found[name]), host.lower(), name)
    for name in ACCOUNT_HEADERS:
        if found.get(name):
            return Account(_hash(host.lower(), name, found[name]), host.lower(), name)
    return None


@dataclass(frozen=True)
class Seen:
    """A window's last state and when it was seen (Unix seconds)."""

    state: WindowState
    at: float

    def current(self, now: float) -> bool:
        """Still says something: its reset time (when reported) has not passed."""
        return self.state.resets_at is None or self.state.resets_at > now


@dataclass(frozen=True)
class Crossing:
    """A window crossed a threshold a rule names (said once on the console)."""

    account: Account
    window: str
    threshold: float
    used: float

    def line(self) -> str:
        return (f"tokunseba: account {self.account.short} ({self.account.host}): window {self.window} is "
                f"{self.used:.0%} used, past the {self.threshold:g} a rule names")


@dataclass
class QuotaBoard:
    """The last state seen of each window of each account (see the module's docstring)."""

    windows: dict[str, dict[str, Seen]] = field(default_factory=dict)  # account key -> window -> seen
    accounts: dict[str, Account] = field(default_factory=dict)
    thresholds: tuple[float, ...] = ()  # the thresholds the rules name (said once when crossed)
    said: set[tuple[str, str, float]] = field(default_factory=set)

    def seen(self, account: Account, reading: Reading, at: float) -> list[Crossing]:
        """A reply's windows for ``account``; returns the thresholds crossed for the first time."""
        mine = self.windows.setdefault(account.key, {})
        self.accounts[account.key] = account
        crossed: list[Crossing] = []
        for w in reading.windows:
            if w.used is None and w.status is None and w.resets_at is None:
                continue
            before = mine.get(w.name)
            if before is not None and w.used is None and before.current(at):  # keep the share a status reply lacks
                w = WindowState(w.name, used=before.state.used, status=w.status or before.state.status,
                                resets_at=w.resets_at or before.state.resets_at,
                                minutes=w.minutes or before.state.minutes, binding=w.binding)
            mine[w.name] = Seen(w, at)
            for t in self.thresholds:
                key = (account.key, w.name, t)
                if w.used is not None and w.used > t and key not in self.said:
                    self.said.add(key)
                    crossed.append(Crossing(account, w.name, t, w.used))
                elif w.used is not None and w.used <= t:
                    self.said.discard(key)  # said again after it falls back (a reset) and crosses anew
        return crossed

    def load(self, rows: Iterable[Mapping[str, Any]], now: float) -> int:
        """The states a ledger holds (ledger/quota.py ``latest``: each account's newest row per
        window), those not yet reset, as if just seen again at their own time (a proxy that
        restarts knows its accounts' windows before their next reply). Returns how many."""
        n = 0
        for r in rows:
            seen = Seen(WindowState(r["window_name"], used=r["used"], status=r["status"], resets_at=r["resets_at"],
                                    minutes=r["minutes"], binding=bool(r["binding"])), float(r["seen_at"]))
            if not seen.current(now):
                continue
            mine = self.windows.setdefault(r["account"], {})
            if (before := mine.get(seen.state.name)) is None or before.at < seen.at:
                mine[seen.state.name] = seen
                self.accounts.setdefault(r["account"], Account(r["account"], r["host"] or "", r["account_by"] or ""))
                n += 1
        return n

    def view(self, account: Account | None, clock: Callable[[], float] = time.time) -> AccountQuota | None:
        return None if account is None else AccountQuota(self, account, clock)


@dataclass
class AccountQuota:
    """One account's windows as a turn's rules see them: read live from the board (a failover
    attempt sees what the failed attempt's reply said)."""

    board: QuotaBoard
    account: Account
    clock: Callable[[], float] = time.time

    def states(self) -> dict[str, Seen]:
        return dict(self.board.windows.get(self.account.key, {}))

    def current(self) -> list[Seen]:
        now = self.clock()
        return [s for s in self.states().values() if s.current(now)]

    def rejected(self) -> Seen | None:
        """A window whose last state says rejected and has not reset, if any."""
        return next((s for s in self.current() if s.state.rejected), None)


def humane(seconds: float) -> str:
    """``3h 05m``, ``4m 10s``, ``2d 3h``: a span people read."""
    s = int(max(seconds, 0))
    d, h, m = s // 86400, s % 86400 // 3600, s % 3600 // 60
    if d:
        return f"{d}d {h}h"
    if h:
        return f"{h}h {m:02d}m"
    if m:
        return f"{m}m {s % 60:02d}s"
    return f"{s}s"


def said(seen: Seen, now: float) -> str:
    """A window's state in one phrase: ``5h 85% used, allowed, resets in 2h 10m, seen 3m 02s ago``."""
    w = seen.state
    parts = [w.name]
    if w.used is not None:
        parts.append(f"{w.used:.0%} used")
    if w.status is not None:
        parts.append(w.status)
    if w.resets_at is not None:
        parts.append(f"resets in {humane(w.resets_at - now)}")
    parts.append(f"seen {humane(now - seen.at)} ago")
    return ", ".join(parts[:1]) + " " + ", ".join(parts[1:])


# ---- the rule predicate

KEYS = ("above", "window")
_FAMILY_WINDOW = re.compile(r"[a-z0-9_]+\.(primary|secondary)")


def quota_problem(value: Any) -> str | None:
    """Why ``when: {quota: ...}`` is not a valid predicate (``check`` says it), or None."""
    if not isinstance(value, dict):
        return "quota: wants a mapping such as {above: 0.8} or {window: 5h, above: 0.8}"
    unknown = [k for k in value if k not in KEYS]
    if unknown:
        return f"quota: unknown key {unknown[0]!r} (known: {', '.join(KEYS)})"
    above = value.get("above")
    if "above" not in value:
        return "quota: needs above: a used share between 0 and 1 (0.8 = 80% of the window used)"
    if isinstance(above, bool) or not isinstance(above, (int, float)) or not 0 <= above <= 1:
        return f"quota: above must be a share between 0 and 1 (0.8 = 80% used), not {above!r}"
    window = value.get("window")
    if "window" in value:
        names = window_names()
        if not isinstance(window, str) or (window not in names and not _FAMILY_WINDOW.fullmatch(window)):
            return (f"quota: unknown window {window!r} (known: {', '.join(names)}, or a Codex limit family's "
                    f"FAMILY.primary / FAMILY.secondary)")
    return None


def check_quota(want: dict, facts: Any) -> tuple[bool, str]:
    """The ``quota`` condition on a turn's facts (``facts.quota``: the account's ``AccountQuota``)."""
    above, window = float(want["above"]), want.get("window")
    which = f"window {window}" if window else "any window"
    q: AccountQuota | None = getattr(facts, "quota", None)
    if q is None:
        return False, (f"quota: no reply has reported windows for the turn's account yet (or the turn carries no "
                       f"credential), rule wants {which} above {above:g}")
    now = q.clock()
    states = q.states()
    if window is not None:
        states = {window: states[window]} if window in states else {}
    if not states:
        return False, f"quota: no reply has reported {which} for account {q.account.short} yet, rule wants above {above:g}"
    current = [s for s in states.values() if s.current(now)]
    over = [s for s in current if s.state.used is not None and s.state.used > above]
    if over:
        s = max(over, key=lambda s: s.state.used or 0)
        return True, f"quota: account {q.account.short}: {said(s, now)}; above {above:g}"
    if not current:
        s = max(states.values(), key=lambda s: s.at)
        return False, (f"quota: account {q.account.short}: {s.state.name} reset since it was seen "
                       f"({humane(now - s.at)} ago); rule wants above {above:g}")
    s = max(current, key=lambda s: s.state.used if s.state.used is not None else -1)
    stale = sorted(name for name, seen in states.items() if not seen.current(now))
    reset = f" ({', '.join(stale)} reset since it was seen)" if stale else ""
    return False, f"quota: account {q.account.short}: {said(s, now)}; not above {above:g}{reset}"


def routed_by_quota(decision: Any) -> dict | None:
    """The ``quota_routed`` event's data when a window moved a turn (its decision): the route
    whose ``quota`` condition held (its reason names the window, its state and when it was
    seen), or the routes skipped because a window said rejected. None: no window moved it.
    What the turn would have used of the window is unknown and never estimated."""
    if decision is None:
        return None
    skipped = [{"route": t.route, "why": t.unavailable} for t in decision.trace
               if t.unavailable and t.unavailable.startswith("quota:")]
    route = decision.route
    held = None
    if route is not None and isinstance(route.when.get("quota"), dict):
        held = next((r for t in decision.trace if t.route == route.name and t.matched for r in t.reasons
                     if r.startswith("quota:")), None)
    if held is None and not skipped:
        return None
    out: dict[str, Any] = {"route": route.name if route else None,
                           "to": decision.endpoint.name if decision.endpoint else None,
                           "would_have_used": "unknown (never estimated)"}
    if held:
        out["why"] = held
    if skipped:
        out["skipped"] = skipped
    return out


EVENT_ROUTED = "quota_routed"  # the turn went elsewhere because of a window (stats and sessions count it)


def routed_line(n: int) -> str:
    """`stats`' line for the turns a window moved (what they would have used is never estimated)."""
    return (f"quota: {n} turn{'s' * (n != 1)} went elsewhere because of a subscription window (a route's quota "
            f"condition held, or a window said rejected); what they would have used of it is unknown and never "
            f"estimated")


def thresholds(rules_routes: Iterable[Any]) -> tuple[float, ...]:
    """The thresholds the routes' ``quota`` conditions name (the board says each once when crossed)."""
    return tuple(sorted({float(r.when["quota"]["above"]) for r in rules_routes
                         if isinstance(r.when.get("quota"), dict) and "above" in r.when["quota"]}))


# ---- a rejected window: the account's endpoints are unavailable

def gate(test: Callable[[Any], bool | str | None] | None, quota: AccountQuota | None,
         spends: Callable[[Any], bool]) -> Callable[[Any], bool | str | None] | None:
    """``decide``'s test of an endpoint, with the account's rejected window: an endpoint that
    would spend the account (``spends(ep)``) is unavailable while the window says rejected."""
    if quota is None:
        return test

    def gated(ep: Any) -> bool | str | None:
        ok = True if test is None else test(ep)
        if ok is not True and ok is not None:
            return ok
        if spends(ep) and (s := quota.rejected()) is not None:
            return f"quota: account {quota.account.short}: {said(s, quota.clock())}"
        return ok
    return gated
