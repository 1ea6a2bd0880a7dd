"""The rules file is watched: an edit takes effect on the next turn; a broken edit keeps the
rules in force."""

from __future__ import annotations

import os

from mitmproxy.addons.proxyserver import Proxyserver
from mitmproxy.test import taddons

from tokunseba.proxy.mitm import Tokunseba

ONE = "routes:\n  - name: first\n    to: openai\n"
TWO = "routes:\n  - name: first\n    to: openai\n  - name: second\n    to: anthropic\n"


def _touch_later(path, text: str, step: int) -> None:
    path.write_text(text)
    st = os.stat(path)
    os.utime(path, (st.st_atime, st.st_mtime + step))  # a distinct mtime, whatever the clock's grain


def test_rules_file_edit_is_picked_up_and_a_broken_edit_is_not(tmp_path, caplog):
    rules = tmp_path / "rules.yaml"
    rules.write_text(ONE)
    addon = Tokunseba()
    with taddons.context(addon, Proxyserver()) as tctx:
        tctx.configure(addon, tokunseba_connect_timeout_ms=0, tokunseba_rules=str(rules), tokunseba_ledger=str(tmp_path / "l.db"))
        assert [r.name for r in addon.rules.routes] == ["first"]

        _touch_later(rules, TWO, 10)
        addon.rules_checked = 0.0
        addon._maybe_reload_rules()
        assert [r.name for r in addon.rules.routes] == ["first", "second"]

        _touch_later(rules, "routes:\n  - name: broken\n    to: nowhere\n", 20)
        addon.rules_checked = 0.0
        addon._maybe_reload_rules()
        assert [r.name for r in addon.rules.routes] == ["first", "second"]  # kept
        assert any("kept the previous rules" in r.message and f"{rules}:3:" in r.message and r.levelname == "ERROR"
                   for r in caplog.records)


def test_rules_are_checked_at_most_once_a_second(tmp_path):
    rules = tmp_path / "rules.yaml"
    rules.write_text(ONE)
    addon = Tokunseba()
    with taddons.context(addon, Proxyserver()) as tctx:
        tctx.configure(addon, tokunseba_connect_timeout_ms=0, tokunseba_rules=str(rules), tokunseba_ledger=str(tmp_path / "l.db"))
        addon._maybe_reload_rules()  # sets the clock
        _touch_later(rules, TWO, 10)
        addon._maybe_reload_rules()  # within the second: not looked at
        assert [r.name for r in addon.rules.routes] == ["first"]
