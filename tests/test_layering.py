"""The import rules of design.md §3: the core never imports mitmproxy, sqlite3, yaml or the
CLI; the CLI never imports mitmproxy; only tokunseba/mitm.py imports mitmproxy."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "addon" / "tokunseba"
CORE = ["protocols", "translate", "sse.py", "jsonc.py", "errors.py"]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
            elif node.module:
                names.add("." + node.module.split(".")[0])
    return names


def _files(entries: list[str]) -> list[Path]:
    out: list[Path] = []
    for e in entries:
        p = PKG / e
        out.extend(sorted(p.rglob("*.py")) if p.is_dir() else [p])
    return out


def test_core_files_exist():
    files = _files(CORE)
    assert len(files) >= 8, files


def test_core_imports_no_io_or_framework():
    banned = {"mitmproxy", "sqlite3", "yaml", "click", "socket", "asyncio", "http"}
    for f in _files(CORE):
        bad = _imports(f) & (banned | {".cli", ".ledger", ".mitm", ".rules", ".cli_read", ".cli_run"})
        assert not bad, f"{f.relative_to(PKG)} imports {bad}"


def test_only_mitm_imports_mitmproxy():
    offenders = [
        str(f.relative_to(PKG))
        for f in PKG.rglob("*.py")
        if f.name != "mitm.py" and "mitmproxy" in _imports(f)
    ]
    assert offenders == []


def test_cli_never_imports_mitm():
    for name in ("cli.py", "cli_read.py", "cli_run.py"):
        f = PKG / name
        if f.exists():
            assert not (_imports(f) & {"mitmproxy", ".mitm"}), name
