"""Usage as reported, and how it converts between counting conventions (docs/dev/protocols.md E.4).

Part of the neutral model: every codec reads and writes usage through it. It names no
protocol: each protocol's counting (its usage fields, how they read as common numbers, how a
usage object of its own is written from any usage) is a ``Counting`` that lives with the
protocol's facts (``protocols/<name>.py``) and is registered with them.

A ``Usage`` holds the upstream's own usage object untouched plus the name of how its numbers
count (its ``counting``: Responses counts as Chat). A conversion goes through ``Tokens``, one
common base: each counting says what its report means there (``Counting.tokens``) and writes
its own object from that (``Counting.write``), copying numbers and re-basing only where
definitions differ. A field the upstream did not report stays absent: never zero-filled,
never estimated.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypedDict

FIELDS = ("input", "output", "cache_read", "cache_write", "reasoning")
_NOTHING: dict[str, int | None] = dict.fromkeys(FIELDS)


def count(v: Any) -> int | None:
    """A reported count: an integer (never a bool); None for anything else."""
    return v if v.__class__ is int or (isinstance(v, int) and not isinstance(v, bool)) else None  # (__class__: the cheapest test)


def first(*values: Any) -> int | None:
    """The first integer among ``values`` (a field reported under one of several names)."""
    for v in values:
        if v.__class__ is int or (v is not None and isinstance(v, int) and not isinstance(v, bool)):
            return v
    return None


def plus(base: int | None, extra: int | None) -> int | None:
    """``base + extra`` of reported numbers (an unreported ``extra`` adds nothing); None when
    the base was not reported."""
    return None if base is None else base + (extra or 0)


_NO_OBJ: dict[str, Any] = {}  # read only: what ``sub`` gives for a missing sub-object


def sub(r: dict[str, Any], key: str) -> dict[str, Any]:
    """``r[key]`` when it is an object, else an empty one (read only)."""
    v = r.get(key)
    return v if isinstance(v, dict) else _NO_OBJ


class Tokens(TypedDict):
    """A report's numbers on the common base every conversion goes through (None: not reported,
    or not derivable from what was). A dict: made once or twice per reply, it must be cheap."""

    input: int | None  # every input token, those read from or written to a cache included
    uncached: int | None  # the input tokens neither read from nor written to a cache
    output: int | None  # every output token, reasoning included
    cache_read: int | None
    cache_write: int | None
    reasoning: int | None  # the reasoning part of ``output``
    total: int | None  # the total as reported, or the sum where the counting's own rules derive one
    # the reasoning count may be shown as a detail of the output where a counting has no field of
    # its own for it (Anthropic's output_tokens_details); False where it never was (Gemini's thoughts)
    reasoning_detail: bool


@dataclass(frozen=True)
class Counting:
    """How one convention counts its usage, as the protocol that reports it knows it."""

    name: str  # "anthropic": what ``Usage.counting`` and the ledger's usage_protocol hold
    input_includes_cached: bool  # its input count includes the cached tokens (prices re-base it)
    # its report -> input / output / cache read / cache write / reasoning in its own counting (the ledger)
    fields: Callable[[dict[str, Any]], dict[str, int | None]]
    tokens: Callable[[dict[str, Any]], Tokens]  # its report -> the common base
    # any usage -> the usage object of this convention a client is sent (only reported fields)
    write: Callable[["Usage"], dict[str, Any]]
    # (input, output) of a report of those two alone, on which every counting agrees (None: not such a report)
    plain: Callable[[dict[str, Any]], tuple[int, int] | None] = lambda r: None
    # the total of a report ``plain`` reads (its ``tokens``' "total" for it): with ``plain``, what
    # a writer needs to write such a report without the common base (a few per reply saved per turn);
    # None: not given (writers then take the general path)
    plain_total: Callable[[dict[str, Any]], int | None] | None = None


COUNTINGS: dict[str, Counting] = {}


def add_counting(c: Counting) -> Counting:
    """Register a counting (protocols.register does, with its facts); the same name twice must
    be the same counting."""
    have = COUNTINGS.get(c.name)
    if have is not None and have is not c:
        raise ValueError(f"usage counting {c.name!r} is already registered by another protocol")
    COUNTINGS[c.name] = c
    return c


def counting_of(name: str) -> Counting:
    try:
        return COUNTINGS[name]
    except KeyError:
        raise KeyError(f"unknown usage counting {name!r} (known: {', '.join(COUNTINGS)})") from None


def includes_cached(name: str | None) -> bool:
    """Whether the input count of counting ``name`` includes the cached tokens (False: unknown)."""
    c = COUNTINGS.get(name or "")
    return c is not None and c.input_includes_cached


# never changed once made (``merged`` makes another); not frozen: a frozen dataclass's __init__
# costs twice as much, and one is made per reply
@dataclass(slots=True)
class Usage:
    counting: str  # how its numbers count (a ``Counting``'s name; not which protocol sent it)
    reported: dict[str, Any]  # the upstream's usage object, as it came

    # ---- the numbers as the upstream named and counted them (for the ledger) ----
    def fields(self) -> dict[str, int | None]:
        """input / output / cache read / cache write / reasoning, in the upstream's own
        counting; all None for a counting no registered protocol knows (nothing readable)."""
        c = COUNTINGS.get(self.counting)
        return c.fields(self.reported) if c is not None else dict(_NOTHING)

    def plain(self) -> tuple[int, int] | None:
        """(input, output) of a report of those two numbers alone, on which every counting
        agrees (a Chat usage of prompt, completion and total only; a Gemini usageMetadata
        without cache, thoughts or tool-use prompt). None for any other report (conversions
        then take their general path)."""
        c = COUNTINGS.get(self.counting)
        return c.plain(self.reported) if c is not None else None

    def plain_counts(self) -> tuple[int, int, int | None] | None:
        """(input, output, total) of a report ``plain`` reads, when its counting says the total
        of such a report (``Counting.plain_total``): the whole of its ``tokens()``, sooner. None
        otherwise (the writers then take the general path)."""
        c = COUNTINGS.get(self.counting)
        if c is None or c.plain_total is None or (p := c.plain(self.reported)) is None:
            return None
        return p[0], p[1], c.plain_total(self.reported)

    def tokens(self) -> Tokens:
        """The report on the common base."""
        c = COUNTINGS.get(self.counting)  # (a dict read; counting_of says which are known when none is)
        return (c if c is not None else counting_of(self.counting)).tokens(self.reported)

    def common_fields(self) -> dict[str, int | None]:
        """``fields()`` on the common base (input includes the cached tokens; output includes
        the reasoning): the numbers a Chat or Responses client sees."""
        if (p := self.plain()) is not None:
            return {"input": p[0], "output": p[1], "cache_read": None, "cache_write": None, "reasoning": None}
        t = self.tokens()
        return {"input": t["input"], "output": t["output"], "cache_read": t["cache_read"],
                "cache_write": t["cache_write"], "reasoning": t["reasoning"]}

    # ---- conversions ----
    def to(self, counting: Counting | str) -> dict[str, Any]:
        """The usage object a client of ``counting`` sees (only reported fields)."""
        return (counting if isinstance(counting, Counting) else counting_of(counting)).write(self)

    def merged(self, newer: dict[str, Any]) -> "Usage":
        """Anthropic's message_delta usage is cumulative: a non-null field overwrites the
        running value, it is never added (docs/dev/pitfalls.md 15)."""
        d = dict(self.reported)
        for k, v in newer.items():
            if v is not None:
                d[k] = v
        return Usage(self.counting, d)
