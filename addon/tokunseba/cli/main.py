"""The `tokunseba` command: run · env · check · models · stats · explain · log · sessions · budgets · shadow · replay · earn · quota.

This module only parses arguments and dispatches; it never imports mitmproxy (the `run`
command starts mitmdump as a separate process). A command of ``cli/run.py`` (run, env, check)
named first builds only that module's parser: `tokunseba run` imports neither the read
commands nor the ledger queries, so the proxy starts sooner (scripts/bench/bench_startup.py).
"""

from __future__ import annotations

import argparse
import sys

EPILOG = """\
protocols (any client to any endpoint; same protocol: retargeted unchanged; a package adding one
is found through the entry-point group tokunseba.protocols, see docs/dev/architecture.md):
{protocols}

typical use:
  tokunseba run --rules rules/examples/easy-turns-local.yaml   # start the proxy
  eval "$(tokunseba env)"                                      # point clients at it
  claude                                                       # or any SDK / Codex
  tokunseba log; tokunseba stats --since 24h; tokunseba explain <request-id>
  tokunseba sessions; tokunseba stats --by agent; tokunseba log --session <id>   # who talked, where it went
  tokunseba shadow --since 24h; tokunseba replay <request-id> --to local   # is the local model good enough?
  tokunseba earn; tokunseba earn --suggest          # which kinds of turn the local model has earned
  tokunseba quota                                              # how much of each subscription window is left
"""


# the commands cli/run.py defines: named first, nothing else is imported (start-up time)
RUN_COMMANDS = frozenset({"run", "env", "check"})


def build_parser(only_run: bool = False) -> argparse.ArgumentParser:
    """The whole parser; ``only_run``: only cli/run.py's commands (the first word is one of them)."""
    from . import run as cli_run

    from .. import protocols

    listed = "\n".join(f"  {p.name:<17} {p.title} ({p.clients})"
                       + ("" if (o := protocols.origin(p.name)) == "built in" else f"; {o}")
                       for p in protocols.all_protocols())
    listed += "".join(f"\n  ! {problem}" for problem in protocols.plugins.problems())
    p = argparse.ArgumentParser(
        prog="tokunseba",
        description="Route LLM API turns by YAML rules through mitmproxy, translating requests, replies\n"
        "and streams between the protocols listed below, and record every turn in a ledger.",
        epilog=EPILOG.format(protocols=listed),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    cli_run.add_commands(sub)
    if only_run:
        return p
    from . import (budgets as cli_budgets, prices as cli_prices, quota as cli_quota, read as cli_read,
                   sessions as cli_sessions, shadow as cli_shadow)

    cli_read.add_commands(sub)
    cli_shadow.add_commands(sub)
    from . import earn as cli_earn

    cli_earn.add_commands(sub)
    cli_prices.extend_stats(sub)  # stats --prices
    cli_sessions.add_commands(sub)  # sessions; log --session; stats --by (after --prices: it keeps it)
    cli_budgets.add_commands(sub)  # budgets
    cli_quota.add_commands(sub)  # quota: each account's subscription windows
    from . import report as cli_report

    cli_report.add_commands(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    parser = build_parser(only_run=bool(words) and words[0] in RUN_COMMANDS)
    args = parser.parse_args(words)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        rc = args.func(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `tokunseba log | head`
        return 0
    return int(rc or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
