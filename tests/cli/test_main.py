"""The `tokunseba` command (cli/main.py): it parses and dispatches; every command the docstring names
is a subcommand; a run-command named first builds only cli/run.py's parser; no command prints the
help and exits 2; the help lists each registered protocol; mitmproxy is never imported."""

from __future__ import annotations

import importlib
import subprocess
import sys

from tokunseba import protocols
from tokunseba.cli.main import RUN_COMMANDS, build_parser, main

cli_main = importlib.import_module("tokunseba.cli.main")


def commands(parser) -> list[str]:
    (sub,) = [a for a in parser._actions if a.dest == "command"]
    return list(sub.choices)


def test_every_command_the_docstring_names_is_a_subcommand():
    named = cli_main.__doc__.splitlines()[0].split(":", 1)[1].strip(" .").split(" · ")
    assert set(named) <= set(commands(build_parser())) and "report" in commands(build_parser())


def test_a_run_command_named_first_builds_only_run_commands():
    assert set(commands(build_parser(only_run=True))) == RUN_COMMANDS == {"run", "env", "check"}


def test_no_command_prints_the_help_and_exits_2(capsys):
    assert main([]) == 2
    out = capsys.readouterr().out
    assert out.startswith("usage: tokunseba") and "typical use:" in out
    for p in protocols.all_protocols():
        assert p.name in out and p.title in out


def test_a_command_runs_and_its_exit_code_is_returned(tmp_path, capsys):
    rules = tmp_path / "r.yaml"
    rules.write_text("routes: []\n")
    assert main(["check", str(rules)]) == 0
    assert capsys.readouterr().out.startswith("OK: ")
    rules.write_text("routes: [1]\n")
    assert main(["check", str(rules)]) == 1


def test_the_cli_never_imports_mitmproxy():
    code = ("import sys\nfrom tokunseba.cli.main import main, build_parser\nbuild_parser()\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'mitmproxy'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr
