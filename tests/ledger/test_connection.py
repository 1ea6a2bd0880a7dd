"""The ledger's connection (ledger/connection.py): open failures are one-line errors, a locked
database delays a write only briefly, a WAL reader reads while the writer writes."""

from __future__ import annotations

import logging
import sqlite3
import threading
import time

import pytest

from tokunseba.ledger import Ledger, LedgerError, LedgerMissing

from tests.support.ledgers import start


def test_open_failures_are_one_line_errors(tmp_path):
    with pytest.raises(LedgerMissing, match=r"^no ledger at .*nope\.db yet: run the proxy first$"):
        Ledger(tmp_path / "nope.db", readonly=True)
    (tmp_path / "dir.db").mkdir()
    with pytest.raises(LedgerError, match=r"^cannot open the ledger .*dir\.db: "):
        Ledger(tmp_path / "dir.db")
    (tmp_path / "junk.db").write_bytes(b"this is not a database" * 100)
    with pytest.raises(LedgerError, match="not a database"):
        Ledger(tmp_path / "junk.db", readonly=True)


def test_a_locked_database_delays_a_write_only_briefly(tmp_path, caplog):
    path = tmp_path / "l.db"
    led = Ledger(path)
    start(led, "tk-l")
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    try:
        t0 = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="tokunseba.ledger"):
            led.update_turn("tk-l", status=200)
        waited = time.monotonic() - t0
    finally:
        other.execute("ROLLBACK")
    assert waited < 2.0
    assert "database is locked" in caplog.text
    led.update_turn("tk-l", status=201)
    assert led.get_turn("tk-l")["status"] == 201


def test_wal_reader_reads_while_the_writer_writes(tmp_path):
    path = tmp_path / "l.db"
    writer = Ledger(path)
    start(writer, "tk-0")
    reader = Ledger(path, readonly=True)
    # a reader in the middle of a read transaction does not block the writer
    raw = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
    raw.execute("BEGIN")
    assert raw.execute("SELECT count(*) FROM turns").fetchone()[0] == 1
    t0 = time.monotonic()
    start(writer, "tk-1")
    assert time.monotonic() - t0 < 0.4
    assert raw.execute("SELECT count(*) FROM turns").fetchone()[0] == 1  # its snapshot
    raw.execute("COMMIT")
    assert raw.execute("SELECT count(*) FROM turns").fetchone()[0] == 2
    raw.close()

    done = threading.Event()

    def write() -> None:
        for i in range(2, 300):
            start(writer, f"tk-{i}", at=float(i))
        done.set()

    th = threading.Thread(target=write)
    th.start()
    seen = []
    while not done.is_set():
        seen.append(len(reader.turns()))
    th.join()
    seen.append(len(reader.turns()))
    assert seen == sorted(seen)  # never goes back, never errors
    assert seen[-1] == 300
    reader.close()
    writer.close()
