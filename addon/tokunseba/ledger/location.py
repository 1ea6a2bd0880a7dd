"""Where the ledger lives and who writes it: its home, its default target (a file or a
``postgresql://`` URL), how a target given as a URL is told from a path, and the names a
proxy records on its turns (``default_instance``) and owns them by (``instance_id``).

Contract: no database here; nothing is opened, only named. ``take_password`` is the one
function with an effect (it moves a URL's password to ``$PGPASSWORD``).
"""

from __future__ import annotations

import getpass
import os
import platform
import re
import secrets
from pathlib import Path

from ..credentials import split_url_password


def tokunseba_home() -> Path:
    """``$TOKUNSEBA_HOME``, else the XDG data dir (``$XDG_DATA_HOME/tokunseba`` or
    ``~/.local/share/tokunseba``)."""
    if home := os.environ.get("TOKUNSEBA_HOME"):
        return Path(home).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg).expanduser() / "tokunseba"


def default_ledger_path() -> Path:
    return tokunseba_home() / "ledger.db"


LEDGER_ENV = "TOKUNSEBA_LEDGER"  # the ledger when --ledger is not given: a file path or a postgresql:// URL
PG_SCHEMES = ("postgresql", "postgres")


def default_ledger_target() -> str | Path:
    """``$TOKUNSEBA_LEDGER`` (a path or a URL), else ``default_ledger_path()``."""
    return os.environ.get(LEDGER_ENV) or default_ledger_path()


def take_password(target: str | None) -> str | None:
    """For a postgresql:// URL holding a password: the URL without it, the password moved to
    ``$PGPASSWORD`` (libpq's), so the URL can be shown (mitmweb's options, ``ps``); else None."""
    if not target or url_scheme(target) not in PG_SCHEMES:
        return None
    clean, password = split_url_password(target)
    if password is None:
        return None
    os.environ["PGPASSWORD"] = password
    return clean


def spool_note(target: str | os.PathLike | None) -> str | None:
    """A line saying what waits in the local spools of the shared ledger ``target`` (its
    database was away when they were written), or None."""
    if target is None or url_scheme(target) not in PG_SCHEMES:
        return None
    from .spool import ledger_key, spool_dir, waiting

    clean = split_url_password(os.fspath(target))[0]
    found = waiting(spool_dir(tokunseba_home()), ledger_key(clean))
    if not found:
        return None
    records = sum(r for _, _, r in found)
    files = ", ".join(str(p) for p, _, _ in found)
    return (f"tokunseba: {records} ledger records wait in a local spool ({files}): the database was away when they "
            "were written; a proxy of this ledger writes them once it reaches the database")


def default_instance() -> str:
    """The name a proxy records on its turns unless told another: ``user@host``."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return f"{user}@{platform.node()}"


# a URL (scheme://...), as opposed to a file path: never taken for a file name
URL_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):(//|$)")


def url_scheme(target: str | os.PathLike | None) -> str | None:
    """The scheme of a ledger given as a URL (``postgresql://…``), lowercased; None for a path."""
    if target is None or isinstance(target, Path):
        return None
    m = URL_SCHEME.match(os.fspath(target))
    return m.group(1).lower() if m else None


def instance_id() -> str:
    """Who owns the turns this process opens: ``host/pid/nonce``."""
    return f"{platform.node()}/{os.getpid()}/{secrets.token_hex(4)}"


def owner_alive(owner: str) -> bool:
    """Whether the proxy instance ``owner`` may still be running: False only when it ran on
    this host and its process is gone. Another host's instance cannot be checked: alive."""
    host, _, rest = owner.partition("/")
    pid_text = rest.partition("/")[0]
    if host != platform.node() or not pid_text.isdigit():
        return True
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True
