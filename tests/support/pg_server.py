"""A real PostgreSQL server for the tests: initdb + postgres in a temp dir, on a free port on
127.0.0.1, run as an unprivileged user (postgres refuses root: the package's ``postgres``
user, else ``nobody``; the current user when the tests do not run as root).

``PgServer.start()`` / ``stop()`` (the outage tests stop it and start it again on the same
port and data). ``url(user, password, db)`` gives a connection URL. Roles made by
``start``: ``tk`` (owner of database ``tokunseba``, password ``TK_PASSWORD``) and
``tk_reader`` (read-only: SELECT on what ``tk`` creates, password ``READER_PASSWORD``).
``fresh_db()`` makes a new empty database owned by ``tk`` (one per test).

``find_bin()`` is None when the server is not installed (the tests skip; under CI=true
they fail: scripts/ci-extras.sh installs Debian's ``postgresql``).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

TK_PASSWORD = "tk-s3cret-Pa55"
READER_PASSWORD = "reader-s3cret-Pa55"


def find_bin() -> Path | None:
    """The directory holding initdb and postgres, or None."""
    cands = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]), reverse=True)
    for d in cands:
        if os.path.exists(os.path.join(d, "initdb")) and os.path.exists(os.path.join(d, "postgres")):
            return Path(d)
    initdb = shutil.which("initdb")
    if initdb and shutil.which("postgres"):
        return Path(os.path.realpath(initdb)).parent
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_as() -> tuple[int, int] | None:
    """(uid, gid) to run the server as when we are root; None: as ourselves."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pw = pwd.getpwnam(name)
            return pw.pw_uid, pw.pw_gid
        except KeyError:
            continue
    raise RuntimeError("running as root and no unprivileged user (postgres, nobody) to run postgres as")


class PgServer:
    def __init__(self, bindir: Path, *, durable: bool = False) -> None:
        self.bindir = bindir
        self.durable = durable  # fsync on (benchmarks); the tests run without it
        self.ids = _run_as()
        self.dir = Path(tempfile.mkdtemp(prefix="tokunseba-pg-"))
        self.data = self.dir / "data"
        self.port = _free_port()
        self.proc: subprocess.Popen | None = None
        self.log = self.dir / "postgres.log"
        self._dbs = 0
        if self.ids:
            os.chown(self.dir, *self.ids)
        os.chmod(self.dir, 0o700)
        pwfile = self.dir / "pw"
        pwfile.write_text("super-" + TK_PASSWORD + "\n")
        if self.ids:
            os.chown(pwfile, *self.ids)
        self._as_user([str(bindir / "initdb"), "-D", str(self.data), "-U", "pgsuper", "--pwfile", str(pwfile),
                       "-A", "scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"], check=True)

    def _as_user(self, argv: list[str], **kw) -> subprocess.CompletedProcess:
        extra = dict(user=self.ids[0], group=self.ids[1], extra_groups=[]) if self.ids else {}
        return subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=self.dir, **extra, **kw)

    def start(self) -> None:
        extra = dict(user=self.ids[0], group=self.ids[1], extra_groups=[]) if self.ids else {}
        logf = open(self.log, "ab")
        self.proc = subprocess.Popen(
            [str(self.bindir / "postgres"), "-D", str(self.data), "-p", str(self.port), "-h", "127.0.0.1",
             "-k", str(self.dir), *([] if self.durable else ["-c", "fsync=off", "-c", "full_page_writes=off"]),
             "-c", "max_connections=60"],
            stdout=logf, stderr=logf, cwd=self.dir, **extra)
        logf.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"postgres exited: {self.log.read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    pass
                if self._ready():
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"postgres did not start: {self.log.read_text()[-2000:]}")

    def _ready(self) -> bool:
        import psycopg

        try:
            psycopg.connect(self.url("pgsuper", "super-" + TK_PASSWORD, "postgres"), connect_timeout=2).close()
            return True
        except psycopg.OperationalError:
            return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # fast shutdown: clients cut off, what was committed kept
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None
        deadline = time.monotonic() + 10  # the port is free again (a restart takes it back)
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                time.sleep(0.05)
            except OSError:
                return

    def url(self, user: str = "tk", password: str | None = TK_PASSWORD, db: str = "tokunseba", **params: str) -> str:
        auth = f"{user}:{password}" if password is not None else user
        query = "&".join(f"{k}={v}" for k, v in params.items())
        return f"postgresql://{auth}@127.0.0.1:{self.port}/{db}" + (f"?{query}" if query else "")

    def admin(self, *statements: str, db: str = "postgres") -> None:
        import psycopg

        with psycopg.connect(self.url("pgsuper", "super-" + TK_PASSWORD, db), autocommit=True) as c:
            for s in statements:
                c.execute(s)

    def setup_roles(self) -> None:
        self.admin(f"CREATE ROLE tk LOGIN PASSWORD '{TK_PASSWORD}'",
                   f"CREATE ROLE tk_reader LOGIN PASSWORD '{READER_PASSWORD}'")

    def fresh_db(self) -> str:
        """A new empty database owned by tk, readable by tk_reader; its name."""
        self._dbs += 1
        name = f"tk{self._dbs}"
        self.admin(f"CREATE DATABASE {name} OWNER tk")
        self.admin("REVOKE CREATE ON SCHEMA public FROM PUBLIC", "GRANT USAGE ON SCHEMA public TO tk_reader",
                   "GRANT ALL ON SCHEMA public TO tk",
                   "ALTER DEFAULT PRIVILEGES FOR ROLE tk IN SCHEMA public GRANT SELECT ON TABLES TO tk_reader",
                   db=name)
        return name

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
