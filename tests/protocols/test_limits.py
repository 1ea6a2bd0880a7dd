"""Subscription windows read from a reply's headers (protocols/limits.py): Anthropic's and the
ChatGPT backend's, as their own clients read them; a malformed header skipped and said, never
guessed; every row of the tables saying where it came from."""

from __future__ import annotations

import pytest

from tokunseba.protocols.limits import ANTHROPIC_FIELDS, ANTHROPIC_OVERALL, CODEX_FIELDS, read_windows

from tests.support.windows import ANTHROPIC, by_name, CODEX, NOW, U


def test_anthropic_windows_are_read_as_the_headers_say():
    r = read_windows(ANTHROPIC, NOW)
    w = by_name(r)
    assert r.provider == "anthropic" and r.binding == "5h" and not r.skipped
    assert (w["5h"].used, w["5h"].status, w["5h"].resets_at, w["5h"].binding) == (0.85, "allowed_warning",
                                                                                  NOW + 3600, True)
    assert (w["7d"].used, w["7d"].status, w["7d"].binding) == (0.31, "allowed", False)
    assert (w["overage"].used, w["overage"].status) == (None, "rejected")  # a status, no share made up


def test_the_account_status_goes_to_the_binding_window_when_it_has_none_of_its_own():
    r = read_windows({"anthropic-ratelimit-unified-status": "rejected",
                      "anthropic-ratelimit-unified-reset": str(int(NOW) + 60),
                      "anthropic-ratelimit-unified-representative-claim": "seven_day",
                      "anthropic-ratelimit-unified-7d-utilization": "1.0"}, NOW)
    w = by_name(r)["7d"]
    assert (w.used, w.status, w.resets_at, w.binding) == (1.0, "rejected", NOW + 60, True)


def test_codex_windows_are_read_as_codex_reads_them():
    r = read_windows(CODEX, NOW)
    w = by_name(r)
    assert r.provider == "chatgpt" and not r.skipped
    assert (w["primary"].used, w["primary"].minutes, w["primary"].resets_at) == (0.425, 300, NOW + 7200)
    assert (w["secondary"].used, w["secondary"].minutes, w["secondary"].resets_at) == (0.13, 10080, NOW + 600000)
    assert w["primary"].status is None  # the backend reports none: never guessed from the share


def test_other_codex_limit_families_are_their_own_windows():
    r = read_windows({"x-codex-bengalfox-primary-used-percent": "80", "x-codex-primary-used-percent": "0"}, NOW)
    assert [w.name for w in r.windows] == ["codex_bengalfox.primary"]  # an all-zero window reports nothing


@pytest.mark.parametrize("name,value", [
    ("anthropic-ratelimit-unified-5h-utilization", "eighty"),
    ("anthropic-ratelimit-unified-5h-utilization", "-0.1"),
    ("anthropic-ratelimit-unified-5h-reset", "tomorrow"),
    ("anthropic-ratelimit-unified-5h-status", "maybe"),
    ("anthropic-ratelimit-unified-representative-claim", "ten_minutes"),
])
def test_a_malformed_anthropic_header_is_skipped_and_said(name, value):
    headers = {**ANTHROPIC, name: value}
    r = read_windows(headers, NOW)
    assert [n for n, _ in r.skipped] == [name]
    assert value in r.skipped[0][1]
    if name.endswith("5h-utilization"):
        assert by_name(r)["5h"].used is None  # skipped, not guessed; the rest of the window stays
        assert by_name(r)["5h"].status == "allowed_warning"


def test_a_malformed_codex_header_is_skipped_and_said():
    r = read_windows({**CODEX, "x-codex-primary-used-percent": "n/a", "x-codex-secondary-window-minutes": "1.5"}, NOW)
    assert sorted(n for n, _ in r.skipped) == ["x-codex-primary-used-percent", "x-codex-secondary-window-minutes"]
    assert [w.name for w in r.windows] == ["secondary"]
    assert by_name(r)["secondary"].minutes is None


def test_no_window_headers_reads_nothing():
    assert not read_windows({"content-type": "application/json", "x-ratelimit-remaining-tokens": "5"}, NOW)


def test_every_row_says_where_it_came_from():
    for table in (ANTHROPIC_FIELDS, ANTHROPIC_OVERALL, CODEX_FIELDS):
        for name, (fmt, source) in table.items():
            assert fmt and len(source) > 20, name


def test_claude_codes_other_headers_are_read_or_left_alone():
    r = read_windows({**ANTHROPIC, U + "5h-surpassed-threshold": "0.9", U + "7d_oi-utilization": "0.4",
                      U + "7d_oi-reset": str(int(NOW) + 9000), U + "fallback": "available",
                      U + "overage-in-use": "true", U + "upgrade-paths": "max_20x"}, NOW)
    assert not r.skipped and by_name(r)["7d_oi"].used == 0.4 and by_name(r)["5h"].used == 0.85
    bad = read_windows({**ANTHROPIC, U + "5h-surpassed-threshold": "high"}, NOW)
    assert [n for n, _ in bad.skipped] == [U + "5h-surpassed-threshold"]
