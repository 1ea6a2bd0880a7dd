"""`tokunseba models`: what each client protocol can reach at each endpoint (retarget, translated,
or refused and why), the models the rules name, and with ``--probe`` what each endpoint's models
API serves (GET {url}/models, straight to the endpoint with its own key; exit 1 when a probed
endpoint gave no models list).
"""

from __future__ import annotations

import argparse
import os
import socket
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .. import jsonc, protocols
from ..outcomes import TurnOutcome
from .common import MAX_TIMEOUT, common_options, error, fmt_num, print_json, table, timeout_option


def add_command(sub: argparse._SubParsersAction) -> None:
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
                        "the rules' own endpoints when they declare some, else the built-in ones; --endpoint to choose. "
                        "A loopback endpoint is also asked its context window (llama-server's /props)")
    p.add_argument("--prefill", action="store_true",
                   help="with --probe: also send each loopback endpoint one ~900-token prompt (max_tokens 1) and say "
                        "its prompt throughput (tokens/s, by the server's own timings where it reports them) and how "
                        "long a 20k-token turn would wait for its first token")
    p.add_argument("--endpoint", metavar="NAME", action="append", help="only this endpoint (repeatable)")
    p.add_argument("--timeout", metavar="SECONDS", default="3",
                   help=f"probe timeout per endpoint (default 3, at most {MAX_TIMEOUT:g})")
    common_options(p, ledger_help=argparse.SUPPRESS)  # accepted for uniformity; models does not read it
    p.set_defaults(func=cmd_models)


def cmd_models(args: argparse.Namespace) -> int:
    from ..routing import RulesError, load_rules

    try:
        timeout = timeout_option(args.timeout)
    except ValueError as e:
        return error(str(e), 2)
    rules_path = args.rules or os.environ.get("TOKUNSEBA_RULES") or None
    try:
        rules = load_rules(rules_path)
    except RulesError as e:
        return error(str(e), 1)
    endpoints = dict(rules.endpoints)
    if args.endpoint:
        unknown = [n for n in args.endpoint if n not in endpoints]
        if unknown:
            return error(f"--endpoint: unknown endpoint {unknown[0]!r} (known: {', '.join(endpoints)})", 2)
        endpoints = {n: endpoints[n] for n in endpoints if n in args.endpoint}
    report = models_report(rules, rules_path, endpoints)
    if args.probe:
        add_probes(report, endpoints, bool(args.endpoint), timeout, args.prefill)
    if args.json:
        print_json(report)
    else:
        print(render_models(report))
    return 1 if any(not e["probe"]["ok"] for e in report["endpoints"] if "probe" in e) else 0


def _pair_result(client: str, target: str) -> tuple[str, str | None]:
    """What a route sending ``client`` to an endpoint speaking ``target`` does. A routed
    same-protocol turn is a retarget (new host/model, the endpoint's key); pass-through is
    only a turn no rule routes, so it never appears here."""
    from ..translate import pair_refusal

    why = pair_refusal(client, target)
    if why:
        return "refused", why
    return ("retarget" if client == target else "translated"), None


def _named_models(rules: Any, endpoints: dict) -> dict[str, list[str]]:
    """Per endpoint, the models the rules name for it (its own model, then its routes')."""
    named: dict[str, list[str]] = {n: [] for n in endpoints}
    for n, ep in endpoints.items():
        if ep.model:
            named[n].append(ep.model)
    for r in rules.routes:
        if r.to in named and r.model and r.model not in named[r.to]:
            named[r.to].append(r.model)
    return named


def models_report(rules: Any, rules_path: str | None, endpoints: dict) -> dict[str, Any]:
    """What `models` says (its --json), before any probe: endpoints, client × endpoint pairs,
    what a translated turn is still refused for, and each route's clients and refusals."""
    from ..routing import caps_of_endpoint
    from ..translate import CODECS, PROTOCOLS, pair_refusal

    named = _named_models(rules, endpoints)
    report: dict[str, Any] = {
        "rules": str(rules_path) if rules_path else None,
        "unmatched": rules.unmatched,
        "endpoints": [
            {"name": n, "protocol": ep.protocol, "url": ep.url, "builtin": ep.builtin, "key_env": ep.key_env,
             "key_set": bool(ep.key_env and os.environ.get(ep.key_env)), "models_in_rules": named[n],
             "count_tokens": ep.count_tokens or ("native" if ep.counter else "none"),
             "counter": ep.counter.name if ep.counter else None, "no_counter_why": ep.no_counter_why,
             "accepts": list(ep.takes), "accepts_said": ep.accepts is not None, "cache": ep.cache,
             "context_tokens": ep.context_tokens, "budgets": caps_of_endpoint(rules, n)}
            for n, ep in endpoints.items()
        ],
        "pairs": [
            {"client": c, "endpoint": n, "target_protocol": ep.protocol, "result": res, "reason": why,
             "refused_per_turn": per_turn_refusals(c, ep.protocol) if res == TurnOutcome.TRANSLATED else []}
            for c in PROTOCOLS for n, ep in endpoints.items() for res, why in [_pair_result(c, ep.protocol)]
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
    return report


def add_probes(report: dict[str, Any], endpoints: dict, chosen: bool, timeout: float, prefill: bool = False) -> None:
    """Probe the endpoints (in parallel) and put each answer in its entry of ``report``.

    A rules file's own endpoints by default (the local server it names, not the cloud behind
    it); the built-in ones when the rules declare none, or when ``chosen`` with --endpoint."""
    declared = {n: ep for n, ep in endpoints.items() if not ep.builtin}
    probed = endpoints if chosen or not declared else declared
    report["not_probed"] = [n for n in endpoints if n not in probed]
    from .fitness import probe_fitness

    def probe(ep: Any) -> tuple[dict, dict | None]:
        """The models API; then, where it answered, a loopback endpoint's window and prefill (cli/fitness.py)."""
        pr = probe_endpoint(ep, timeout)
        return pr, probe_fitness(ep, os.environ, timeout, prefill=prefill) if pr["ok"] else None

    with ThreadPoolExecutor(max_workers=max(len(probed), 1)) as pool:
        probes = dict(zip(probed, pool.map(probe, probed.values())))
    for entry in report["endpoints"]:
        if (got := probes.get(entry["name"])) is not None:
            pr, fitness = got
            pr["not_served"] = [m for m in entry["models_in_rules"] if pr["models"] is not None and m not in pr["models"]]
            entry["probe"] = pr
            if fitness is not None:
                entry["fitness"] = fitness


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
    """The report as text: the endpoints, the client × endpoint pairs, the routes, the probes."""
    return "\n".join([*_endpoint_lines(rep), *_pair_lines(rep), *_route_lines(rep), *_probe_lines(rep)])


def _endpoint_lines(rep: dict) -> list[str]:
    from ..routing import Unmatched

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
    if capped := [e for e in rep["endpoints"] if e.get("budgets")]:  # spending caps (tokunseba budgets)
        out += ["", "Spending caps: " + "; ".join(f"{e['name']}: {', '.join(e['budgets'])}" for e in capped)
                + " (tokunseba budgets: spent, held, limit, reset)"]
    if nocount := [e for e in rep["endpoints"] if e["counter"] is None]:
        out += ["", "Token counts routed to " + "; ".join(f"{e['name']} ({e['no_counter_why']})" for e in nocount)
                + " are answered with an error naming the endpoint: a count is never estimated."]
    return out


def _pair_lines(rep: dict) -> list[str]:
    out = [""]
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
    return out


def _route_lines(rep: dict) -> list[str]:
    from ..routing import OnFailure, OnRefused

    if not rep["routes"]:
        return []
    rows = []
    for r in rep["routes"]:
        res = "ok"
        if r["refused"]:
            then = "error to the client" if r["on_refused"] == OnRefused.ERROR else "next route"
            res = f"refused for {', '.join(r['refused'])} → {then}"
        unreachable = "error to the client" if r["on_failure"] == OnFailure.ERROR else "next route"
        rows.append([r["name"], fmt_num(r["line"]), r["to"], r["model"] or "-", ", ".join(r["clients"]), res,
                     unreachable])
    return ["", table(["ROUTE", "LINE", "TO", "MODEL", "CLIENTS", "RESULT", "IF IT FAILS"], rows)]


def _probe_lines(rep: dict) -> list[str]:
    probed = [e for e in rep["endpoints"] if "probe" in e]
    if not probed:
        return []
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
    out = ["", table(["ENDPOINT", "PROBED", "STATE", "MODELS SERVED"], rows)]
    if rep.get("not_probed"):
        out.append(f"not probed (built in): {', '.join(rep['not_probed'])}; probe one with --endpoint NAME")
    from .fitness import FITNESS_HEAD, FITNESS_NOTE, fitness_rows

    if rows := fitness_rows(rep):
        out += ["", table(FITNESS_HEAD, rows, right={1, 3, 4, 5}), FITNESS_NOTE]
    return out


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
