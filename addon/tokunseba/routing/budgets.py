"""Spending caps as the rules file states them (``budgets:``), read and checked: ``Budget``,
its ``Window``, the policies ``OnLimit`` and ``OnLedgerUnavailable``, and ``read_budgets``.

```yaml
on_ledger_unavailable: serve      # or refuse: what a turn under a cap does when the ledger is away
budgets:
  - name: team-daily
    scope: {endpoint: anthropic, model: "claude-*"}   # any of endpoint, route, client, model, session, agent
    shared: true                  # the whole team's ledger (PostgreSQL), not only this proxy
    usd: 5.00                     # or tokens: 2000000
    window: day                   # day | week | month (calendar, in tz) | a rolling length: 5h, 30m, 2d
    tz: Europe/Berlin
    warn_at: 0.8                  # the soft line: a console line and a ledger mark
    on_limit: refuse              # refuse | reroute | warn
    hold: 0.10                    # held while a turn of this scope is in flight (declared, never estimated)
```

A scope value is a name or a glob (``claude-*``), or a list of them; a turn is in scope when
every key holds. Money is kept in integer micro-dollars (``usd: 0.10`` is 100000), read from
the YAML text as a decimal, never through a float. A rolling window opens at the first turn
after the previous one closed and lasts its length (as the providers' own 5-hour windows do);
a calendar window is the day, week (from Monday) or month in its time zone.

Each mistake is one ``FILE:LINE: what is wrong`` of the ``YamlReader``. Pure: no I/O.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation
from enum import StrEnum
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from yaml.nodes import Node, ScalarNode, SequenceNode

from .yaml_reader import YamlReader, is_null

MICROS = 1_000_000  # micro-dollars in a dollar
SCOPE_KEYS = ("endpoint", "route", "client", "model", "session", "agent")
BUDGET_KEYS = ("name", "scope", "shared", "usd", "tokens", "window", "tz", "warn_at", "on_limit", "hold")
CALENDAR = ("day", "week", "month")
_ROLLING = re.compile(r"^(\d+)\s*(m|h|d)$")
_UNIT_S = {"m": 60, "h": 3600, "d": 86400}


class OnLimit(StrEnum):
    """A budget's ``on_limit``: what a turn does when its hold would pass the cap."""

    REFUSE = "refuse"  # answered in the client's own "stop now" shape (protocols' stop_now)
    REROUTE = "reroute"  # handed to the next route whose when matches, recorded
    WARN = "warn"  # served, with a console line and a ledger mark


class OnLedgerUnavailable(StrEnum):
    """The file's ``on_ledger_unavailable``: a turn under a cap while the ledger cannot be reached."""

    SERVE = "serve"  # served without a hold, said on the console and in the ledger
    REFUSE = "refuse"  # answered like a reached cap: spending cannot be checked


class Unit(StrEnum):
    USD = "usd"  # integer micro-dollars
    TOKENS = "tokens"  # input + output tokens as reported


@dataclass(frozen=True)
class Window:
    """A calendar window (``day``/``week``/``month`` in ``tz``) or a rolling one (``seconds``)."""

    kind: str  # day | week | month | rolling
    tz: str = "UTC"
    seconds: int = 0  # rolling only

    def bounds(self, now: float) -> tuple[float, float]:
        """(start, end) of the window a turn starting at ``now`` opens: a calendar window's own
        bounds; a rolling one starts now."""
        if self.kind == "rolling":
            return now, now + self.seconds
        zone = ZoneInfo(self.tz)
        t = datetime.fromtimestamp(now, zone)
        start = t.replace(hour=0, minute=0, second=0, microsecond=0)
        if self.kind == "week":
            start -= timedelta(days=start.weekday())
            end = start + timedelta(days=7)
        elif self.kind == "month":
            start = start.replace(day=1)
            end = (start + timedelta(days=32)).replace(day=1)
        else:
            end = start + timedelta(days=1)
        # wall-clock arithmetic, then each bound read in the zone again (a DST day has 23 or 25 hours)
        start = start.replace(tzinfo=None).replace(tzinfo=zone)
        end = end.replace(tzinfo=None).replace(tzinfo=zone)
        return start.timestamp(), end.timestamp()

    def text(self) -> str:
        if self.kind == "rolling":
            s = self.seconds
            n, unit = next(((s // u, k) for k, u in (("d", 86400), ("h", 3600), ("m", 60)) if s % u == 0), (s, "s"))
            return f"rolling {n}{unit}"
        return f"{self.kind} ({self.tz})"


@dataclass(frozen=True)
class Budget:
    name: str
    scope: dict[str, tuple[str, ...]]  # key -> names or globs (each key must hold)
    unit: Unit
    limit: int  # micro-dollars or tokens
    window: Window
    hold: int  # the declared amount held while a turn of this scope is in flight (same unit)
    shared: bool = False
    warn_at: float | None = None
    on_limit: OnLimit = OnLimit.REFUSE
    line: int = 0

    def matches(self, facts: dict[str, str | None]) -> bool:
        """Every scope key holds for the turn (``facts``: endpoint, route, client, model, session, agent)."""
        for key, globs in self.scope.items():
            value = facts.get(key)
            if value is None or not any(fnmatch.fnmatchcase(value, g) for g in globs):
                return False
        return True

    def amount(self, n: int) -> str:
        """An amount in this budget's unit, as said to people: ``$4.90`` or ``120000 tokens``."""
        return money(n) if self.unit == Unit.USD else f"{n} tokens"


def money(micros: int) -> str:
    """``$4.90``: cents when exact, else every micro-dollar digit."""
    sign, m = ("-" if micros < 0 else ""), abs(micros)
    whole, frac = divmod(m, MICROS)
    digits = f"{frac:06d}".rstrip("0")
    return f"{sign}${whole}.{digits.ljust(2, '0')}"


def _decimal_micros(r: YamlReader, node: Node, what: str) -> int | None:
    """A dollar amount (YAML number) as integer micro-dollars, from its text (never a float)."""
    if r.number(node) is None or not isinstance(node, ScalarNode):
        r.error(node, f"{what} must be a number of dollars, got {r.got(node)}")
        return None
    try:
        d = Decimal(node.value.replace("_", ""))
    except InvalidOperation:
        d = Decimal(str(r.number(node)))
    if not d.is_finite() or d < 0:
        r.error(node, f"{what} must be a number of dollars ≥ 0, got {r.got(node)}")
        return None
    micros = d * MICROS
    if micros != micros.to_integral_value():
        r.error(node, f"{what}: {node.value} has more digits than a micro-dollar")
        return None
    return int(micros)


def _window(r: YamlReader, node: Node, tz_node: Node | None, where: str) -> Window | None:
    text = r.value(node, "text", f"{where}: window")
    if text is None:
        return None
    tz = "UTC"
    if tz_node is not None:
        tz = r.value(tz_node, "text", f"{where}: tz") or "UTC"
        try:
            ZoneInfo(tz)
        except (ZoneInfoNotFoundError, ValueError):
            r.error(tz_node, f"{where}: tz {tz!r} is not a time zone (e.g. Europe/Berlin, UTC)")
            return None
    if text in CALENDAR:
        return Window(text, tz)
    m = _ROLLING.match(text.strip())
    if m is None or int(m.group(1)) == 0:
        r.error(node, f"{where}: window must be day, week, month or a rolling length like 5h, 30m, 2d; got {text!r}")
        return None
    if tz_node is not None:
        r.error(tz_node, f"{where}: tz applies to a calendar window (day, week, month), not to {text!r}")
    return Window("rolling", seconds=int(m.group(1)) * _UNIT_S[m.group(2)])


def _scope(r: YamlReader, node: Node, where: str) -> dict[str, tuple[str, ...]] | None:
    if is_null(node):
        return {}
    m = r.mapping(node, f"{where}: scope", SCOPE_KEYS)
    if m is None:
        return None
    out: dict[str, tuple[str, ...]] = {}
    for key, (_, vn) in m.items():
        if isinstance(vn, SequenceNode) or isinstance(vn, ScalarNode):
            v = r.value(vn, "texts", f"{where}: scope.{key}")
            if v is not None:
                out[key] = tuple(v)
        else:
            r.error(vn, f"{where}: scope.{key} must be a name, a glob or a list of them, got {r.got(vn)}")
    return out


def read_budgets(r: YamlReader, node: Node) -> list[Budget]:
    """The ``budgets:`` list; every mistake an error of ``r`` with its line."""
    if not isinstance(node, SequenceNode):
        r.error(node, f"budgets must be a list, got {r.got(node)}")
        return []
    out: list[Budget] = []
    first: dict[str, int] = {}
    for i, bn in enumerate(node.value, 1):
        m = r.mapping(bn, f"budget #{i}", BUDGET_KEYS)
        if m is None:
            continue
        before = len(r.problems)
        name = r.entry_name(m, bn, "budget", i, first)
        where = f"budget {name!r}" if name else f"budget #{i}"
        scope = _scope(r, m["scope"][1], where) if "scope" in m else {}
        if ("usd" in m) == ("tokens" in m):
            r.error(bn, f"{where} needs one limit: usd: DOLLARS or tokens: N")
        unit = Unit.USD if "usd" in m else Unit.TOKENS
        limit = hold = None
        if "usd" in m:
            limit = _decimal_micros(r, m["usd"][1], f"{where}: usd")
        elif "tokens" in m:
            limit = r.value(m["tokens"][1], "int", f"{where}: tokens")
        if "hold" not in m:
            r.error(bn, f"{where} has no 'hold': the amount held while one of its turns is in flight "
                        f"(a number you declare, e.g. hold: 0.10; tokunseba never estimates it)")
        elif unit == Unit.USD:
            hold = _decimal_micros(r, m["hold"][1], f"{where}: hold")
        else:
            hold = r.value(m["hold"][1], "int", f"{where}: hold")
        if isinstance(limit, int) and isinstance(hold, int) and hold > limit:
            r.error(m["hold"][1], f"{where}: hold {hold} is more than the limit {limit}: no turn could start")
        window = _window(r, m["window"][1], m["tz"][1] if "tz" in m else None, where) if "window" in m else None
        if "window" not in m:
            r.error(bn, f"{where} has no 'window' (day, week, month, or a rolling length like 5h)")
        shared = bool(r.value(m["shared"][1], "bool", f"{where}: shared")) if "shared" in m else False
        warn_at = None
        if "warn_at" in m:
            v = r.number(m["warn_at"][1])
            if v is None or not 0 < v < 1:
                r.error(m["warn_at"][1], f"{where}: warn_at must be a fraction between 0 and 1 (0.8 = at 80%), "
                                         f"got {r.got(m['warn_at'][1])}")
            else:
                warn_at = float(v)
        on_limit = OnLimit.REFUSE
        if "on_limit" in m:
            v = r.value(m["on_limit"][1], "text", f"{where}: on_limit")
            words = [p.value for p in OnLimit]
            if v is not None and v not in words:
                r.error(m["on_limit"][1], f"{where}: on_limit must be one of: {', '.join(words)}; got {v!r}")
            elif v is not None:
                on_limit = OnLimit(v)
        if len(r.problems) == before and name and scope is not None and window is not None \
                and isinstance(limit, int) and isinstance(hold, int):
            out.append(Budget(name, scope, unit, limit, window, hold, shared, warn_at, on_limit, r.line(bn)))
    return out


def budget_scope_problems(r: YamlReader, budgets: list[Budget], endpoints: set[str], routes: set[str],
                          clients: set[str]) -> None:
    """Scope names that name nothing the file knows (an endpoint, route or client that does not
    exist): errors of ``r``, at the budget's line. Globs are not checked."""
    known = {"endpoint": endpoints, "route": routes, "client": clients}
    for b in budgets:
        for key, names in b.scope.items():
            for n in names:
                if key in known and not any(ch in n for ch in "*?[") and n not in known[key]:
                    r.error(b.line, f"budget {b.name!r}: scope.{key}: unknown {key} {n!r} "
                                    f"(known: {', '.join(sorted(known[key]))})")


@dataclass
class BudgetSettings:
    """What the rules file says of caps as a whole."""

    budgets: list[Budget] = field(default_factory=list)
    on_ledger_unavailable: OnLedgerUnavailable = OnLedgerUnavailable.SERVE
