"""Shared fixtures. TOKUNSEBA_HOME always points at a temp dir so no test touches the
user's real ledger."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

# Protocols shipped as packages (the test plugin, tests/plugins/tokunseba_echo_protocol, is
# installed beside the test venv) are loaded only by the tests about them (tests/suites/test_echo_plugin.py
# loads it, its e2e test starts mitmdump without this variable): every other test sees the four
# built in, as before. Set before anything imports tokunseba.protocols, which loads plugins once.
os.environ["TOKUNSEBA_PLUGINS"] = ""
# the test plugin lives beside the venv (scripts/setup.sh): on the path of the tests and of the
# processes they start, never of a user's `tokunseba run`
TEST_PLUGINS = Path(__file__).resolve().parent.parent / ".venv" / "test-plugins"
if str(TEST_PLUGINS) not in sys.path:
    sys.path.append(str(TEST_PLUGINS))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (os.environ.get("PYTHONPATH"), str(TEST_PLUGINS))))

# captured client requests (redacted), kept in the repository: the code never points outside it
FIXTURES = Path(__file__).resolve().parent / "data" / "fixtures"


@pytest.fixture(autouse=True)
def _tokunseba_home(tmp_path_factory, monkeypatch):
    home = tmp_path_factory.mktemp("tokunseba_home")
    monkeypatch.setenv("TOKUNSEBA_HOME", str(home))
    return home


def load_fixture(name: str) -> dict:
    """A captured request (tests/data/fixtures): {"method","url","headers":[[k,v]...],"body":{...}}."""
    return json.loads((FIXTURES / name).read_text())


@pytest.fixture(autouse=True)
def _no_ledger_env(monkeypatch):
    """A developer's $TOKUNSEBA_LEDGER never reaches the tests."""
    monkeypatch.delenv("TOKUNSEBA_LEDGER", raising=False)


def _pg_missing(why: str):
    import os

    if os.environ.get("CI") == "true":
        pytest.fail(f"{why} (scripts/ci-extras.sh installs it)")
    pytest.skip(why)


@pytest.fixture(scope="session")
def pg_server():
    """A real PostgreSQL server for the session (tests/support/pg_server.py); skipped when it is not
    installed here, a failure under CI=true."""
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        _pg_missing("psycopg / psycopg_pool not installed (pip install -e '.[test]')")
    from tests.support.pg_server import PgServer, find_bin

    bindir = find_bin()
    if bindir is None:
        _pg_missing("PostgreSQL server not installed (Debian: apt-get install postgresql)")
    server = PgServer(bindir)
    try:
        server.start()
        server.setup_roles()
        yield server
    finally:
        server.close()


@pytest.fixture
def pg_url(pg_server):
    """The URL (role tk, with its password) of a new empty database."""
    return pg_server.url(db=pg_server.fresh_db())
