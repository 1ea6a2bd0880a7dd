"""Private by default (ledger/private_files.py): a new ledger's directory 0700 and its files 0600,
whatever the umask."""

from __future__ import annotations

import os
import stat

from tokunseba.ledger import Ledger, readable_by_others


def test_a_new_ledger_is_private_whatever_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        home = tmp_path / "data" / "tokunseba"
        with Ledger(home / "ledger.db") as led:
            led.event("tk-1", "routed", {"decision": "pass"})
            modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in home.iterdir()}
        assert stat.S_IMODE(home.stat().st_mode) == 0o700
        assert modes == {"ledger.db": 0o600, "ledger.db-wal": 0o600, "ledger.db-shm": 0o600}
        assert readable_by_others(home / "ledger.db") == []
    finally:
        os.umask(old)
