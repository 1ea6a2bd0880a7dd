#!/usr/bin/env python3
"""The front door's figures (issue 28), read from the source: proxy/'s modules and the idea each
docstring opens with, its largest classes, the length of every mitmproxy hook, and the state
literals left outside states.py. For the request hook's walk, see scripts/flow_walk.py.

Targets: the largest class under proxy/ at most 300 lines; every hook at most 30 lines;
proxy/ at most 16 modules; no reply-mode or disposition literal, and no action compared as a
string, outside addon/tokunseba/states.py. Not a test: it prints, it asserts nothing.
Usage: python3 scripts/front_door.py [--root CHECKOUT]
"""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path

HOOKS = {"load", "configure", "running", "done", "request", "requestheaders", "responseheaders", "response", "error",
         "client_connected", "client_disconnected", "server_connect", "server_connected", "websocket_message"}
STATE_LITERAL = re.compile(r"""["'](raw-stream|translate-stream|translate-whole|shape-error|answer-broken|"""
                           r"""answer-unreachable|answer-shape|judge-whole|retarget-error|record-error)["']""")
ACTION_STRING = re.compile(r"""\.(action|do|mode)\s*(==|!=|in)\s*\(?\s*["']""")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent, help="a checkout (default: this one)")
    args = ap.parse_args()
    pkg = args.root / "addon" / "tokunseba"
    proxy = sorted((pkg / "proxy").glob("*.py"))
    print(f"proxy/: {len([p for p in proxy if p.name != '__init__.py'])} modules (+ __init__.py)")
    classes, hooks = [], []
    for f in proxy:
        tree = ast.parse(f.read_text())
        doc = (ast.get_docstring(tree) or "(no docstring)").split("\n")[0]
        print(f"  {f.name:<20} {doc}")
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                classes.append((node.end_lineno - node.lineno + 1, f"{f.name}:{node.name}"))
                for m in node.body:
                    if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and m.name in HOOKS:
                        hooks.append((m.end_lineno - m.lineno + 1, f"{f.name}:{node.name}.{m.name}"))
    print("largest classes: " + ", ".join(f"{n} {name}" for n, name in sorted(classes, reverse=True)[:4]))
    print("longest hooks: " + ", ".join(f"{n} {name}" for n, name in sorted(hooks, reverse=True)[:4]))
    literals = []
    for f in sorted(pkg.rglob("*.py")):
        if f == pkg / "states.py":
            continue
        for i, line in enumerate(f.read_text().splitlines(), 1):
            if STATE_LITERAL.search(line) or ACTION_STRING.search(line):
                literals.append(f"{f.relative_to(pkg)}:{i}")
    print(f"state literals or string comparisons outside states.py: {len(literals)}" +
          (": " + ", ".join(literals[:10]) if literals else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
