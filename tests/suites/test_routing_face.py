"""routing/ has one public face (issue 38): the other packages import only the names of
``tokunseba.routing.__all__``, from the package itself, never a module of it nor a private
``_name`` (tests of a module's internals may import that module)."""

from __future__ import annotations

import ast
from pathlib import Path

import tokunseba.routing as routing

PKG = Path(__file__).resolve().parents[2] / "addon" / "tokunseba"


def _routing_imports(path: Path) -> list[tuple[str, str]]:
    """(module, name) of each ``from ... import name`` in ``path`` that reaches into tokunseba.routing."""
    here = ["tokunseba", *path.relative_to(PKG).parts[:-1]]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom):
            base = here[: len(here) - (node.level - 1)] if node.level else []
            module = ".".join(base + (node.module.split(".") if node.module else []))
            if module == "tokunseba.routing" or module.startswith("tokunseba.routing."):
                out += [(module, a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            out += [(a.name, "*") for a in node.names if a.name.startswith("tokunseba.routing")]
    return out


def test_every_public_name_is_there():
    assert len(routing.__all__) == len(set(routing.__all__))
    assert [n for n in routing.__all__ if not hasattr(routing, n)] == []


def test_other_packages_import_only_the_face():
    files = [f for f in sorted(PKG.rglob("*.py")) if f.relative_to(PKG).parts[0] != "routing"]
    bad = [f"{f.relative_to(PKG)}: {m} import {n}" for f in files for m, n in _routing_imports(f)
           if m != "tokunseba.routing" or n not in routing.__all__]
    assert bad == []
    assert sum(len(_routing_imports(f)) for f in files) > 20  # the pass sees the importers


def test_no_private_name_crosses_a_module_of_routing():
    bad = [f"{f.relative_to(PKG)}: {m} import {n}" for f in sorted(PKG.rglob("*.py"))
           for m, n in _routing_imports(f) if n.startswith("_")]
    assert bad == []
