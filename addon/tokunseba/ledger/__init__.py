"""The ledger: every turn recorded, as it happened (docs/architecture.md §5).

- ``store``: the schema, its migrations and every read and write (``Ledger``);
- ``dialect``: what differs between SQLite and PostgreSQL; ``pg``, ``shared``, ``spool``:
  a team's shared PostgreSQL ledger, its connection handling and the local spool that keeps
  turns while the database is away;
- ``writer`` and ``batch``: the writer thread that takes records off the proxy's event loop
  and writes them in batches;
- ``scrub``: the scrubbed JSON text the ledger stores for a value (credentials out), memoized;
- ``private_files``: files only the user may read (0600), the ledger's and others'.

Contract: no mitmproxy; the proxy hands records to the writer, the CLI reads through ``store``.
"""
