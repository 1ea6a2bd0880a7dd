"""One face per package (issue 38): a package in ``FACES`` declares ``__all__`` in its
``__init__``, every name there exists, and no module outside the package imports from one of
its submodules, a name its ``__all__`` does not give, or a private (``_x``) name of it. An
``ast`` pass over addon/tokunseba, as encode/httpx's own exported-members test checks its
own face. A package that gains a face is one more row of ``FACES``."""

from __future__ import annotations

import ast
import functools
import importlib
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "addon" / "tokunseba"

# package (under tokunseba) -> why its face is kept
FACES: dict[str, str] = {
    "ledger": "the proxy writes and the CLI reads the ledger through its face (issue 38)",
    "routing": "the proxy and the CLI decide and explain through its face (issue 38; tests/suites/test_routing_face.py)",
    "neutral": "codecs, protocols and the turn speak the neutral model through its face (issue 38)",
    "protocols": "every fact about a protocol is read through its face (issue 38)",
    "translate": "the turn, the rules and the CLI translate through its face (issue 38)",
    "reasoning": "the turn and the proxy keep and restore reasoning through its face (issue 38)",
    "shadow": "the proxy sends shadows and the CLI replays and explains them through its face (issue 38)",
    "webview": "the turn and the proxy present a turn to mitmweb through its face (issue 38)",
    "pricing": "the proxy and the CLI price turns through its face (issue 38)",
    "report": "the CLI's report command draws the page through its face (issue 38)",
    "turn": "the proxy (its adapter) and shadows take a turn's plan, reply and failover through its face (issue 38)",
    "budgets": "the proxy and the CLI hold, settle and read spending caps through its face (issue 40)",
}


def _module_name(path: Path) -> str:
    """The dotted name of the module at ``path`` (a package's for its ``__init__``)."""
    parts = ("tokunseba", *path.relative_to(PKG).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _absolute(path: Path, node: ast.ImportFrom) -> str:
    """The module a ``from … import`` in ``path`` names, absolute."""
    if node.level == 0:
        return node.module or ""
    here = _module_name(path).split(".")
    if path.name != "__init__.py":
        here = here[:-1]  # the package the module is in
    base = here[: len(here) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


@functools.cache
def _import_nodes() -> tuple[tuple[Path, tuple[ast.Import | ast.ImportFrom, ...]], ...]:
    """Every module's import statements, parsed once for all the tests here."""
    return tuple((path, tuple(n for n in ast.walk(ast.parse(path.read_text(), filename=str(path)))
                              if isinstance(n, (ast.Import, ast.ImportFrom))))
                 for path in sorted(PKG.rglob("*.py")))


def _imports_of(package: str, *, inside_too: bool = False) -> list[tuple[str, str, str | None]]:
    """(where, module, name) of every import of ``tokunseba.<package>`` or below from a module
    outside it (or from any module, ``inside_too``); name None for ``import module``."""
    full = f"tokunseba.{package}"
    inside = PKG / package
    found: list[tuple[str, str, str | None]] = []
    for path, nodes in _import_nodes():
        if path.is_relative_to(inside) and not inside_too:
            continue
        for node in nodes:
            where = f"{path.relative_to(PKG.parent.parent)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Import):
                found.extend((where, a.name, None) for a in node.names if a.name == full or a.name.startswith(full + "."))
            elif isinstance(node, ast.ImportFrom):
                module = _absolute(path, node)
                if module == full or module.startswith(full + "."):
                    found.extend((where, module, a.name) for a in node.names)
                elif module == "tokunseba" and any(a.name == package for a in node.names):
                    found.append((where, full, None))  # from .. import ledger: the package itself
    return found


@pytest.mark.parametrize("package", sorted(FACES))
def test_every_name_in_all_exists(package):
    mod = importlib.import_module(f"tokunseba.{package}")
    names = getattr(mod, "__all__", None)
    assert names, f"tokunseba.{package} declares no __all__"
    assert len(names) == len(set(names)), f"tokunseba.{package}.__all__ names a name twice"
    missing = [n for n in names if not hasattr(mod, n)]
    assert not missing, f"tokunseba.{package}.__all__ names what it does not have: {missing}"
    private = [n for n in names if n.startswith("_")]
    assert not private, f"tokunseba.{package}.__all__ gives private names: {private}"


@pytest.mark.parametrize("package", sorted(FACES))
def test_others_import_only_the_face(package):
    full = f"tokunseba.{package}"
    names = set(importlib.import_module(full).__all__)
    imports = _imports_of(package)
    assert imports, f"no module outside tokunseba.{package} imports it: is the walk right?"
    bad = [f"{where}: {module}" + (f" import {name}" if name else "")
           for where, module, name in imports
           if module != full or (name is not None and name not in names)]
    assert not bad, (f"{len(bad)} imports past tokunseba.{package}'s face (import from the package, "
                     "a name its __all__ gives):\n" + "\n".join(bad))


@pytest.mark.parametrize("package", sorted(FACES))
def test_no_private_name_crosses_a_module(package):
    """Not even between the package's own modules: a name another module needs is public."""
    bad = [f"{where}: {module} import {name}" for where, module, name in _imports_of(package, inside_too=True)
           if name is not None and name.startswith("_")]
    assert not bad, "private names imported across modules:\n" + "\n".join(bad)


def test_the_walk_sees_a_submodule_import():
    """The walk resolves relative imports: a submodule import is told from the face's."""
    path = PKG / "cli" / "x.py"
    sub = ast.parse("from ..ledger.store import Ledger").body[0]
    face = ast.parse("from ..ledger import Ledger").body[0]
    top = ast.parse("from . import ledger").body[0]
    assert isinstance(sub, ast.ImportFrom) and isinstance(face, ast.ImportFrom) and isinstance(top, ast.ImportFrom)
    assert _absolute(path, sub) == "tokunseba.ledger.store"
    assert _absolute(path, face) == "tokunseba.ledger"
    assert _absolute(PKG / "__init__.py", top) == "tokunseba"
