"""Where caps are counted: each budget's window (spent, held) and the holds in flight, in the
ledger's own database — SQLite for one machine, PostgreSQL for a team — with admission atomic
and settlement exact.

- ``admit``: the check and the hold are one step. SQLite: one ``BEGIN IMMEDIATE`` transaction
  (the window found or opened, ``spent + held + hold <= limit`` checked, ``held`` raised, the hold
  row written). PostgreSQL: one conditional ``UPDATE … SET held = held + hold WHERE spent + held
  + hold <= limit RETURNING`` that writes the hold row in the same statement; the window of a
  rolling cap is opened under an advisory lock, so two proxies open the same one. Concurrent
  turns cannot slip past a cap, on one proxy or on many.
- ``settle``: the hold becomes the cost reported (``None``: nothing was reported — a cut stream —
  and the hold is kept as the charge). Charged to the window the turn started in, even when a
  newer window has opened since. Each charge is a row of ``budget_charges``.
- ``sweep``: holds whose lease ran out (a proxy killed mid-turn) are charged at their declared
  amount and removed, by any proxy on the ledger; a live proxy ``renew``s the leases of its own.

The tables are the ledger's (its migration ``0012_budgets``, applied when this store connects
if the ledger has not yet). Amounts are integers: micro-dollars or tokens. Errors of the database are raised as
``LedgerAway`` (the caller applies ``on_ledger_unavailable``).
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ..ledger import PG_SCHEMES, default_ledger_path, migrate_connection, url_scheme
from ..routing import Budget

LEASE_S = 120.0  # a hold not renewed for this long is swept (its proxy is gone)
BUSY_MS = 10_000


class LedgerAway(Exception):
    """The ledger holding the caps cannot be reached (one line)."""


@dataclass(frozen=True)
class Admission:
    """One budget's answer to a turn: admitted with a hold (``hold_id``), or not (``ok`` False);
    the window's figures as they stood with this turn's hold counted (or without, when refused)."""

    budget: Budget
    ok: bool
    spent: int
    held: int
    window_start: float
    window_end: float
    hold_id: str | None = None
    scope_key: str = ""


@dataclass(frozen=True)
class WindowRow:
    budget: str
    scope_key: str
    window_start: float
    window_end: float
    unit: str
    limit: int
    spent: int
    held: int


class BudgetStore:
    """The caps' counters in one database (``target``: a SQLite path or a postgresql:// URL)."""

    def __init__(self, target: str | os.PathLike | None, *, owner: str, lease_s: float = LEASE_S,
                 readonly: bool = False) -> None:
        self.owner, self.lease_s, self.readonly = owner, lease_s, readonly
        self.target = os.fspath(target) if target is not None else str(default_ledger_path())
        self.pg = url_scheme(self.target) in PG_SCHEMES
        self._lock = threading.Lock()
        self._conn: Any = None
        self.mine: dict[str, int] = {}  # hold id -> amount, of this proxy's holds in flight
        self._open: dict[tuple[str, str], tuple[float, float]] = {}  # (budget, scope key) -> its current window

    # ---- connection
    def _connect(self) -> Any:
        if self._conn is not None:
            return self._conn
        conn: Any
        try:
            if self.pg:
                import psycopg

                conn = psycopg.connect(self.target, autocommit=True, connect_timeout=5)
                if self.readonly:  # tokunseba budgets: a read-only role is enough
                    self._conn = conn
                    return conn
                migrate_connection(conn, postgresql=True)  # the ledger's migrations (0012_budgets)
            else:
                if self.readonly:
                    conn = sqlite3.connect(f"file:{quote(self.target)}?mode=ro", uri=True, check_same_thread=False)
                    self._conn = conn
                    return conn
                Path(self.target).parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(self.target, isolation_level=None, check_same_thread=False)
                conn.execute(f"PRAGMA busy_timeout={BUSY_MS}")
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                migrate_connection(conn, postgresql=False)  # the ledger's migrations (0012_budgets)
        except Exception as e:
            raise LedgerAway(f"cannot reach the ledger for budgets: {' '.join(str(e).split())}") from None
        self._conn = conn
        return conn

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            finally:
                self._conn = None

    def _run(self, fn: Any) -> Any:
        with self._lock:
            try:
                return fn(self._connect())
            except LedgerAway:
                raise
            except Exception as e:
                if self.pg:  # a broken connection is made again at the next call
                    self.close()
                elif isinstance(e, sqlite3.Error):
                    try:
                        self._conn.execute("ROLLBACK")
                    except sqlite3.Error:
                        pass
                raise LedgerAway(f"the ledger for budgets failed: {' '.join(str(e).split())}") from None

    # ---- admission
    def admit(self, wanted: Iterable[tuple[Budget, str, bool]], *, request_id: str, now: float) -> list[Admission]:
        """Hold each budget's declared amount (``wanted``: budgets with their scope keys, and whether
        the cap is enforced: ``on_limit: warn`` holds past it), all or none: the answers in order,
        stopping at the first refused (whose holds taken before it in this call are given back). A
        refused answer has ``ok`` False."""
        wanted = list(wanted)
        if not wanted:
            return []
        if self.pg:
            return self._run(lambda c: self._admit_pg(c, wanted, request_id, now))
        return self._run(lambda c: self._admit_sqlite(c, wanted, request_id, now))

    def _hold_id(self, request_id: str, budget: str) -> str:
        return f"{request_id}:{budget}:{secrets.token_hex(4)}"

    def _admit_sqlite(self, c: sqlite3.Connection, wanted: list[tuple[Budget, str, bool]], rid: str,
                      now: float) -> list[Admission]:
        out: list[Admission] = []
        c.execute("BEGIN IMMEDIATE")
        for b, key, enforce in wanted:
            # the window this turn falls in: known from a turn before (a window's bounds never change), or
            # found or opened now; then the check and the hold in one conditional UPDATE
            ws, we = self._open.get((b.name, key), (0.0, 0.0))
            if not ws <= now < we:
                ws, we = self._window_sqlite(c, b, key, now)
                self._open[(b.name, key)] = (ws, we)
            row = c.execute("UPDATE budget_windows SET held = held + ?, limit_amount = ? WHERE budget = ? AND "
                            "scope_key = ? AND window_start = ? AND (? = 0 OR spent + held + ? <= ?) "
                            "RETURNING spent, held", (b.hold, b.limit, b.name, key, ws, int(enforce), b.hold,
                                                      b.limit)).fetchone()
            if row is None:
                spent, held = c.execute("SELECT spent, held FROM budget_windows WHERE budget = ? AND scope_key = ? "
                                        "AND window_start = ?", (b.name, key, ws)).fetchone()
                c.execute("ROLLBACK")
                return [Admission(b, False, spent, held, ws, we, scope_key=key)]  # the holds above rolled back
            hid = self._hold_id(rid, b.name)
            c.execute("INSERT INTO budget_holds VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                      (hid, b.name, key, ws, b.hold, rid, self.owner, now + self.lease_s))
            out.append(Admission(b, True, row[0], row[1], ws, we, hid, key))
        c.execute("COMMIT")
        for a in out:
            self.mine[a.hold_id or ""] = a.budget.hold
        return out

    @staticmethod
    def _window_sqlite(c: sqlite3.Connection, b: Budget, key: str, now: float) -> tuple[float, float]:
        row = c.execute("SELECT window_start, window_end FROM budget_windows WHERE budget = ? AND scope_key = ? AND "
                        "window_start <= ? AND window_end > ? ORDER BY window_start DESC LIMIT 1",
                        (b.name, key, now, now)).fetchone()
        if row is not None:
            return row
        ws, we = b.window.bounds(now)
        c.execute("INSERT OR IGNORE INTO budget_windows (budget, scope_key, window_start, window_end, unit, "
                  "limit_amount) VALUES (?, ?, ?, ?, ?, ?)", (b.name, key, ws, we, str(b.unit), b.limit))
        return ws, we

    def _admit_pg(self, c: Any, wanted: list[tuple[Budget, str, bool]], rid: str, now: float) -> list[Admission]:
        out: list[Admission] = []
        for b, key, enforce in wanted:
            ws, we = self._open.get((b.name, key), (0.0, 0.0))
            if not ws <= now < we:  # known from a turn before, else found or opened now
                ws, we = self._window_pg(c, b, key, now)
                self._open[(b.name, key)] = (ws, we)
            hid = self._hold_id(rid, b.name)
            row = c.execute(
                "WITH up AS (UPDATE budget_windows SET held = held + %(hold)s, limit_amount = %(limit)s "
                "WHERE budget = %(b)s AND scope_key = %(k)s AND window_start = %(ws)s "
                "AND (%(enforce)s = 0 OR spent + held + %(hold)s <= %(limit)s) RETURNING spent, held) "
                "INSERT INTO budget_holds (hold_id, budget, scope_key, window_start, amount, request_id, owner, "
                "expires_at) SELECT %(id)s, %(b)s, %(k)s, %(ws)s, %(hold)s, %(rid)s, %(owner)s, %(exp)s FROM up "
                "RETURNING (SELECT spent FROM up), (SELECT held FROM up)",
                dict(hold=b.hold, limit=b.limit, enforce=int(enforce), b=b.name, k=key, ws=ws, id=hid, rid=rid,
                     owner=self.owner,
                     exp=now + self.lease_s)).fetchone()
            if row is None:
                cur = c.execute("SELECT spent, held FROM budget_windows WHERE budget = %s AND scope_key = %s "
                                "AND window_start = %s", (b.name, key, ws)).fetchone() or (0, 0)
                for a in out:  # all or none: what this call held before is given back
                    self._release_pg(c, a)
                return [Admission(b, False, cur[0], cur[1], ws, we, scope_key=key)]
            self.mine[hid] = b.hold
            out.append(Admission(b, True, row[0], row[1], ws, we, hid, key))
        return out

    @staticmethod
    def _window_pg(c: Any, b: Budget, key: str, now: float) -> tuple[float, float]:
        find = ("SELECT window_start, window_end FROM budget_windows WHERE budget = %s AND scope_key = %s AND "
                "window_start <= %s AND window_end > %s ORDER BY window_start DESC LIMIT 1")
        row = c.execute(find, (b.name, key, now, now)).fetchone()
        if row is not None:
            return row
        with c.transaction():  # two proxies open one window: the second finds the first's
            c.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"tokunseba-budget:{b.name}:{key}",))
            row = c.execute(find, (b.name, key, now, now)).fetchone()
            if row is not None:
                return row
            ws, we = b.window.bounds(now)
            c.execute("INSERT INTO budget_windows (budget, scope_key, window_start, window_end, unit, limit_amount) "
                      "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                      (b.name, key, ws, we, str(b.unit), b.limit))
            return ws, we

    def _release_pg(self, c: Any, a: Admission) -> None:
        c.execute("WITH h AS (DELETE FROM budget_holds WHERE hold_id = %s RETURNING budget, scope_key, window_start, "
                  "amount) UPDATE budget_windows w SET held = w.held - h.amount FROM h WHERE w.budget = h.budget "
                  "AND w.scope_key = h.scope_key AND w.window_start = h.window_start", (a.hold_id,))
        self.mine.pop(a.hold_id or "", None)

    def release(self, admissions: Iterable[Admission]) -> None:
        """Give holds back uncharged (the turn was never sent: refused by another step)."""
        held = [a for a in admissions if a.ok and a.hold_id]
        if not held:
            return
        if self.pg:
            def go_pg(c: Any) -> None:
                for a in held:
                    self._release_pg(c, a)
            self._run(go_pg)
            return

        def go(c: sqlite3.Connection) -> None:
            c.execute("BEGIN IMMEDIATE")
            for a in held:
                if c.execute("DELETE FROM budget_holds WHERE hold_id = ?", (a.hold_id,)).rowcount:
                    c.execute("UPDATE budget_windows SET held = held - ? WHERE budget = ? AND scope_key = ? AND "
                              "window_start = ?", (a.budget.hold, a.budget.name, a.scope_key, a.window_start))
            c.execute("COMMIT")
            for a in held:
                self.mine.pop(a.hold_id or "", None)
        self._run(go)

    # ---- settlement
    def settle(self, admissions: Iterable[Admission], amounts: dict[str, int | None], *, request_id: str,
               now: float) -> None:
        """Each hold becomes its budget's reported amount (``amounts``: budget name -> micro-dollars
        or tokens; None: nothing reported, the hold is kept as the charge)."""
        held = [a for a in admissions if a.ok and a.hold_id]
        if not held:
            return
        if self.pg:
            self._run(lambda c: [self._settle_pg(c, a, amounts.get(a.budget.name), request_id, now) for a in held])
        else:
            self._run(lambda c: self._settle_sqlite(c, held, amounts, request_id, now))
        for a in held:
            self.mine.pop(a.hold_id or "", None)

    @staticmethod
    def _settle_sqlite(c: sqlite3.Connection, held: list[Admission], amounts: dict[str, int | None], rid: str,
                       now: float) -> None:
        c.execute("BEGIN IMMEDIATE")
        for a in held:
            cost = amounts.get(a.budget.name)
            charge, kind = (a.budget.hold, "kept_hold") if cost is None else (cost, "reported")
            gone = c.execute("DELETE FROM budget_holds WHERE hold_id = ?", (a.hold_id,)).rowcount
            if gone:
                c.execute("UPDATE budget_windows SET held = held - ?, spent = spent + ? WHERE budget = ? AND "
                          "scope_key = ? AND window_start = ?", (a.budget.hold, charge, a.budget.name, a.scope_key,
                                                                  a.window_start))
            else:  # swept meanwhile (charged its hold then): the difference now
                charge, kind = charge - a.budget.hold, "after_sweep"
                c.execute("UPDATE budget_windows SET spent = spent + ? WHERE budget = ? AND scope_key = ? AND "
                          "window_start = ?", (charge, a.budget.name, a.scope_key, a.window_start))
            c.execute("INSERT INTO budget_charges (budget, scope_key, window_start, request_id, amount, kind, ts) "
                      "VALUES (?, ?, ?, ?, ?, ?, ?)",
                      (a.budget.name, a.scope_key, a.window_start, rid, charge, kind, now))
        c.execute("COMMIT")

    @staticmethod
    def _settle_pg(c: Any, a: Admission, cost: int | None, rid: str, now: float) -> None:
        charge, kind = (a.budget.hold, "kept_hold") if cost is None else (cost, "reported")
        row = c.execute(
            "WITH h AS (DELETE FROM budget_holds WHERE hold_id = %(id)s RETURNING budget, scope_key, window_start, "
            "amount), up AS (UPDATE budget_windows w SET held = w.held - h.amount, spent = w.spent + %(charge)s "
            "FROM h WHERE w.budget = h.budget AND w.scope_key = h.scope_key AND w.window_start = h.window_start "
            "RETURNING w.spent) INSERT INTO budget_charges (budget, scope_key, window_start, request_id, amount, kind, "
            "ts) SELECT budget, scope_key, window_start, %(rid)s, %(charge)s, %(kind)s, %(ts)s FROM h RETURNING 1",
            dict(id=a.hold_id, charge=charge, rid=rid, kind=kind, ts=now)).fetchone()
        if row is None:  # swept meanwhile (charged its hold then): the difference now
            with c.transaction():
                c.execute("UPDATE budget_windows SET spent = spent + %s WHERE budget = %s AND scope_key = %s AND "
                          "window_start = %s", (charge - a.budget.hold, a.budget.name, a.scope_key, a.window_start))
                c.execute("INSERT INTO budget_charges (budget, scope_key, window_start, request_id, amount, kind, ts) "
                          "VALUES (%s, %s, %s, %s, %s, 'after_sweep', %s)",
                          (a.budget.name, a.scope_key, a.window_start, rid, charge - a.budget.hold, now))

    # ---- leases
    def renew(self, now: float) -> None:
        """This proxy's holds in flight live another lease."""
        if not self.mine:
            return
        ph = "%s" if self.pg else "?"
        self._run(lambda c: c.execute(f"UPDATE budget_holds SET expires_at = {ph} WHERE owner = {ph}",
                                      (now + self.lease_s, self.owner)))

    def sweep(self, now: float) -> int:
        """Holds whose lease ran out, charged at their declared amount and removed: how many."""
        if self.pg:
            def go_pg(c: Any) -> int:
                rows = c.execute(
                    "WITH gone AS (DELETE FROM budget_holds WHERE expires_at < %(now)s RETURNING budget, scope_key, "
                    "window_start, amount, request_id), s AS (SELECT budget, scope_key, window_start, sum(amount) AS "
                    "total FROM gone GROUP BY budget, scope_key, window_start), up AS (UPDATE budget_windows w SET "
                    "held = w.held - s.total, spent = w.spent + s.total FROM s WHERE w.budget = s.budget AND "
                    "w.scope_key = s.scope_key AND w.window_start = s.window_start RETURNING 1) INSERT INTO "
                    "budget_charges (budget, scope_key, window_start, request_id, amount, kind, ts) SELECT budget, "
                    "scope_key, window_start, request_id, amount, 'swept', %(now)s FROM gone RETURNING 1",
                    dict(now=now)).fetchall()
                return len(rows)
            return self._run(go_pg)

        def go(c: sqlite3.Connection) -> int:
            c.execute("BEGIN IMMEDIATE")
            gone = c.execute("SELECT hold_id, budget, scope_key, window_start, amount, request_id FROM budget_holds "
                             "WHERE expires_at < ?", (now,)).fetchall()
            for hid, b, k, ws, amount, rid in gone:
                c.execute("DELETE FROM budget_holds WHERE hold_id = ?", (hid,))
                c.execute("UPDATE budget_windows SET held = held - ?, spent = spent + ? WHERE budget = ? AND "
                          "scope_key = ? AND window_start = ?", (amount, amount, b, k, ws))
                c.execute("INSERT INTO budget_charges (budget, scope_key, window_start, request_id, amount, kind, ts) "
                          "VALUES (?, ?, ?, ?, ?, 'swept', ?)", (b, k, ws, rid, amount, now))
            c.execute("COMMIT")
            return len(gone)
        return self._run(go)

    # ---- reads (tokunseba budgets, the tests)
    def has_tables(self) -> bool:
        """Whether the ledger holds the caps' tables yet (a read-only reader's first question)."""
        sql = ("SELECT 1 FROM information_schema.tables WHERE table_name = 'budget_windows'" if self.pg
               else "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'budget_windows'")
        return self._run(lambda c: c.execute(sql).fetchone() is not None)

    def windows(self, now: float | None = None) -> list[WindowRow]:
        """Every window that is open at ``now`` (None: every window kept), newest first."""
        ph = "%s" if self.pg else "?"
        where, params = ("", ()) if now is None else (f" WHERE window_end > {ph}", (now,))

        def go(c: Any) -> list[WindowRow]:
            rows = c.execute("SELECT budget, scope_key, window_start, window_end, unit, limit_amount, spent, held "
                             f"FROM budget_windows{where} ORDER BY budget, scope_key, window_start DESC",
                             params).fetchall()
            return [WindowRow(*r) for r in rows]
        return self._run(go)

    def charges(self, budget: str | None = None) -> list[dict]:
        ph = "%s" if self.pg else "?"
        where, params = ("", ()) if budget is None else (f" WHERE budget = {ph}", (budget,))

        def go(c: Any) -> list[dict]:
            rows = c.execute("SELECT budget, scope_key, window_start, request_id, amount, kind, ts FROM budget_charges"
                             f"{where} ORDER BY id", params).fetchall()
            keys = ("budget", "scope_key", "window_start", "request_id", "amount", "kind", "ts")
            return [dict(zip(keys, r)) for r in rows]
        return self._run(go)

    def holds(self) -> list[dict]:
        def go(c: Any) -> list[dict]:
            rows = c.execute("SELECT hold_id, budget, scope_key, window_start, amount, request_id, owner, expires_at "
                             "FROM budget_holds").fetchall()
            keys = ("hold_id", "budget", "scope_key", "window_start", "amount", "request_id", "owner", "expires_at")
            return [dict(zip(keys, r)) for r in rows]
        return self._run(go)
