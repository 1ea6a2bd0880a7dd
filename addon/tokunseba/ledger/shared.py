"""A shared (PostgreSQL) ledger's writes: one batch, one transaction, exactly once, and a
local spool while the database is away.

``Ledger.write_batch`` hands its records here (on the writer thread, ``writer``):

- the batch is built as on SQLite (``batch.write_folded``, same folding, same
  scrubbing), into a ``pg.Recorder``: its statements, with a new batch id;
- when nothing waits in a spool, it is run at once (``pg.run_program``: one
  transaction, skipped if its id was applied); should a statement fail, the batch is
  rolled back and its records written again one savepoint each (``_one_by_one``, as
  ``Ledger.write_batch`` does on SQLite: a record that fails costs only itself, never the
  other records of its turn folded with it; a batch drained from a spool, whose records are
  gone, is redone one savepoint per statement); if the database is away (at start or
  mid-run) or the connection breaks, the batch goes to the spool (``spool``) and a
  warning says so, once per outage, with the spool's file and bound;
- while a spool waits, every new batch is appended behind it (order kept), and the spool is
  drained, oldest batch first, as soon as a connection can be had (tried at most every
  ``pg.RETRY_S``); spools left by proxies of the same ledger that stopped are
  adopted and drained first. A line says when the database is back and what was drained.
- A batch that would pass the spool's bound is dropped, counted and logged.
"""

from __future__ import annotations

import logging
import time
import uuid
from pathlib import Path
from typing import Any

from ..credentials import redact_text
from .batch import Record, record_name, statements_of, write_folded
from .pg import RETRY_S, Away, PgConnection, Recorder, run_program
from .spool import (
    DEFAULT_MAX_BYTES,
    Spool,
    decode_batch,
    encode_batch,
    ledger_key,
    orphans,
    own_path,
    spool_dir,
)

log = logging.getLogger("tokunseba.ledger")


class SharedWriter:
    def __init__(self, ledger: Any, *, home: Path, fold_args: dict[str, Any], max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        """``ledger``: the ``Ledger`` (its connection, its record builders); ``fold_args``: its
        ``write_folded`` arguments; ``home``: where the spool directory is."""
        self.ledger = ledger
        self.conn = ledger._conn
        self._fold_args = fold_args
        self.dir = spool_dir(home)
        self.key = ledger_key(ledger.path)
        self.max_bytes = max_bytes
        self.spool: Spool | None = None  # created when first needed
        self.adopted: list[Spool] = []
        self.away_since: float | None = None
        self.spooled_batches = 0
        self.drained_batches = 0
        self.retry_s = RETRY_S
        self._adopt()

    # ---- state

    @property
    def waiting(self) -> bool:
        return bool(self.adopted) or (self.spool is not None and self.spool.waiting)

    @property
    def dropped_records(self) -> int:
        return self.spool.dropped_records if self.spool is not None else 0

    def _adopt(self) -> None:
        if not self.dir.exists():
            return
        for p in orphans(self.dir, self.key):
            try:
                sp = Spool(p, self.max_bytes, adopt=True)
            except OSError:
                continue
            if sp.waiting:
                self.adopted.append(sp)
                log.warning("ledger: %s waits to be written to %s (left by a proxy that stopped)", p, self.ledger.path)
            else:
                sp.close()

    # ---- writes

    def write_batch(self, records: list[Record]) -> bool:
        reader = self.conn if self.away_since is None else None
        rec = Recorder(reader)
        left_out = write_folded(rec, self.ledger, records, **self._fold_args)
        redone = self.send(rec.ops, len(records), names=records) if rec.ops else False
        if not redone:  # (written again one by one, each record that failed was said there, once)
            for what, e in left_out:
                log.warning("ledger %s failed: %s", what, e)
        return True

    def _one_by_one(self, records: list[Record], ran: list[bool]) -> Any:
        """The batch's records again, inside ``run_program``'s transaction, one savepoint each
        (each record's statements built there: what it reads is what the records before it
        wrote); the failures, one line each. ``ran`` is set once it runs."""
        def redo(conn: PgConnection) -> list[str]:
            ran[:] = [True]
            failed: list[str] = []
            for record in records:
                conn.execute("SAVEPOINT rec")
                try:
                    for sql, params in statements_of(self.ledger, record):
                        conn.execute(sql, params)
                except Away:
                    raise
                except Exception as e:  # this record alone (a statement, or a record that cannot be built)
                    conn.execute("ROLLBACK TO SAVEPOINT rec")
                    failed.append(f"{record_name(record)} failed: {redact_text(' '.join(str(e).split()))}")
                conn.execute("RELEASE SAVEPOINT rec")
            return failed
        return redo

    def send(self, ops: list[tuple], n_records: int, names: list[Record] | None = None) -> bool:
        """Run (or spool) a batch's statements; True when a statement failed and the batch's
        records (``names``) were written again one by one."""
        batch_id = uuid.uuid4().hex
        ran = [False]
        if not self.waiting:
            try:
                redo = self._one_by_one(names, ran) if names else None
                for problem in run_program(self.conn, batch_id, ops, fresh=True, redo=redo):
                    log.warning("ledger: %s", problem)
                return ran[0]
            except Away as e:
                self._went_away(str(e))
        self._spool(batch_id, ops, n_records, names)
        self.drain()
        return False

    def _went_away(self, reason: str) -> None:
        if self.away_since is None:
            self.away_since = time.time()
            sp = self._own()
            log.warning("ledger: the database %s is away (%s); turns are kept in %s (at most %d MiB) until it is back",
                        self.ledger.path, reason, sp.path, self.max_bytes // 2**20)

    def _own(self) -> Spool:
        if self.spool is None:
            self.spool = Spool(own_path(self.dir, self.key), self.max_bytes)
        return self.spool

    def _spool(self, batch_id: str, ops: list[tuple], n_records: int, names: list[Record] | None) -> None:
        sp = self._own()
        if sp.append(encode_batch(batch_id, ops, n_records), n_records):
            self.spooled_batches += 1
            return
        what = ", ".join(sorted({record_name(r) for r in names or []})[:4]) or "statements"
        log.warning("ledger: the spool %s is full (%d MiB): %d records dropped (%s); %d dropped so far",
                    sp.path, self.max_bytes // 2**20, n_records, what, sp.dropped_records)

    def drain(self) -> bool:
        """Write what waits in the spools, oldest first; True once nothing waits."""
        if not self.waiting:
            return True
        try:
            self.conn.connect()
        except Away as e:
            self._went_away(str(e))
            return False
        drained = 0
        for sp in [*self.adopted, *([self.spool] if self.spool is not None else [])]:
            try:
                for nbytes, line in list(sp.batches()):
                    batch_id, ops, _ = decode_batch(line)
                    for problem in run_program(self.conn, batch_id, ops):
                        log.warning("ledger: %s", problem)
                    sp.done(nbytes)
                    drained += 1
            except Away as e:
                self.drained_batches += drained
                self._went_away(str(e))
                return False
            if sp is not self.spool:
                sp.close()
                self.adopted.remove(sp)
        self.drained_batches += drained
        since, self.away_since = self.away_since, None
        log.warning("ledger: the database %s is reachable%s: %d spooled batches written", self.ledger.path,
                    f" again after {time.time() - since:.0f} s" if since else "", drained)
        return True

    def close(self) -> None:
        if self.waiting:
            self.drain()
        for sp in self.adopted:
            sp.close(remove_if_empty=False)
        if self.spool is not None:
            if self.spool.waiting:
                log.warning("ledger: %s keeps the turns not yet written to %s: the next proxy of this ledger writes "
                            "them", self.spool.path, self.ledger.path)
            self.spool.close()
