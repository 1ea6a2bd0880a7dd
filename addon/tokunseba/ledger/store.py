"""The ledger: one row per provider turn plus the events of its story, in one SQLite file or
one PostgreSQL database.

``Ledger`` is both halves on one connection: ``writes.LedgerWrites`` (what the proxy
records; writes never raise) and ``reads.LedgerReader`` (what the CLI reads; reads raise).
Where it lives is ``location``, its tables ``schema``, its figures ``stats``.
"""

from __future__ import annotations

from .reads import LedgerReader
from .writes import LedgerWrites


class Ledger(LedgerWrites, LedgerReader):
    """The ledger database, read and written (the proxy's writer, a replay recording its
    result). Safe to share between threads (one connection, one lock).

    Opening raises ``LedgerError`` (``LedgerMissing`` for a read-only ledger that does not
    exist); after that, writes never raise."""
