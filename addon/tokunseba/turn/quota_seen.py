"""A reply's subscription windows, seen on the proxy's path (docs/guide/quota.md).

``WindowWatch.reply(turn, sent, headers, now)``: from the headers of any reply of an attempt
(passed through, retargeted, translated, or a failed attempt the relay held), the windows the
provider reported (protocols/limits.read_windows) are put on the board (routing/quota.py) for
the account the attempt spent: the credential it carried (``sent``: the request's header fields
as the attempt sent them, hashed, never kept). Returns what the proxy does with it (``Seen``):
the ledger rows, the turn event when a header was skipped, and the console lines (a header
skipped, said once per header name; a threshold a rule names crossed, said once). Reads only:
the client's bytes are never altered.

Plain Python: no mitmproxy, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..ledger import quota_rows as rows_of
from ..protocols import Reading, SkipNotes, read_windows
from ..routing import Account, QuotaBoard, account_of
from ..states import Action
from .plan import Turn

EVENT_SKIPPED = "quota_header_skipped"  # a reply's window header did not parse: skipped, never guessed


@dataclass
class Seen:
    account: Account | None
    reading: Reading
    rows: list[tuple] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    event: tuple[str, dict] | None = None


def attempt_host(turn: Turn) -> str:
    """Where the attempt went: its endpoint's host when routed, else the client's own host."""
    if turn.action in (Action.RETARGET, Action.TRANSLATE) and turn.endpoint is not None:
        return turn.endpoint.host
    return turn.host


@dataclass
class WindowWatch:
    board: QuotaBoard = field(default_factory=QuotaBoard)
    notes: SkipNotes = field(default_factory=SkipNotes)

    def reply(self, turn: Turn, sent: Iterable[tuple[Any, Any]] | Mapping[str, str],
              headers: Iterable[tuple[str, str]] | Mapping[str, str], now: float) -> Seen | None:
        reading = read_windows(headers, now)
        if not reading:
            return None
        host = attempt_host(turn)
        account = account_of(host, sent)
        out = Seen(account, reading)
        for name, why in self.notes.first_time(reading):
            out.lines.append(f"tokunseba: {host}: reply header {name} skipped: {why} (said once per header; "
                             f"each one is recorded as {EVENT_SKIPPED})")
        if reading.skipped:
            out.event = (EVENT_SKIPPED, {"headers": [{"header": n, "why": w} for n, w in reading.skipped]})
        if account is None:
            if reading.windows:
                out.lines.append(f"tokunseba: {host}: a reply reported windows for a request with no credential "
                                 f"tokunseba reads: not recorded")
            return out
        out.lines += [c.line() for c in self.board.seen(account, reading, now)]
        out.rows = rows_of(account=account.key, host=account.host, by=account.by, provider=reading.provider,
                           windows=[w.record() for w in reading.windows], seen_at=now, request_id=turn.request_id)
        return out
