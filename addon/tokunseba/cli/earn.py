"""The `earn` command: where each stratum of an earned route stands, read from the ledger's
shadow rows by the same fold the proxy keeps in memory (routing/earn.py ``EarnBook``), and the
plain rules a user could write instead (``--suggest``).

`tokunseba earn [--since WHEN] [--route NAME] [--rules FILE] [--json] [--suggest]`: per route
with ``earn:`` and per stratum: its state (learning, earned, returned), the comparisons counted,
how many agreed, the agreement and the lower bound of its 95% Wilson interval, the bar, since
when, the plain text turns seen (never counted), and the turns that disagreed most. The routes'
``earn:`` come from the rules file when one is given (``--rules``, else $TOKUNSEBA_RULES), else
from what the comparisons recorded.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from .. import jsonc
from ..routing import SIZE_BUCKETS, Earn, EarnBook, Rules, RulesError, earn_of, earn_rows, load_rules
from .common import common_options, error, fmt_time, print_json, read_ledger, since_option, table

EPILOG = """\
set up (a route whose candidate earns its turns, stratum by stratum):
  routes:
    - name: claude-code
      when: {client: anthropic}
      to: anthropic             # where turns go while the candidate learns
      earn: {to: local, bar: 0.95, min_turns: 200, canary: 0.05}

what counts as agreement (facts, never a model's opinion):
  structured output   both replies valid against the request's own JSON schema, the same keys
  tool calls          the same tool names in order, arguments JSON-equal (edit tools: the same
                      paths), the same stop reason
  plain text          recorded, never counted: whether two texts say the same thing is an
                      opinion (a judge model's), not a fact, so a text-only stratum never earns

then:
  tokunseba earn                      # each stratum: learning, earned or returned, and why
  tokunseba earn --suggest            # the fixed rules that would send the earned strata there
  tokunseba earn --report             # paired table, tokens saved at each bar, beside a shuffled control
  tokunseba explain <request-id>      # one turn: which stratum, and the evidence it was routed on
"""


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "earn", help="earned routes: which kinds of turn the candidate has earned, on what evidence",
        description="For each route with `earn:` and each stratum of its turns (client, agent kind, tool set, "
        "thinking, size): its state (learning, earned, returned), the shadowed comparisons counted and how many "
        "agreed, the agreement and the lower bound of its 95% Wilson interval against the bar, and the turns that "
        "disagreed most. A stratum is earned once that bound reaches the bar over at least min_turns comparisons; "
        "plain text turns are recorded but never counted (no model judges another).",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--since", metavar="WHEN", help="only comparisons from then: 30m, 24h, 7d, 2026-12-01 "
                   "(the proxy folds them all)")
    p.add_argument("--route", metavar="NAME", help="only this route")
    p.add_argument("--rules", metavar="FILE", help="rules YAML with the routes' earn: (default: $TOKUNSEBA_RULES; "
                   "without one, what the comparisons recorded)")
    p.add_argument("--suggest", action="store_true",
                   help="print the plain rules (YAML) that would send the earned strata to their candidate")
    p.add_argument("--report", action="store_true",
                   help="the proof in numbers: the paired table of the comparisons, the tokens saved at each bar "
                   "(reported usage only) and a shuffled control sending the same share of turns at random")
    common_options(p)
    p.set_defaults(func=cmd_earn)


def _routes(rules: Rules | None, rows: list[dict], only: str | None) -> list[tuple[str, Earn, dict]]:
    """(route, its earn, its when as written) for each earned route to report."""
    if rules is not None:
        return [(r.name, r.earn, r.when) for r in rules.routes if r.earn is not None and only in (None, r.name)]
    return [(route, earn_of(rec), {}) for (route, _), rec in earn_rows(rows, only).items()]


def earn_report(rows: list[dict], rules: Rules | None, only: str | None, since: float | None) -> dict:
    book = EarnBook()
    book.load([r for r in rows if r["kind"] == "shadow"])
    out = []
    for route, earn, when in _routes(rules, rows, only):
        strata = [s.record(earn) for s in book.standings(route, earn)]
        out.append({"route": route, "earn": earn.record(), "when": when, "strata": strata})
    return {"since": since, "routes": out}


def cmd_earn(args: argparse.Namespace) -> int:
    try:
        since = since_option(args.since)
    except ValueError as e:
        return error(str(e), 2)
    rules = None
    path = args.rules or os.environ.get("TOKUNSEBA_RULES") or None
    if path:
        try:
            rules = load_rules(path)
        except RulesError as e:
            return error(str(e), 1)

    def body(ledger: Any) -> int:
        rows = ledger.shadows(since=since)
        if args.report:
            from .earn_report import render_report, report

            proof = report(rows, _routes(rules, rows, args.route))
            if args.json:
                print_json({"since": since, "routes": proof})
            else:
                print(render_report(proof))
            return 0
        rep = earn_report(rows, rules, args.route, since)
        if args.suggest:
            text = suggest(rep)
            if args.json:
                print_json({**rep, "suggested": text})
            else:
                print(text)
        elif args.json:
            print_json(rep)
        else:
            print(render_earn(rep))
        return 0

    return read_ledger(args, {"since": since, "routes": []}, body)


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def render_earn(rep: dict) -> str:
    if not rep["routes"]:
        return "no earned routes: give a route `earn: {to: ENDPOINT}` (see `tokunseba earn --help`)"
    out: list[str] = []
    for r in rep["routes"]:
        e = r["earn"]
        out += [f"{r['route']} → earn {e['to']} · bar {e['bar']:g} · min_turns {e['min_turns']} · canary {e['canary']:g}"]
        if not r["strata"]:
            out += ["  no comparisons yet: its turns are shadowed to the candidate as they come", ""]
            continue
        rows = [[s["state"], str(s["counted"]), str(s["agree"]), _fmt(s["agreement"]), _fmt(s["lower_bound"]),
                 str(s["text_turns"]), fmt_time(s["since"]), _short(s["stratum"])] for s in r["strata"]]
        out.append(table(["STATE", "COUNTED", "AGREED", "AGREEMENT", "LOWER", "TEXT", "SINCE", "STRATUM"], rows,
                         indent="  ", right={1, 2, 3, 4, 5}))
        for s in r["strata"]:
            out.append(f"  · {s['said']}")
            for w in s["worst"][:3]:
                out.append(f"      disagreed: {w['request_id']} ({w['kind']}): {'; '.join(w['failed']) or '-'}")
        out.append("")
    out.append("(LOWER: the lower bound of the 95% Wilson interval; TEXT: plain text turns, recorded, never counted)")
    return "\n".join(out)


def _short(stratum: dict) -> str:
    return (f"{stratum.get('client')} {stratum.get('agent')} tools={stratum.get('tools')} "
            f"thinking={'on' if stratum.get('thinking') else 'off'} {stratum.get('size')}")


# ---------------------------------------------------------------- --suggest


def _when_of(stratum: dict) -> dict[str, Any]:
    """The ``when`` conditions that hold for the turns of a stratum (as plain rules can say them)."""
    when: dict[str, Any] = {"client": stratum["client"]}
    if stratum["agent"] == "background":
        when["background"] = True
    elif stratum["agent"] in ("main", "subagent"):
        when["agent"] = stratum["agent"]
    when["tools"] = stratum["tools"] != "none"
    when["thinking"] = bool(stratum["thinking"])
    limit = next((lim for lim, name in SIZE_BUCKETS if name == stratum["size"]), None)
    if limit is not None:
        when["max_request_bytes"] = limit
    return when


def suggest(rep: dict) -> str:
    """The plain rules for the earned strata: place them before their route."""
    out: list[str] = []
    for r in rep["routes"]:
        earned = [s for s in r["strata"] if s["state"] == "earned"]
        if not earned:
            out.append(f"# {r['route']}: no stratum earned yet, nothing to suggest")
            continue
        out.append(f"# {r['route']}: {len(earned)} earned strat{'um' if len(earned) == 1 else 'a'}; place these "
                   f"routes before route {r['route']!r} (a fixed rule does not measure: no canary, no return)")
        out.append("routes:")
        for i, s in enumerate(earned, 1):
            when = {**{k: v for k, v in (r.get("when") or {}).items()}, **_when_of(s["stratum"])}
            out.append(f"  # {s['said']}")
            if s["stratum"]["tools"] not in ("none",):
                out.append(f"  # the tool set {s['stratum']['tools']} cannot be written as a condition: any tools match")
            out.append(f"  - name: {r['route']}-earned-{i}")
            out.append(f"    when: {jsonc.dumps(when)}")
            out.append(f"    to: {r['earn']['to']}")
    return "\n".join(out)
