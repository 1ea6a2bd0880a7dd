"""The ledger: every turn recorded, as it happened (docs/dev/architecture.md §5).

- ``location``: where the ledger lives (its home, its default target, a URL told from a
  path) and the names a proxy records its turns under;
- ``schema``: the append-only migrations and the tables' columns;
- ``connection``: the one connection (SQLite or PostgreSQL) and its opening errors;
  ``reads`` its read half (``LedgerReader``, the CLI's), ``writes`` its write half (the
  proxy's), ``store`` both (``Ledger``);
- ``stats``: the figures the turns add up to (``compute_stats``);
- ``dialect``: what differs between SQLite and PostgreSQL; ``pg``, ``shared``, ``spool``:
  a team's shared PostgreSQL ledger, its connection handling and the local spool that keeps
  turns while the database is away;
- ``writer`` and ``batch``: the writer thread that takes records off the proxy's event loop
  and writes them in batches;
- ``scrub``: the scrubbed JSON text the ledger stores for a value (credentials out), memoized;
- ``prefix``: per-block hashes of a prompt's cacheable prefix;
- ``quota``: the subscription windows replies reported (rows written, the state now read);
- ``private_files``: files only the user may read (0600), the ledger's and others'.

Contract: no mitmproxy; the proxy hands records to the writer, the CLI reads through
``LedgerReader``. Other packages import only the names in ``__all__``, from here
(tests/suites/test_exported_members.py keeps it so).
"""

from .connection import LedgerError, LedgerMissing
from .dialect import db_errors
from .location import (
    LEDGER_ENV,
    PG_SCHEMES,
    default_instance,
    default_ledger_path,
    default_ledger_target,
    instance_id,
    owner_alive,
    spool_note,
    take_password,
    tokunseba_home,
    url_scheme,
)
from .batch import Later
from .prefix import first_change, prefix_hashes
from .quota import rows_of as quota_rows
from .private_files import create_private, private_dir, readable_by_others
from .reads import LedgerReader
from .schema import INTERRUPTED, USAGE_FIELDS, migrate_connection
from .stats import NOT_SERVED, cache_read_share, compute_stats, percentile, turn_class, usage_counting
from .store import Ledger
from .writer import LedgerWriter
from .writes import MAX_STORED_BODY

__all__ = [
    # the store: read and written (Ledger), read only (LedgerReader), written off the event loop
    "Ledger",
    "LedgerReader",
    "LedgerWriter",
    "LedgerError",
    "LedgerMissing",
    "db_errors",
    "MAX_STORED_BODY",
    # where it lives and who writes it
    "LEDGER_ENV",
    "PG_SCHEMES",
    "default_instance",
    "default_ledger_path",
    "default_ledger_target",
    "instance_id",
    "owner_alive",
    "spool_note",
    "take_password",
    "tokunseba_home",
    "url_scheme",
    # what its rows hold and add up to
    "INTERRUPTED",
    "migrate_connection",
    "USAGE_FIELDS",
    "NOT_SERVED",
    "cache_read_share",
    "compute_stats",
    "percentile",
    "turn_class",
    "usage_counting",
    # prompt prefix hashes
    "first_change",
    "prefix_hashes",
    "Later",
    # subscription windows: a reply's rows (written through LedgerWriter.quota_windows)
    "quota_rows",
    # private files
    "create_private",
    "private_dir",
    "readable_by_others",
]
