"""Subscription windows: the reply headers in which a provider says how much of each usage window
of the account is used (docs/guide/quota.md), as data, and their one reader.

A subscription login (Claude Code on Pro/Max, Codex signed in with ChatGPT) runs out of windows,
not money: Anthropic's 5-hour and weekly windows (and per model family), the ChatGPT backend's
primary and secondary windows. Each provider reports them on every reply:

- ``ANTHROPIC_FIELDS`` / ``ANTHROPIC_OVERALL``: ``anthropic-ratelimit-unified-<window>-<field>``
  per window and the ``anthropic-ratelimit-unified-<field>`` headers of the whole account;
- ``CODEX_FIELDS``: ``x-codex-<primary|secondary>-<field>`` (and other limit families,
  ``x-codex-<family>-primary-...``, as Codex itself reads them).

Each row says its format and where it was taken from (Claude Code 2.1.197's bundled JS, Codex's
source and binary). ``read_windows(headers, now)`` is the
sans-IO reader: headers -> ``Reading`` (one ``WindowState`` per window: name, used share 0..1,
status, reset time, window length, whether it binds). A header that is absent is simply not
there; one whose value does not parse is **skipped and said** (``Reading.skipped``), never
guessed: no share is made up from a status, no reset from a window's length.

``ACCOUNT_HEADERS`` / ``ACCOUNT_ID_HEADERS``: which request headers name the account whose
windows a reply reports (the credential, hashed by routing/quota.py, never kept; the provider's
account id where the client sends one).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .openai_responses import LIMIT_HEADERS

# ---- Anthropic (Claude Code on a subscription login)

ANTHROPIC_PREFIX = "anthropic-ratelimit-unified-"
# Read out of Claude Code 2.1.197's bundled JS (the claude binary of @anthropic-ai/claude-code, as
# scripts/install-claude-code.sh installs it; `grep -ao 'anthropic-ratelimit-unified[^`"]*'`).
CLAUDE_CODE = "Claude Code 2.1.197's bundled cli JS"

# per-window field (``<prefix><window>-<field>``) -> (format, source)
ANTHROPIC_FIELDS: dict[str, tuple[str, str]] = {
    "utilization": ("share", f"the window's used share, a decimal 0..1 ('0.42'): {CLAUDE_CODE} reads it with "
                             "Number() and warns at 0.9 of 5h, 0.25/0.5/0.75 of 7d"),
    "reset": ("epoch", f"when the window resets, Unix seconds ('1776649200'): {CLAUDE_CODE} compares it with "
                       "Date.now()/1000"),
    "surpassed-threshold": ("share", f"the warning threshold the window passed, 0..1: {CLAUDE_CODE} warns on "
                                     "it (read and checked here, not kept: the utilization says more)"),
    "status": ("status", "the window's own status (allowed, allowed_warning, rejected): sent by the API per window "
                         f"(third-party captures, e.g. ClaudeProxy's tests: 5h-status rejected); {CLAUDE_CODE} "
                         "reads only the account's status"),
}
# account-wide headers -> (format, source)
ANTHROPIC_OVERALL: dict[str, tuple[str, str]] = {
    "status": ("status", f"the account's status, its binding window's (absent: allowed): {CLAUDE_CODE}; "
                         "'rejected' = turns refused, unless extra usage (overage) is allowed and takes them"),
    "reset": ("epoch", f"when the binding window resets, Unix seconds: {CLAUDE_CODE}"),
    "representative-claim": ("claim", f"which window binds (CLAIMS): {CLAUDE_CODE} names it in its messages"),
    "overage-status": ("status", f"extra usage past the windows (usage credits): {CLAUDE_CODE}; kept as the "
                                 "window 'overage' (NOT_REFUSING)"),
    "overage-reset": ("epoch", f"when the extra-usage allowance resets, Unix seconds: {CLAUDE_CODE}"),
}
# representative-claim -> the window name its headers use (``<prefix><name>-utilization``): the pairs
# Claude Code itself makes (its table {"5h": "five_hour", "7d": "seven_day", "7d_oi": ..., overage}); the
# claims it names (session, weekly, Opus, Sonnet limits) without a header of their own keep their name
CLAIMS: dict[str, str] = {
    "five_hour": "5h",  # the 5-hour session window
    "seven_day": "7d",  # the weekly window
    "seven_day_overage_included": "7d_oi",  # the weekly window that extra usage is counted in
    "overage": "overage",  # extra usage past the windows
    "seven_day_opus": "seven_day_opus",  # the weekly window of the Opus models ("Opus limit")
    "seven_day_sonnet": "seven_day_sonnet",  # the weekly window of the Sonnet models ("Sonnet limit")
}
# statuses Anthropic reports for a window or the account (anything else is skipped and said)
STATUSES: dict[str, str] = {
    "allowed": "within the window",
    "allowed_warning": "within it, past the warning threshold Claude Code warns at",
    "rejected": "used up: turns on this account are refused until the reset",
}
REJECTED = "rejected"
# windows whose "rejected" refuses no turn by itself (a rejected window of any other name does)
NOT_REFUSING: dict[str, str] = {
    "overage": "extra usage past the windows: 'rejected' says only that it is not available "
               "(overage-disabled-reason org_level_disabled, out_of_credits); turns are refused when a window "
               "itself (or the account's status) is rejected",
}

# ---- ChatGPT backend (Codex signed in with ChatGPT)

CODEX_SOURCE = ("openai/codex codex-rs/codex-api/src/rate_limits.rs (parse_rate_limit_for_limit); the same names "
                "are in Codex 0.171.0's binary")
CODEX_PREFIX = LIMIT_HEADERS[0].rstrip("-")  # "x-codex": openai_responses.LIMIT_HEADERS, the one place it is said
CODEX_WINDOWS = ("primary", "secondary")  # the short window (5 h on Plus/Pro) and the weekly one
# per-window field -> (format, source)
CODEX_FIELDS: dict[str, tuple[str, str]] = {
    "used-percent": ("percent", f"the used share in percent, a decimal 0..100 ('42.5'); {CODEX_SOURCE}"),
    "window-minutes": ("minutes", f"the window's length in minutes ('300', '10080'); {CODEX_SOURCE}"),
    "reset-at": ("epoch", f"when the window resets, Unix seconds ('1704069000'); {CODEX_SOURCE}"),
    "reset-after-seconds": ("seconds", "seconds until the window resets, from the reply's time: Codex proxies read "
                                       "it (not Codex 0.171.0); used only where reset-at is absent"),
}

# ---- which account a reply's windows belong to (request headers)

# credential headers, in order of preference: the one found first names the account (hashed)
ACCOUNT_HEADERS: dict[str, str] = {
    "authorization": "a subscription login's bearer token (Claude Code's OAuth token, Codex's ChatGPT "
                     "access token), or an API key as Bearer",
    "x-api-key": "Anthropic's API key header",
    "x-goog-api-key": "Gemini's API key header",
    "api-key": "Azure OpenAI's API key header",
}
# the provider's own account id, sent by the client: it outlives a refreshed token
ACCOUNT_ID_HEADERS: dict[str, str] = {
    "chatgpt-account-id": "Codex signed in with ChatGPT sends it with every turn (the id token's "
                          "chatgpt_account_id claim)",
}

# every header name the reader looks at starts with one of these (a cheap test per reply)
PREFIXES = (ANTHROPIC_PREFIX, CODEX_PREFIX + "-")


@dataclass(frozen=True)
class WindowState:
    """One window as a reply reported it. ``used``: 0..1 (None: not reported); ``status``: one of
    ``STATUSES`` (None: not reported); ``resets_at``: Unix seconds (None: not reported);
    ``minutes``: the window's length (None: not reported); ``binding``: the reply named this
    window as the one that binds."""

    name: str
    used: float | None = None
    status: str | None = None
    resets_at: float | None = None
    minutes: int | None = None
    binding: bool = False

    @property
    def rejected(self) -> bool:
        """The window refuses turns now (its status says rejected; not a window in ``NOT_REFUSING``)."""
        return self.status == REJECTED and self.name not in NOT_REFUSING

    def record(self) -> dict[str, Any]:
        return {"window": self.name, "used": self.used, "status": self.status, "resets_at": self.resets_at,
                "minutes": self.minutes, "binding": self.binding}


@dataclass(frozen=True)
class Reading:
    """What one reply said of its account's windows. ``skipped``: (header, why) for each header
    whose value did not parse; ``provider``: "anthropic" or "chatgpt" (None: nothing reported)."""

    provider: str | None = None
    windows: tuple[WindowState, ...] = ()
    skipped: tuple[tuple[str, str], ...] = ()
    binding: str | None = None  # the window the reply named as binding, as the headers name it

    def __bool__(self) -> bool:
        return bool(self.windows or self.skipped)


class _Bad(ValueError):
    pass


def _share(v: str) -> float:
    x = float(v)
    if not math.isfinite(x) or x < 0:
        raise _Bad("not a share >= 0")
    return x


def _percent(v: str) -> float:
    x = float(v)
    if not math.isfinite(x) or x < 0:
        raise _Bad("not a percentage >= 0")
    return x / 100.0


def _epoch(v: str) -> float:
    x = float(v.strip())
    if not math.isfinite(x) or x <= 0:
        raise _Bad("not a Unix time")
    return x


def _minutes(v: str) -> int:
    x = int(v.strip())
    if x < 0:
        raise _Bad("not a length in minutes")
    return x


def _seconds(v: str) -> float:
    x = float(v.strip())
    if not math.isfinite(x) or x < 0:
        raise _Bad("not a number of seconds")
    return x


def _status(v: str) -> str:
    s = v.strip()
    if s not in STATUSES:
        raise _Bad(f"not a status tokunseba knows ({', '.join(STATUSES)})")
    return s


def _claim(v: str) -> str:
    s = v.strip()
    if s not in CLAIMS:
        raise _Bad(f"not a window tokunseba knows ({', '.join(CLAIMS)})")
    return s


PARSERS = {"share": _share, "percent": _percent, "epoch": _epoch, "minutes": _minutes, "seconds": _seconds,
           "status": _status, "claim": _claim}


def _parse(fmt: str, name: str, value: str, skipped: list[tuple[str, str]]) -> Any:
    try:
        return PARSERS[fmt](value)
    except (ValueError, TypeError) as e:
        shown = value if len(value) <= 40 else value[:40] + "…"
        why = str(e) if isinstance(e, _Bad) else f"not a {'number' if fmt != 'minutes' else 'whole number'}"
        skipped.append((name, f"{shown!r}: {why}"))
        return None


_BYTE_PREFIXES = tuple(p.encode() for p in PREFIXES)


def has_windows(fields: Iterable[tuple[bytes, bytes]]) -> bool:
    """Whether raw header fields (mitmproxy's ``Headers.fields``) hold any window header: the
    cheap test every reply takes before it is read."""
    return any(k.lower().startswith(_BYTE_PREFIXES) for k, _ in fields)


def read_windows(headers: Iterable[tuple[str, str]] | Mapping[str, str], now: float) -> Reading:
    """The windows a reply's headers report (see the module's docstring). ``now``: when the
    reply was seen (a relative reset, ``reset-after-seconds``, counts from it)."""
    items = headers.items() if isinstance(headers, Mapping) else headers
    mine = {}
    for k, v in items:
        low = str(k).lower()
        if low.startswith(PREFIXES) and low not in mine:
            mine[low] = str(v)
    if not mine:
        return Reading()
    if any(k.startswith(ANTHROPIC_PREFIX) for k in mine):
        return _anthropic({k[len(ANTHROPIC_PREFIX):]: v for k, v in mine.items() if k.startswith(ANTHROPIC_PREFIX)})
    return _codex(mine, now)


def _anthropic(h: dict[str, str]) -> Reading:
    skipped: list[tuple[str, str]] = []
    overall = {f: _parse(fmt, ANTHROPIC_PREFIX + f, h[f], skipped)
               for f, (fmt, _) in ANTHROPIC_OVERALL.items() if f in h}
    windows: dict[str, dict[str, Any]] = {}
    for key, value in h.items():
        if key in ANTHROPIC_OVERALL:
            continue
        for f, (fmt, _) in ANTHROPIC_FIELDS.items():
            if key.endswith("-" + f) and len(key) > len(f) + 1:
                name = key[: -len(f) - 1]
                got = _parse(fmt, ANTHROPIC_PREFIX + key, value, skipped)
                if got is not None:
                    windows.setdefault(name, {})[f] = got
                break
    claim = overall.get("representative-claim")
    binding = CLAIMS.get(claim) if claim else None
    if overall.get("overage-status") is not None or overall.get("overage-reset") is not None:
        w = windows.setdefault("overage", {})
        w.setdefault("status", overall.get("overage-status"))
        w.setdefault("reset", overall.get("overage-reset"))
    if binding is not None and binding in windows:  # the account's status and reset are the binding window's
        w = windows[binding]
        if w.get("status") is None and overall.get("status") is not None:
            w["status"] = overall["status"]
        if w.get("reset") is None and overall.get("reset") is not None:
            w["reset"] = overall["reset"]
    elif binding is not None and (overall.get("status") is not None or overall.get("reset") is not None):
        windows[binding] = {"status": overall.get("status"), "reset": overall.get("reset")}
    states = tuple(
        WindowState(name, used=w.get("utilization"), status=w.get("status"), resets_at=w.get("reset"),
                    binding=name == binding)
        for name, w in sorted(windows.items())
        if any(w.get(k) is not None for k in ("utilization", "status", "reset"))
    )
    return Reading("anthropic", states, tuple(skipped), binding)


def _codex(h: dict[str, str], now: float) -> Reading:
    skipped: list[tuple[str, str]] = []
    families = {"codex"}
    suffix = "-primary-used-percent"
    for k in h:
        if k.endswith(suffix) and k.startswith(CODEX_PREFIX):
            families.add(k[2: -len(suffix)].replace("-", "_"))
    states: list[WindowState] = []
    for family in sorted(families):
        prefix = "x-" + family.replace("_", "-")
        for which in CODEX_WINDOWS:
            base = f"{prefix}-{which}-"
            got: dict[str, object] = {}
            for f, (fmt, _) in CODEX_FIELDS.items():
                if base + f in h:
                    got[f] = _parse(fmt, base + f, h[base + f], skipped)
            used = got.get("used-percent")
            if used is None:  # Codex reads a window only with its used share
                continue
            minutes, reset = got.get("window-minutes"), got.get("reset-at")
            if reset is None and got.get("reset-after-seconds") is not None:
                reset = now + float(got["reset-after-seconds"])  # type: ignore[arg-type]
            if used == 0 and not minutes and reset is None:  # Codex: an all-zero window reports nothing
                continue
            name = which if family == "codex" else f"{family}.{which}"
            states.append(WindowState(name, used=float(used), resets_at=reset,  # type: ignore[arg-type]
                                      minutes=minutes))  # type: ignore[arg-type]
    return Reading("chatgpt", tuple(states), tuple(skipped))


def window_names() -> dict[str, str]:
    """The window names a rule may ask about, with what each is."""
    return {"5h": "Anthropic's 5-hour window", "7d": "Anthropic's weekly window",
            "7d_oi": "Anthropic's weekly window extra usage is counted in",
            "seven_day_opus": "Anthropic's weekly window of the Opus models",
            "seven_day_sonnet": "Anthropic's weekly window of the Sonnet models",
            "overage": "Anthropic's extra usage past the windows",
            "primary": "the ChatGPT backend's short window (Codex)",
            "secondary": "the ChatGPT backend's weekly window (Codex)"}


@dataclass
class SkipNotes:
    """Headers skipped once said: a malformed header is logged the first time it is seen
    (per header name), and counted every time."""

    said: set[str] = field(default_factory=set)
    counts: dict[str, int] = field(default_factory=dict)

    def first_time(self, reading: Reading) -> list[tuple[str, str]]:
        out = []
        for name, why in reading.skipped:
            self.counts[name] = self.counts.get(name, 0) + 1
            if name not in self.said:
                self.said.add(name)
                out.append((name, why))
        return out
