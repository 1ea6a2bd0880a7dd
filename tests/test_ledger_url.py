"""A ledger given as a URL tokunseba cannot open is a one-line error, never a file: no
directory named after the scheme appears, and the URL's password is never shown."""

from __future__ import annotations

import os

import pytest

from tokunseba.cli import main
from tokunseba.ledger import Ledger, LedgerError, url_scheme
from tokunseba.secrets import redact_text, split_url_password

BAD_URLS = ["mysql://tk:hunter2@127.0.0.1:3306/db", "http://tk:hunter2@127.0.0.1/db", "sqlite://tk:hunter2@x/db"]


@pytest.mark.parametrize("url", BAD_URLS)
@pytest.mark.parametrize("command", [["stats"], ["log"], ["explain", "abc"]])
def test_read_commands_refuse_a_url_in_one_line_and_create_nothing(capsys, tmp_path, monkeypatch, url, command):
    monkeypatch.chdir(tmp_path)
    rc = main([*command, "--ledger", url])
    out, err = capsys.readouterr()
    scheme = url.partition(":")[0]
    assert rc == 1 and out == ""
    assert err == (f"error: cannot open the ledger {url.replace('hunter2', '<redacted>')}: a {scheme}: URL is not "
                   "a ledger tokunseba can open (give a SQLite file path)\n")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("url", BAD_URLS)
def test_run_refuses_a_url_before_starting_anything(capsys, tmp_path, monkeypatch, url):
    monkeypatch.chdir(tmp_path)
    rc = main(["run", "--ledger", url, "--port", "0", "--dry-run"])
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    assert err.startswith("error: cannot open the ledger ") and "hunter2" not in err and "<redacted>" in err
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("url", BAD_URLS)
def test_the_ledger_itself_refuses_a_url(tmp_path, monkeypatch, url):
    monkeypatch.chdir(tmp_path)
    for readonly in (False, True):
        with pytest.raises(LedgerError) as e:
            Ledger(url, readonly=readonly)
        assert "hunter2" not in str(e.value)
    assert os.listdir(tmp_path) == []


def test_paths_are_not_urls(tmp_path):
    for path in ("ledger.db", "./postgresql/ledger.db", "C:ledger.db", "/tmp/a:b/ledger.db", str(tmp_path)):
        assert url_scheme(path) is None
    assert url_scheme("PostgreSQL://h/db") == "postgresql"
    assert url_scheme("postgres:") == "postgres"


@pytest.mark.parametrize("url, clean, password", [
    ("postgresql://tk:s3cr%40t@127.0.0.1:5432/db?sslmode=require", "postgresql://tk@127.0.0.1:5432/db?sslmode=require",
     "s3cr@t"),
    ("postgresql://tk@h/db?password=xx&sslmode=disable", "postgresql://tk@h/db?sslmode=disable", "xx"),
    ("postgresql://h/db?sslmode=verify-full", "postgresql://h/db?sslmode=verify-full", None),
])
def test_a_urls_password_is_split_off_and_redacted_in_text(url, clean, password):
    assert split_url_password(url) == (clean, password)
    if password:
        assert password not in redact_text(f"cannot connect to {url}: refused")
    assert redact_text("host=db password=abc dbname=x") == "host=db password=<redacted> dbname=x"
