"""The read commands together (cli/read.py registers them): no ledger, an empty ledger, a file
that is not one, reads while a proxy holds it open, and never a traceback through the console
script. Each command's own output is tested beside it (test_models, test_stats, test_explain,
test_log)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tokunseba import jsonc
from tokunseba.ledger import Ledger

from tests.support.read_story import run, story


def test_log_and_stats_without_a_ledger_say_so_in_one_line(capsys, tmp_path, _tokunseba_home):
    missing = tmp_path / "none.db"
    rc, out, err = run(capsys, "log", "--ledger", str(missing))
    assert (rc, out, err) == (0, f"no ledger at {missing} yet: run the proxy first\n", "")
    rc, out, err = run(capsys, "stats")  # the default ledger under TOKUNSEBA_HOME
    assert (rc, out, err) == (0, f"no ledger at {_tokunseba_home / 'ledger.db'} yet: run the proxy first\n", "")
    rc, out, err = run(capsys, "log", "--ledger", str(missing), "--json")
    assert (rc, jsonc.loads(out)) == (0, [])
    assert err == f"no ledger at {missing} yet: run the proxy first\n"
    rc, out, _ = run(capsys, "stats", "--ledger", str(missing), "--json")
    assert rc == 0 and jsonc.loads(out)["turns"] == 0
    assert not missing.exists()  # reading never creates a ledger


def test_an_empty_ledger(capsys, tmp_path):
    Ledger(tmp_path / "l.db").close()
    rc, out, _ = run(capsys, "log", "--ledger", str(tmp_path / "l.db"))
    assert (rc, out) == (0, f"no turns recorded yet in {tmp_path / 'l.db'}\n")
    rc, out, _ = run(capsys, "stats", "--ledger", str(tmp_path / "l.db"))
    assert (rc, out) == (0, "window: all time\nno turns in this window\n")


def test_a_file_that_is_not_a_ledger_is_one_line(capsys, tmp_path):
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not sqlite at all" * 200)
    for cmd in (["log"], ["stats"], ["explain", "tk-1"]):
        rc, out, err = run(capsys, *cmd, "--ledger", str(junk))
        assert (rc, out) == (1, "")
        assert err.startswith(f"error: cannot open the ledger {junk}: ") and err.count("\n") == 1


def test_a_timestamp_no_date_can_show_is_printed_as_a_number(capsys, tmp_path):
    path = tmp_path / "odd.db"
    with Ledger(path) as led:
        led.start_turn("tk-odd", started_at=1e20, client_protocol="openai", host="api.openai.com",
                       path="/v1/chat/completions", requested_model="gpt-4o", stream=False)
    rc, out, err = run(capsys, "log", "--ledger", str(path))
    assert (rc, err) == (0, "") and out.splitlines()[1].startswith("1e+20  tk-odd")


def test_reads_while_a_proxy_holds_the_ledger_open(capsys, story):
    writer = Ledger(story)  # the proxy: open, writing
    writer.start_turn("tk-live", started_at=time.time(), client_protocol="openai", host="h", path="/p",
                      requested_model="m", stream=True)
    rc, out, _ = run(capsys, "log", "--ledger", str(story), "--limit", "1")
    assert rc == 0 and "tk-live" in out
    writer.update_turn("tk-live", status=200)
    rc, out, _ = run(capsys, "explain", "tk-live", "--ledger", str(story), "--json")
    assert jsonc.loads(out)["turn"]["status"] == 200
    writer.close()


def test_the_console_script_never_shows_a_traceback(tmp_path):
    """Through a real process: bad arguments and a missing ledger are one line each."""
    for argv, code, line in [
        (["stats", "--since", "soon"], 2, "error: --since: expected a duration"),
        (["explain", "abc"], 1, "error: no ledger at"),
        (["log", "--limit", "x"], 2, "error: --limit: expected a positive integer, got 'x'"),
    ]:
        p = subprocess.run([sys.executable, "-m", "tokunseba.cli", *argv, "--ledger", str(tmp_path / "x.db")],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == code, p.stderr
        assert p.stderr.startswith(line) and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr


@pytest.mark.parametrize("argv,line", [
    (["log", "--limit", "100000000000000000000000"], "error: --limit: 100000000000000000000000 is too large"),
    (["log", "--limit", "9" * 5000], "error: --limit: expected a positive integer"),
    (["stats", "--since", "99999999999d"], "error: --since: '99999999999d' is out of the range"),
    (["stats", "--since", "9" * 400 + "d"], "error: --since: '999"),
    (["stats", "--since", "99999-01-01"], "error: --since: expected a duration"),
    (["models", "--timeout", "1e400"], "error: --timeout: expected a positive number of seconds up to 3600"),
    (["models", "--timeout", "99999999999", "--probe"], "error: --timeout: expected a positive number"),
    (["models", "--timeout", "nan", "--probe"], "error: --timeout: expected a positive number"),
    (["models", "--timeout=-inf"], "error: --timeout: expected a positive number"),
])
def test_absurd_numbers_are_one_line_through_the_console_script(tmp_path, argv, line):
    """The installed `tokunseba` script, with a real ledger to read: no input reaches SQLite,
    the clock or a socket timeout unchecked (an OverflowError would be a traceback)."""
    path = tmp_path / "l.db"
    with Ledger(path) as led:
        led.start_turn("tk-1", started_at=time.time(), client_protocol="openai", host="api.openai.com",
                       path="/v1/chat/completions", requested_model="gpt-4o", stream=False)
    ledger = ["--ledger", str(path)] if argv[0] != "models" else []
    p = subprocess.run([str(Path(sys.executable).parent / "tokunseba"), *argv, *ledger],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2, p.stderr
    assert p.stdout == "" and "Traceback" not in p.stderr
    assert p.stderr.startswith(line) and p.stderr.count("\n") == 1, p.stderr
