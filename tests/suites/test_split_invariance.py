"""Output never depends on how the upstream bytes were split (docs/dev/architecture.md rule 5): every
stream fixture fed whole, byte by byte, cut at every single point, and in 100 seeded random
splittings gives byte-identical output and identical reports. The fixtures hold non-ASCII
text (cuts land inside multi-byte UTF-8) and \\r\\n / \\r framing (cuts land between \\r
and \\n)."""

from __future__ import annotations

import random

import pytest

from tests.translate.openai_chat.test_stream import FIXTURES, raw, translate


def _result(name: str, cuts: list[int] | None, include_usage: bool = True):
    out, t = translate(name, cuts=cuts, include_usage=include_usage)
    return out, t.report, t.client_usage, t.started


def test_fixtures_cover_the_hard_splits():
    data = b"".join(raw(n) for n in FIXTURES)
    assert b"\r\n" in data and b"\r" in data.replace(b"\r\n", b"")
    assert any(b >= 0xF0 for b in data) and any(0xE0 <= b < 0xF0 for b in data)  # 4- and 3-byte UTF-8


@pytest.mark.parametrize("name", FIXTURES)
def test_byte_by_byte_equals_whole(name):
    whole = _result(name, None)
    assert whole[0]
    assert _result(name, list(range(1, len(raw(name))))) == whole


@pytest.mark.parametrize("name", FIXTURES)
def test_every_single_split_point(name):
    whole = _result(name, None)
    n = len(raw(name))
    for cut in range(n + 1):
        assert _result(name, [cut]) == whole, f"differs when cut at byte {cut}"


@pytest.mark.parametrize("name", FIXTURES)
@pytest.mark.parametrize("include_usage", [True, False])
def test_random_splittings(name, include_usage):
    whole = _result(name, None, include_usage)
    n = len(raw(name))
    rng = random.Random(f"{name}:{include_usage}")
    for _ in range(100):
        cuts = sorted(rng.sample(range(1, n), min(n - 1, rng.randint(1, 40))))
        assert _result(name, cuts, include_usage) == whole, cuts
