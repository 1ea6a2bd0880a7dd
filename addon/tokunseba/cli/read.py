"""The read commands: `models`, `stats`, `explain`, `log` (docs/architecture.md §4).

Each prints an aligned plain-text table (or the same facts as JSON with ``--json``) and
returns an exit code. Bad arguments are one ``error: ...`` line on stderr (exit 2); a
missing ledger is one line (empty results, exit 0; for ``explain`` exit 1).
"""

from __future__ import annotations

import argparse
import math
import os
import re
import socket
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

from .. import jsonc
from ..ledger import (
    LEDGER_ENV,
    USAGE_FIELDS,
    LedgerError,
    LedgerMissing,
    LedgerReader,
    compute_stats,
    db_errors,
    default_ledger_target,
    spool_note,
)
from ..outcomes import client_label, label, outcome_class, route_text, seconds, was_sent
from .. import protocols
from ..credentials import redact_text
from ..reasoning.state import STATE_EVENTS, explain_state
from ..routing import EVENT_ROUTED, routed_line

# ---------------------------------------------------------------- registration


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "models",
        help="what each client protocol can reach at each endpoint, and the models there",
        description="For each client protocol x endpoint, what a route sending that client there does: "
        "retarget (same protocol: new host/model, the endpoint's own key), translated, or refused (and why); "
        "plus the models the rules name for each endpoint. --probe asks each endpoint's models API "
        "(GET {url}/models, straight to the endpoint, with its own key) and says for each: reachable or not, "
        "the models it serves, and the rules' models it does not serve; exit status 1 when a probed endpoint "
        "gave no models list. A local server you already run (llama-server, Ollama, LM Studio, vLLM): "
        "`tokunseba models --rules FILE --probe --endpoint NAME`.",
    )
    p.add_argument("--rules", metavar="FILE", help="rules YAML (default: $TOKUNSEBA_RULES; else built-in endpoints only)")
    p.add_argument("--probe", action="store_true",
                   help="ask each endpoint's models API: reachable or not, models served (exit 1 if one gives no list); "
                        "the rules' own endpoints when they declare some, else the built-in ones; --endpoint to choose")
    p.add_argument("--endpoint", metavar="NAME", action="append", help="only this endpoint (repeatable)")
    p.add_argument("--timeout", metavar="SECONDS", default="3",
                   help=f"probe timeout per endpoint (default 3, at most {MAX_TIMEOUT:g})")
    _common(p, ledger_help=argparse.SUPPRESS)  # accepted for uniformity; models does not read it
    p.set_defaults(func=cmd_models)

    p = sub.add_parser(
        "stats",
        help="turns, translations, refusals, errors, usage as reported, latency percentiles",
        description="Counts by route, endpoint and model; usage summed exactly as reported (grouped by how "
        "the upstream counts: OpenAI input includes cache reads, Anthropic input does not); latency "
        "and time-to-first-byte p50/p95.",
    )
    p.add_argument("--since", metavar="WHEN", help="window start: 30m, 24h, 7d, 2026-12-01 or an ISO datetime")
    _common(p)
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("explain", help="the whole story of one turn", description="The whole story of one turn: "
                       "rules tried, decision, translation, upstream status, usage as reported, timings, events; who was "
                       "talking (session, agent, client) and the session's other turns around this one.")
    p.add_argument("request_id", metavar="REQUEST_ID", help="a request id, or a unique prefix of one")
    _common(p)
    p.set_defaults(func=cmd_explain)

    p = sub.add_parser("log", help="recent turns with their request ids, newest first")
    p.add_argument("--limit", metavar="N", default="20", help="how many turns (default 20)")
    p.add_argument("--instance", metavar="NAME",
                   help="only the turns of this proxy (its --instance; default of a proxy: user@host)")
    _common(p)
    p.set_defaults(func=cmd_log)


def _common(p: argparse.ArgumentParser, ledger_help: str | None = None) -> None:
    p.add_argument(
        "--ledger", metavar="PATH|URL",
        help=ledger_help or f"the ledger: a SQLite file or a postgresql:// URL (a read-only role is enough; default: "
        f"${LEDGER_ENV}, else $TOKUNSEBA_HOME/ledger.db)",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")


# ---------------------------------------------------------------- small helpers


def _error(msg: str, code: int) -> int:
    print(f"error: {msg}", file=sys.stderr)
    return code


def _json(obj: Any) -> None:
    print(jsonc.pretty(obj))


def fmt_time(ts: float | None) -> str:
    if ts is None:
        return "-"
    try:
        return datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")
    except (ValueError, OverflowError, OSError):  # a ledger value no calendar date can show
        return str(ts)


def fmt_ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f} ms"


def fmt_num(v: int | None) -> str:
    return "-" if v is None else str(v)


def fmt_share(v: float | None) -> str:
    return "-" if v is None else f"{v * 100:.1f}%"


def counted_outcome(t: dict) -> str | None:
    """The outcome as `stats` counts it, the console and mitmweb say it (outcomes.outcome_class):
    a finished turn with a status >= 400 or an error is an error whatever path it took (a
    translated turn the upstream answered with a 400 included); refused, cancelled and
    interrupted stay themselves; None while open."""
    o = t.get("outcome")
    if o is None:
        return None
    return outcome_class(o, t.get("status"), t.get("error"))


def outcome_label(o: str | None) -> str:
    return label(o)


_NUMERIC = re.compile(r"^-?\d+(\.\d+)?( ms|%)?$")


def table(header: list[str], rows: list[list[str]], indent: str = "", right: set[int] | None = None) -> str:
    """An aligned plain-text table; numeric columns (or those in ``right``) right-aligned."""
    rows = [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    numeric = [
        i in right if right is not None else
        any(_NUMERIC.match(r[i]) for r in rows) and all(_NUMERIC.match(r[i]) or r[i] in ("", "-") for r in rows)
        for i in range(len(header))
    ]

    def line(cells: list[str]) -> str:
        out = [c.rjust(w) if num else c.ljust(w) for c, w, num in zip(cells, widths, numeric)]
        return (indent + "  ".join(out)).rstrip()

    return "\n".join([line(header), *(line(r) for r in rows)])


_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_since(text: str, now: float | None = None) -> float:
    """``30m`` / ``24h`` / ``7d`` (before now), or an ISO date/datetime (local time unless it
    names a zone) -> epoch seconds. ValueError with a one-line message otherwise, also for a
    start no calendar date can show (``99999999999d``)."""
    now = time.time() if now is None else now
    s = text.strip()
    dt: datetime | None = None  # a date given, or else a duration in seconds
    seconds = 0.0
    if m := _DURATION.fullmatch(s.lower()):
        seconds = float(m.group(1)) * _UNITS[m.group(2)]
        if seconds <= 0:
            raise ValueError(f"the duration must be positive, got {text!r}")
    else:
        try:
            dt = datetime.fromisoformat(s)
        except ValueError:
            raise ValueError(
                f"expected a duration (30m, 24h, 7d) or a date (2026-12-01, 2026-12-01T08:00), got {text!r}"
            ) from None
    try:
        ts = now - seconds if dt is None else (dt if dt.tzinfo else dt.astimezone()).timestamp()
        datetime.fromtimestamp(ts)  # the window start must be a date this system can show
    except (ValueError, OverflowError, OSError):
        raise ValueError(f"{text!r} is out of the range of dates this system can handle") from None
    return ts


MAX_LIMIT = 2**63 - 1  # SQLite's largest integer
MAX_TIMEOUT = 3600.0  # seconds; a probe is one GET of a models list


def _positive_int(name: str, text: str, maximum: int = MAX_LIMIT) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n <= 0:
        raise ValueError(f"{name}: expected a positive integer, got {text!r}")
    if n > maximum:
        raise ValueError(f"{name}: {text.strip()} is too large (at most {maximum})")
    return n


def _open(args: argparse.Namespace) -> LedgerReader:
    """The ledger named by --ledger (else the default), read-only. Raises LedgerError."""
    return LedgerReader(args.ledger or default_ledger_target(), readonly=True)


def _read(args: argparse.Namespace, empty: Any, body: Callable[[LedgerReader], int]) -> int:
    """Run ``body`` on the ledger. A missing ledger prints one line (and ``empty`` as JSON)."""
    try:
        ledger = _open(args)
    except LedgerMissing as e:
        if args.json:
            print(str(e), file=sys.stderr)
            _json(empty)
        else:
            print(str(e))
        return 0
    except LedgerError as e:
        if note := spool_note(args.ledger or default_ledger_target()):
            print(note, file=sys.stderr)
        return _error(str(e), 1)
    try:
        with ledger:
            return body(ledger)
    except db_errors() + (OverflowError,) as e:
        return _error(f"cannot read the ledger {ledger.path}: {redact_text(str(e))}", 1)


# ---------------------------------------------------------------- log


def cmd_log(args: argparse.Namespace) -> int:
    try:
        limit = _positive_int("--limit", args.limit)
    except ValueError as e:
        return _error(str(e), 2)

    def body(ledger: LedgerReader) -> int:
        turns = ledger.turns(limit=limit, instance=args.instance)
        if args.json:
            _json(turns)
        elif not turns:
            print(f"no turns recorded yet in {ledger.path}" if args.instance is None
                  else f"no turns of instance {args.instance!r} in {ledger.path}")
        else:
            head = ["TIME", "REQUEST ID", "CLIENT", "MODEL", "ROUTE", "OUTCOME", "STATUS", "LATENCY", "ERROR"]
            turns, folded = fold_retries(turns)
            rows = [_log_row(t) for t in turns]
            if args.instance is None and len({t.get("instance") for t in turns}) > 1:  # a shared ledger
                head.insert(2, "INSTANCE")
                for r, t in zip(rows, turns):
                    r.insert(2, t.get("instance") or "-")
            print(table(head, rows))
            if folded:
                print(f"{folded} retr{'y' if folded == 1 else 'ies'} folded into the request they repeat "
                      "(+N retries in its row; log --json lists every turn)")
            total = ledger.count_turns(instance=args.instance)
            shown = len(turns) + folded
            if total > shown:
                print(f"{shown} of {total} shown, newest first (--limit N shows more)")
        return 0

    return _read(args, [], body)


def fold_retries(turns: list[dict]) -> tuple[list[dict], int]:
    """``log``: the retries of a request (turns.retry_of) that is in ``turns`` folded into its
    row (``retries``: how many, and the outcome of the last one), and how many were folded."""
    by_id = {t["request_id"]: t for t in turns}
    out, folded = [], 0
    for t in reversed(turns):  # oldest first: the last retry's outcome is the latest word
        first = by_id.get(t.get("retry_of") or "")
        if first is not None:
            first["retries"] = first.get("retries", 0) + 1
            first["last_retry"] = t
            folded += 1
        else:
            out.append(t)
    return list(reversed(out)), folded


def _model_cell(t: dict) -> str:
    req, used = t.get("requested_model"), t.get("model_used")
    if used and used != req:
        return f"{req or '-'} → {used}"
    return req or used or "-"


def _route_cell(t: dict) -> str:
    """The route as the console says it (outcomes.route_text), then where the turn went."""
    route = route_text(t.get("rule"), t.get("trace"), t.get("attempts"))
    if t.get("rule"):
        cell = f"{route} → {t.get('endpoint') or '-'}"
    elif was_sent(t):
        cell = f"{route} → {t.get('endpoint') or t.get('host') or '-'}"
    else:
        cell = f"{route} → {t.get('host') or '-'} (not sent)"
    failed = _failed_attempts(t)[: len(t.get("attempts") or []) - 1]  # every attempt before the last one
    if failed:  # failed over (the last attempt answered, or its failure is what the client got)
        cell += f" (failed over from {', '.join(failed)})"
    return cell


def _failed_attempts(t: dict) -> list[str]:
    """``small 503`` for each attempt of the turn that failed (turns.attempts)."""
    out = []
    for a in t.get("attempts") or []:
        if isinstance(a, dict) and a.get("kind") != "answered":
            what = str(a["status"]) if a.get("kind") == "status" and a.get("status") else str(a.get("kind", "?"))
            out.append(f"{a.get('endpoint') or a.get('host') or 'original host'} {what.replace('_', ' ')}")
    return out


def _attempt_lines(t: dict) -> list[str]:
    """explain: each attempt of a turn that failed over (or whose only attempt failed)."""
    attempts = [a for a in t.get("attempts") or [] if isinstance(a, dict)]
    if not attempts:
        return []
    out = ["", "attempts"]
    for i, a in enumerate(attempts, 1):
        where = f"{a.get('route') or 'unmatched'} → {a.get('endpoint') or a.get('host') or 'the host the client asked for'}"
        took = fmt_ms(a.get("ms"))
        if a.get("kind") == "answered":
            out.append(f"  {i}. {where}: answered, status {fmt_num(a.get('status'))}, after {took}")
            continue
        told = any(x.get("told") for x in attempts)  # every attempt failed: the one that said most was told
        if a.get("told"):
            after = ("moved on; the client got this failure, which says most about the turn" if i < len(attempts)
                     else "the client got this failure, which says most about the turn")
        elif i < len(attempts):
            after = "moved on to the next route"
        else:
            after = "no next route" if told else "the client got this failure"
        out.append(f"  {i}. {where}: failed ({str(a.get('kind')).replace('_', ' ')}) after {took}; {after}")
        out.append(f"       {a.get('why') or ''}")
        if a.get("cooled_s"):
            out.append(f"       cooled down for {a['cooled_s']:g} s (its retry-after / rate-limit reset, "
                       "capped by cooldown_max_s): later turns did not ask it meanwhile")
        elif a.get("backoff_s"):
            out.append(f"       backed off for {a['backoff_s']:g} s (no retry-after: the passive back-off)")
    return out


def _log_row(t: dict) -> list[str]:
    err = (t.get("error") or "").replace("\n", " ")
    if t.get("retries"):  # folded: the request, then how its retries ended
        last = t["last_retry"]
        n = t["retries"]
        err = (f"+{n} retr{'y' if n == 1 else 'ies'}, the last {label(counted_outcome(last))} "
               f"{fmt_num(last.get('status'))}" + (f" · {err}" if err else ""))
    return [
        fmt_time(t["started_at"]),
        t["request_id"],
        client_label(t.get("client_name"), t.get("client_protocol")),  # as the console names it
        _model_cell(t),
        _route_cell(t),
        outcome_label(counted_outcome(t)),
        fmt_num(t.get("status")),
        seconds(t.get("latency_ms")),  # as the console shows it
        err[:77] + "..." if len(err) > 80 else err,
    ]


# ---------------------------------------------------------------- stats


def since_option(text: str | None) -> float | None:
    """``--since`` as epoch seconds (None: all time); ValueError with the one-line message."""
    if text is None:
        return None
    try:
        return parse_since(text)
    except ValueError as e:
        raise ValueError(f"--since: {e}") from None


def timeout_option(text: str) -> float:
    """``--timeout`` in seconds, positive and at most MAX_TIMEOUT; ValueError otherwise."""
    try:
        timeout = float(text)
    except ValueError:
        timeout = math.nan
    if not 0 < timeout <= MAX_TIMEOUT:  # also refuses nan and inf
        raise ValueError(f"--timeout: expected a positive number of seconds up to {MAX_TIMEOUT:g}, got {text!r}")
    return timeout


def cmd_stats(args: argparse.Namespace) -> int:
    try:
        since = since_option(args.since)
    except ValueError as e:
        return _error(str(e), 2)

    def body(ledger: LedgerReader) -> int:
        st = ledger.stats(since)
        st["quota_routed"] = ledger.turns_with_event(EVENT_ROUTED, since)  # moved by a window (routing/quota.py)
        if args.json:
            _json(st)
        else:
            print(render_stats(st, args.since))
        if note := spool_note(ledger.path):
            print(note, file=sys.stderr)
        return 0

    return _read(args, compute_stats([], since), body)


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
        f"{st['retargeted']}  ·  pass-through {st['pass_through']}) + errors {st['errors']} + refused {st['refused']}"
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


# ---------------------------------------------------------------- explain


def cmd_explain(args: argparse.Namespace) -> int:
    try:
        args.request_id.encode()
    except UnicodeEncodeError:  # bytes that are not UTF-8 in argv: no request id looks like that
        return _error(f"no turn with request id {args.request_id!r}", 1)
    try:
        ledger = _open(args)
    except LedgerError as e:
        return _error(str(e), 1)
    try:
        with ledger:
            turn = ledger.get_turn(args.request_id)
            events = ledger.events(turn["request_id"])
            shadows = ledger.shadows(request_id=turn["request_id"])
            session = ledger.turns(session=turn["session_id"]) if turn.get("session_id") else []
    except LookupError as e:
        return _error(str(e.args[0]), 1)
    except db_errors() + (OverflowError,) as e:
        return _error(f"cannot read the ledger {ledger.path}: {e}", 1)
    for k in ("request_body", "response_body"):
        if isinstance(turn.get(k), bytes):
            turn[k] = turn[k].decode("utf-8", "replace")
    from . import cache_view, session_view

    if args.json:
        shown, before, after = session_view.around(session, turn["request_id"]) if session else ([], 0, 0)
        _json({"turn": turn, "events": events, "shadows": shadows, "cache": cache_view.cache_facts(turn, session),
               "session": {"id": turn.get("session_id"), "turns": len(session), "earlier_not_shown": before,
                           "later_not_shown": after,
                           "around": [{k: t.get(k) for k in SESSION_TURN_KEYS} for t in shown]}})
    else:
        from ..shadow.view import explain_lines

        print("\n".join([render_explain(turn, events), *explain_lines(shadows),
                         *cache_view.explain_lines(turn, session), *session_view.explain_lines(turn, session)]))
    return 0


# what `explain --json` shows of each of the session's turns around the one asked for
SESSION_TURN_KEYS = ("request_id", "started_at", "agent", "agent_id", "background", "rule", "endpoint", "host",
                     "model_used", "outcome", "status", "usage_input", "usage_output")


def _kv(key: str, value: str) -> str:
    return f"{key:<13}{value}".rstrip()


def _compact(v: Any) -> str:
    return v if isinstance(v, str) else jsonc.dumps(v)


def _trace_lines(trace: list) -> list[str]:
    """Each rule tried: its verdict, then why (one reason a line)."""
    if not trace:
        return ["  (none: no routes in the rules, or the turn was not routable)"]
    out = []
    for i, t in enumerate(trace, 1):
        if not isinstance(t, dict):
            out.append(f"  {i}. {_compact(t)}")
            continue
        name = t.get("route") or t.get("rule") or t.get("name") or "?"
        if not t.get("matched"):
            verdict = "no match"
        elif t.get("refused"):
            verdict = f"matched, but refused: {t['refused']}"
        elif t.get("unavailable"):
            verdict = f"matched, but the endpoint was {t['unavailable']}"
        elif t.get("unreachable"):
            verdict = "matched, but the endpoint was unreachable"
        else:
            verdict = "matched"
        out.append(f"  {i}. {name}: {verdict}")
        reasons = t.get("reasons") or t.get("reason") or []
        for r in [reasons] if isinstance(reasons, str) else reasons:
            out.append(f"       {_compact(r)}")
    return out


def _usage_line(fields: dict[str, int | None]) -> str:
    got = [f"{f.replace('_', ' ')} {fields[f]}" for f in USAGE_FIELDS if fields[f] is not None]
    missing = [f.replace("_", " ") for f in USAGE_FIELDS if fields[f] is None]
    return " · ".join(got) + (f"  (not reported: {', '.join(missing)})" if missing else "")


TRANSLATION_NONE = {
    "pass_through": "none (same protocol, body untouched)",
    "retargeted": "none (same protocol, retargeted)",
    "translated": "no details recorded",
}


VIA = {"proxy": "via the HTTPS proxy", "base_url": "via a base URL"}  # turns.via


def render_explain(turn: dict, events: list[dict]) -> str:
    t0 = turn["started_at"]
    flags = []
    if turn.get("stream") is not None:
        flags.append("stream" if turn["stream"] else "not streamed")
    if turn.get("via") in VIA:  # how it came in (NULL in ledgers older than base URLs)
        flags.append(VIA[turn["via"]])
    out = [
        _kv("request", turn["request_id"]),
        _kv("time", fmt_time(t0)),
        _kv("client", f"{turn.get('client_protocol') or '-'} · {turn.get('host') or '-'}{turn.get('path') or ''}"
            + (f" · {', '.join(flags)}" if flags else "")),
        _kv("requested", turn.get("requested_model") or "- (no model in the request)"),
        *([_kv("retry of", f"{turn['retry_of']} (the same request, sent again by the client)")]
          if turn.get("retry_of") else []),
        "",
        "rules tried",
        *_trace_lines(turn.get("trace") or []),
        "",
    ]
    outcome = turn.get("outcome")
    if turn.get("rule"):
        refused_to = next((e["data"].get("target") for e in events if e["kind"] == "route_refused"
                           and isinstance(e["data"], dict) and e["data"].get("rule") == turn["rule"]), None)
        target = turn.get("endpoint") or refused_to or "-"
        if turn.get("target_protocol"):
            target += f" ({turn['target_protocol']})"
        decision = f"{turn['rule']} → {target} · {outcome_label(counted_outcome(turn))}"
    else:  # the route as the console and `log` say it: "route X matched; endpoint Y unreachable", or "no route"
        route = route_text(None, turn.get("trace"), turn.get("attempts"))
        if not was_sent(turn):
            decision = f"{route} → {turn.get('host') or '-'} (not sent) · {outcome_label(counted_outcome(turn))}"
        elif counted_outcome(turn) == "pass_through":
            decision = f"{route}: passed through unchanged to {turn.get('host') or '-'}"
        else:
            decision = f"{route} → {turn.get('host') or '-'} · {outcome_label(counted_outcome(turn))}"
    if turn.get("model_used"):
        decision += f" · model {turn['model_used']}"
    out.append(_kv("decision", decision))
    out += _attempt_lines(turn)

    translated = [e["data"] or {} for e in events if e["kind"] == "protocol_translated"]
    if translated:
        for d in translated:
            out.append(_kv("translation", f"{d.get('from', '?')} → {d.get('to', '?')}"))
            for key, label in (("dropped", "  dropped"), ("plumbing", "  added"), ("converted", "  converted"),
                               ("warnings", "  warnings")):
                items = d.get(key) or []
                if isinstance(items, (list, tuple)):
                    for j, item in enumerate(items):
                        out.append(_kv(label if j == 0 else "", _compact(item)))
                elif items:
                    out.append(_kv(label, _compact(items)))
    else:
        out.append(_kv("translation", TRANSLATION_NONE.get(outcome or "", "none")))
    for e in events:
        if e["kind"] == "route_refused":
            d = e["data"] or {}
            out.append(_kv("refused", f"{d.get('rule', '?')} → {d.get('target', '?')}: {d.get('reason', '')}"))
        elif e["kind"] == "left_behind":  # another host: what did not go there (names only)
            d = e["data"] or {}
            parts = [f"{what} {', '.join(map(str, d.get(key) or []))}" for key, what in
                     (("headers", "headers"), ("query", "query parameters")) if d.get(key)]
            out.append(_kv("left behind", "; ".join(parts)))
        elif e["kind"] in STATE_EVENTS and isinstance(e["data"], dict):  # provider state of a tool loop
            out += [_kv(*line) for line in explain_state(e["kind"], e["data"])]

    out += ["", _kv("upstream", f"status {turn['status']}" if turn.get("status") is not None else "no status recorded")]
    done = next((e["data"] for e in reversed(events) if e["kind"] == "completed" and isinstance(e["data"], dict)), {})
    if done.get("stop_reason"):
        out.append(_kv("stop reason", str(done["stop_reason"])))
    for j, item in enumerate(done.get("dropped") or []):  # reply fields left behind by the translation
        out.append(_kv("reply drops" if j == 0 else "", _compact(item)))
    for e in events:  # a token count answered by the endpoint's own counter (issue 32)
        if e["kind"] == "counted" and isinstance(e["data"], dict):
            d = e["data"]
            out.append(_kv("count", f"{d.get('input_tokens')} input tokens, counted by {d.get('counter')} of endpoint "
                                    f"{d.get('endpoint')} (a count, not a turn's usage)"))
    if turn.get("usage_reported") is None:
        out.append(_kv("usage", "none reported"))
    else:
        fields = {f: turn.get(f"usage_{f}") for f in USAGE_FIELDS}
        counting = turn.get("usage_protocol") or "unknown"
        if all(v is None for v in fields.values()):
            out.append(_kv("usage", f"reported without counts ({counting}): {_compact(turn['usage_reported'])}"))
        else:
            out.append(_kv("usage", f"as reported ({counting} counting): {_usage_line(fields)}"))
            out.append(_kv("", f"raw {_compact(turn['usage_reported'])}"))
    if turn.get("usage_client") is not None:
        out.append(_kv("client view", _compact(turn["usage_client"])))
    out.append(_kv("timings", f"latency {fmt_ms(turn.get('latency_ms'))} · first byte {fmt_ms(turn.get('ttfb_ms'))}"))
    errors = [turn["error"]] if turn.get("error") else []
    errors += [f"{e['kind']}: {_compact(e['data'])}" for e in events
               if e["kind"] in ("upstream_error", "endpoint_unreachable", "translation_error")]
    out.append(_kv("errors", errors[0] if errors else "none"))
    out += [_kv("", e) for e in errors[1:]]
    for k in ("request_body", "response_body"):
        if turn.get(k) is not None:
            out.append(_kv(k.replace("_", " "), f"{len(turn[k])} characters stored (see --json)"))

    out += ["", "events"]
    if events:
        rows = [[f"+{(e['ts'] - t0) * 1000:.1f} ms", e["kind"], "" if e["data"] is None else _compact(e["data"])]
                for e in events]
        out += table(["AT", "KIND", "DATA"], rows, indent="  ").splitlines()
    else:
        out.append("  (none)")
    return "\n".join(out)


# ---------------------------------------------------------------- models


def cmd_models(args: argparse.Namespace) -> int:
    from ..routing import RulesError, load_rules
    from ..translate import CODECS, PROTOCOLS, pair_refusal

    try:
        timeout = timeout_option(args.timeout)
    except ValueError as e:
        return _error(str(e), 2)
    rules_path = args.rules or os.environ.get("TOKUNSEBA_RULES") or None
    try:
        rules = load_rules(rules_path)
    except RulesError as e:
        return _error(str(e), 1)
    endpoints = dict(rules.endpoints)
    if args.endpoint:
        unknown = [n for n in args.endpoint if n not in endpoints]
        if unknown:
            return _error(f"--endpoint: unknown endpoint {unknown[0]!r} (known: {', '.join(endpoints)})", 2)
        endpoints = {n: endpoints[n] for n in endpoints if n in args.endpoint}

    named: dict[str, list[str]] = {n: [] for n in endpoints}
    for n, ep in endpoints.items():
        if ep.model:
            named[n].append(ep.model)
    for r in rules.routes:
        if r.to in named and r.model and r.model not in named[r.to]:
            named[r.to].append(r.model)

    def result(client: str, target: str) -> tuple[str, str | None]:
        """What a route sending ``client`` to an endpoint speaking ``target`` does. A routed
        same-protocol turn is a retarget (new host/model, the endpoint's key); pass-through is
        only a turn no rule routes, so it never appears here."""
        why = pair_refusal(client, target)
        if why:
            return "refused", why
        return ("retarget" if client == target else "translated"), None

    report: dict[str, Any] = {
        "rules": str(rules_path) if rules_path else None,
        "unmatched": rules.unmatched,
        "endpoints": [
            {"name": n, "protocol": ep.protocol, "url": ep.url, "builtin": ep.builtin, "key_env": ep.key_env,
             "key_set": bool(ep.key_env and os.environ.get(ep.key_env)), "models_in_rules": named[n],
             "count_tokens": ep.count_tokens or ("native" if ep.counter else "none"),
             "counter": ep.counter.name if ep.counter else None, "no_counter_why": ep.no_counter_why,
             "accepts": list(ep.takes), "accepts_said": ep.accepts is not None, "cache": ep.cache,
             "context_tokens": ep.context_tokens}
            for n, ep in endpoints.items()
        ],
        "pairs": [
            {"client": c, "endpoint": n, "target_protocol": ep.protocol, "result": res, "reason": why,
             "refused_per_turn": per_turn_refusals(c, ep.protocol) if res == "translated" else []}
            for c in PROTOCOLS for n, ep in endpoints.items() for res, why in [result(c, ep.protocol)]
        ],
        "refused_per_turn": {
            p: {"leaving": list(CODECS[p].refused_leaving), "arriving": list(CODECS[p].refused_arriving)}
            for p in PROTOCOLS if p in CODECS},
        "routes": [],
    }
    for r in rules.routes:
        if r.to not in endpoints:
            continue
        clients = _route_clients(r) or list(PROTOCOLS)
        target = endpoints[r.to].protocol
        refused = {c: why for c in clients if (why := pair_refusal(c, target))}
        report["routes"].append({"name": r.name, "line": r.line, "to": r.to, "model": r.model, "clients": clients,
                                 "refused": refused, "on_refused": r.on_refused,
                                 "on_failure": r.on_failure, "on_unreachable": r.on_unreachable})
    if args.probe:
        # a rules file's own endpoints by default (the local server it names, not the cloud behind
        # it); the built-in ones when the rules declare none, or when named with --endpoint
        declared = {n: ep for n, ep in endpoints.items() if not ep.builtin}
        probed = endpoints if args.endpoint or not declared else declared
        report["not_probed"] = [n for n in endpoints if n not in probed]
        with ThreadPoolExecutor(max_workers=max(len(probed), 1)) as pool:
            probes = dict(zip(probed, pool.map(lambda ep: probe_endpoint(ep, timeout), probed.values())))
        for entry in report["endpoints"]:
            if (pr := probes.get(entry["name"])) is not None:
                pr["not_served"] = [m for m in entry["models_in_rules"] if pr["models"] is not None and m not in pr["models"]]
                entry["probe"] = pr
    if args.json:
        _json(report)
    else:
        print(render_models(report))
    return 1 if any(not e["probe"]["ok"] for e in report["endpoints"] if "probe" in e) else 0


def per_turn_refusals(client: str, target: str) -> list[str]:
    from ..translate import CODECS

    """What a translated ``client`` → ``target`` turn is still refused for (the codecs' own lists)."""
    return list(CODECS[client].refused_leaving) + list(CODECS[target].refused_arriving)


def _route_clients(route: Any) -> list[str]:
    """The client protocols a route is limited to (``when: client:``); [] when any."""
    when = route.when
    c = when.get("client") if isinstance(when, dict) else getattr(when, "client", None)
    if c is None:
        return []
    return [c] if isinstance(c, str) else list(c)


def render_models(rep: dict) -> str:
    from ..routing import OnFailure, OnRefused, Unmatched

    unmatched = {Unmatched.PASS: "pass through to the host the client asked for",
                 Unmatched.REFUSE: "refused with an error in the client's protocol"}[rep["unmatched"]]
    out = [f"rules: {rep['rules'] or 'none (built-in endpoints only)'}",
           f"unmatched: {rep['unmatched']} (turns no route takes: {unmatched})", ""]
    rows = []
    for e in rep["endpoints"]:
        key = "-" if not e["key_env"] else f"{e['key_env']} ({'set' if e['key_set'] else 'unset'})"
        rows.append([e["name"], e["protocol"], e["url"], ", ".join(e["models_in_rules"]) or "-", key,
                     (e["counter"] or "none") + (f" (count_tokens: {e['count_tokens']})"
                                                 if e["count_tokens"] not in ("native", "none") else ""),
                     ", ".join(e.get("accepts") or ()) + ("" if e.get("accepts_said", True) else " (default)"),
                     str(e["context_tokens"]) if e.get("context_tokens") else "-"])
    heads = ["ENDPOINT", "PROTOCOL", "URL", "MODELS IN RULES", "KEY", "TOKEN COUNTER", "ACCEPTS", "CONTEXT"]
    if not any(e.get("context_tokens") for e in rep["endpoints"]):  # a column only when some endpoint says it
        heads, rows = heads[:-1], [r[:-1] for r in rows]
    out.append(table(heads, rows))
    if nocount := [e for e in rep["endpoints"] if e["counter"] is None]:
        out += ["", "Token counts routed to " + "; ".join(f"{e['name']} ({e['no_counter_why']})" for e in nocount)
                + " are answered with an error naming the endpoint: a count is never estimated."]
    out.append("")
    rows = [[p["client"], p["endpoint"], p["result"] + (f": {p['reason']}" if p["reason"] else "")]
            for p in rep["pairs"]]
    out.append(table(["CLIENT", "ENDPOINT", "RESULT"], rows))
    notes = [(f"turns of {p} clients, to another protocol", r["leaving"]) for p, r in rep["refused_per_turn"].items()
             if r["leaving"]]
    notes += [(f"turns translated to {p} endpoints", r["arriving"]) for p, r in rep["refused_per_turn"].items()
              if r["arriving"]]
    if notes:
        out += ["", "A translated turn is still refused, before anything is sent, when it carries what the target "
                    "cannot take without inventing (`explain` names the JSON path):"]
        out += [f"  {who}: {'; '.join(what)}" for who, what in notes]
    if rep["routes"]:
        rows = []
        for r in rep["routes"]:
            res = "ok"
            if r["refused"]:
                then = "error to the client" if r["on_refused"] == OnRefused.ERROR else "next route"
                res = f"refused for {', '.join(r['refused'])} → {then}"
            unreachable = "error to the client" if r["on_failure"] == OnFailure.ERROR else "next route"
            rows.append([r["name"], fmt_num(r["line"]), r["to"], r["model"] or "-", ", ".join(r["clients"]), res,
                         unreachable])
        out += ["", table(["ROUTE", "LINE", "TO", "MODEL", "CLIENTS", "RESULT", "IF IT FAILS"], rows)]
    probed = [e for e in rep["endpoints"] if "probe" in e]
    if probed:
        rows = []
        for e in probed:
            pr = e["probe"]
            if pr["ok"]:
                n = len(pr["models"])
                state = f"reachable, {n} model{'s' * (n != 1)}"
                served = ", ".join(pr["models"]) or "-"
                if pr["not_served"]:
                    served += f"  [not served: {', '.join(pr['not_served'])}]"
            elif pr["reachable"]:
                state, served = f"reachable, but {pr['error']}", "-"
            else:
                state, served = f"unreachable: {pr['error']}", "-"
            rows.append([e["name"], pr["url"], state, served])
        out += ["", table(["ENDPOINT", "PROBED", "STATE", "MODELS SERVED"], rows)]
        if rep.get("not_probed"):
            out.append(f"not probed (built in): {', '.join(rep['not_probed'])}; probe one with --endpoint NAME")
    return "\n".join(out)


# models API reply shapes: (list key, id key); Gemini names are "models/<id>"
MODEL_LISTS = (("data", "id"), ("models", "name"), ("models", "id"))


def _sent_headers(protocol: str) -> dict[str, str]:
    """What the protocol's endpoints need besides the key (Anthropic's anthropic-version)."""
    facts = protocols.find(protocol)
    return dict(facts.sent_headers) if facts is not None else {}


def probe_endpoint(ep: Any, timeout: float) -> dict:
    """GET {url}/models at the endpoint itself (no proxy), with the endpoint's own key.

    ``reachable``: an HTTP reply came back (whatever its status); ``ok``: it was a models list,
    whose ids are ``models``; otherwise ``error`` says what went wrong in a few words."""
    url = ep.url.rstrip("/") + "/models"
    headers = {"accept": "application/json", "user-agent": "tokunseba-models-probe",
               **_sent_headers(ep.protocol), **ep.auth_headers(os.environ)}
    res: dict[str, Any] = {"url": url, "reachable": False, "ok": False, "status": None, "models": None,
                           "error": None}
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(urllib.request.Request(url, headers=headers), timeout=timeout) as r:
            res["status"] = r.status
            body = r.read()
    except urllib.error.HTTPError as e:
        res["reachable"], res["status"] = True, e.code
        hint = ""
        if e.code in (401, 403):
            hint = f" (no key: set {ep.key_env})" if ep.key_env and not os.environ.get(ep.key_env) else " (key rejected)"
        elif e.code == 404:
            hint = " (no models API here: does the url end with the API's base, e.g. /v1?)"
        res["error"] = f"HTTP {e.code}{hint}"
        return res
    except (urllib.error.URLError, OSError) as e:
        res["error"] = _network_error(getattr(e, "reason", e), timeout)
        return res
    res["reachable"] = True
    try:
        data = jsonc.loads(body)
    except jsonc.JSONDecodeError:
        res["error"] = "unexpected reply (not JSON)"
        return res
    models = _model_ids(data)
    if models is None:
        res["error"] = "unexpected reply (no models list)"
        return res
    res["ok"], res["models"] = True, models
    return res


def _model_ids(data: Any) -> list[str] | None:
    if not isinstance(data, dict):
        return None
    for list_key, id_key in MODEL_LISTS:
        items = data.get(list_key)
        if isinstance(items, list):
            ids = [m[id_key] for m in items if isinstance(m, dict) and isinstance(m.get(id_key), str)]
            if ids or not items:
                return [i.removeprefix("models/") for i in ids]
    return None


def _network_error(reason: Any, timeout: float) -> str:
    match reason:
        case ConnectionRefusedError():
            return "connection refused"
        case TimeoutError():
            return f"timed out after {timeout:g}s"
        case socket.gaierror():
            return "cannot resolve the host name"
        case ConnectionResetError():
            return "connection reset"
        case _:
            text = str(reason)
            return "timed out" if "timed out" in text else text
