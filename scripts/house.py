#!/usr/bin/env python3
"""The house's figures (issue 38), read from the source: what the issue's targets measure.

- files over 700 lines in addon/, the largest class, functions over 60 lines (an ast pass:
  ``end_lineno - lineno + 1``);
- private (``_x``) names imported across modules (``from .m import _x``), and the distinct
  names proxy/ imports from turn/ (and how many of them through turn's face, its ``__init__``);
- README lines and how many files draw the package map (a table row naming ``protocols/``
  and ``translate/``);
- ``.py`` files at the top of tests/, and modules with a test named after them
  (``test_<module>.py`` anywhere under tests/);
- outcome and policy words compared as strings (``== "pass_through"``, ``== "error"``, …).

Not a test: it prints, it asserts nothing.
Usage: python3 scripts/house.py [--root CHECKOUT]
"""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path

OUTCOME_POLICY_WORDS = ("translated", "retargeted", "pass_through", "refused", "cancelled", "interrupted", "unfinished",
                        "capped", "skip", "next", "pass", "refuse", "warn", "reroute")
COMPARED = re.compile(r"""(==|!=)\s*["'](%s)["']|["'](%s)["']\s*(==|!=)""" % ("|".join(OUTCOME_POLICY_WORDS),
                                                                             "|".join(OUTCOME_POLICY_WORDS)))


def spans(tree: ast.AST, kind: type) -> list[tuple[int, str]]:
    return [(n.end_lineno - n.lineno + 1, n.name) for n in ast.walk(tree) if isinstance(n, kind)]  # type: ignore[attr-defined]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent, help="a checkout (default: this one)")
    root = ap.parse_args().root
    pkg = root / "addon" / "tokunseba"
    files = sorted(pkg.rglob("*.py"))
    long_files, classes, funcs, private, from_turn, face, compared = [], [], [], [], set(), set(), 0
    for f in files:
        text = f.read_text()
        rel = f.relative_to(pkg)
        n = len(text.splitlines())
        if n > 700:
            long_files.append((n, str(rel)))
        tree = ast.parse(text)
        classes += [(s, f"{rel}:{name}") for s, name in spans(tree, ast.ClassDef)]
        funcs += [(s, f"{rel}:{name}") for s, name in spans(tree, ast.FunctionDef) + spans(tree, ast.AsyncFunctionDef)]
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level > 0:
                private += [f"{rel}: {a.name}" for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
                if rel.parts[0] == "proxy" and node.module and node.module.split(".")[0] == "turn" and node.level == 2:
                    names = {a.name for a in node.names}
                    from_turn |= names
                    if node.module == "turn":
                        face |= names
        compared += len(COMPARED.findall(text))
    readme = len((root / "README.md").read_text().splitlines())
    maps = [p for p in [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
            if re.search(r"^\|.*protocols/.*\|", p.read_text(), re.M) and re.search(r"^\|.*translate/.*\|", p.read_text(), re.M)]
    tests = root / "tests"
    top = [p for p in tests.glob("*.py")]
    test_names = {p.name for p in tests.rglob("test_*.py")}
    modules = [f for f in files if f.name != "__init__.py"]
    named = [f for f in modules if f"test_{f.stem}.py" in test_names]
    print(f"files over 700 lines: {len(long_files)} {sorted(long_files, reverse=True)[:5]}")
    print(f"largest class: {max(classes)[0]} ({max(classes)[1]})")
    print(f"functions over 60 lines: {sum(1 for s, _ in funcs if s > 60)} {sorted((x for x in funcs if x[0] > 60), reverse=True)[:5]}")
    print(f"private names imported across modules: {len(private)} {private[:5]}")
    print(f"names proxy/ takes from turn/: {len(from_turn)} (from its face: {len(face)})")
    print(f"README lines: {readme}; files drawing the package map: {len(maps)} {[str(p.relative_to(root)) for p in maps]}")
    print(f".py files at the top of tests/: {len(top)}; modules with a test named after them: {len(named)} of {len(modules)}")
    print(f"outcome and policy words compared as strings: {compared}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
