"""Earned routes: a route's turns go to a candidate endpoint stratum by stratum, once the
candidate has proven, on the user's own shadowed turns, that it answers them as the route's
own target does.

A route says ``earn: {to: local, bar: 0.95, min_turns: 200, canary: 0.05}`` (``Earn``). Each
of its turns falls in a stratum (routing/strata.py). Per (route, stratum) a ``Standing`` folds
the comparisons of that stratum's shadowed turns, oldest first (``step``): each comparison
counted by shadow/agreement.py is one agreement or one disagreement (plain text turns are not
counted: nothing but a judge could say two texts agree, and no model judges another here).

- ``learning``: turns go where the route says and are shadowed to the candidate. Once at least
  ``min_turns`` comparisons are counted and the lower bound of the 95% Wilson score interval of
  their agreement (``wilson_lower``) reaches ``bar``, the stratum is ``earned``;
- ``earned``: turns go to the candidate; a ``canary`` share of them is shadowed the other way
  (to the route's own target) and keeps counting. When the bound falls below ``bar`` the stratum
  ``returned``: its count starts again from zero (the evidence before the fall no longer says
  what the candidate does now), and it earns again only as a learning stratum does;
- a session's tier only rises: once a turn of a session in a stratum went to the route's own
  target after the session's turns of that stratum had been on the candidate (the stratum
  returned, or the candidate could not take the turn), that session's turns of that stratum
  never go to the candidate again.

Where the state lives: ``EarnBook``, in the proxy's memory. It is folded from the
ledger's shadow rows (read once, the first time the book is asked or told anything, or by
``ready`` in a thread the proxy starts at start-up: a large ledger never delays the start) (each row's ``comparison`` carries its stratum, its verdict and which
endpoint was the candidate: shadow/sender.py writes them), and each comparison that lands is
folded in as it is written (``observe``), so the proxy, ``tokunseba earn`` and ``explain``
read the same fold of the same rows. Which sessions left the candidate is kept in memory
only (a restart forgets it; the turns' ``earn`` events record each decision). Sets of sessions
are bounded (``MAX_SESSIONS`` per stratum, the oldest forgotten first). Pure but for a lock:
the proxy calls it from its event loop and from the shadow sender's threads.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Callable

from .facts import TurnFacts
from .strata import stratum_of

log = logging.getLogger("tokunseba")

Z95 = 1.959963984540054  # the normal quantile of a two-sided 95% interval
MAX_SESSIONS = 100_000  # per stratum: sessions remembered as on (or as having left) the candidate
WORST_KEPT = 20  # disagreements kept per stratum, the most failed facts first


@dataclass(frozen=True)
class Earn:
    """A route's ``earn:`` key."""

    to: str  # the candidate endpoint
    bar: float = 0.95  # the lower bound of agreement a stratum must reach
    min_turns: int = 200  # counted comparisons before a stratum can be earned
    canary: float = 0.05  # share of an earned stratum's turns shadowed back to the route's target

    def record(self) -> dict:
        return {"to": self.to, "bar": self.bar, "min_turns": self.min_turns, "canary": self.canary}


class EarnState(StrEnum):
    LEARNING = "learning"
    EARNED = "earned"
    RETURNED = "returned"


def wilson_lower(agree: int, n: int, z: float = Z95) -> float:
    """The lower bound of the Wilson score interval of ``agree`` successes in ``n`` trials (0 when
    n is 0). Unlike ``agree/n - margin`` it stays within [0, 1] and is honest for small n."""
    if n <= 0:
        return 0.0
    p = agree / n
    z2 = z * z
    centre = p + z2 / (2 * n)
    margin = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return max(0.0, (centre - margin) / (1 + z2 / n))


def when(at: float | None) -> str:
    return "-" if at is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


@dataclass
class Standing:
    """One stratum of one earned route: its state and the counted comparisons since ``since``."""

    route: str
    stratum: dict  # Stratum.record()
    state: EarnState = EarnState.LEARNING
    n: int = 0
    agree: int = 0
    since: float | None = None  # the first comparison counted now (the start, or the last return)
    changed_at: float | None = None  # when the state last changed
    text_turns: int = 0  # comparisons of plain text turns: recorded, never counted
    transitions: list[dict] = field(default_factory=list)
    worst: list[dict] = field(default_factory=list)  # the disagreements with the most failed facts

    @property
    def lower(self) -> float:
        return wilson_lower(self.agree, self.n)

    @property
    def rate(self) -> float | None:
        return self.agree / self.n if self.n else None

    def step(self, verdict: dict, at: float, earn: Earn, request_id: str | None = None) -> EarnState | None:
        """Fold one comparison in; the new state when it changed."""
        agreed = verdict.get("agree")
        if agreed is None:
            self.text_turns += verdict.get("kind") == "text"
            return None
        if self.since is None:
            self.since = at
        self.n += 1
        self.agree += bool(agreed)
        if not agreed:
            self.worst.append({"request_id": request_id, "at": at, "kind": verdict.get("kind"),
                               "failed": list(verdict.get("failed") or ())})
            self.worst.sort(key=lambda w: -len(w["failed"]))
            del self.worst[WORST_KEPT:]
        lower = self.lower
        if self.state != EarnState.EARNED and self.n >= earn.min_turns and lower >= earn.bar:
            return self._change(EarnState.EARNED, at)
        if self.state == EarnState.EARNED and lower < earn.bar:
            changed = self._change(EarnState.RETURNED, at)
            self.n = self.agree = 0
            self.since = None
            return changed
        return None

    def _change(self, to: EarnState, at: float) -> EarnState:
        self.transitions.append({"at": at, "from": str(self.state), "to": str(to), "n": self.n, "agree": self.agree,
                                 "lower": round(self.lower, 4)})
        self.state, self.changed_at = to, at
        return to

    def say(self, earn: Earn) -> str:
        """One line: what ``explain`` and the console say of this stratum."""
        key = self.stratum.get("key", "?")
        if self.state == EarnState.EARNED:
            return (f"earned: stratum {key}, agreement {self.rate or 0:.2f} (lower bound {self.lower:.2f}) over "
                    f"{self.n} turns since {when(self.since)}")
        counted = f"{self.n} of {earn.min_turns}"
        if self.n:
            counted += f", agreement {self.rate or 0:.2f} (lower bound {self.lower:.2f}, bar {earn.bar:g})"
        if self.state == EarnState.RETURNED:
            return f"returned: stratum {key} at {when(self.changed_at)}; learning again: {counted}"
        return f"learning: {counted} (stratum {key})"

    def record(self, earn: Earn) -> dict:
        return {"route": self.route, "candidate": earn.to, "stratum": self.stratum, "state": str(self.state),
                "counted": self.n, "agree": self.agree, "agreement": None if self.rate is None else round(self.rate, 4),
                "lower_bound": round(self.lower, 4), "bar": earn.bar, "min_turns": earn.min_turns,
                "canary": earn.canary, "since": self.since, "changed_at": self.changed_at,
                "text_turns": self.text_turns, "transitions": self.transitions, "worst": self.worst,
                "said": self.say(earn)}


@dataclass
class EarnCall:
    """What the book says of one turn of an earned route: where it goes, and why."""

    route: str
    candidate: str
    standing: dict  # Standing.record()
    session: str | None
    session_left: bool  # the session's turns of this stratum left the candidate before
    text: str

    @property
    def to_candidate(self) -> bool:
        return self.standing["state"] == EarnState.EARNED and not self.session_left

    def record(self, *, served_by: str, why: str | None = None) -> dict:
        """The turn's ``earn`` event: the decision and the evidence it was taken on."""
        s = self.standing
        return {"route": self.route, "candidate": self.candidate, "served_by": served_by, "state": s["state"],
                "stratum": s["stratum"]["key"], "counted": s["counted"], "agree": s["agree"],
                "agreement": s["agreement"], "lower_bound": s["lower_bound"], "bar": s["bar"],
                "min_turns": s["min_turns"], "since": s["since"], "session": self.session,
                "session_left": self.session_left, "said": self.text + (f"; {why}" if why else "")}


class EarnBook:
    """The proxy's earned-route state (see the module's docstring)."""

    def __init__(self, source: Callable[[], list[dict]] | None = None) -> None:
        """``source``: reads the ledger's comparisons (``LedgerReader.earn_comparisons``), called
        once, when the book is first used or made ``ready``."""
        self._lock = threading.Lock()
        self._source = source
        # (route, candidate, stratum key) -> the comparisons: (at, verdict, request_id, stratum record)
        self._seen: dict[tuple[str, str, str], list[tuple[float, dict, str | None, dict]]] = {}
        self._folded: dict[tuple[str, str, str], tuple[Earn, Standing]] = {}
        self._on: dict[tuple[str, str], OrderedDict[str, None]] = {}  # (route, key) -> sessions served by it
        self._left: dict[tuple[str, str], OrderedDict[str, None]] = {}  # (route, key) -> sessions that left it

    # ---- evidence
    def observe(self, route: str, candidate: str, stratum: dict, verdict: dict, at: float,
                request_id: str | None = None) -> None:
        """One comparison of a turn of ``route`` in ``stratum`` with ``candidate``, as written."""
        with self._lock:
            self._read_source()
            self._observe(route, candidate, stratum, verdict, at, request_id)

    def _observe(self, route: str, candidate: str, stratum: dict, verdict: dict, at: float,
                 request_id: str | None) -> None:
        key = (route, candidate, stratum.get("key", "?"))
        self._seen.setdefault(key, []).append((at, verdict, request_id, stratum))
        folded = self._folded.get(key)
        if folded is not None:
            folded[1].step(verdict, at, folded[0], request_id)

    def load(self, rows: list[dict]) -> int:
        """The ledger's shadow rows (oldest first): each comparison carrying a stratum and a
        verdict is observed. Returns how many were."""
        with self._lock:
            return self._load(rows)

    def ready(self) -> int:
        """Read ``source`` now if it was not read yet (once); how many comparisons it held."""
        with self._lock:
            return self._read_source()

    def _read_source(self) -> int:  # the lock held
        source, self._source = self._source, None
        if source is None:
            return 0
        try:
            return self._load(source())
        except Exception:  # an unreadable ledger leaves the routes learning: never a failed turn
            log.exception("tokunseba: could not read the ledger's shadow comparisons for earned routes")
            return 0

    def _load(self, rows: list[dict]) -> int:  # the lock held
        n = 0
        for r in rows:
            c = r.get("comparison")
            if not isinstance(c, dict) or not isinstance(c.get("stratum"), dict) or not isinstance(c.get("verdict"), dict):
                continue
            cand = (c.get("earn") or {}).get("candidate") or r.get("endpoint")
            self._observe(r.get("route") or "?", cand or "?", c["stratum"], c["verdict"], r["started_at"],
                          r.get("request_id"))
            n += 1
        return n

    def _standing(self, route: str, earn: Earn, key: str, stratum: dict) -> Standing:
        """The fold of one stratum for ``earn`` (refolded when the route's earn changed: a reload)."""
        k = (route, earn.to, key)
        folded = self._folded.get(k)
        if folded is None or folded[0] != earn:
            st = Standing(route, stratum)
            for at, verdict, rid, _ in self._seen.get(k, ()):
                st.step(verdict, at, earn, rid)
            self._folded[k] = folded = (earn, st)
        return folded[1]

    def standings(self, route: str, earn: Earn) -> list[Standing]:
        """Every stratum of ``route`` seen with its candidate, oldest first."""
        with self._lock:
            self._read_source()
            keys = [(k[2], v[0][3]) for k, v in self._seen.items() if k[0] == route and k[1] == earn.to and v]
            return [self._standing(route, earn, key, stratum) for key, stratum in keys]

    # ---- a turn
    def status(self, route: str, earn: Earn, facts: TurnFacts) -> EarnCall:
        """Where a turn of ``route`` goes by its stratum's standing and its session."""
        stratum = stratum_of(route, facts).record()
        session = facts.who.session
        with self._lock:
            self._read_source()
            st = self._standing(route, earn, stratum["key"], stratum)
            left = session is not None and session in self._left.get((route, stratum["key"]), ())
            record = st.record(earn)
        text = record["said"]
        if left and record["state"] == EarnState.EARNED:
            text += f"; but session {session} left the candidate before (a session's tier only rises)"
        return EarnCall(route, earn.to, record, session, left, text)

    def served(self, call: EarnCall, *, on_candidate: bool) -> None:
        """A turn of ``call`` went to the candidate or not: a session whose turns of this stratum
        were on the candidate and now are not has left it for good."""
        if call.session is None:
            return
        k = (call.route, call.standing["stratum"]["key"])
        with self._lock:
            on = self._on.setdefault(k, OrderedDict())
            if on_candidate:
                _remember(on, call.session)
            elif call.session in on:
                _remember(self._left.setdefault(k, OrderedDict()), call.session)


def _remember(sessions: OrderedDict[str, None], session: str) -> None:
    sessions[session] = None
    sessions.move_to_end(session)
    while len(sessions) > MAX_SESSIONS:
        sessions.popitem(last=False)


def earn_rows(rows: list[dict], route: str | None = None) -> dict[tuple[str, str], dict]:
    """(route, candidate) -> the last ``earn`` config recorded with its comparisons (for a
    reader without the rules file)."""
    out: dict[tuple[str, str], dict] = {}
    for r in rows:
        c = r.get("comparison")
        e = c.get("earn") if isinstance(c, dict) else None
        if isinstance(e, dict) and e.get("candidate") and (route is None or r.get("route") == route):
            out[(r.get("route") or "?", e["candidate"])] = e
    return out


def earn_of(recorded: dict[str, Any]) -> Earn:
    """An ``Earn`` from its recorded form."""
    return Earn(recorded["candidate"], float(recorded.get("bar", 0.95)), int(recorded.get("min_turns", 200)),
                float(recorded.get("canary", 0.05)))
