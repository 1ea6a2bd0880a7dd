"""Is this attempt's reply a failure another route may answer instead? (pure, no I/O)

``classify(status, body, protocol)`` -> a ``Failure`` or None. A failure is what the issue
and protocols/failures.py list: connection refused or reset before the status line
(``unreachable`` / ``reset``, said by the relay), no status line within the endpoint's
``first_byte_timeout_s`` (``timeout``), a status of ``FAILOVER_STATUSES`` (408, 429, 5xx,
529), or a context-window error read from the body (protocols/failures.is_context_window,
the same table the error envelopes read: a client is told "prompt is too long" for exactly
what fails a turn over). Anything else (a plain 400, 401, 404…)
is the request's own fault: answered, never failed over.

``needs_body(status)`` says which replies the relay holds (up to ``HOLD_MAX`` bytes) until
this is decided; every other reply is relayed at once, so the healthy path pays nothing.
``retry_hint(headers, now)`` reads how long the endpoint asked to be left alone.
"""

from __future__ import annotations

import email.utils
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from ..neutral.error import UpstreamError, parse_error_body
from ..protocols.failures import (
    CONTEXT_STATUSES,
    FAILOVER_STATUSES,
    RESET_HEADERS,
    RETRY_HEADERS,
    is_context_window,
)

HOLD_MAX = 256 * 1024  # a failure reply bigger than this is relayed as it is (no error says that much)

KINDS = ("unreachable", "reset", "timeout", "status", "context_window", "busy")


@dataclass(frozen=True)
class Failure:
    kind: str  # one of KINDS
    why: str  # one line, for the ledger, explain and the mitmweb comment
    status: int | None = None  # the endpoint's status, when it sent one
    error: UpstreamError | None = field(default=None, compare=False)  # the endpoint's error, read (a status failure)

    def short(self) -> str:
        """``503``, ``context window``, ``reset``... for the chain in a comment or a log line."""
        if self.kind == "status":
            return str(self.status)
        if self.kind == "context_window":
            return f"{self.status} context window" if self.status else "context window"
        return self.kind


def needs_body(status: int) -> bool:
    """Whether a reply with ``status`` must be held until classified (a failure, or a reply
    that may be a context-window error)."""
    return status in FAILOVER_STATUSES or status in CONTEXT_STATUSES


def classify(status: int, body: bytes, protocol: str | None = None) -> Failure | None:
    """A whole (held) reply of an endpoint of ``protocol``: a failure, or None when the client
    should get it. (A context-window error is read against every protocol's wordings, since
    servers borrow each other's: ``protocol`` does not narrow it.)"""
    if status in FAILOVER_STATUSES:
        err = parse_error_body(status, body)
        return Failure("status", f"HTTP {status}: {_line(err.message)}", status, err)
    if status in CONTEXT_STATUSES:
        err = parse_error_body(status, body)
        if is_context_window(err):
            return Failure("context_window", f"HTTP {status} context-window error: {_line(err.message)}", status, err)
    return None


def _line(text: str, n: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def _seconds(value: str, fmt: str, now: float) -> float | None:
    v = value.strip()
    try:
        if fmt == "ms":
            return float(v) / 1000
        if fmt == "seconds-or-date":
            if re.fullmatch(r"\d+(\.\d+)?", v):
                return float(v)
            when = email.utils.parsedate_to_datetime(v)
            return when.timestamp() - now
        if fmt == "duration":
            parts = _DURATION.findall(v)
            if not parts or "".join(n + u for n, u in parts) != v:
                return None
            return sum(float(n) * _UNIT[u] for n, u in parts)
        if fmt == "rfc3339":
            return datetime.fromisoformat(v.replace("Z", "+00:00")).timestamp() - now
    except (ValueError, TypeError, OverflowError, IndexError):
        return None
    return None


def retry_hint(headers: Iterable[tuple[str, str]], now: float) -> tuple[float, str] | None:
    """How long (seconds, and the header that said it) the endpoint asked not to be sent turns:
    ``retry-after`` / ``retry-after-ms`` first, else the reset of a used-up rate limit. None
    without a usable hint (absent, unparseable, or already past)."""
    h = {k.lower(): v for k, v in headers}
    for name, fmt in RETRY_HEADERS.items():
        if name in h and (s := _seconds(h[name], fmt, now)) is not None and s > 0:
            return s, name
    resets = []
    for name, (remaining, fmt) in RESET_HEADERS.items():
        if name in h and h.get(remaining, "").strip() == "0" and (s := _seconds(h[name], fmt, now)) is not None:
            resets.append((s, name))
    resets = [r for r in resets if r[0] > 0]
    return max(resets) if resets else None
