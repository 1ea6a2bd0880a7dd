"""Shared fixtures. TOKUNSEBA_HOME always points at a temp dir so no test touches the
user's real ledger."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parent.parent.parent / "shared"
FIXTURES = SHARED / "fixtures"


@pytest.fixture(autouse=True)
def _tokunseba_home(tmp_path_factory, monkeypatch):
    home = tmp_path_factory.mktemp("tokunseba_home")
    monkeypatch.setenv("TOKUNSEBA_HOME", str(home))
    return home


def load_fixture(name: str) -> dict:
    """A captured request: {"method","url","headers":[[k,v]...],"body":{...}}."""
    p = FIXTURES / name
    if not p.exists():  # CI lays shared/ beside the clone; fall back to /work/shared
        p = Path("/work/shared/fixtures") / name
    return json.loads(p.read_text())
