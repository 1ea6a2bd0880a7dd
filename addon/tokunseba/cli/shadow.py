"""The `shadow` command (agreement facts of shadowed turns) and the `replay` command.

`tokunseba shadow [--since 24h] [--route NAME] [--json]`: per route and shadow endpoint,
turns shadowed / skipped / failed; among the turns whose two replies could both be read,
how many agree on the stop reason, on the tool names (in order), on the tool arguments
(JSON-equal), and how many have exactly the same text; latency p50/p95 of each side; tokens
as each side reported them. Facts only: no quality score is invented. Each group is also
shown per stratum (the kind of turn: routing/strata.py), with the agreement verdicts of
shadow/agreement.py: counted comparisons, agreed, the lower bound of the 95% Wilson interval,
and the plain text turns (recorded, never counted).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from .common import (
    common_options,
    error,
    fmt_ms,
    fmt_num,
    print_json,
    read_ledger,
    since_option,
    table,
    timeout_option,
)
from ..credentials import redact_text, redact_url
from ..routing import wilson_lower
from ..ledger import (
    USAGE_FIELDS,
    Ledger,
    LedgerError,
    LedgerReader,
    db_errors,
    default_ledger_target,
    percentile,
    url_scheme,
    usage_counting,
)

EPILOG = """\
set up:
  routes:
    - name: title-turns
      when: {client: anthropic, model: "*haiku*", tools: false}
      shadow: local            # also send the turn to `local`, in the background
      shadow_sample: 1.0       # fraction of matching turns to shadow

then, after some traffic:
  tokunseba shadow --since 24h              # agreement per route and shadow endpoint
  tokunseba explain <request-id>            # one shadowed turn: both replies side by side
  tokunseba replay <request-id> --to local  # re-send one recorded turn, now
"""

def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "shadow", help="how shadowed turns compare: stop reasons, tool calls, text, latency, usage",
        description="For each route and shadow endpoint: turns shadowed, skipped (the concurrency bound was "
        "full) and failed; among the turns whose two replies were both read, how many agree on the stop reason, "
        "the tool names in order, the tool arguments (JSON-equal), and the exact text; latency p50/p95 of the "
        "client's reply and of the shadow's; tokens as each endpoint reported them (never estimated).",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--since", metavar="WHEN", help="window start: 30m, 24h, 7d, 2026-12-01 or an ISO datetime")
    p.add_argument("--route", metavar="NAME", help="only this route")
    common_options(p)
    p.set_defaults(func=cmd_shadow)

    p = sub.add_parser(
        "replay", help="re-send a recorded turn to an endpoint and compare with the recorded reply",
        description="Re-send a recorded turn (its request body must be stored: `tokunseba run --ledger-bodies`, "
        "or a turn of a route with `shadow:`) to ENDPOINT through the same translators as a routed turn, "
        "non-streamed, with the endpoint's own key (key_env). Prints the new reply in the client's protocol "
        "(text, tool calls, stop reason, usage as reported, latency) beside the recorded one, and records it as "
        "a `replay` row linked to the original turn (see `tokunseba explain ID`).",
        epilog="example:\n  tokunseba replay tk-1a2b3c --to local --rules rules/examples/easy-turns-local.yaml "
        "--save reply.json\n", formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("request_id", metavar="ID", help="a request id, or a unique prefix of one")
    p.add_argument("--to", metavar="ENDPOINT", required=True, help="endpoint to send the turn to (built in or in --rules)")
    p.add_argument("--rules", metavar="FILE", help="rules YAML declaring the endpoint (default: $TOKUNSEBA_RULES)")
    p.add_argument("--save", metavar="FILE", type=Path, help="write the new reply (client's protocol) to FILE")
    p.add_argument("--timeout", metavar="SECONDS", default="120", help="give the endpoint this long (default 120)")
    common_options(p)
    p.set_defaults(func=cmd_replay)


def cmd_shadow(args: argparse.Namespace) -> int:
    try:
        since = since_option(args.since)
    except ValueError as e:
        return error(str(e), 2)

    def body(ledger: LedgerReader) -> int:
        rows = [r for r in ledger.shadows(since=since) if r["kind"] != "replay"
                and (args.route is None or r["route"] == args.route)]
        rep = shadow_report(rows, since)
        if args.json:
            print_json(rep)
        else:
            print(render_shadow(rep))
        return 0

    return read_ledger(args, shadow_report([], since), body)


# ---------------------------------------------------------------- the report


def _tokens(rows: list[dict], prefix: str) -> dict:
    """Usage sums as reported, by how the endpoint counts; a field no turn reported stays None."""
    out: dict[str, dict] = {}
    none = 0
    for r in rows:
        if r[f"{prefix}usage_reported"] is None:
            none += 1
            continue
        counted = usage_counting(r[f"{prefix}usage_protocol"], r[f"{prefix}usage_protocol"] or "-")
        u = out.setdefault(counted, {"turns": 0, **{f: None for f in USAGE_FIELDS}})
        u["turns"] += 1
        for f in USAGE_FIELDS:
            if (v := r[f"{prefix}usage_{f}"]) is not None:
                u[f] = (u[f] or 0) + v
    return {"by_counting": out, "turns_none": none}


def _timing(values: list[float | None]) -> dict:
    vals = [v for v in values if v is not None]
    return {"n": len(vals), "p50": percentile(vals, 50), "p95": percentile(vals, 95)}


def _failed(r: dict) -> bool:
    return bool(r["error"]) or (r["status"] or 0) >= 400 or r["status"] is None


def _strata(sent: list[dict]) -> list[dict]:
    """Agreement per stratum: the verdicts counted (structured and tool turns), agreed, the lower
    bound of the 95% Wilson interval, plain text turns (never counted)."""
    out: dict[str, dict] = {}
    for r in sent:
        c = r["comparison"] if isinstance(r["comparison"], dict) else {}
        st, v = c.get("stratum"), c.get("verdict")
        if not isinstance(st, dict) or not isinstance(v, dict):
            continue
        g = out.setdefault(st.get("key", "?"), {"stratum": st, "counted": 0, "agree": 0, "text": 0, "not_counted": 0})
        if v.get("agree") is None:
            g["text" if v.get("kind") == "text" else "not_counted"] += 1
        else:
            g["counted"] += 1
            g["agree"] += bool(v["agree"])
    for g in out.values():
        g["lower_bound"] = round(wilson_lower(g["agree"], g["counted"]), 4)
    return list(out.values())


def shadow_report(rows: list[dict], since: float | None) -> dict:
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["route"], r["endpoint"]), []).append(r)
    out = []
    for (route, endpoint), rs in groups.items():
        sent = [r for r in rs if r["kind"] == "shadow"]
        cmp = [r["comparison"] for r in sent if isinstance(r["comparison"], dict) and r["comparison"].get("compared")]
        with_tools = [c for c in cmp if c["tool_names"]["primary"] or c["tool_names"]["shadow"]]
        out.append({
            "route": route, "endpoint": endpoint,
            "shadowed": len(sent), "skipped": sum(r["kind"] == "shadow_skipped" for r in rs),
            "failed": sum(_failed(r) for r in sent), "compared": len(cmp),
            "agree": {"stop_reason": sum(bool(c["stop_reason"]["same"]) for c in cmp),
                      "tool_names": sum(bool(c["tool_names"]["same"]) for c in cmp),
                      "tool_arguments": sum(bool(c["tool_arguments_equal"]) for c in cmp),
                      "text_exact": sum(bool(c["text"]["same"]) for c in cmp)},
            "turns_with_tool_calls": len(with_tools),
            "tool_arguments_agree_with_tool_calls": sum(bool(c["tool_arguments_equal"]) for c in with_tools),
            "latency_ms": {"primary": _timing([r["primary_latency_ms"] for r in sent]),
                           "shadow": _timing([r["latency_ms"] for r in sent if not _failed(r)])},
            "tokens": {"primary": _tokens(sent, "primary_"), "shadow": _tokens(sent, "")},
            "strata": _strata(sent),
        })
    return {"since": since, "groups": out}


def _ratio(n: int, of: int) -> str:
    return f"{n}/{of}" if of else "-"


def render_shadow(rep: dict) -> str:
    if not rep["groups"]:
        return "no shadowed turns in this window (a route with `shadow: ENDPOINT` records them)"
    out = []
    rows = [[g["route"] or "-", g["endpoint"] or "-", str(g["shadowed"]), str(g["skipped"]), str(g["failed"]),
             _ratio(g["agree"]["stop_reason"], g["compared"]), _ratio(g["agree"]["tool_names"], g["compared"]),
             _ratio(g["tool_arguments_agree_with_tool_calls"], g["turns_with_tool_calls"]),
             _ratio(g["agree"]["text_exact"], g["compared"])] for g in rep["groups"]]
    out.append(table(["ROUTE", "SHADOW", "SHADOWED", "SKIPPED", "FAILED", "SAME STOP", "SAME TOOLS",
                      "SAME ARGS", "SAME TEXT"], rows, right={2, 3, 4, 5, 6, 7, 8}))
    out.append("  (agreement counted over turns whose two replies were both read; SAME ARGS over turns with tool calls)")
    for g in rep["groups"]:
        out += ["", f"{g['route']} → {g['endpoint']}"]
        lat = g["latency_ms"]
        out.append(table(["", "N", "LATENCY P50", "P95"], [
            [side, str(lat[side]["n"]), fmt_ms(lat[side]["p50"]), fmt_ms(lat[side]["p95"])]
            for side in ("primary", "shadow")], indent="  "))
        rows = []
        for side in ("primary", "shadow"):
            t = g["tokens"][side]
            for counting, u in t["by_counting"].items():
                rows.append([side, counting, str(u["turns"]), *(fmt_num(u[f]) for f in USAGE_FIELDS)])
            if t["turns_none"]:
                rows.append([side, "(none reported)", str(t["turns_none"]), *("-" for _ in USAGE_FIELDS)])
        if g.get("strata"):
            out.append(table(["STRATUM", "COUNTED", "AGREED", "LOWER", "TEXT"], [
                [st["stratum"].get("key", "?").split(" ", 1)[-1], str(st["counted"]), str(st["agree"]),
                 f"{st['lower_bound']:.2f}", str(st["text"])] for st in g["strata"]], indent="  ", right={1, 2, 3, 4}))
        if rows:
            out.append(table(["TOKENS AS REPORTED", "COUNTING", "TURNS", "INPUT", "OUTPUT", "CACHE READ",
                              "CACHE WRITE", "REASONING"], rows, indent="  ", right=set(range(2, 8))))
    return "\n".join(out)


# ---------------------------------------------------------------- replay


def cmd_replay(args: argparse.Namespace) -> int:
    from ..shadow import ReplayError, replay_turn
    from ..routing import RulesError, load_rules
    from ..shadow import explain_lines

    try:
        timeout = timeout_option(args.timeout)
    except ValueError as e:
        return error(str(e), 2)
    try:
        rules = load_rules(args.rules or os.environ.get("TOKUNSEBA_RULES") or None)
    except RulesError as e:
        return error(str(e), 1)
    ep = rules.endpoints.get(args.to)
    if ep is None:
        return error(f"--to: unknown endpoint {args.to!r} (known: {', '.join(rules.endpoints)})", 2)
    try:
        args.request_id.encode()
    except UnicodeEncodeError:  # bytes that are not UTF-8 in argv: no request id looks like that
        return error(f"no turn with request id {args.request_id!r}", 1)
    if args.save and not args.save.parent.is_dir():  # before anything is sent
        return error(f"--save: no directory {args.save.parent} to write {args.save.name} in", 2)
    path = args.ledger or default_ledger_target()
    if url_scheme(path) is None and not Path(path).exists():
        return error(f"no ledger at {path} yet: run the proxy first", 1)
    try:
        with Ledger(path) as ledger:  # read-write: the replay is recorded
            turn = ledger.get_turn(args.request_id)
            done = replay_turn(ledger, turn, ep, os.environ, timeout=timeout)
    except (LookupError, ReplayError) as e:
        return error(str(e.args[0]), 1)
    except (LedgerError,) + db_errors() as e:
        return error(f"cannot use the ledger {redact_url(str(path))}: {redact_text(str(e))}", 1)
    if args.save:
        try:
            args.save.write_bytes(done.client_body)
        except OSError as e:
            return error(f"--save: cannot write {args.save}: {e.strerror or e}", 1)
    if args.json:
        from .. import jsonc

        reply: object = done.client_body.decode("utf-8", "replace")
        try:
            reply = jsonc.loads(done.client_body)
        except (jsonc.JSONDecodeError, UnicodeDecodeError):
            pass
        print_json({**done.row, "client_status": done.client_status, "client_reply": reply})
    else:
        r = done.row
        print(f"replay of {r['request_id']} ({turn.get('client_protocol')} client) → {ep.name} ({ep.protocol})")
        for item in r.get("plumbing") or ():
            print(f"  added: {item}")
        print("\n".join(explain_lines([r])).lstrip("\n"))
        print(f"recorded as a replay of {r['request_id']}" + (f"; reply saved to {args.save}" if args.save else ""))
    return 0 if done.row["error"] is None else 1
