"""What the read commands share (cli/common.py): --since parsed."""

from __future__ import annotations

import time

import pytest

from tokunseba.cli.common import parse_since


def test_parse_since():
    now = 1_000_000.0
    assert parse_since("30m", now) == now - 1800
    assert parse_since("24h", now) == now - 86400
    assert parse_since("7d", now) == now - 7 * 86400
    assert parse_since("1.5h", now) == now - 5400
    assert parse_since("2026-12-01T10:00:00+00:00") == 1796119200.0
    assert parse_since("2026-12-01T12:00:00+02:00") == 1796119200.0
    local_midnight = time.mktime((2026, 12, 1, 0, 0, 0, 0, 0, -1))
    assert parse_since("2026-12-01") == local_midnight
    later = 1_800_000_000.0  # 2027
    assert parse_since("700000d", later) == later - 700000 * 86400  # about 1917 years back: still a date
    for far in ("100000000d", "1e3d", "inf", "9999999999999999999999999s"):
        with pytest.raises(ValueError):
            parse_since(far, now)
