"""The import rules of docs/dev/architecture.md §3: the core never imports mitmproxy, sqlite3, yaml, the
CLI, the ledger, the proxy path or the rules; the CLI never imports mitmproxy nor the proxy
path (proxy/, turn/); only the adapter (proxy/mitm.py, core.py and the parts it chains)
imports mitmproxy or tornado; turn/ imports no proxy/, no mitmproxy, no asyncio; no import
runs back up a layer (``LAYERS``), and in proxy/ the core imports no part (``PROXY_LAYERS``).
And the codec rules of issue 9: no codec package imports another; ``neutral/`` imports no
codec and no ``protocols/``; ``protocols/`` imports no codec."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "addon" / "tokunseba"
CORE = ["neutral", "protocols", "translate", "sse.py", "jsonc.py", "errors.py"]


def _imports(path: Path) -> set[str]:
    """Top-level names of what ``path`` imports; a tokunseba module as ``.name`` (its first
    part under the package: ``.ledger`` for ``from ..ledger.store import x``)."""
    here = path.relative_to(PKG).parts[:-1]  # the package the file is in, under tokunseba
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] if not a.name.startswith("tokunseba.") else "." + a.name.split(".")[1]
                         for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module:
                parts = node.module.split(".")
                names.add("." + parts[1] if parts[0] == "tokunseba" and len(parts) > 1 else parts[0])
            else:
                base = list(here[: len(here) - (node.level - 1)])
                target = base + (node.module.split(".") if node.module else [])
                if target:
                    names.add("." + target[0])
                else:  # from . import x (at the package's top): each name is a module
                    names.update("." + a.name for a in node.names)
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
        bad = _imports(f) & (banned | {".cli", ".ledger", ".proxy", ".routing", ".shadow", ".webview", ".reasoning"})
        assert not bad, f"{f.relative_to(PKG)} imports {bad}"


ADAPTER = {PKG / "proxy" / f"{m}.py" for m in ("mitm", "core", "route", "reply", "record", "web", "websocket",
                                                  "ws_connection", "ws_routed")}


def test_only_the_adapter_imports_mitmproxy_or_tornado():
    assert all(f.exists() for f in ADAPTER), sorted(str(f) for f in ADAPTER if not f.exists())
    offenders = [
        str(f.relative_to(PKG))
        for f in PKG.rglob("*.py")
        if f not in ADAPTER and {"mitmproxy", "tornado"} & _imports(f)
    ]
    assert offenders == []


def test_turn_imports_no_proxy_no_mitmproxy_no_asyncio():
    files = sorted((PKG / "turn").rglob("*.py"))
    assert len(files) >= 10, files
    for f in files:
        bad = {i for i in _absolute_imports(f)
               if _under(i, "tokunseba.proxy") or i.split(".")[0] in ("mitmproxy", "asyncio", "tornado", "socket")}
        assert not bad, f"{f.relative_to(PKG)} imports {bad}"


def test_the_cli_imports_nothing_of_the_proxy_path():
    for f in sorted((PKG / "cli").rglob("*.py")):
        bad = {i for i in _absolute_imports(f) if _under(i, "tokunseba.proxy") or _under(i, "tokunseba.turn")}
        assert not bad, f"{f.relative_to(PKG)} imports {bad}"


# the packages and top modules of tokunseba, lowest first: a module imports only from its own
# layer or a lower one (each row: why it sits there)
LAYERS: list[tuple[set[str], str]] = [
    ({"jsonc", "sse", "encoding", "errors", "states", "addresses"}, "plain building blocks: no tokunseba import but each other"),
    ({"neutral"}, "the neutral model"),
    ({"protocols"}, "the protocol facts, over the neutral model"),
    ({"credentials", "validate", "translate", "webview", "outcomes"}, "over the facts: keys, checks, codecs, views"),
    ({"routing", "ledger"}, "where a turn goes; where it is written"),
    ({"pricing", "reasoning", "budgets", "report"}, "over the rules and the ledger (report: the figures of `tokunseba report`)"),
    ({"turn"}, "one turn's plain lifecycle, over all of the above"),
    ({"shadow"}, "a turn sent again (it plans as a turn does)"),
    ({"proxy"}, "the adapter: mitmproxy's hooks and the sockets"),
    ({"cli"}, "the command: reads the ledger and the rules, never the proxy path"),
]
PROXY_LAYERS = [{"options", "http1", "relay_pool", "relay", "provider_reach", "provider_limits", "base_url", "recorder",
                 "shadowing", "otel_spans", "ws_client", "ws_connection", "budgeting", "__init__"}, {"core"}, {"record"},
                {"route", "reply", "web"}, {"ws_routed"}, {"websocket"}, {"mitm"}]


def _layer(name: str, layers: list) -> int:
    for i, row in enumerate(layers):
        if name in (row[0] if isinstance(row, tuple) else row):
            return i
    raise AssertionError(f"{name} is in no layer of tests/suites/test_layering.py: give it one")


def test_no_import_runs_back_up_a_layer():
    assert not (PKG / "__init__.py").read_text().count("import "), "tokunseba/__init__.py imports nothing"
    for f in sorted(PKG.rglob("*.py")):
        rel = f.relative_to(PKG)
        if rel == Path("__init__.py"):
            continue
        own = _layer(rel.parts[0].removesuffix(".py"), LAYERS)
        for i in _absolute_imports(f):
            parts = i.split(".")
            if parts[0] != "tokunseba" or len(parts) < 2 or not (PKG / parts[1]).exists() and not (PKG / f"{parts[1]}.py").exists():
                continue
            assert _layer(parts[1], LAYERS) <= own, f"{rel} imports {i}: up a layer"
            if rel.parts[0] == "proxy" and parts[1] == "proxy" and len(parts) > 2 and (PKG / "proxy" / f"{parts[2]}.py").exists():
                mine = _layer(rel.name.removesuffix(".py"), PROXY_LAYERS)
                assert _layer(parts[2], PROXY_LAYERS) <= mine, f"{rel} imports {i}: up a layer of proxy/"


def test_cli_never_imports_mitm():
    files = sorted((PKG / "cli").glob("*.py"))
    assert len(files) >= 5, files
    for f in files:
        assert "mitmproxy" not in _imports(f), f.name
        assert not re.search(r"^\s*from \.\.proxy(\.mitm)? import (mitm\b|.*Tokunseba)|proxy\.mitm", f.read_text(), re.M), f.name


# ---- the codec rules --------------------------------------------------------------------

ROOT = PKG.parent  # addon/


def _module(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    return ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)


def _absolute_imports(path: Path) -> set[str]:
    """Every module ``path`` imports, as absolute dotted names (function-level imports too;
    ``from X import name`` counts as X and X.name, since the name may be a module)."""
    mod = _module(path)
    package = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)
    return out


def _codec_packages() -> list[Path]:
    return sorted(d for d in (PKG / "translate").iterdir() if d.is_dir() and (d / "__init__.py").exists())


def _under(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_there_is_one_codec_package_per_translated_protocol():
    assert {d.name for d in _codec_packages()} >= {"anthropic", "openai_chat", "openai_responses"}


def test_no_codec_package_imports_another():
    codecs = {d.name: _module(d / "__init__.py") for d in _codec_packages()}
    for name, package in codecs.items():
        others = [p for n, p in codecs.items() if n != name]
        for f in (PKG / "translate" / name).rglob("*.py"):
            bad = {i for i in _absolute_imports(f) if any(_under(i, o) for o in others)}
            assert not bad, f"{f.relative_to(PKG)} imports another codec: {bad}"


def test_neutral_imports_no_codec_and_no_protocol_module():
    for f in (PKG / "neutral").rglob("*.py"):
        bad = {i for i in _absolute_imports(f) if _under(i, "tokunseba.translate") or _under(i, "tokunseba.protocols")}
        assert not bad, f"{f.relative_to(PKG)} imports {bad}"


def test_protocols_import_no_codec():
    for f in (PKG / "protocols").rglob("*.py"):
        bad = {i for i in _absolute_imports(f) if _under(i, "tokunseba.translate")}
        assert not bad, f"{f.relative_to(PKG)} imports {bad}"
