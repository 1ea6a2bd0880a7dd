"""`tokunseba explain REQUEST_ID`: the whole story of one turn — rules tried, decision, attempts,
translation, upstream status, usage as reported, timings, events — then its shadows, its cache
and its session (shadow/view.py, cache_view.py, session_view.py). Exit 1 when no turn has that id.
"""

from __future__ import annotations

import argparse
from typing import Any

from .. import jsonc
from ..ledger import USAGE_FIELDS, LedgerError, db_errors
from ..outcomes import TurnOutcome, route_text, was_sent
from ..reasoning import STATE_EVENTS, explain_state
from ..pricing import Cost, PricesError, Source, routed_url, row_cost, usd_exact
from .common import (
    common_options,
    counted_outcome,
    error,
    fmt_ms,
    fmt_num,
    fmt_time,
    open_ledger,
    outcome_label,
    print_json,
    table,
)
from .costs import add_prices_option, price_table


def add_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("explain", help="the whole story of one turn", description="The whole story of one turn: "
                       "rules tried, decision, translation, upstream status, usage as reported and its cost (with the price's "
                       "source), timings, events; who was "
                       "talking (session, agent, client) and the session's other turns around this one.")
    p.add_argument("request_id", metavar="REQUEST_ID", help="a request id, or a unique prefix of one")
    add_prices_option(p)
    common_options(p)
    p.set_defaults(func=cmd_explain)


def cmd_explain(args: argparse.Namespace) -> int:
    try:
        args.request_id.encode()
    except UnicodeEncodeError:  # bytes that are not UTF-8 in argv: no request id looks like that
        return error(f"no turn with request id {args.request_id!r}", 1)
    try:
        prices = price_table(args)
    except PricesError as e:
        return error(str(e), 2)
    try:
        ledger = open_ledger(args)
    except LedgerError as e:
        return error(str(e), 1)
    try:
        with ledger:
            turn = ledger.get_turn(args.request_id)
            events = ledger.events(turn["request_id"])
            shadows = ledger.shadows(request_id=turn["request_id"])
            session = ledger.turns(session=turn["session_id"]) if turn.get("session_id") else []
    except LookupError as e:
        return error(str(e.args[0]), 1)
    except db_errors() + (OverflowError,) as e:
        return error(f"cannot read the ledger {ledger.path}: {e}", 1)
    for k in ("request_body", "response_body"):
        if isinstance(turn.get(k), bytes):
            turn[k] = turn[k].decode("utf-8", "replace")
    cost = row_cost(turn, prices, routed_url(events, turn.get("endpoint")) if turn.get("rule") else None)
    from . import cache_view, session_view

    if args.json:
        shown, before, after = session_view.around(session, turn["request_id"]) if session else ([], 0, 0)
        print_json({"turn": turn, "events": events, "shadows": shadows, "cost": cost.record(),
                    "cache": cache_view.cache_facts(turn, session),
                    "session": {"id": turn.get("session_id"), "turns": len(session), "earlier_not_shown": before,
                                "later_not_shown": after,
                                "around": [{k: t.get(k) for k in SESSION_TURN_KEYS} for t in shown]}})
    else:
        from ..shadow import explain_lines

        print("\n".join([render_explain(turn, events, cost), *explain_lines(shadows),
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


def render_explain(turn: dict, events: list[dict], cost: Cost | None = None) -> str:
    """The turn's story, section by section: who asked, the rules tried and the decision, the
    translation, the upstream's answer (status, usage and its cost, timings, errors), the events."""
    return "\n".join([*_request_lines(turn, events), *_decision_lines(turn, events), *_translation_lines(turn, events),
                      *_upstream_lines(turn, events, cost), *_event_lines(turn, events)])


def _request_lines(turn: dict, events: list[dict]) -> list[str]:
    """Who asked, when, how it came in, for what model, with which login; then the rules tried."""
    flags = []
    if turn.get("stream") is not None:
        flags.append("stream" if turn["stream"] else "not streamed")
    if turn.get("via") in VIA:  # how it came in (NULL in ledgers older than base URLs)
        flags.append(VIA[turn["via"]])
    return [
        _kv("request", turn["request_id"]),
        _kv("time", fmt_time(turn["started_at"])),
        _kv("client", f"{turn.get('client_protocol') or '-'} · {turn.get('host') or '-'}{turn.get('path') or ''}"
            + (f" · {', '.join(flags)}" if flags else "")),
        _kv("requested", turn.get("requested_model") or "- (no model in the request)"),
        *[_kv("login", f"{e['data'].get('login')} ({e['data'].get('why')})") for e in events
          if e["kind"] == "login" and isinstance(e["data"], dict)],  # which login the client sent it with
        *([_kv("retry of", f"{turn['retry_of']} (the same request, sent again by the client)")]
          if turn.get("retry_of") else []),
        "",
        "rules tried",
        *_trace_lines(turn.get("trace") or []),
        "",
    ]


def _decision_lines(turn: dict, events: list[dict]) -> list[str]:
    """The decision (route → endpoint · outcome · model), then each attempt when it failed over."""
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
        elif counted_outcome(turn) == TurnOutcome.PASS_THROUGH:
            decision = f"{route}: passed through unchanged to {turn.get('host') or '-'}"
        else:
            decision = f"{route} → {turn.get('host') or '-'} · {outcome_label(counted_outcome(turn))}"
    if turn.get("model_used"):
        decision += f" · model {turn['model_used']}"
    from ..shadow import earn_lines  # an earned route: where the turn went, on what evidence

    return [_kv("decision", decision), *earn_lines(events), *_attempt_lines(turn)]


def _translation_lines(turn: dict, events: list[dict]) -> list[str]:
    """What the translation dropped, added, converted, warned; routes refused; what was left
    behind at another host; the provider state of a tool loop."""
    out = []
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
        out.append(_kv("translation", TRANSLATION_NONE.get(turn.get("outcome") or "", "none")))
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
    return out


def _upstream_lines(turn: dict, events: list[dict], cost: Cost | None) -> list[str]:
    """The upstream's answer: status, stop reason, reply drops, token counts, usage, timings,
    errors, stored bodies."""
    out = ["", _kv("upstream", f"status {turn['status']}" if turn.get("status") is not None else "no status recorded")]
    done = next((e["data"] for e in reversed(events) if e["kind"] == "completed" and isinstance(e["data"], dict)), {})
    if done.get("stop_reason"):
        out.append(_kv("stop reason", str(done["stop_reason"])))
    for j, item in enumerate(done.get("converted") or []):  # told the client in place of the upstream's (issue 41)
        out.append(_kv("told client" if j == 0 else "", _compact(item)))
    for j, item in enumerate(done.get("dropped") or []):  # reply fields left behind by the translation
        out.append(_kv("reply drops" if j == 0 else "", _compact(item)))
    for e in events:  # a token count answered by the endpoint's own counter (issue 32)
        if e["kind"] == "counted" and isinstance(e["data"], dict):
            d = e["data"]
            out.append(_kv("count", f"{d.get('input_tokens')} input tokens, counted by {d.get('counter')} of endpoint "
                                    f"{d.get('endpoint')} (a count, not a turn's usage)"))
    out += _usage_lines(turn)
    if cost is not None:
        out += _cost_lines(cost)
    out.append(_kv("timings", f"latency {fmt_ms(turn.get('latency_ms'))} · first byte {fmt_ms(turn.get('ttfb_ms'))}"))
    errors = [turn["error"]] if turn.get("error") else []
    errors += [f"{e['kind']}: {_compact(e['data'])}" for e in events
               if e["kind"] in ("upstream_error", "endpoint_unreachable", "translation_error")]
    out.append(_kv("errors", errors[0] if errors else "none"))
    out += [_kv("", e) for e in errors[1:]]
    for k in ("request_body", "response_body"):
        if turn.get(k) is not None:
            out.append(_kv(k.replace("_", " "), f"{len(turn[k])} characters stored (see --json)"))
    return out


def _usage_lines(turn: dict) -> list[str]:
    """Usage as reported, in the counting of the endpoint that reported it, and the client's view."""
    out = []
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
    return out


PART_LABELS = {"input": "input", "cache_read": "cache read", "cache_write": "cache write", "output": "output"}


def _cost_lines(cost: Cost) -> list[str]:
    """What the usage cost, its parts, and where the price came from."""
    if cost.kind is Source.NO_USAGE:
        return []
    if cost.usd is None:
        return [_kv("cost", cost.source)]
    parts = " + ".join(f"{PART_LABELS.get(k, k)} {usd_exact(v)}" for k, v in cost.parts.items())
    out = [_kv("cost", usd_exact(cost.usd) + (f" = {parts}" if parts else ""))]
    if cost.unpriced_tokens:
        out.append(_kv("", "not priced (no price in your row): "
                           + ", ".join(f"{PART_LABELS.get(k, k)} {n}" for k, n in cost.unpriced_tokens.items())))
    out.append(_kv("price", cost.source + (f": {cost.rates}" if cost.rates else "")))
    return out


def _event_lines(turn: dict, events: list[dict]) -> list[str]:
    """Every event of the turn, at its time after the turn's start."""
    out = ["", "events"]
    if events:
        t0 = turn["started_at"]
        rows = [[f"+{(e['ts'] - t0) * 1000:.1f} ms", e["kind"], "" if e["data"] is None else _compact(e["data"])]
                for e in events]
        out += table(["AT", "KIND", "DATA"], rows, indent="  ").splitlines()
    else:
        out.append("  (none)")
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

