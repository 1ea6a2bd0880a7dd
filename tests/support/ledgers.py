"""Ledgers for the ledger tests: ``make`` opens one on the test's back end (a SQLite file, or a
database on the real PostgreSQL server), ``start`` starts a turn in it, ``raw_bytes`` reads
everything on disk for a SQLite ledger."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokunseba.ledger import Ledger


# the secrets a ledger must never hold (the ledger tests send them in every place a turn can)
SECRETS = ["local-plain-secret", "sk-ant-api03-SECRETSECRET", "Bearer-SECRET-TOKEN-1", "COOKIE-SECRET-2", "AIzaSyD-SECRET-GOOGLE-KEY-123",
           "sess-SECRET-3", "sk-proj-SECRETSECRETSECRET42"]


def start(led: Ledger, rid: str, at: float = 1000.0, **kw) -> None:
    args = dict(started_at=at, client_protocol="anthropic", host="api.anthropic.com", path="/v1/messages",
                requested_model="claude-haiku-4-5", stream=True)
    args.update(kw)
    led.start_turn(rid, **args)


def raw_bytes(path: Path) -> bytes:
    """Everything on disk for this ledger: the database, its WAL and shared memory."""
    return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))


@pytest.fixture(params=["sqlite", "postgresql"])
def make(request, tmp_path):
    """``make(name="l.db", **kw)`` opens a ledger on this test's back end: a SQLite file, or a
    database on the real PostgreSQL server (tests/support/pg_server.py); the same name, the same
    database. ``readonly=True`` reads PostgreSQL as the read-only role."""
    if request.param == "sqlite":
        def open_sqlite(name: str = "l.db", **kw) -> Ledger:
            return Ledger(tmp_path / name, **kw)
        opener = open_sqlite
    else:
        from tests.support.pg_server import READER_PASSWORD

        server = request.getfixturevalue("pg_server")
        dbs: dict[str, str] = {}

        def open_pg(name: str = "l.db", **kw) -> Ledger:
            if name not in dbs:
                dbs[name] = server.fresh_db()
            if kw.get("readonly"):
                return Ledger(server.url("tk_reader", READER_PASSWORD, dbs[name]), **kw)
            return Ledger(server.url(db=dbs[name]), **kw)
        opener = open_pg
    opener.backend, opener.tmp_path = request.param, tmp_path
    return opener
