"""The ledger's read half (ledger/reads.py): turns newest first with --since and --limit, a turn
found by its id's prefix."""

from __future__ import annotations

import pytest

from tests.support.ledgers import make, start


# ---------------------------------------------------------------- reads


def test_turns_are_newest_first_with_since_and_limit(make):
    with make() as led:
        for i, at in enumerate([100.0, 300.0, 200.0, 300.0]):
            start(led, f"tk-{i}", at=at)
        assert [t["request_id"] for t in led.turns()] == ["tk-3", "tk-1", "tk-2", "tk-0"]
        assert [t["request_id"] for t in led.turns(limit=2)] == ["tk-3", "tk-1"]
        assert [t["request_id"] for t in led.turns(since=200.0)] == ["tk-3", "tk-1", "tk-2"]


def test_get_turn_by_prefix(make):
    with make() as led:
        for rid in ("tk-abc", "tk-abd", "tk-ab", "tk-xyz"):
            start(led, rid)
        assert led.get_turn("tk-x")["request_id"] == "tk-xyz"
        assert led.get_turn("tk-ab")["request_id"] == "tk-ab"  # an exact id wins over longer ones
        assert led.get_turn("  tk-abc ")["request_id"] == "tk-abc"
        with pytest.raises(LookupError, match=r"^request id prefix 'tk-a' is ambiguous: tk-ab.*$"):
            led.get_turn("tk-a")
        with pytest.raises(LookupError, match=r"^no turn with request id 'nope'$"):
            led.get_turn("nope")
        with pytest.raises(LookupError, match="empty request id"):
            led.get_turn("")
        with pytest.raises(LookupError, match="no turn"):
            led.get_turn("tk-%")  # LIKE wildcards are not wildcards here
