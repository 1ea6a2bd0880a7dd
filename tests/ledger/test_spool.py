"""The spool (ledger/spool.py): a private file, bounded, counting what it drops."""

from __future__ import annotations

import os
import stat

from tokunseba.ledger.spool import Spool


def test_the_spool_file_is_private_and_bounded_and_counts_what_it_drops(tmp_path):
    sp = Spool(tmp_path / "spool" / "k-1.jsonl", max_bytes=300)
    assert stat.S_IMODE(os.stat(tmp_path / "spool").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(sp.path).st_mode) == 0o600
    assert sp.append(b"x" * 200 + b"\n", 7)
    assert not sp.append(b"y" * 200 + b"\n", 5)  # past the bound: dropped, counted
    assert (sp.dropped_batches, sp.dropped_records, sp.size) == (1, 5, 201)
    assert [n for n, _ in sp.batches()] == [201]
    sp.done(201)
    assert sp.size == 0 and not sp.waiting
    sp.close()
    assert not sp.path.exists()  # empty: removed
