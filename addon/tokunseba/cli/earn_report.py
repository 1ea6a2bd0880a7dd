"""`tokunseba earn --report`: the proof in numbers, over a ledger's shadow comparisons of each
earned route.

- **The paired table**: every comparison by what the facts say of the pair (shadow/agreement.py):
  structured turns (both valid with the same keys, both valid with other keys, only the
  reference valid, only the candidate valid, neither), tool turns (agree, other tool names, the
  same names with other arguments or paths, only the stop reason differs), plain text turns (never
  counted), a failed reference (not counted), a failed candidate.
- **Savings at each bar, from reported usage only**: the comparisons are replayed in time order
  through the same fold as the proxy's (routing/earn.py ``Standing``) with that bar; a turn whose
  stratum stood earned when it came would have gone to the candidate: its reference's usage as
  reported (input and output tokens) is saved, and a disagreement among those turns is an answer
  the client would have got that the reference would not have given. Turns whose reference
  reported no usage are counted apart, never estimated.
- **A cost-matched shuffled control beside it**: the same share of the counted turns sent to the
  candidate at random (``SHUFFLES`` draws, a fixed seed): their mean savings and disagreements;
  the savings a random routing reaches before it makes more disagreements than the earned routing
  made (savings at equal agreement); and how often a random draw did at least as well on both
  counts (``luck``). A rule-based router that cannot beat this control is guessing (LiteLLM's
  benchmark of its own complexity router found exactly that).

Pure: reads rows, returns a dict; rendering beside it.
"""

from __future__ import annotations

import random
from typing import Any

from ..routing import Earn, EarnState, Standing
from .common import table

BARS = (0.8, 0.9, 0.95, 0.99)
SHUFFLES = 200
SEED = 43


def pair_class(verdict: dict) -> str:
    """The row of the paired table a comparison falls in."""
    kind, facts, failed = verdict.get("kind"), verdict.get("facts") or {}, verdict.get("failed") or []
    if any(f.startswith("reference failed") for f in failed):
        return "reference failed (not counted)"
    if any(f.startswith("candidate failed") for f in failed):
        return "candidate failed"
    if kind == "structured":
        rv, cv = facts.get("reference_valid"), facts.get("candidate_valid")
        if rv and cv:
            return "structured: both valid, same keys" if facts.get("same_keys") else "structured: both valid, other keys"
        return {(True, False): "structured: only the reference valid", (False, True): "structured: only the candidate valid"}.get(
            (bool(rv), bool(cv)), "structured: neither valid")
    if kind == "tool":
        if verdict.get("agree"):
            return "tool: the same calls and stop reason"
        if not facts.get("same_tool_names", False):
            return "tool: other tool names"
        if any(not f.startswith("stop reason") for f in failed):
            return "tool: same names, other arguments or paths"
        return "tool: only the stop reason differs"
    return "text (never counted)"


def _reference_tokens(r: dict) -> tuple[int, int] | None:
    """The reference's input and output tokens as reported (the client's turn for a learning
    shadow; the shadow itself for a canary), or None when it reported none."""
    canary = ((r["comparison"].get("earn") or {}).get("role")) == "canary"
    prefix = "" if canary else "primary_"
    if r.get(f"{prefix}usage_reported") is None:
        return None
    return int(r.get(f"{prefix}usage_input") or 0), int(r.get(f"{prefix}usage_output") or 0)


def _counted(rows: list[dict], route: str, earn: Earn) -> list[dict]:
    """The comparisons of ``route`` with its candidate that carry a verdict, oldest first."""
    out = []
    for r in rows:
        c = r.get("comparison")
        if (r.get("kind") != "shadow" or r.get("route") != route or not isinstance(c, dict)
                or not isinstance(c.get("verdict"), dict) or not isinstance(c.get("stratum"), dict)):
            continue
        if ((c.get("earn") or {}).get("candidate") or r.get("endpoint")) != earn.to:
            continue
        out.append(r)
    return out


def replay_bar(rows: list[dict], earn: Earn) -> list[bool]:
    """For each counted comparison (oldest first): would its turn have gone to the candidate,
    its stratum standing earned when it came, under ``earn``?"""
    standings: dict[str, Standing] = {}
    moved = []
    for r in rows:
        c = r["comparison"]
        key = c["stratum"].get("key", "?")
        st = standings.setdefault(key, Standing(r.get("route") or "?", c["stratum"]))
        moved.append(st.state == EarnState.EARNED)
        st.step(c["verdict"], r["started_at"], earn, r.get("request_id"))
    return moved


def _control(turns: list[dict], share: int, earned_saved: int, earned_bad: int, rng: random.Random) -> dict:
    """The shuffled control: ``share`` counted turns sent to the candidate at random, SHUFFLES times."""
    saved, bad, at_equal, luck = [], [], [], 0
    for _ in range(SHUFFLES):
        order = turns[:]
        rng.shuffle(order)
        pick = order[:share]
        s, b = sum(t["tokens"] for t in pick), sum(not t["agree"] for t in pick)
        saved.append(s)
        bad.append(b)
        luck += s >= earned_saved and b <= earned_bad
        acc = worse = 0  # savings before a random routing makes more disagreements than the earned one
        for t in order:
            worse += not t["agree"]
            if worse > earned_bad:
                break
            acc += t["tokens"]
        at_equal.append(acc)
    n = max(len(saved), 1)
    return {"saved_tokens": round(sum(saved) / n, 1), "disagreed": round(sum(bad) / n, 2),
            "saved_tokens_at_equal_agreement": round(sum(at_equal) / n, 1), "luck": round(luck / n, 4),
            "shuffles": SHUFFLES}


def route_report(rows: list[dict], route: str, earn: Earn, bars: tuple[float, ...] = BARS, seed: int = SEED) -> dict:
    compared = _counted(rows, route, earn)
    paired: dict[str, int] = {}
    for r in compared:
        k = pair_class(r["comparison"]["verdict"])
        paired[k] = paired.get(k, 0) + 1
    no_usage = 0
    turns = []  # the counted turns: agreed, the reference's tokens
    for r in compared:
        v = r["comparison"]["verdict"]
        if v.get("agree") is None:
            continue
        tokens = _reference_tokens(r)
        if tokens is None:
            no_usage += 1
        turns.append({"agree": bool(v["agree"]), "tokens": sum(tokens) if tokens else 0})
    counted = [r for r in compared if r["comparison"]["verdict"].get("agree") is not None]
    rng = random.Random(seed)
    at_bars = []
    for bar in bars:
        moved = replay_bar(counted, Earn(earn.to, bar, earn.min_turns, earn.canary))
        picked = [t for t, m in zip(turns, moved) if m]
        saved, bad = sum(t["tokens"] for t in picked), sum(not t["agree"] for t in picked)
        at_bars.append({"bar": bar, "moved": len(picked), "share": round(len(picked) / len(turns), 4) if turns else 0.0,
                        "saved_tokens": saved, "disagreed": bad,
                        "control": _control(turns, len(picked), saved, bad, rng)})
    return {"route": route, "candidate": earn.to, "min_turns": earn.min_turns, "comparisons": len(compared),
            "counted": len(turns), "counted_without_usage": no_usage, "paired": paired, "bars": at_bars}


def render_report(reports: list[dict]) -> str:
    if not reports:
        return "no earned routes: give a route `earn: {to: ENDPOINT}` (see `tokunseba earn --help`)"
    out: list[str] = []
    for rep in reports:
        out.append(f"{rep['route']} → {rep['candidate']}: {rep['comparisons']} comparisons, {rep['counted']} counted"
                   + (f" ({rep['counted_without_usage']} of them with no usage reported: saving 0 tokens)"
                      if rep["counted_without_usage"] else ""))
        if rep["paired"]:
            out.append(table(["PAIRED", "TURNS"], [[k, str(v)] for k, v in sorted(rep["paired"].items())],
                             indent="  ", right={1}))
        rows = [[f"{b['bar']:g}", str(b["moved"]), f"{b['share']:.0%}", str(b["saved_tokens"]), str(b["disagreed"]),
                 f"{b['control']['saved_tokens']:g}", f"{b['control']['disagreed']:g}",
                 f"{b['control']['saved_tokens_at_equal_agreement']:g}", f"{b['control']['luck']:.2f}"]
                for b in rep["bars"]]
        out.append(table(["BAR", "MOVED", "SHARE", "SAVED TOKENS", "DISAGREED", "CONTROL SAVED", "CONTROL DISAGREED",
                          "CONTROL SAVED AT EQUAL", "LUCK"], rows, indent="  ", right=set(range(1, 9))))
        out.append("")
    out.append(f"(min_turns as configured; SAVED: the reference's input+output tokens as reported, for the turns the "
               f"candidate would have taken; CONTROL: the same share at random, mean of {SHUFFLES} draws; CONTROL SAVED "
               "AT EQUAL: what a random routing saves before it disagrees more than the earned one; LUCK: the share "
               "of draws that saved as much with no more disagreements)")
    return "\n".join(out)


def report(rows: list[dict], routes: list[tuple[str, Earn, Any]]) -> list[dict]:
    return [route_report(rows, name, earn) for name, earn, _ in routes]
