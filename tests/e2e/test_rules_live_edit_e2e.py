"""A live edit of the rules file is taken, or a broken one reported, when it is made (issue 31):
the real `tokunseba run`, its rules file rewritten while it runs, and no turn sent at all."""

from __future__ import annotations

import time

import pytest

from .test_console_e2e import Run

pytestmark = pytest.mark.e2e

GOOD = """\
endpoints:
  local:
    protocol: openai
    url: http://127.0.0.1:9/v1
routes:
  - name: first
    when: {client: anthropic}
    to: local
"""


def _wait_for(run: Run, text: str, after: int, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        said = "".join(run.lines[after:])
        if text in said:
            return said
        time.sleep(0.1)
    raise AssertionError(f"{text!r} not said within {timeout} s:\n" + "".join(run.lines))


def test_a_broken_edit_is_reported_when_made_and_a_good_one_taken(tmp_path):
    rules = tmp_path / "rules.yaml"
    rules.write_text(GOOD)
    run = Run(tmp_path, "--rules", str(rules))
    try:
        _wait_for(run, "Loading script", 0)
        time.sleep(1.2)  # a new mtime second: the edit is seen as an edit
        n = len(run.lines)
        rules.write_text(GOOD.replace("to: local", "to: nowhere"))
        said = _wait_for(run, "kept the previous rules", n)
        assert "nowhere" in said, said
        time.sleep(1.2)
        n = len(run.lines)
        rules.write_text(GOOD + "  - name: second\n    when: {client: openai}\n    to: local\n")
        said = _wait_for(run, f"reloaded {rules}: 2 routes", n)
    finally:
        out = run.stop()
    assert " tk-" not in out, out  # no turn came: the watch alone said it
