"""Private by default: the data dir is created 0700 and the files tokunseba creates in it
(the ledger and SQLite's ``-wal`` / ``-shm``) 0600, whatever the user's umask.

``create_private(path, opener)`` runs ``opener`` under umask 077 (so no file it creates is
ever readable by others, not even for an instant) and chmods ``path`` to 0600 when it did
not exist before; SQLite gives ``-wal`` / ``-shm`` the main file's mode. Existing files are
left as they are: ``readable_by_others`` lets ``tokunseba run`` warn about them instead.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
DIR_MODE, FILE_MODE = 0o700, 0o600
SIDE_FILES = ("-wal", "-shm", "-journal")
_umask_lock = threading.Lock()  # the umask is per process: one change at a time


def private_dir(path: Path) -> None:
    """Create ``path`` (and missing parents) 0700; an existing dir is left as it is."""
    if not path.exists():
        path.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
        os.chmod(path, DIR_MODE)  # mkdir's mode is filtered by the umask


def create_private(path: Path, opener: Callable[[], T]) -> T:
    """``opener()`` with files created 0600; ``path``'s dir created 0700 if missing."""
    private_dir(path.parent)
    new = not path.exists()
    with _umask_lock:
        old = os.umask(0o077)
        try:
            result = opener()
        finally:
            os.umask(old)
    if new:
        for p in (path, *(path.with_name(path.name + s) for s in SIDE_FILES)):
            try:
                os.chmod(p, FILE_MODE)
            except FileNotFoundError:
                pass
    return result


def readable_by_others(path: Path) -> list[str]:
    """``path`` and its SQLite side files that group or others may read (for a warning)."""
    out = []
    for p in (path, *(path.with_name(path.name + s) for s in SIDE_FILES)):
        try:
            mode = p.stat().st_mode
        except OSError:
            continue
        if mode & (stat.S_IRGRP | stat.S_IROTH):
            out.append(f"{p} ({stat.filemode(mode)})")
    return out
