"""Subscription windows in the ledger: each window state a reply reported, per account, with the
time it was seen (table ``quota_windows``, created by the migration ``0013_quota_windows`` of
ledger/schema.py), and what ``tokunseba quota`` reads of them (docs/guide/quota.md).

A row is one window of one reply: the account (SHA-256 hex of its credential or account id:
routing/quota.py; never the credential), its host and which header named it, the window's name,
used share (0..1, NULL when not reported), status, reset time, length in minutes, whether the reply
named it binding, the time seen and the turn whose reply it was. Rows are only appended; the
state now is each (account, window)'s newest row (``latest``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

TABLE = "quota_windows"

COLUMNS = ("account", "host", "account_by", "provider", "window_name", "used", "status", "resets_at", "minutes",
           "binding", "seen_at", "request_id")
INSERT = f"INSERT INTO {TABLE} ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})"


def rows_of(*, account: str, host: str, by: str, provider: str | None, windows: Iterable[dict[str, Any]],
            seen_at: float, request_id: str | None) -> list[tuple]:
    """One row per window (``WindowState.record()`` dicts)."""
    return [(account, host, by, provider, w["window"], w.get("used"), w.get("status"), w.get("resets_at"),
             w.get("minutes"), int(bool(w.get("binding"))), seen_at, request_id) for w in windows]


def statements(rows: list[tuple]) -> list[tuple[str, tuple]]:
    return [(INSERT, row) for row in rows]


LATEST = f"""SELECT q.* FROM {TABLE} q
    JOIN (SELECT account, window_name, MAX(id) AS id FROM {TABLE} GROUP BY account, window_name) last
    ON q.id = last.id ORDER BY q.host, q.account, q.window_name"""


def latest(query) -> list[dict]:
    """Each (account, window)'s newest row (``query(sql)`` -> rows as dicts); [] on a ledger
    older than the table."""
    return query(LATEST)
