"""What the proxy says at start about an endpoint it cannot reach, and what happens to the
turns routed there.

At start (and after a rules reload) the adapter connects once to every endpoint a route
sends turns to (``endpoints_in_use``). For each one that fails, one warning line names the
endpoint, its URL, why, and the consequence for each route that uses it, so a mis-set
endpoint (a local server started on another port) is said at once instead of every easy turn
quietly going elsewhere:

    tokunseba: endpoint local (http://127.0.0.1:28431/v1) cannot be reached now: connection refused.
    Until it can: turns of route claude-background go to the next route whose when matches, else
    pass through to their provider. Check it with: tokunseba models --probe --endpoint local

Pure: no mitmproxy, no I/O.
"""

from __future__ import annotations

import shlex

from ..routing.endpoints import Endpoint
from ..routing.rules import Rules


def endpoints_in_use(rules: Rules) -> list[Endpoint]:
    """The endpoints routes send turns to (``to``, ``shadow``), each once, in route order."""
    names: list[str] = []
    for r in rules.routes:
        for name in (r.to, r.shadow):
            if name and name not in names and name in rules.endpoints:
                names.append(name)
    return [rules.endpoints[n] for n in names]


def unreachable_line(rules: Rules, ep: Endpoint, why: str, cli: str = "tokunseba") -> str:
    """The warning for an endpoint that cannot be reached: why, and what each route that uses
    it does with its turns meanwhile (``cli``: how to call tokunseba here)."""
    unmatched = ("pass through to their provider" if rules.unmatched == "pass"
                 else "are refused (unmatched: refuse)")
    parts = []
    nexts = [r.name for r in rules.routes if r.to == ep.name and r.on_failure == "next"]
    errors = [r.name for r in rules.routes if r.to == ep.name and r.on_failure == "error"]
    shadows = [r.name for r in rules.routes if r.shadow == ep.name]
    if nexts:
        parts.append(f"turns of route{'s' if len(nexts) > 1 else ''} {', '.join(nexts)} go to the next route whose "
                     f"when matches, else {unmatched}")
    if errors:
        parts.append(f"turns of route{'s' if len(errors) > 1 else ''} {', '.join(errors)} get an error in their "
                     f"client's protocol (on_failure: error)")
    if shadows:
        parts.append(f"the shadows of route{'s' if len(shadows) > 1 else ''} {', '.join(shadows)} fail (recorded)")
    rules_arg = f" --rules {shlex.quote(rules.source)}" if rules.source and not rules.source.startswith("<") else ""
    return (f"tokunseba: endpoint {ep.name} ({ep.url}) cannot be reached now: {why}. Until it can: "
            f"{'; '.join(parts) or 'no route uses it'}. Check it with: {shlex.quote(cli)} models{rules_arg} "
            f"--probe --endpoint {ep.name}")
