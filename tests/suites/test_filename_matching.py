"""The tests mirror the packages (issue 38), checked as mitmproxy's own filename_matching script
checks mitmproxy's: a test file in ``tests/<package>/`` is named after a module of
``addon/tokunseba/<package>/`` — ``test_<module>.py``, or ``test_<module>_<aspect>.py`` for a
second file about one side of the same module — and a test file at the top of ``tests/`` after a
module at the top of the package. Suites that cut across modules live in the folders of
``CROSS_CUTTING``; a file that must stand elsewhere goes into ``EXCEPTIONS`` with its reason.

Run as a script (``python tests/suites/test_filename_matching.py``) it prints the modules that no
test file is named after; the test prints the same list (``pytest -s``)."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
PKG = TESTS.parent / "addon" / "tokunseba"

# folders of tests/ that mirror no package, each with what it holds
CROSS_CUTTING = {
    "suites": "suites across packages: layering, references, types, faces, pairs and properties, "
              "security, docs and the scripts' smoke tests",
    "support": "helpers several tests import (planning, pairs, upstream servers, browser, tmux, ...)",
    "e2e": "end-to-end tests through real processes, one file per behaviour",
    "data": "fixtures: captured requests and streams",
    "plugins": "the test protocol package installed beside the venv",
    "toy": "the toy protocol registered by tests/suites/test_toy_protocol.py",
}

# test files named after no module of their folder: path under tests/ -> why
EXCEPTIONS: dict[str, str] = {}


def _modules(folder: Path) -> set[str]:
    return {p.stem for p in folder.glob("*.py") if p.name != "__init__.py"}


def _misnamed() -> list[str]:
    bad = []
    for test in sorted(TESTS.rglob("test_*.py")):
        rel = test.relative_to(TESTS)
        if rel.parts[0] in CROSS_CUTTING or rel.as_posix() in EXCEPTIONS:
            continue
        source = PKG.joinpath(*rel.parts[:-1])
        if not (source / "__init__.py").is_file() and source != PKG:
            bad.append(f"tests/{rel}: no package addon/tokunseba/{rel.parent.as_posix()}")
            continue
        name = test.stem.removeprefix("test_")
        modules = _modules(source)
        if name not in modules and not any(name.startswith(m + "_") for m in modules):
            bad.append(f"tests/{rel}: no module {name}.py in addon/tokunseba/{rel.parent.as_posix()}")
    return bad


def untested_modules() -> list[str]:
    """Modules of the package that no test file is named after (``test_<module>.py`` in the
    mirroring folder)."""
    out = []
    for module in sorted(PKG.rglob("*.py")):
        if module.name == "__init__.py" or "__pycache__" in module.parts:
            continue
        rel = module.relative_to(PKG)
        if not TESTS.joinpath(*rel.parts[:-1], f"test_{module.stem}.py").is_file():
            out.append(rel.as_posix())
    return out


def test_every_test_file_is_named_after_a_module_of_its_folder():
    untested = untested_modules()
    print(f"\n{len(untested)} modules with no test named after them:\n  " + "\n  ".join(untested))
    bad = _misnamed()
    assert not bad, ("test files named after no module (rename, move to a cross-cutting folder, "
                     "or add to EXCEPTIONS with a reason):\n" + "\n".join(bad))


def test_every_test_folder_is_a_package():
    # equal basenames in two folders (translate/gemini/test_decode.py, translate/anthropic/...)
    # import as different modules only when each folder is a package
    bad = [f"tests/{d.relative_to(TESTS)}" for d in sorted(TESTS.rglob("*"))
           if d.is_dir() and "__pycache__" not in d.parts and d.relative_to(TESTS).parts[0] not in ("data", "plugins")
           and any(d.glob("*.py")) and not (d / "__init__.py").is_file()]
    assert not bad, "test folders without __init__.py:\n" + "\n".join(bad)


def test_the_exceptions_still_exist():
    gone = [p for p in EXCEPTIONS if not (TESTS / p).is_file()]
    assert not gone, f"EXCEPTIONS names files that are gone: {gone}"


if __name__ == "__main__":
    missing = untested_modules()
    print(f"{len(missing)} modules with no test named after them:")
    for m in missing:
        print(f"  addon/tokunseba/{m}")
    raise SystemExit(1 if _misnamed() else 0)
