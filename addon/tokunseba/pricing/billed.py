"""The tokens a turn is billed for, read from its usage as reported, on one base whatever the
counting (neutral/usage.py's ``Tokens``): ``input`` every input token, cache reads and writes
included (OpenAI's and Gemini's prompt counts already include them, Anthropic's input_tokens
do not: they are added); ``uncached`` the input neither read from nor written to a cache;
``output`` every output token, reasoning included (Gemini's thoughts are billed as output).

A count the upstream did not report stays None: never zero-filled, never estimated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import protocols  # noqa: F401 - registers the built-in protocols' usage countings
from ..neutral import COUNTINGS, Usage, includes_cached

FIELDS = ("input", "output", "cache_read", "cache_write")


@dataclass(frozen=True)
class Billed:
    input: int | None
    uncached: int | None
    output: int | None
    cache_read: int | None = None
    cache_write: int | None = None

    def nothing(self) -> bool:
        return all(getattr(self, f) is None for f in ("input", "output", "cache_read", "cache_write"))


def billed_of(counting: str | None, reported: Any, fields: dict[str, int | None] | None = None) -> Billed | None:
    """The billed tokens of a usage report in ``counting`` (the ledger's usage_protocol and
    usage_reported); from the ledger's per-field columns (``fields``, in that counting) when the
    report itself cannot be read. None when nothing was reported."""
    if isinstance(reported, dict) and counting in COUNTINGS:
        t = Usage(counting, reported).tokens()
        b = Billed(input=t["input"], uncached=t["uncached"], output=t["output"], cache_read=t["cache_read"],
                   cache_write=t["cache_write"])
        return None if b.nothing() else b
    if not fields or all(fields.get(f) is None for f in FIELDS):
        return None
    inp, cr, cw = fields.get("input"), fields.get("cache_read"), fields.get("cache_write")
    cached = (cr or 0) + (cw or 0)
    if includes_cached(counting):
        total, uncached = inp, None if inp is None else inp - cached
    else:
        total, uncached = None if inp is None else inp + cached, inp
    return Billed(input=total, uncached=uncached, output=fields.get("output"), cache_read=cr, cache_write=cw)


def billed_of_row(row: dict) -> Billed | None:
    """A ledger row's billed tokens (a turn's, or a shadow's or a replay's)."""
    if row.get("usage_reported") is None:
        return None
    return billed_of(row.get("usage_protocol"), row.get("usage_reported"),
                     {f: row.get(f"usage_{f}") for f in FIELDS})
