"""`tokunseba explain` for a shadowed or replayed turn: both replies side by side (text
trimmed, tool calls whole) and the agreement facts, with the turn's stratum and verdict
(shadow/agreement.py); and for a turn of an earned route, where it went and on what evidence
(``earn_lines``). Rendering only: no ledger access."""

from __future__ import annotations

from typing import Any

from .. import jsonc

TEXT_TRIM = 160  # characters of each reply's text shown side by side


def _trim(text: str, n: int = TEXT_TRIM) -> str:
    text = text.replace("\n", "⏎")
    return text if len(text) <= n else text[: n - 1] + "…"


def _side(f: Any) -> list[str]:
    """One reply's facts as lines: text trimmed, tool calls whole."""
    if not isinstance(f, dict):
        return ["(not recorded)"]
    if f.get("error"):
        return [f"error: {_trim(f['error'])}"]
    out = [f"stop {f.get('stop_reason') or '-'}", f"text ({len(f.get('text') or '')} chars) {_trim(f.get('text') or '')!r}"]
    for c in f.get("tool_calls") or ():
        out.append(f"tool {c.get('name')}({_compact(c.get('arguments'))})")
    return out


def _usage(f: Any) -> str:
    u = f.get("usage") if isinstance(f, dict) else None
    return "none reported" if u is None else f"{_compact(u)} ({f.get('usage_protocol')} counting)"


def _compact(v: Any) -> str:
    return v if isinstance(v, str) else jsonc.dumps(v)


def explain_lines(rows: list[dict]) -> list[str]:
    """The shadow / replay rows of one turn: both replies side by side, then the agreement."""
    out: list[str] = []
    for r in rows:
        head = f"{r['kind']} → {r['endpoint'] or '-'}"
        if r["kind"] == "shadow_skipped":
            out += ["", f"{head}: skipped ({r['error']})"]
            continue
        latency = "-" if r["latency_ms"] is None else f"{r['latency_ms']:.1f} ms"
        out += ["", f"{head} · status {r['status'] if r['status'] is not None else '-'} · latency {latency}"
                + (f" · model {r['model']}" if r.get("model") else "")]
        if r.get("error"):
            out.append(f"  error: {r['error']}")
        left, right = _side(r.get("primary_facts")), _side(r.get("facts"))
        left_label = "recorded reply" if r["kind"] == "replay" else "client's reply"
        left.insert(0, left_label.upper())
        right.insert(0, f"{r['kind'].upper()} REPLY ({r['endpoint']})")
        width = max(len(x) for x in left)
        for i in range(max(len(left), len(right))):
            out.append(("  " + (left[i] if i < len(left) else "").ljust(width) + "  │ "
                        + (right[i] if i < len(right) else "")).rstrip())
        out.append(f"  usage as reported · {left_label}: {_usage(r.get('primary_facts'))}")
        out.append(f"  usage as reported · {r['kind']}: {_usage(r.get('facts'))}")
        c = r.get("comparison")
        if isinstance(c, dict) and c.get("compared"):
            out.append(f"  same stop reason: {_yes(c['stop_reason']['same'])} · same tool names: "
                       f"{_yes(c['tool_names']['same'])} · tool arguments equal: {_yes(c['tool_arguments_equal'])}"
                       f" · same text: {_yes(c['text']['same'])}")
        if isinstance(c, dict) and isinstance(c.get("verdict"), dict):
            v, role = c["verdict"], (c.get("earn") or {}).get("role")
            said = {True: "agree", False: "disagree", None: "not counted"}[v.get("agree")]
            out.append(f"  {v.get('kind')} turn: {said}" + (f" ({'; '.join(v['failed'])})" if v.get("failed") else "")
                       + (f" · {role} shadow" if role else "") + f" · stratum {(c.get('stratum') or {}).get('key')}")
        if r.get("dropped"):
            out.append(f"  dropped for the {r['kind']}: {', '.join(r['dropped'])}")
    return out


def _yes(v: Any) -> str:
    return "-" if v is None else ("yes" if v else "no")


def earn_lines(events: list[dict]) -> list[str]:
    """`explain`'s lines for a turn of an earned route (its ``earn`` event, routing/earn.py)."""
    out = []
    for e in events:
        d = e.get("data")
        if e.get("kind") == "earn" and isinstance(d, dict):
            out.append(f"{'earn':<13}served by {d.get('served_by')} · {d.get('said')}")
    return out
