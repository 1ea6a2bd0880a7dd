"""docs/reference/cli.md is what `tokunseba COMMAND --help` prints today (scripts/cli_reference.py
writes it): an option added, renamed or re-worded without regenerating the page fails here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_cli_reference_is_up_to_date():
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "cli_reference.py"), "--check"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr + "\n(regenerate: .venv/bin/python scripts/cli_reference.py)"


def test_cli_reference_has_every_command():
    sys.path.insert(0, str(ROOT / "scripts"))
    import cli_reference

    text = (ROOT / "docs/reference/cli.md").read_text()
    from tokunseba.cli.main import build_parser

    import argparse

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name in sub.choices:
        assert f"\n## tokunseba {name}\n" in text, name
    assert cli_reference.PAGE == ROOT / "docs/reference/cli.md"
