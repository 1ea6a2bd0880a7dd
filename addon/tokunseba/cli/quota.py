"""`tokunseba quota [--json] [--ledger PATH]`: each account's subscription windows now, as the last
reply that reported them said (docs/guide/quota.md).

Per account (a short prefix of the SHA-256 of its credential or account id, never the
credential, with the host it spends at): each window's used share, status, when it resets
("resets in 2h 10m"; a reset that has passed says the state is stale) and how long ago it was
seen; the window the reply named binding is marked. Facts as the provider reported them: a share
or status it did not report is "-", never made up. ``routed_line`` is the line `stats` adds: the
turns that went elsewhere because of a window (what they would have used is unknown and never
estimated).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from ..ledger import LedgerReader
from ..routing import ACCOUNT_SHORT as SHORT, humane
from .common import common_options, print_json, read_ledger, table

EPILOG = """\
what it shows:
  Every reply of a provider that reports its subscription windows (Anthropic's
  anthropic-ratelimit-unified-* headers, the ChatGPT backend's x-codex-* headers) is recorded
  per account: the hash of the credential the request carried (or of ChatGPT-Account-ID),
  never the credential. USED is the share of the window used (as the provider said it), STATUS
  is its status (allowed, allowed_warning, rejected; the ChatGPT backend reports none), RESETS
  IN is when it starts afresh, SEEN is how long ago a reply said so. `*` marks the window the
  reply named binding.

route on it (rules file):
  routes:
    - name: easy-turns-local-when-busy
      when: {client: anthropic, model: "*haiku*", quota: {window: 5h, above: 0.8}}
      to: local          # the easy turns go local once the 5-hour window is 80% used
  A window whose status says rejected makes the endpoints that spend that account unavailable
  (as a cooling endpoint): the turn goes to the next route. `tokunseba explain ID` says which
  window moved a turn, its state and when it was seen; `tokunseba stats` counts those turns.

examples:
  tokunseba quota
  tokunseba quota --json | jq '.accounts[] | select(.windows[].used > 0.8)'
"""


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "quota", help="each account's subscription windows now: used share, status, resets in, seen when",
        description="Each account's subscription windows (Claude's 5-hour and weekly windows, Codex's primary "
        "and secondary ones) as the last reply that reported them said: used share, status, when the window "
        "resets, how long ago it was seen. An account is shown by a short prefix of the hash of its credential.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    common_options(p)
    p.set_defaults(func=cmd_quota)


def report(rows: list[dict], now: float) -> dict[str, Any]:
    """The ledger's newest window rows, grouped per account (what --json prints)."""
    accounts: dict[str, dict[str, Any]] = {}
    for r in rows:
        a = accounts.setdefault(r["account"], {"account": r["account"][:SHORT], "host": r["host"],
                                               "provider": r["provider"], "by": r["account_by"], "windows": []})
        resets = r["resets_at"]
        a["windows"].append({
            "window": r["window_name"], "used": r["used"], "status": r["status"], "resets_at": resets,
            "resets_in_s": None if resets is None else round(resets - now, 1),
            "reset_passed": resets is not None and resets <= now,
            "minutes": r["minutes"], "binding": bool(r["binding"]), "seen_at": r["seen_at"],
            "seen_ago_s": round(now - r["seen_at"], 1), "request_id": r["request_id"]})
    return {"now": now, "accounts": list(accounts.values())}


def render(rep: dict[str, Any]) -> str:
    if not rep["accounts"]:
        return ("no subscription windows recorded yet: they come with the replies of a provider that reports "
                "them (Claude Code on a Pro/Max login, Codex signed in with ChatGPT) through the proxy")
    out: list[str] = []
    for a in rep["accounts"]:
        out.append(f"account {a['account']} ({a['provider'] or '?'} at {a['host']}, by its {a['by']} header)")
        rows = []
        for w in a["windows"]:
            if w["resets_in_s"] is None:
                resets = "-"
            elif w["reset_passed"]:
                resets = f"reset {humane(-w['resets_in_s'])} ago (stale)"
            else:
                resets = humane(w["resets_in_s"])
            rows.append([("* " if w["binding"] else "  ") + w["window"],
                         "-" if w["used"] is None else f"{w['used']:.0%}", w["status"] or "-", resets,
                         f"{humane(w['seen_ago_s'])} ago"])
        out += [table(["  WINDOW", "USED", "STATUS", "RESETS IN", "SEEN"], rows, indent="  ", right={1}), ""]
    out.append("* the window the last reply named binding; '-' where the provider reported nothing")
    return "\n".join(out)


def cmd_quota(args: argparse.Namespace) -> int:
    def body(ledger: LedgerReader) -> int:
        rep = report(ledger.quota_windows(), time.time())
        if args.json:
            print_json(rep)
        else:
            print(render(rep))
        return 0

    return read_ledger(args, {"now": None, "accounts": []}, body)
