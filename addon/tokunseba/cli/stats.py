"""`tokunseba stats`: turns, translations, refusals, errors, usage as reported and latency
percentiles, by route, endpoint and model (the ledger computes them; this module renders them).
"""

from __future__ import annotations

import argparse
import sys

from ..ledger import USAGE_FIELDS, LedgerReader, compute_stats, spool_note
from ..routing import EVENT_ROUTED, routed_line
from .common import common_options, error, fmt_ms, fmt_num, fmt_share, fmt_time, print_json, read_ledger, since_option, table


def add_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "stats",
        help="turns, translations, refusals, errors, usage as reported, latency percentiles",
        description="Counts by route, endpoint and model; usage summed exactly as reported (grouped by how "
        "the upstream counts: OpenAI input includes cache reads, Anthropic input does not); latency "
        "and time-to-first-byte p50/p95.",
    )
    p.add_argument("--since", metavar="WHEN", help="window start: 30m, 24h, 7d, 2026-12-01 or an ISO datetime")
    common_options(p)
    p.set_defaults(func=cmd_stats)


def cmd_stats(args: argparse.Namespace) -> int:
    try:
        since = since_option(args.since)
    except ValueError as e:
        return error(str(e), 2)

    def body(ledger: LedgerReader) -> int:
        st = with_quota(ledger.stats(since), ledger, since)
        if args.json:
            print_json(st)
        else:
            print(render_stats(st, args.since))
        if note := spool_note(ledger.path):
            print(note, file=sys.stderr)
        return 0

    return read_ledger(args, compute_stats([], since), body)


def with_quota(st: dict, ledger: LedgerReader, since: float | None) -> dict:
    """``st`` with ``quota_routed``: the turns that went elsewhere because of a subscription window
    (routing/quota.py; what they would have used of it is never estimated)."""
    st["quota_routed"] = ledger.turns_with_event(EVENT_ROUTED, since)
    return st


GROUP_NONE = {"route": "(no route)", "endpoint": "(nothing sent)", "model": "(unknown)", "instance": "(unknown)"}
USAGE_LABELS = {"input": "INPUT", "output": "OUTPUT", "cache_read": "CACHE READ", "cache_write": "CACHE WRITE",
                "reasoning": "REASONING"}


# turns that were not served, shown when there are any: in flight or left open (unfinished),
# open when their proxy stopped (interrupted), given up by the client (cancelled)
UNSERVED_LABELS = (("cancelled", "cancelled"), ("interrupted", "interrupted"), ("unfinished", "unfinished"))


def render_stats(st: dict, since_text: str | None = None) -> str:
    window = f"since {fmt_time(st['since'])}" + (f" ({since_text})" if since_text else "") if st["since"] else "all time"
    out = [f"window: {window}"]
    if not st["turns"]:
        out.append("no turns in this window")
        return "\n".join(out)
    # the classes partition the turns (outcomes.CLASSES): served ones, then errors, refused, and
    # the unserved ones when there are any; failed over is not a class (said after them)
    out.append(
        f"turns {st['turns']} = served {st.get('served', 0)} (translated {st['translated']}  ·  retargeted "
        f"{st['retargeted']}  ·  pass-through {st['pass_through']}"
        + (f"  ·  capped {st['capped']}: cut by the endpoint's cap" if st.get("capped") else "")
        + f") + errors {st['errors']} + refused {st['refused']}"
        + "".join(f" + {label} {st.get(key, 0)}" for key, label in UNSERVED_LABELS if st.get(key))
        + (f"  ·  failed over {st['failed_over']}" if st.get("failed_over") else "")
        + (f"  ·  requests {st['requests']} + retries {st['retries']}" if st.get("retries") else "")
    )
    cached = any(g.get("cache_read") is not None for g in st["by_endpoint"])  # cache columns once reported
    for name in ("route", "endpoint", "model"):
        rows = [[g[name] or GROUP_NONE[name], str(g["turns"]), str(g["translated"]), str(g["refused"]), str(g["errors"]),
                 str(g.get("cancelled", 0)), fmt_share(g["share"]),
                 *([fmt_num(g.get("cache_read")), fmt_num(g.get("cache_write")), fmt_share(g.get("cache_read_share"))]
                   if cached else [])] for g in st[f"by_{name}"]]
        out += ["", table([name.upper(), "TURNS", "TRANSLATED", "REFUSED", "ERRORS", "CANCELLED", "SHARE SERVED",
                           *(["CACHE READ", "CACHE WRITE", "INPUT FROM CACHE"] if cached else [])], rows,
                          right=set(range(1, 10)))]
    if st.get("failover_by_endpoint"):
        rows = [[g["endpoint"], str(g["failed"]), str(g["moved_on"]), str(g["cooled"])] for g in st["failover_by_endpoint"]]
        out += ["", f"failover: {st['failed_over']} turns went on to a later attempt"
                f" (an attempt that failed before its first byte moved to the next route)",
                table(["ENDPOINT", "FAILED ATTEMPTS", "MOVED ON", "COOLED (RETRY-AFTER)"], rows, indent="  ")]
    u = st["usage"]
    out += ["", "usage as reported (openai input includes cache reads; anthropic input does not):"]
    if u["by_counting"]:
        rows = [[proto, str(v["turns"]), *(fmt_num(v[f]) for f in USAGE_FIELDS), fmt_share(v.get("cache_read_share"))]
                for proto, v in u["by_counting"].items()]
        out.append(table(["COUNTING", "TURNS", *(USAGE_LABELS[f] for f in USAGE_FIELDS), "INPUT FROM CACHE"], rows,
                         indent="  ", right=set(range(1, 3 + len(USAGE_FIELDS)))))
    out.append(f"  turns that reported usage: {u['turns_reported']}; reported none: {u['turns_none']}")
    t = st["timings"]
    rows = [[label, str(t[k]["n"]), fmt_ms(t[k]["p50"]), fmt_ms(t[k]["p95"])]
            for label, k in (("latency", "latency_ms"), ("first byte", "ttfb_ms"))]
    out += ["", table(["TIMING", "N", "P50", "P95"], rows)]
    if st.get("quota_routed"):
        out += ["", routed_line(st["quota_routed"])]
    return "\n".join(out)

