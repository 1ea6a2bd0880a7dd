"""A ledger given as a URL tokunseba cannot open is a one-line error, never a file: no
directory named after the scheme appears, and the URL's password is never shown."""

from __future__ import annotations

import os

import pytest

from tokunseba.cli.main import main
from tokunseba.credentials import redact_text, split_url_password
from tokunseba.ledger import default_ledger_path, Ledger, LedgerError, url_scheme

from tests.support.ledgers import start

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
                   "a ledger tokunseba can open (give a SQLite file path or a postgresql:// URL)\n")
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


def test_read_commands_read_a_postgresql_ledger_on_a_read_only_role(capsys, pg_server, monkeypatch, tmp_path):
    """Two proxies' turns in one database (role tk), read by the CLI as tk_reader: stats by
    instance, log of one instance, explain; the password shows nowhere."""
    import json

    from tests.support.pg_server import READER_PASSWORD

    db = pg_server.fresh_db()
    for name in ("alice@a", "bob@b"):
        led = Ledger(pg_server.url(db=db))
        led.instance = name
        for i in range(3 if name == "alice@a" else 2):
            rid = f"tk-{name[0]}{i}"
            led.start_turn(rid, started_at=1000.0 + i, client_protocol="anthropic", host="api.anthropic.com",
                           path="/v1/messages", requested_model="claude-x", stream=False)
            led.update_turn(rid, outcome="translated", status=200, usage_protocol="openai",
                            usage_reported={"prompt_tokens": 10, "completion_tokens": 2})
            led.event(rid, "completed", {"status": 200})
        led.close()
    led = Ledger(pg_server.url(db=db))
    led.add_shadow("tk-a0", "shadow", started_at=1000.5, route="r", endpoint="other", model="m2", status=200,
                   latency_ms=12.0, comparison={"stop_reason": True})
    led.close()
    # libpq's parameters pass through: sslmode and connect_timeout here (the test server has no TLS)
    reader = pg_server.url("tk_reader", READER_PASSWORD, db, sslmode="disable", connect_timeout="5")
    monkeypatch.chdir(tmp_path)
    assert main(["stats", "--ledger", pg_server.url("tk_reader", READER_PASSWORD, db, sslmode="require")]) == 1
    err = capsys.readouterr().err
    assert "server does not support SSL" in err and err.count("\n") == 1 and READER_PASSWORD not in err
    for argv in (["sessions"], ["shadow"], ["stats", "--by", "route"], ["log", "--limit", "2"]):
        assert main([*argv, "--ledger", reader]) == 0, argv  # every read command, on the read-only role
        out, err = capsys.readouterr()
        assert READER_PASSWORD not in out + err and "error" not in err, (argv, err)
    assert main(["shadow", "--ledger", reader, "--json"]) == 0
    assert "other" in capsys.readouterr().out
    assert main(["stats", "--ledger", reader, "--json"]) == 0
    out, err = capsys.readouterr()
    st = json.loads(out)
    assert st["turns"] == 5 and st["usage"]["by_counting"]["openai"]["input"] == 50
    assert [(g["instance"], g["turns"]) for g in st["by_instance"]] == [("alice@a", 3), ("bob@b", 2)]
    assert main(["stats", "--ledger", reader, "--by", "instance"]) == 0
    out, err = capsys.readouterr()
    assert "INSTANCE" in out and "alice@a" in out and "ROUTE" not in out
    monkeypatch.setenv("TOKUNSEBA_LEDGER", reader)  # the environment variable instead of --ledger
    assert main(["log", "--instance", "bob@b", "--json"]) == 0
    out, err = capsys.readouterr()
    assert sorted(t["request_id"] for t in json.loads(out)) == ["tk-b0", "tk-b1"]
    assert main(["log"]) == 0
    out, err = capsys.readouterr()
    assert "INSTANCE" in out and "bob@b" in out
    assert main(["explain", "tk-a2"]) == 0
    out, err = capsys.readouterr()
    assert "tk-a2" in out and READER_PASSWORD not in out + err
    # a wrong password: one line, no password shown
    assert main(["stats", "--ledger", pg_server.url("tk_reader", "wrong-pw-123", db)]) == 1
    out, err = capsys.readouterr()
    assert err.startswith("error: cannot open the ledger postgresql://tk_reader@127.0.0.1") and "wrong-pw-123" not in err
    assert os.listdir(tmp_path) == []


def test_run_passes_a_postgresql_ledger_without_its_password(capsys, tmp_path, monkeypatch):
    """The proxy's command line (ps, mitmweb's options) holds the URL without the password;
    the password reaches libpq as $PGPASSWORD, which the proxy inherits."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PGPASSWORD", raising=False)
    url = "postgresql://tk:hunter2@127.0.0.1:5432/db?sslmode=require&application_name=x"
    assert main(["run", "--ledger", url, "--instance", "ci-1", "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert "hunter2" not in out + err
    assert "tokunseba_ledger=postgresql://tk@127.0.0.1:5432/db?sslmode=require&application_name=x" in out
    assert "tokunseba_instance=ci-1" in out
    assert os.environ["PGPASSWORD"] == "hunter2"
    assert os.listdir(tmp_path) == []


def test_the_addon_keeps_no_password_in_its_option(monkeypatch):
    """mitmweb shows the addon's options: a URL given with its password (mitmdump --set) is
    kept without it, the password handed to libpq as $PGPASSWORD."""
    from mitmproxy.test import taddons

    from tokunseba.proxy.mitm import Tokunseba

    monkeypatch.delenv("PGPASSWORD", raising=False)
    addon = Tokunseba()
    with taddons.context(addon) as tctx:
        tctx.configure(addon, tokunseba_ledger="postgresql://tk:hunter2@127.0.0.1:1/db?sslmode=disable")
        assert tctx.options.tokunseba_ledger == "postgresql://tk@127.0.0.1:1/db?sslmode=disable"
        assert addon.ledger is not None and addon.ledger.path == "postgresql://tk@127.0.0.1:1/db?sslmode=disable"
        assert os.environ["PGPASSWORD"] == "hunter2"
        addon.done()


def test_run_and_stats_say_when_a_spool_waits(capsys, tmp_path, monkeypatch, _tokunseba_home):
    from tokunseba.ledger.spool import Spool, encode_batch, ledger_key, spool_dir

    url = "postgresql://tk:hunter2@127.0.0.1:1/db"  # nothing listens there: the database is away
    sp = Spool(spool_dir(_tokunseba_home) / f"{ledger_key(url)}-1.jsonl")
    sp.append(encode_batch("b1", [("INSERT INTO events (request_id) VALUES (?)", ("tk-1",))], 7), 7)
    sp.close(remove_if_empty=False)
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--ledger", url, "--dry-run"]) == 0
    err = capsys.readouterr().err
    assert "tokunseba: 7 ledger records wait in a local spool" in err and "hunter2" not in err
    assert main(["stats", "--ledger", url]) == 1  # the database away: an error, and the spool said
    err = capsys.readouterr().err
    assert "7 ledger records wait in a local spool" in err and err.rstrip().splitlines()[-1].startswith("error: ")


# ---------------------------------------------------------------- paths


def test_default_path_follows_tokunseba_home(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKUNSEBA_HOME", str(tmp_path / "th"))
    assert default_ledger_path() == tmp_path / "th" / "ledger.db"


def test_default_path_falls_back_to_xdg_then_home(tmp_path, monkeypatch):
    monkeypatch.delenv("TOKUNSEBA_HOME")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_ledger_path() == tmp_path / "xdg" / "tokunseba" / "ledger.db"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_ledger_path() == tmp_path / "home" / ".local" / "share" / "tokunseba" / "ledger.db"


def test_ledger_without_path_creates_the_default_under_tokunseba_home(_tokunseba_home):
    with Ledger() as led:
        start(led, "tk-a")
    assert (_tokunseba_home / "ledger.db").exists()
    assert Ledger(readonly=True).get_turn("tk-a")["request_id"] == "tk-a"
