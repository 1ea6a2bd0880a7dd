"""The read commands, registered in the order `--help` lists them: `models`, `stats`, `explain`,
`log` (docs/dev/architecture.md §4). Each lives in its own module (models.py, stats.py, explain.py,
log.py) over what they share (common.py).

Each prints an aligned plain-text table (or the same facts as JSON with ``--json``) and
returns an exit code. Bad arguments are one ``error: ...`` line on stderr (exit 2); a
missing ledger is one line (empty results, exit 0; for ``explain`` exit 1).
"""

from __future__ import annotations

import argparse

from . import explain, log, models, stats


def add_commands(sub: argparse._SubParsersAction) -> None:
    for command in (models, stats, explain, log):
        command.add_command(sub)
