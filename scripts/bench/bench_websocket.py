#!/usr/bin/env python3
"""Benchmark: what tokunseba adds to a Responses session over WebSocket that it passes on.

Starts, on loopback with free ports: the scripted Responses endpoint that speaks WebSocket
(tests/support/ws_upstream.py, reached as api.openai.com through tests/support/point_hosts.py), a bare
``mitmdump`` relaying the same WebSocket, and ``mitmdump -s addon/tokunseba_addon.py`` (no
route: every turn passed on, each one planned, watched and recorded in a throw-away ledger).
A client speaking Codex's wire then runs whole sessions through each: the upgrade, a warm-up
(``generate: false``), then ``--turns`` turns continuing with ``previous_response_id``, each
answered with ``--events`` events (``--input-kb N``: the first turn's input also carries N KB
of text, as a Codex session's first turn carries its instructions and files: every later turn
continues a conversation that long, which tokunseba plans whole and the bare proxy only relays
once). Every round runs one session through each proxy in a
fresh shuffled order (interleaved: the machine's noise falls on both alike). It prints each
setup's median and p95 session time and the ratio of tokunseba's median to bare mitmdump's,
and the CPU time each proxy process spent per session (its threads' run time from /proc; less
noisy than wall time on a loaded machine) with its ratio.
Both proxies are started afresh every ``--restart`` rounds (under load one process can be
scheduled worse than another for its whole life: fresh pairs spread that over both).
Every session is checked (each turn ends in response.completed); failures are counted, never
timed. With ``--against OTHER_ADDON`` (another tree's addon/tokunseba_addon.py, e.g. main's:
``git archive main | tar -x -C /tmp/main``) that tree's tokunseba runs as a third setup
(``tokunseba@LABEL``) in the same rounds, and its ratios are printed beside this tree's: one
run compares two versions under the same noise. Not a test: it prints, it asserts nothing.

Usage: .venv/bin/python scripts/bench/bench_websocket.py [--rounds N] [--turns N] [--events N] [--input-kb N] [--warmup N]
                                                  [--restart N] [--seed S]
                                                  [--against OTHER_ADDON [--against-label LABEL]]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import re
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import harness  # scripts/bench/harness.py: the timing harness the benchmarks share

from websockets.asyncio.client import connect

ROOT = Path(__file__).resolve().parent.parent.parent
SUPPORT = ROOT / "tests" / "support"
BIN = Path(sys.executable).parent


def _ws_upstream():
    spec = importlib.util.spec_from_file_location("ws_upstream", SUPPORT / "ws_upstream.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["ws_upstream"] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


class Proxy:
    def __init__(self, name: str, work: Path, ws_port: int, addon: Path | None) -> None:
        work.mkdir(parents=True, exist_ok=True)
        self.name, self.conf = name, work / f"conf-{name}"
        cmd = [str(BIN / "mitmdump"), "--listen-host", "127.0.0.1", "-p", "0", "--set", f"confdir={self.conf}",
               "--set", "connection_strategy=lazy", "--set", "flow_detail=0"]
        if addon is not None:
            rules = work / "rules.yaml"
            rules.write_text("routes: []\n")
            cmd += ["-s", str(addon), "--set", f"tokunseba_rules={rules}",
                    "--set", f"tokunseba_ledger={work / f'ledger-{name}.db'}"]
        cmd += ["-s", str(SUPPORT / "point_hosts.py")]
        env = {**os.environ, "TK_TEST_POINT": f"api.openai.com=http://127.0.0.1:{ws_port}"}
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        self.port = 0
        deadline = time.monotonic() + 30
        lines = []
        while not self.port and time.monotonic() < deadline:
            line = self.proc.stdout.readline()  # type: ignore[union-attr]
            if not line and self.proc.poll() is not None:
                raise RuntimeError(f"{name} exited:\n" + "".join(lines))
            lines.append(line)
            m = re.search(r"proxy listening at .*:(\d+)", line)
            self.port = int(m.group(1)) if m else 0
        if not self.port:
            self.proc.kill()
            raise RuntimeError(f"{name} did not start:\n" + "".join(lines))
        threading.Thread(target=lambda: [None for _ in self.proc.stdout], daemon=True).start()  # type: ignore[union-attr]
        self.ssl = ssl.create_default_context(cafile=str(self.conf / "mitmproxy-ca-cert.pem"))

    def cpu(self) -> float:
        """CPU seconds the proxy process's threads have run so far (Linux: each thread's
        /proc/PID/task/TID/schedstat, in nanoseconds; else /proc/PID/stat's user + system, in
        clock ticks of 10 ms: too coarse for a session of ~150 ms)."""
        try:
            tasks = Path(f"/proc/{self.proc.pid}/task")
            return sum(int((t / "schedstat").read_text().split()[0]) for t in tasks.iterdir()) / 1e9
        except (OSError, IndexError, ValueError):
            pass
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            return float("nan")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(15)


def create(input_items: list, prev: str | None) -> str:
    d = {"type": "response.create", "model": "gpt-5.5", "instructions": "be brief", "input": input_items,
         "tools": [], "store": False, "prompt_cache_key": "bench-session"}
    if prev:
        d["previous_response_id"] = prev
    return json.dumps(d)


async def _until_done(ws) -> str:
    while True:
        ev = json.loads(await ws.recv())
        if ev.get("type") in ("response.completed", "response.failed", "error"):
            if ev["type"] != "response.completed":
                raise RuntimeError(f"turn failed: {ev}")
            return ev["response"]["id"]


async def session(p: Proxy, turns: int, input_kb: int = 0) -> float:
    t0 = time.perf_counter()
    async with connect("wss://api.openai.com/v1/responses", proxy=f"http://127.0.0.1:{p.port}", ssl=p.ssl,
                       additional_headers={"authorization": "Bearer sk-bench",
                                           "openai-beta": "responses_websockets=2026-02-06"},
                       max_size=None) as ws:
        await ws.send(json.dumps({**json.loads(create([], None)), "generate": False}))
        prev = await _until_done(ws)
        for i in range(turns):
            parts = [{"type": "input_text", "text": f"turn {i}"}]
            if i == 0 and input_kb:
                parts.append({"type": "input_text", "text": ("context " * 128)[:1024] * input_kb})
            await ws.send(create([{"type": "message", "role": "user", "content": parts}], prev))
            prev = await _until_done(ws)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--turns", type=int, default=5, help="turns per session (after its warm-up)")
    ap.add_argument("--events", type=int, default=60, help="text deltas per turn's reply")
    ap.add_argument("--input-kb", type=int, default=0,
                    help="KB of text the first turn's input also carries (the conversation every later turn continues)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed rounds after each start")
    ap.add_argument("--restart", type=int, default=10, help="rounds per pair of proxy processes")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--against", type=Path, default=None, metavar="OTHER_ADDON",
                    help="another tree's addon/tokunseba_addon.py, run as a third setup in the same rounds")
    ap.add_argument("--against-label", default="other", help="suffix of its setup's name (default: other)")
    a = ap.parse_args()
    if a.against is not None and not a.against.is_file():
        ap.error(f"--against: {a.against} is not a file (give another tree's addon/tokunseba_addon.py)")
    addons: dict[str, Path | None] = {"bare": None, "tokunseba": ROOT / "addon" / "tokunseba_addon.py"}
    if a.against is not None:
        addons[f"tokunseba@{a.against_label}"] = a.against.resolve()
    up_mod = _ws_upstream()
    _, rnd = harness.seeded(a.seed)
    with tempfile.TemporaryDirectory() as tmp, up_mod.WsUpstream() as up:
        up.script(up_mod.WsScript(up_mod.text_events([f"tok{i} " for i in range(a.events)])))
        work = Path(tmp)
        times: dict[str, list[float]] = {name: [] for name in addons}
        failed = {name: 0 for name in times}
        cpu: dict[str, list[float]] = {name: [] for name in times}  # the proxy's CPU seconds per session
        done = 0
        while done < a.rounds:  # fresh processes every --restart rounds: no setup keeps one process's luck
            proxies = [Proxy(name, work / f"{i}-{done}", up.port, addon) for i, (name, addon) in enumerate(addons.items())]
            try:
                block = min(a.restart, a.rounds - done)
                for r in range(a.warmup + block):
                    order = proxies[:]
                    rnd.shuffle(order)
                    for p in order:
                        before = p.cpu()
                        try:
                            t = asyncio.run(session(p, a.turns, a.input_kb))
                        except Exception as e:
                            failed[p.name] += 1
                            print(f"  {p.name}: session failed: {e}", file=sys.stderr)
                            continue
                        if r >= a.warmup:
                            times[p.name].append(t)
                            cpu[p.name].append(p.cpu() - before)
                done += block
            finally:
                for p in proxies:
                    p.stop()
    print(f"Responses over WebSocket, passed on: {a.rounds} interleaved rounds, a warm-up + {a.turns} turns "
          f"of {a.events} deltas per session" + (f", the first turn's input {a.input_kb} KB longer" if a.input_kb else ""))
    width = max(len(name) for name in times)
    for name, ts in times.items():
        if ts:
            p95 = harness.p95(ts)
            print(f"  {name:{width}s} median {statistics.median(ts) * 1000:8.2f} ms   p95 {p95 * 1000:8.2f} ms   "
                  f"proxy CPU {statistics.mean(cpu[name]) * 1000:7.2f} ms/session   failed {failed[name]}")
    for name in [n for n in times if n != "bare"]:
        if times["bare"] and times[name]:
            ratio = statistics.median(times[name]) / statistics.median(times["bare"])
            print(f"  ratio {name} / bare mitmdump (median session time): {ratio:.3f}x")
            cratio = statistics.mean(cpu[name]) / statistics.mean(cpu["bare"])
            print(f"  ratio {name} / bare mitmdump (proxy CPU per session): {cratio:.3f}x")
    print(f"  load average (1 min) at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
