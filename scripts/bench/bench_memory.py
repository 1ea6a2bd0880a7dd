#!/usr/bin/env python3
"""Benchmark: what a large whole reply costs the proxy in memory (issue 10 item 5).

Starts, on loopback with free ports: a scripted upstream whose whole replies (Anthropic
Messages and OpenAI Chat Completions) carry a text of ``--mb`` megabytes when the prompt
says ``big``, a bare ``mitmdump`` (an addon-less baseline) and a ``mitmdump`` with this
tree's tokunseba (and, with ``--against OTHER_ADDON``, one with another tree's). For each
setup (bare; tokunseba pass-through, retarget, translated) a fresh proxy process gets three
small warm-up turns, then one big turn, and the script reads the process's ``VmRSS`` before
and its peak ``VmHWM`` and ``VmRSS`` after (``/proc/PID/status``, Linux only); ``--repeat``
times per setup, in shuffled order (the allocator's luck moves one run by ±15 MB).

It prints, per setup, the reply size, RSS before, the median peak growth during the big
turn (and that growth as a multiple of the reply's size), its range, and the RSS left after. Every reply is
checked (status 200, JSON). Not a test: it asserts nothing.
Usage: .venv/bin/python scripts/bench/bench_memory.py [--mb N] [--repeat N] [--seed S]
                                               [--against OTHER_ADDON [--against-label L]]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_proxy as bp  # noqa: E402  (its upstream shapes, process and client helpers)

SETUPS = {"pass-through": "claude-bench", "retarget": "retarget-bench", "translated": "translate-bench"}


class BigHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    size = 20_000_000

    def log_message(self, *a) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
        text = "w" * (self.size if body["messages"][0]["content"] == "big" else 10)
        if self.path.endswith("/chat/completions"):
            d = bp.chat_whole(1, body.get("model") or "m")
            d["choices"][0]["message"]["content"] = text
        else:
            d = bp.anthropic_whole(1, body.get("model") or "m")
            d["content"][0]["text"] = text
        data = json.dumps(d).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def memory(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM of a process, in MB."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        k, _, v = line.partition(":")
        if k in ("VmRSS", "VmHWM"):
            out[k] = int(v.split()[0]) / 1024
    return out


def measure(work: Path, upstream_port: int, model: str, addon: Path | None) -> tuple[float, dict, dict]:
    """One fresh proxy, three small turns, one big one: (reply MB, memory before, after)."""
    extra: list[str] = ["--set", "flow_detail=0"]
    work.mkdir(parents=True, exist_ok=True)
    if addon is not None:
        rules = work / "rules.yaml"
        rules.write_text(bp.RULES.format(port=upstream_port))
        extra += ["-s", str(addon), "--set", f"tokunseba_rules={rules}", "--set", f"tokunseba_ledger={work / 'l.db'}",
                  "--set", f"tokunseba_provider_hosts=127.0.0.1:{upstream_port}=anthropic"]
    proxy = bp.mitmdump(work, *extra)
    try:
        client = bp.Client(upstream_port, proxy.port)

        def turn(content: str) -> int:
            body = json.dumps({"model": model, "max_tokens": 5,
                               "messages": [{"role": "user", "content": content}]}).encode()
            _, data, status = client.turn(body, False)
            why = bp.check(data, status, False)
            if why:
                sys.exit(f"bench_memory: {model}: {why}")
            return len(data)

        for _ in range(3):
            turn("small")
        time.sleep(0.3)
        before = memory(proxy.proc.pid)
        n = turn("big")
        time.sleep(0.5)
        return n / 1e6, before, memory(proxy.proc.pid)
    finally:
        proxy.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 epilog="Prints MB figures; everything it starts listens on 127.0.0.1 and is stopped.")
    ap.add_argument("--mb", type=float, default=20.0, help="size of the big reply's text in MB (default 20)")
    ap.add_argument("--repeat", type=int, default=3, help="fresh processes per setup (default 3)")
    ap.add_argument("--seed", type=int, default=None, help="shuffle seed (default: random)")
    ap.add_argument("--against", type=Path, default=None, metavar="OTHER_ADDON",
                    help="also measure another tree's tokunseba (its addon/tokunseba_addon.py)")
    ap.add_argument("--against-label", default="other", help="suffix of its setups' names (default: other)")
    args = ap.parse_args()
    if args.mb <= 0 or args.repeat < 1:
        ap.error("--mb must be more than 0 and --repeat at least 1")
    if args.against is not None and not args.against.is_file():
        ap.error(f"--against: {args.against} is not a file (give another tree's addon/tokunseba_addon.py)")
    if not Path("/proc/self/status").exists():
        sys.exit("bench_memory: needs Linux (/proc/PID/status)")
    BigHandler.size = int(args.mb * 1e6)
    server = bp.UpstreamServer(("127.0.0.1", 0), BigHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    runs = [("bare", "claude-bench", None)]
    for label, addon in [("", bp.ADDON)] + ([(f"@{args.against_label}", args.against.resolve())] if args.against else []):
        runs += [(f"{setup}{label}", model, addon) for setup, model in SETUPS.items()]
    width = max(len(r[0]) for r in runs)
    order = [r for r in runs for _ in range(args.repeat)]
    random.Random(args.seed).shuffle(order)
    got: dict[str, list[tuple[float, dict, dict]]] = {}
    print(f"bench_memory: one {args.mb:g} MB whole reply per fresh proxy process, {args.repeat} per setup,"
          f" shuffled (MB; peak + is the median, its range after it)")
    print(f"  {'setup':<{width}} {'reply':>6} {'before':>7} {'peak +':>7} {'x reply':>8} {'range':>11} {'after':>7}")
    try:
        with tempfile.TemporaryDirectory(prefix="tk-bench-mem-") as tmp:
            for i, (name, model, addon) in enumerate(order):
                got.setdefault(name, []).append(measure(Path(tmp) / str(i), port, model, addon))
        for name, _, _ in runs:
            mb = got[name][0][0]
            grows = [after["VmHWM"] - before["VmRSS"] for _, before, after in got[name]]
            grow = statistics.median(grows)
            before = statistics.median(b["VmRSS"] for _, b, _ in got[name])
            after = statistics.median(a["VmRSS"] for _, _, a in got[name])
            span = f"{min(grows):.0f}..{max(grows):.0f}"
            print(f"  {name:<{width}} {mb:>6.1f} {before:>7.0f} {grow:>+7.0f} {grow / mb:>8.1f} {span:>11} {after:>7.0f}")
    finally:
        server.shutdown()


if __name__ == "__main__":
    main()
