#!/usr/bin/env python3
"""Write docs/reference/cli.md from the `tokunseba` command's own --help (every command), so the
reference is never out of date: tests/suites/test_cli_reference.py fails when the page differs from
what this prints.

    .venv/bin/python scripts/cli_reference.py           # rewrite docs/reference/cli.md
    .venv/bin/python scripts/cli_reference.py --check   # exit 1 and say so when the page is stale

The help is rendered 100 columns wide with the built-in protocols only (no plugins), whatever the
terminal, so the page is the same on every machine.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from contextlib import redirect_stdout
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs/reference/cli.md"

HEAD = """\
# The `tokunseba` command

Every command and option, exactly as `tokunseba COMMAND --help` prints it. This page is written by
`scripts/cli_reference.py` from the command's own help; `tests/suites/test_cli_reference.py` fails when it
is stale, so regenerate it after changing an option:
`.venv/bin/python scripts/cli_reference.py`.
"""


def _help(parser: argparse.ArgumentParser) -> str:
    out = io.StringIO()
    with redirect_stdout(out):
        parser.print_help()
    return out.getvalue().rstrip() + "\n"


def render() -> str:
    os.environ["COLUMNS"] = "100"
    os.environ["TOKUNSEBA_PLUGINS"] = ""
    sys.path.insert(0, str(ROOT / "addon"))
    from tokunseba.cli.main import build_parser

    parser = build_parser()
    parts = [HEAD, "\n## tokunseba\n\n```\n" + _help(parser) + "```\n"]
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, command in sub.choices.items():
        parts.append(f"\n## tokunseba {name}\n\n```\n" + _help(command) + "```\n")
    return "".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="only say whether the page is stale (exit 1 if so)")
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        if not PAGE.exists() or PAGE.read_text() != text:
            print(f"{PAGE.relative_to(ROOT)} is stale: run .venv/bin/python scripts/cli_reference.py", file=sys.stderr)
            return 1
        print(f"{PAGE.relative_to(ROOT)} is up to date")
        return 0
    PAGE.parent.mkdir(parents=True, exist_ok=True)
    PAGE.write_text(text)
    print(f"wrote {PAGE.relative_to(ROOT)} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
