"""The ``tokunseba`` command (docs/dev/architecture.md §6): ``main`` parses the arguments and hands each
subcommand to its module — ``run`` (start mitmdump/mitmweb with the addon), ``read`` (registers
the read commands, one module each: ``models``, ``stats``, ``explain``, ``log``, over ``common``,
what every read command shares), ``sessions`` and its ``session_view`` (turns grouped by who is
talking), ``shadow`` (shadow turns and replays), ``quota`` (each account's subscription
windows), ``earn`` (earned routes) and its ``earn_report`` (``--report``), ``fitness`` (``models --probe``'s window and prefill), ``context_env``
(``env --rules``' Claude Code context settings), ``prices``.

Contract: the CLI reads the ledger and the rules; it never imports mitmproxy nor the proxy
path (tests/suites/test_layering.py keeps it so). ``python -m tokunseba.cli`` runs ``main``.
"""

from .main import build_parser, main

__all__ = ["build_parser", "main"]
