"""Is this request a client's retry of a recent one? (in memory, per proxy; no I/O)

A client whose turn failed sends the same request again (Claude Code up to ten times with a
growing back-off, Gemini CLI and Codex likewise): each is a turn of its own, handled as any
other, but it is not a new question. ``RetryWatch.seen(key, request_id, now)`` says so: a
request whose ``key`` (``retry_key``: the session, else the client and its host and path, and
a digest of the body byte for byte) matches one seen less than ``window_s`` ago is a retry of
the first request of that series (its request id is returned, and the series' clock starts
again from this one); else None, and this request starts a series. The ledger keeps it as
``turns.retry_of``: ``log`` folds the retries under their first request, ``stats`` counts
requests and retries apart. At most ``max_keys`` series are remembered (the oldest go first).
"""

from __future__ import annotations

from collections import OrderedDict

WINDOW_S = 600.0  # a repeat later than this is a new request (the clients' retries span a few minutes)
MAX_KEYS = 4096


def retry_key(*, session: str | None, client: str | None, host: str, path: str, body: bytes) -> tuple[str | int, ...]:
    """What makes two requests the same request: who (the session, else the client), where
    (host and path), and the body, byte for byte (its length and its 64-bit SipHash, Python's
    ``hash`` of the bytes). The key lives in this process's memory only, so a per-process
    digest is enough; it takes a fifth of a SHA-256's time on the 48 KB Claude Code turn
    (scripts/bench/bench_hooks.py), which every turn pays. ``session`` is the one the client
    sent (``Speaker.own_session``): a fingerprint of the conversation's start is a hash of the
    client's name and the body, both in the key already, so it would part no two requests the
    key does not (and it is not hashed on the event loop for this)."""
    return (session or f"client:{client or '-'}", host.lower(), path, len(body), hash(body))


class RetryWatch:
    def __init__(self, window_s: float = WINDOW_S, max_keys: int = MAX_KEYS) -> None:
        self.window_s, self.max_keys = window_s, max_keys
        self.series: OrderedDict[tuple[str | int, ...], tuple[str, float]] = OrderedDict()  # key -> (first id, last seen)

    def seen(self, key: tuple[str | int, ...], request_id: str, now: float) -> str | None:
        """The request id of the first request this one repeats, or None (a new request)."""
        got = self.series.pop(key, None)
        first = got[0] if got is not None and now - got[1] <= self.window_s else None
        self.series[key] = (first or request_id, now)
        while len(self.series) > self.max_keys:
            self.series.popitem(last=False)
        return first
