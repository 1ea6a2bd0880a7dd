"""The ledger's migrations (ledger/schema.py): an empty database migrated, an older ledger read
read-only and migrated when opened for writing, a newer one opened, two processes migrating at
once applying each migration once."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

from tokunseba.ledger import Ledger, schema as ledger_mod
from tokunseba.ledger.schema import MIGRATIONS

from tests.support.ledgers import start


# ---------------------------------------------------------------- migrations


def test_migrates_an_empty_database(tmp_path):
    path = tmp_path / "deep" / "dir" / "ledger.db"
    with Ledger(path) as led:
        assert led.schema() == [name for name, _ in MIGRATIONS]
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"_migrations", "turns", "events", "bodies"} <= tables


def _older_ledger(path: Path, upto: int) -> None:
    """A ledger as an older tokunseba left it: only the first ``upto`` migrations, one turn."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
    for name, statements in MIGRATIONS[:upto]:
        for sql in statements:
            conn.execute(sql)
        conn.execute("INSERT INTO _migrations VALUES (?, 1.0)", (name,))
    conn.execute("INSERT INTO turns (request_id, started_at, client_protocol, status) VALUES ('tk-old', 5.0, 'openai', 200)")
    conn.execute("INSERT INTO events (request_id, ts, kind, data) VALUES ('tk-old', 5.5, 'completed', '{\"status\":200}')")
    conn.close()


def test_reads_an_older_ledger_readonly_and_migrates_it_when_opened_for_writing(tmp_path):
    path = tmp_path / "ledger.db"
    _older_ledger(path, upto=1)
    # a reader copes with the older schema without changing it
    with Ledger(path, readonly=True) as ro:
        assert ro.schema() == [MIGRATIONS[0][0]]
        assert ro.get_turn("tk-old")["status"] == 200
        assert [e["kind"] for e in ro.events("tk-old")] == ["completed"]
    # a writer applies the missing migrations, keeping the old rows
    with Ledger(path, store_bodies=True) as led:
        assert led.schema() == [name for name, _ in MIGRATIONS]
        led.update_turn("tk-old", request_body=b'{"model":"m"}')
        old = led.get_turn("tk-old")
    assert old["client_protocol"] == "openai" and old["status"] == 200
    assert old["request_body"] == b'{"model":"m"}'
    # opening again applies nothing twice
    conn = sqlite3.connect(path)
    assert ledger_mod.migrate(conn) == []
    assert conn.execute("SELECT count(*) FROM _migrations").fetchone()[0] == len(MIGRATIONS)


def test_opens_a_ledger_written_by_a_newer_tokunseba(tmp_path):
    path = tmp_path / "ledger.db"
    Ledger(path).close()
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO _migrations VALUES ('9999_from_the_future', 1.0)")
    conn.execute("ALTER TABLE turns ADD COLUMN future_column TEXT")
    conn.commit()
    conn.close()
    with Ledger(path) as led:
        start(led, "tk-new")
        assert led.get_turn("tk-new")["future_column"] is None
        assert led.schema()[-1] == "9999_from_the_future"


def test_two_processes_migrating_at_once_apply_each_migration_once(tmp_path):
    path = tmp_path / "ledger.db"
    code = "import sys; from tokunseba.ledger import Ledger; Ledger(sys.argv[1]).close()"
    procs = [subprocess.Popen([sys.executable, "-c", code, str(path)]) for _ in range(4)]
    assert [p.wait(timeout=30) for p in procs] == [0] * 4
    conn = sqlite3.connect(path)
    assert [r[0] for r in conn.execute("SELECT name FROM _migrations ORDER BY rowid")] == [n for n, _ in MIGRATIONS]
