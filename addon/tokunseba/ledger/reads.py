"""The ledger's read half: what the CLI reads (turns, one turn, its events, shadows, stats,
the applied migrations, the subscription windows).

Contract: reads raise (``LedgerError`` and the database's errors: the CLI reports them); a
ledger older than a column or table reads as having none of it (no turn of a session, no
instance), never an error.
"""

from __future__ import annotations

from typing import Any

from .. import jsonc
from .connection import LedgerConnection
from .quota import TABLE as QUOTA_TABLE, latest as quota_latest
from .schema import JSON_COLUMNS, SHADOW_JSON_COLUMNS, USAGE_FIELDS
from .stats import compute_stats


class LedgerReader(LedgerConnection):
    """The read half of the ledger (the CLI's): open it with ``readonly=True``."""

    def schema(self) -> list[str]:
        """Names of the applied migrations, in order."""
        if not self._has_table("_migrations"):
            return []
        return [r["name"] for r in self._query("SELECT name FROM _migrations ORDER BY rowid")]

    @staticmethod
    def _decode(row: dict) -> dict:
        for c in JSON_COLUMNS:
            if row.get(c) is not None:
                row[c] = jsonc.loads(row[c])
        if row.get("stream") is not None:
            row["stream"] = bool(row["stream"])
        return row

    def turns(self, since: float | None = None, limit: int | None = None, *, session: str | None = None,
              instance: str | None = None) -> list[dict]:
        """Turns, newest first; only those of ``session`` (a session id) and of proxy
        ``instance`` when given."""
        if not self._has_table("turns"):
            return []
        sql = "SELECT * FROM turns"
        where: list[str] = []
        params: list[Any] = []
        if since is not None:
            where.append("started_at >= ?")
            params.append(since)
        if session is not None:
            if "0005_turn_session" not in self.schema():  # a ledger older than sessions: none known
                return []
            where.append("session_id = ?")
            params.append(session)
        if instance is not None:
            if "instance" not in self._columns("turns"):
                return []  # a ledger older than instances
            where.append("instance = ?")
            params.append(instance)
        if where:
            sql += " WHERE " + " AND ".join(where)
        args = tuple(params)
        sql += " ORDER BY started_at DESC, rowid DESC"
        if limit is not None:
            sql += " LIMIT ?"
            args = (*args, limit)
        return [self._decode(r) for r in self._query(sql, args)]

    def count_turns(self, *, instance: str | None = None) -> int:
        """How many turns the ledger holds (of proxy ``instance`` when given)."""
        if not self._has_table("turns"):
            return 0
        if instance is not None:
            if "instance" not in self._columns("turns"):
                return 0
            return int(self._query("SELECT count(*) AS n FROM turns WHERE instance = ?", (instance,))[0]["n"])
        return int(self._query("SELECT count(*) AS n FROM turns")[0]["n"])

    def get_turn(self, prefix: str) -> dict:
        """The turn whose request id is ``prefix`` or starts with it (when unique)."""
        prefix = prefix.strip()
        if not prefix:
            raise LookupError("empty request id")
        if not self._has_table("turns"):
            raise LookupError(f"no turn with request id {prefix!r}")
        rows = self._query("SELECT * FROM turns WHERE request_id=?", (prefix,))
        if not rows:
            # a range on the primary key (uses its index); ids compare as UTF-8 bytes
            match, params = self.dialect.prefix_match("request_id", prefix)
            rows = self._query(f"SELECT * FROM turns WHERE {match} ORDER BY started_at DESC LIMIT 6", params)
        if not rows:
            raise LookupError(f"no turn with request id {prefix!r}")
        if len(rows) > 1:
            ids = ", ".join(r["request_id"] for r in rows[:5])
            more = ", ..." if len(rows) > 5 else ""
            raise LookupError(f"request id prefix {prefix!r} is ambiguous: {ids}{more}")
        turn = self._decode(rows[0])
        if self._has_table("bodies"):
            for b in self._query(
                "SELECT request_body, response_body FROM bodies WHERE request_id=?", (turn["request_id"],)
            ):
                turn.update(b)
        return turn

    def events(self, request_id: str) -> list[dict]:
        if not self._has_table("events"):
            return []
        rows = self._query("SELECT id, ts, kind, data FROM events WHERE request_id=? ORDER BY id", (request_id,))
        for r in rows:
            r["data"] = None if r["data"] is None else jsonc.loads(r["data"])
        return rows

    def quota_windows(self) -> list[dict]:
        """Each account's windows now: the newest state of each (ledger/quota.py ``latest``)."""
        return quota_latest(self._query) if self._has_table(QUOTA_TABLE) else []

    def turns_with_event(self, kind: str, since: float | None = None) -> int:
        """How many turns (started since ``since``) have an event of ``kind``."""
        if not self._has_table("events"):
            return 0
        sql = "SELECT COUNT(DISTINCT e.request_id) AS n FROM events e"
        if since is None:
            return int(self._query(sql + " WHERE e.kind = ?", (kind,))[0]["n"])
        sql += " JOIN turns t ON t.request_id = e.request_id WHERE e.kind = ? AND t.started_at >= ?"
        return int(self._query(sql, (kind, since))[0]["n"])

    def shadows(self, *, since: float | None = None, request_id: str | None = None,
                bodies: bool = False) -> list[dict]:
        """Shadow / shadow_skipped / replay rows, oldest first, with their primary turn's
        latency, usage, host and route (``primary_*``)."""
        if not self._has_table("shadows"):
            return []
        cols = "s.*" if bodies else ", ".join(
            f"s.{c}" for c in ("id", "request_id", "kind", "started_at", "route", "endpoint", "target_protocol",
                               "model", "origin", "at_original", "status", "latency_ms", "error", "usage_protocol",
                               "usage_reported", *(f"usage_{f}" for f in USAGE_FIELDS), "dropped", "facts",
                               "primary_facts", "comparison"))
        prim = ", ".join(f"t.{c} AS primary_{c}" for c in (
            "rule", "endpoint", "host", "model_used", "requested_model", "outcome", "status", "latency_ms",
            "usage_protocol", "usage_reported", *(f"usage_{f}" for f in USAGE_FIELDS)))
        where: list[str] = []
        params: list[Any] = []
        if since is not None:
            where.append("s.started_at >= ?")
            params.append(since)
        if request_id is not None:
            where.append("s.request_id = ?")
            params.append(request_id)
        sql = (f"SELECT {cols}, {prim} FROM shadows s LEFT JOIN turns t ON t.request_id = s.request_id"
               + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY s.started_at, s.id")
        rows = self._query(sql, tuple(params))
        for r in rows:
            for c in (*SHADOW_JSON_COLUMNS, "primary_usage_reported"):
                if r.get(c) is not None:
                    r[c] = jsonc.loads(r[c])
        return rows

    def earn_comparisons(self) -> list[dict]:
        """The shadow rows that carry an earned route's comparison (a ``stratum`` in their
        ``comparison``), oldest first, with only what routing/earn.py's ``EarnBook.load`` reads
        (``request_id``, ``started_at``, ``route``, ``endpoint``, ``comparison``): read at every
        proxy start, so no join and no other column (20,000 rows: ~5× faster than ``shadows``)."""
        if not self._has_table("shadows"):
            return []
        rows = self._query("SELECT request_id, started_at, route, endpoint, comparison FROM shadows"
                           " WHERE comparison LIKE '%\"stratum\"%' ORDER BY started_at, id")
        for r in rows:
            r["comparison"] = jsonc.loads(r["comparison"])
        return rows

    def budget_use(self, since: float | None = None) -> list[dict]:
        """Each budget window's charges in time order (``budget``, ``unit``, ``limit_amount``,
        ``window_start``, ``window_end``, ``amount``, ``ts``), for `tokunseba report`; none in a
        ledger without budgets (migration 0012_budgets)."""
        if not self._has_table("budget_charges"):
            return []
        sql = ("SELECT c.budget, w.unit, w.limit_amount, c.window_start, w.window_end, c.amount, c.ts"
               " FROM budget_charges c JOIN budget_windows w ON w.budget = c.budget AND w.scope_key = c.scope_key"
               " AND w.window_start = c.window_start" + (" WHERE c.ts >= ?" if since is not None else "")
               + " ORDER BY c.ts, c.id")
        return self._query(sql, (since,) if since is not None else ())

    def stats(self, since: float | None = None) -> dict:
        """Counts, groupings, usage sums as reported and timing percentiles."""
        cols = "request_id, rule, endpoint, host, model_used, outcome, status, error, latency_ms, ttfb_ms, " + ", ".join(
            ["usage_protocol", "usage_reported"] + [f"usage_{f}" for f in USAGE_FIELDS]
        )
        rows: list[dict] = []
        if self._has_table("turns"):
            if "instance" in self._columns("turns"):
                cols += ", instance"  # a ledger older than instances: every turn's instance unknown
            columns = self._columns("turns")
            if "attempts" in columns:
                cols += ", attempts"
            if "retry_of" in columns:  # a ledger older than retries: none recognised
                cols += ", retry_of"
            cols += ", CASE WHEN rule IS NULL THEN trace END AS trace"  # read only where no rule took the turn
            where, params = ("WHERE started_at >= ?", (since,)) if since is not None else ("", ())
            rows = self._query(f"SELECT {cols} FROM turns {where}", params)
        return compute_stats(rows, since)
