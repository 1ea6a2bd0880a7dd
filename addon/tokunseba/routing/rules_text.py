"""The text ``tokunseba check`` prints of a rules file (after its first line, ``counts_line``),
and ``tokunseba models`` / ``tokunseba run`` reuse: what the file declares, its policies, the
who-is-talking keys its routes use and who can say them, and the content a route's endpoint
refuses (routing/accepts.py). One function per block of lines; the warnings the reader finds
are routing/rules_file.py's.

Contract: pure: Rules in, lines out.
"""

from __future__ import annotations

from .budgets import OnLedgerUnavailable
from .rules import OnFailure, OnRefused, Rules, ToolLoops, Unmatched
from ..protocols import NAMES as PROTOCOLS  # a live view of the registry
from ..protocols import VISIBILITY
from ..translate import pair_refusal


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def counts_line(rules: Rules) -> str:
    """``check``'s first line: what the file declares, the built-in endpoints apart, and a
    file that routes nothing said as such."""
    declared = sum(1 for e in rules.endpoints.values() if not e.builtin)
    builtin = len(rules.endpoints) - declared
    line = f"OK: {_n(declared, 'endpoint')} declared (+{builtin} built in), {_n(len(rules.routes), 'route')}"
    if not rules.routes:
        line += (" — nothing is routed: every turn passes through" if rules.unmatched == Unmatched.PASS
                 else f" — every provider turn is refused (unmatched: {rules.unmatched})")
    return line


_CONTENT = {"images": "images", "documents": "documents", "server_tools": "provider-run tools"}


def accepts_lines(rules: Rules) -> list[str]:
    """For each route whose endpoint does not take some content its ``when`` lets through
    (routing/accepts.py): which turns are refused there, before sending, and what happens then."""
    out = []
    for route in rules.routes:
        if route.to is None:
            continue
        ep = rules.endpoints[route.to]
        open_to = [k for k in _CONTENT if route.when.get(k) is not False]
        missing = [k for k in open_to if k not in ep.takes]
        cross = [c for c in route.when.get("client") or PROTOCOLS if c != ep.protocol
                 and pair_refusal(c, ep.protocol) is None] if "server_tools" in open_to and "server_tools" in ep.takes else []
        if not missing and not cross:
            continue
        said = "" if ep.accepts is not None else " by default" + (" (an endpoint on loopback: a local server)"
                                                                  if ep.takes == ("text",) else "")
        then = "answered with an error" if route.on_refused == OnRefused.ERROR else "go on to the next route"
        what = []
        if missing:
            names = [_CONTENT[k] for k in missing]
            what.append("turns with " + (", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]))
        if cross:
            what.append(f"turns of {', '.join(cross)} clients relying on provider-run tools (no translation "
                        f"to {ep.protocol} carries them)")
        out.append(f"accepts: route {route.name!r} → {ep.name} takes {', '.join(ep.takes)}{said}: "
                   f"{' and '.join(what)} are refused there before sending and {then}")
    return out


def who_lines(rules: Rules) -> list[str]:
    """For each who-is-talking key the routes use (background, agent, session): which clients
    can say it, and how (protocols/clients.py); the others' turns never match it."""
    out = []
    for key, seen in VISIBILITY.items():
        users = [r.name for r in rules.routes if key in r.when]
        if not users:
            continue
        how = "; ".join(f"{client}: {what}" for client, what in seen)
        tail = ("" if key == "session" else
                "; any other client cannot say, and the condition does not match its turns")
        out.append(f"when.{key} (route{'s' * (len(users) > 1)} {', '.join(users)}): seen from {how}{tail}")
    return out


def quota_lines(rules: Rules) -> list[str]:
    """For the routes that ask about subscription windows (when.quota): where the windows come
    from, and that the condition does not hold until a reply has reported them."""
    users = [r.name for r in rules.routes if "quota" in r.when]
    if not users:
        return []
    return [f"when.quota (route{'s' * (len(users) > 1)} {', '.join(users)}): the windows of the account a turn "
            f"spends (its credential) as the provider's last reply through this proxy reported them (Anthropic's "
            f"anthropic-ratelimit-unified-*, the ChatGPT backend's x-codex-*); until a reply has, or once the "
            f"window has reset, the condition does not hold; `tokunseba quota` shows them"]


def policy_lines(rules: Rules) -> list[str]:
    """What happens to turns no route takes, and when a route's endpoint is unreachable
    (shown by `tokunseba check`; `tokunseba models` shows the same per route)."""
    unmatched = {Unmatched.PASS: "pass through to the host the client asked for",
                 Unmatched.REFUSE: "answered with an error in the client's protocol, never sent on"}[rules.unmatched]
    erring = [r.name for r in rules.routes if r.on_failure == OnFailure.ERROR]
    what = "an endpoint unreachable, cooling down, full, or failing before the reply's first byte"
    if not erring:
        failure = f"next for every route ({what}: the next route whose when matches, then unmatched)"
    else:
        rest = "; next for the others" if len(erring) < len(rules.routes) else ""
        failure = f"error for {', '.join(erring)}{rest} ({what}: an error to the client)"
    lines = [f"unmatched: {rules.unmatched} (turns no route takes, unparseable ones included: {unmatched})",
             f"on_failure: {failure}",
             f"tool_loops: {rules.tool_loops} (a turn answering tool calls: " + (
                 "goes to the endpoint and model that made them, while a route to that endpoint takes its client)"
                 if rules.tool_loops == ToolLoops.FOLLOW else "routed afresh, like any turn)")]
    if rules.aliased:
        lines.append(f"note: on_unreachable (route {', '.join(rules.aliased)}) is the older name of on_failure "
                     "(skip = next); both mean the same")
    return lines


def budget_scope_text(scope: dict[str, tuple[str, ...]]) -> str:
    """``endpoint anthropic · model claude-*``, or ``every turn``."""
    return " · ".join(f"{k} {', '.join(v)}" for k, v in scope.items()) or "every turn"


def budget_lines(rules: Rules) -> list[str]:
    """``check``'s lines of the file's caps: each budget's scope, limit, window, hold, policy."""
    caps = rules.budgets
    if not caps.budgets:
        return []
    out = [f"budgets: {_n(len(caps.budgets), 'cap')}; when the ledger cannot be reached, turns under a cap are "
           + ("refused" if caps.on_ledger_unavailable == OnLedgerUnavailable.REFUSE else "served without a hold")
           + f" (on_ledger_unavailable: {caps.on_ledger_unavailable})"]
    for b in caps.budgets:
        soft = f", warns at {b.warn_at:.0%}" if b.warn_at is not None else ""
        out.append(f"  {b.name}: {b.amount(b.limit)} per {b.window.text()} window, "
                   f"{'shared by every proxy on the ledger' if b.shared else 'counted per proxy'}; "
                   f"{budget_scope_text(b.scope)}; holds {b.amount(b.hold)} per turn in flight; "
                   f"on_limit: {b.on_limit}{soft}")
    return out


def caps_of_endpoint(rules: Rules, endpoint: str) -> list[str]:
    """The budgets whose scope can take a turn served by ``endpoint`` (its name): those whose
    ``endpoint`` key names it (or has none), and, with a ``route`` key, a route to it."""
    import fnmatch

    out = []
    for b in rules.budgets.budgets:
        eps = b.scope.get("endpoint")
        if eps is not None and not any(fnmatch.fnmatchcase(endpoint, g) for g in eps):
            continue
        routes = b.scope.get("route")
        if routes is not None and not any(r.to == endpoint and any(fnmatch.fnmatchcase(r.name, g) for g in routes)
                                          for r in rules.routes):
            continue
        out.append(b.name)
    return out
