"""The spool: a shared ledger's batches kept in a local file while its database is away.

- One file per proxy process, ``$TOKUNSEBA_HOME/spool/<ledger>-<pid>.jsonl`` (``<ledger>``:
  a hash of the database's host, port and name), created 0600 in a 0700 directory and
  held with an exclusive ``flock`` while its proxy runs. A line is one batch: its id and
  its statements, built (scrubbed) as they would have been written, bytes in base64.
- Bounded (``max_bytes``): a batch that would pass the bound is dropped, counted
  (``dropped_batches`` / ``dropped_records``) and logged with the bound.
- ``batches()`` reads what waits, in order, from where the last drain stopped; ``done(n)``
  marks the next ``n`` lines drained (the file is emptied once all are). Drained batches
  are applied exactly once (``pg.run_program`` skips a batch id already applied),
  so a drain cut short, or a file adopted after a crash, is simply drained again.
- ``orphans(dir, key)``: spool files of the same ledger left by proxies that stopped (not
  locked): the next proxy adopts and drains them. ``waiting(dir, key)`` says what waits in
  every spool of a ledger (for ``run`` and ``stats``).
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import os
from pathlib import Path
from urllib.parse import unquote, urlsplit
from typing import Any

import orjson

from .private_files import private_dir

DEFAULT_MAX_BYTES = 256 * 1024 * 1024


def ledger_key(url: str) -> str:
    """A file-name-safe key of a shared ledger: its database's host, port and name (whoever
    connects: the proxy's role and a read-only one find the same spools)."""
    parts = urlsplit(url)
    port: int | str
    try:
        port = parts.port or 5432
    except ValueError:
        port = parts.netloc
    where = f"{(parts.hostname or 'localhost').lower()}:{port}/{unquote(parts.path.lstrip('/'))}"
    return hashlib.sha256(where.encode()).hexdigest()[:16]


def _default(v: Any) -> Any:
    if isinstance(v, (bytes, bytearray, memoryview)):
        return {"$b": base64.b64encode(bytes(v)).decode()}
    raise TypeError(f"cannot spool a {type(v).__name__}")


def _decode(v: Any) -> Any:
    if isinstance(v, dict) and "$b" in v:
        return base64.b64decode(v["$b"])
    if isinstance(v, list):
        return [_decode(x) for x in v]
    return v


def encode_batch(batch_id: str, ops: list[tuple], records: int) -> bytes:
    return orjson.dumps({"id": batch_id, "records": records, "ops": ops}, default=_default) + b"\n"


def decode_batch(line: bytes) -> tuple[str, list[tuple], int]:
    obj = orjson.loads(line)
    ops = [(op[0], tuple(_decode(op[1])), *op[2:]) if len(op) == 2 else (op[0], [tuple(_decode(r)) for r in op[1]], "many")
           for op in obj["ops"]]
    return obj["id"], ops, obj.get("records", 0)


class Spool:
    def __init__(self, path: Path, max_bytes: int = DEFAULT_MAX_BYTES, *, adopt: bool = False) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.dropped_batches = 0
        self.dropped_records = 0
        self._offset = 0  # bytes of the file already drained
        private_dir(path.parent)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (fcntl.LOCK_NB if adopt else 0))
        except OSError:
            os.close(fd)
            raise
        os.fchmod(fd, 0o600)
        self._fd = fd

    @property
    def size(self) -> int:
        return os.fstat(self._fd).st_size

    @property
    def waiting(self) -> bool:
        return self.size > self._offset

    def append(self, line: bytes, records: int) -> bool:
        """Keep one batch line; False (and counted as dropped) when it would pass the bound."""
        if self.size + len(line) > self.max_bytes:
            self.dropped_batches += 1
            self.dropped_records += records
            return False
        os.write(self._fd, line)
        return True

    def batches(self):
        """(line length, line) of each batch waiting, in order."""
        with open(self.path, "rb") as f:
            f.seek(self._offset)
            for line in f:
                if line.endswith(b"\n"):
                    yield len(line), line

    def done(self, nbytes: int) -> None:
        self._offset += nbytes
        if self._offset >= self.size:
            os.ftruncate(self._fd, 0)
            self._offset = 0

    def close(self, *, remove_if_empty: bool = True) -> None:
        if self._fd < 0:
            return
        if remove_if_empty and not self.waiting:
            try:
                self.path.unlink()
            except OSError:
                pass
        os.close(self._fd)
        self._fd = -1


def spool_dir(home: Path) -> Path:
    return home / "spool"


def own_path(directory: Path, key: str) -> Path:
    return directory / f"{key}-{os.getpid()}.jsonl"


def orphans(directory: Path, key: str) -> list[Path]:
    """Spool files of ledger ``key`` that no running proxy holds, oldest first."""
    out = []
    for p in sorted(directory.glob(f"{key}-*.jsonl"), key=lambda p: p.stat().st_mtime):
        try:
            fd = os.open(p, os.O_RDONLY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            out.append(p)
        except OSError:
            pass
        finally:
            os.close(fd)
    return out


def waiting(directory: Path, key: str) -> list[tuple[Path, int, int]]:
    """(file, batches, records) of every non-empty spool of ledger ``key``."""
    out = []
    for p in sorted(directory.glob(f"{key}-*.jsonl")):
        try:
            data = p.read_bytes()
        except OSError:
            continue
        lines = [ln for ln in data.split(b"\n") if ln]
        if lines:
            records = 0
            for ln in lines:
                try:
                    records += int(orjson.loads(ln).get("records", 0))
                except (orjson.JSONDecodeError, ValueError, AttributeError):
                    pass
            out.append((p, len(lines), records))
    return out
