#!/usr/bin/env python3
"""Benchmark: what `shadow:` adds to the client's turn, measured side by side in one run.

Starts, on loopback with free ports: a scripted Anthropic upstream and a scripted Chat
Completions shadow endpoint (threads of this process, HTTP/1.1 keep-alive), and
``mitmdump -s addon/tokunseba_addon.py`` with a throw-away ledger and these rules: turns
naming model ``shadow-bench`` match a shadow-only route (served as pass-through, and also
sent to the shadow endpoint in the background, translated Anthropic -> Chat); turns naming
``claude-bench`` match no route (plain pass-through). An Anthropic-shaped client (plain
HTTP, absolute-form requests, one keep-alive connection per variant) sends each turn whole
and streamed. Every round runs each (variant, shape) once in a fresh shuffled order, so the
noise of the machine's other tenants falls on both variants alike.

A shadow is sent once its own turn's reply is complete, so its work lands on whatever turn
comes next, of either variant (shuffled): the added median is what `shadow:` costs the turn
it shadows; the load of the shadows themselves is shared by both variants.

Prints per shape each variant's median and p95 turn latency (request sent -> last byte),
the median added by `shadow:` (difference of medians) and the ratio; it also reports how
many shadow rows the ledger holds and how many were skipped. Every reply is checked
(status 200 and its terminal event / JSON); failures are counted, never timed.

Not a test: it prints, it asserts nothing.
Usage: .venv/bin/python scripts/bench/bench_shadow.py [--rounds N] [--warmup N] [--seed S]
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import re
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
ADDON = ROOT / "addon" / "tokunseba_addon.py"
BIN = Path(sys.executable).parent
VARIANTS = {"pass-through": "claude-bench", "shadowed": "shadow-bench"}
SHAPES = ("whole", "stream")

RULES = """\
endpoints:
  shadowep:
    protocol: openai
    url: http://127.0.0.1:{shadow}/v1
    max_tokens: 256
routes:
  - name: shadowed
    when: {{model: shadow-bench}}
    shadow: shadowep
"""

USAGE = {"input_tokens": 12, "output_tokens": 5}
WHOLE = json.dumps({"id": "msg_bench", "type": "message", "role": "assistant", "model": "m",
                    "content": [{"type": "text", "text": "Hello there, bench."}], "stop_reason": "end_turn",
                    "stop_sequence": None, "usage": USAGE}).encode()


def _sse(kind: str, obj: dict) -> bytes:
    return f"event: {kind}\ndata: {json.dumps(obj)}\n\n".encode()


STREAM = b"".join([
    _sse("message_start", {"type": "message_start", "message": {"id": "msg_bench", "type": "message",
                                                                "role": "assistant", "model": "m", "content": [],
                                                                "stop_reason": None, "stop_sequence": None,
                                                                "usage": {"input_tokens": 12, "output_tokens": 1}}}),
    _sse("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
    *(_sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                   "delta": {"type": "text_delta", "text": w}}) for w in ("Hello ", "there, ", "bench.")),
    _sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
    _sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                           "usage": {"output_tokens": 5}}),
    _sse("message_stop", {"type": "message_stop"}),
])
CHAT = json.dumps({"id": "chatcmpl-bench", "object": "chat.completion", "created": 1, "model": "m",
                   "choices": [{"index": 0, "finish_reason": "stop",
                                "message": {"role": "assistant", "content": "Hello there, bench."}}],
                   "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}}).encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def setup(self):
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # no 40 ms Nagle/delayed-ACK stalls

    def do_POST(self):
        n = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(n) or b"{}")
        if self.path.endswith("/chat/completions"):
            self._send("application/json", CHAT)
        elif body.get("stream"):
            self._send("text/event-stream", STREAM)
        else:
            self._send("application/json", WHOLE)

    def _send(self, ctype: str, data: bytes) -> None:
        self.send_response(200)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def serve() -> ThreadingHTTPServer:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def start_proxy(work: Path, upstream: int, shadow: int) -> tuple[subprocess.Popen, int]:
    rules = work / "rules.yaml"
    rules.write_text(RULES.format(shadow=shadow))
    cmd = [str(BIN / "mitmdump"), "--listen-host", "127.0.0.1", "-p", "0", "--set", f"confdir={work / 'conf'}",
           "-s", str(ADDON), "--set", f"tokunseba_ledger={work / 'ledger.db'}", "--set", f"tokunseba_rules={rules}",
           "--set", "connection_strategy=lazy", "--set", f"tokunseba_provider_hosts=127.0.0.1:{upstream}=anthropic"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=work)
    deadline = time.time() + 30
    while time.time() < deadline:
        line = proc.stdout.readline()
        if m := re.search(r"proxy listening at .*:(\d+)", line):
            threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()
            return proc, int(m.group(1))
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise SystemExit("bench_shadow: mitmdump did not start")


def turn(conn: http.client.HTTPConnection, upstream: int, model: str, stream: bool) -> float | None:
    body = json.dumps({"model": model, "max_tokens": 64, "stream": stream,
                       "messages": [{"role": "user", "content": "Say hello to the bench."}]}).encode()
    if conn.sock is None:
        conn.connect()
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    t0 = time.perf_counter()
    conn.request("POST", f"http://127.0.0.1:{upstream}/v1/messages", body=body,
                 headers={"content-type": "application/json", "x-api-key": "sk-ant-bench-client",
                          "anthropic-version": "2023-06-01"})
    r = conn.getresponse()
    data = r.read()
    dt = time.perf_counter() - t0
    ok = r.status == 200 and (b"event: message_stop" in data if stream else b'"end_turn"' in data)
    return dt * 1000 if ok else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--seed", type=int, default=12)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    up, sh = serve(), serve()
    with tempfile.TemporaryDirectory(prefix="bench-shadow-") as tmp:
        work = Path(tmp)
        proc, port = start_proxy(work, up.server_address[1], sh.server_address[1])
        try:
            conns = {v: http.client.HTTPConnection("127.0.0.1", port, timeout=30) for v in VARIANTS}
            times: dict[tuple[str, str], list[float]] = {(v, s): [] for v in VARIANTS for s in SHAPES}
            failures = 0
            cases = [(v, s) for v in VARIANTS for s in SHAPES]
            for i in range(args.warmup + args.rounds):
                rng.shuffle(cases)
                for v, s in cases:
                    ms = turn(conns[v], up.server_address[1], VARIANTS[v], s == "stream")
                    if ms is None:
                        failures += 1
                    elif i >= args.warmup:
                        times[(v, s)].append(ms)
            time.sleep(1.0)  # let the last shadows land
            con = sqlite3.connect(work / "ledger.db")
            kinds = dict(con.execute("SELECT kind, count(*) FROM shadows GROUP BY kind").fetchall())
            con.close()
        finally:
            proc.terminate()
            proc.wait(10)
    print(f"bench_shadow: {args.rounds} rounds (+{args.warmup} warm-up), each (variant, shape) once per round, "
          f"shuffled; failures {failures}")
    for s in SHAPES:
        print(f"\n{s}:")
        med = {}
        for v in VARIANTS:
            xs = sorted(times[(v, s)])
            med[v] = statistics.median(xs) if xs else float("nan")
            p95 = xs[max(int(len(xs) * 0.95) - 1, 0)] if xs else float("nan")
            print(f"  {v:<13} n={len(xs):<5} median {med[v]:7.3f} ms   p95 {p95:7.3f} ms")
        added = med["shadowed"] - med["pass-through"]
        print(f"  shadow: added median {added:+.3f} ms   ratio {med['shadowed'] / med['pass-through']:.3f}x pass-through")
    print(f"\nledger: shadow rows {kinds.get('shadow', 0)}, shadow_skipped {kinds.get('shadow_skipped', 0)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
