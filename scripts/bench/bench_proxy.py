#!/usr/bin/env python3
"""Benchmark: what the proxy adds to a turn, measured side by side in one run.

Starts, all on loopback with free ports: a scripted upstream (a child process serving
Anthropic Messages and OpenAI Chat Completions, whole and streamed, HTTP/1.1 keep-alive),
a bare ``mitmdump`` (no addon; ``stream_large_bodies=1`` so that it streams replies as they
come, as the addon does for SSE: otherwise its "first byte" is its last) and ``mitmdump -s addon/tokunseba_addon.py`` (tokunseba,
with a throw-away ledger and rules). An Anthropic-shaped client (plain HTTP over a
keep-alive connection per setup, absolute-form requests to the proxy) then sends turns in
five setups:

  direct        client -> upstream
  bare          client -> bare mitmdump -> upstream
  bare-buffered client -> bare mitmdump with its defaults (it buffers the request and the reply,
                as tokunseba must buffer a request to route it) -> upstream
  pass-through  client -> tokunseba (no route matches) -> upstream
  retarget      client -> tokunseba (same-protocol route, model rewritten) -> upstream
  translated    client -> tokunseba (Anthropic -> Chat -> Anthropic) -> upstream
  failover      client -> tokunseba -> an endpoint answering a context-window error (400) at
                once -> the next route, translated as above -> upstream (issue 19)
  bare-reverse  client -> bare ``mitmdump --mode reverse:http://upstream`` -> upstream (a base URL)
  base-url      client -> tokunseba's base-URL (reverse) listener, no route -> upstream (issue 30)

each whole and streamed (``--events`` SSE events). With ``--client chat`` the client speaks OpenAI
Chat Completions instead (``/v1/chat/completions``; the upstream answers Chat replies and
streams), in the setups that need no route: direct, bare, pass-through, bare-reverse and
base-url (a passed-through Chat stream, as issue 38 measures it). With ``--against OTHER_ADDON`` (another
tree's ``addon/tokunseba_addon.py``, e.g. a clean checkout of main) that tree's tokunseba
runs too, as the extra setups ``pass-through@LABEL``, ``retarget@LABEL`` and
``translated@LABEL`` in the same interleaved rounds, so one run compares two versions. Every round runs each (setup, shape)
once in a fresh shuffled order, so noise from the other tenants of the machine falls on all
setups alike. It prints, per shape, each setup's median and p95 turn latency, the time added
over bare mitmdump (difference of medians and of p95s) and the ratio to bare; for streams
also the first-byte delay (request sent -> first body byte). Every reply is checked (status
200 and its terminal event or JSON), and failures are counted, never timed.

With ``--concurrent N`` it then also runs, for every proxied setup in shuffled order,
N streams at once (each on its own new connection, ``--concurrent-rounds`` times) and
prints each setup's median and p95 stream latency, its p95 as a ratio to bare mitmdump's,
and how many streams were lost (failed or incomplete).

Failover: the ledger records how long each failover turn's failed attempt took; the report
ends with what failing over added beyond it: median(failover) - median(translated) - the
median failed attempt, per shape (the --against tree runs no failover setup).

CPU: each proxy process's CPU time (user + system, from /proc) over the measured rounds (after
the warm-up, once every process is idle), per turn it served, next to bare mitmdump's: less moved by the machine's other
tenants than wall time. With ``--only`` one setup per process (e.g. ``bare,pass-through``)
it is that setup's cost.

Base URL: the report also sets what a turn through tokunseba's base-URL listener adds over a
bare reverse-mode mitmdump beside what the proxy path (pass-through) adds over a bare one.

Not a test: it prints, it asserts nothing.
Usage: .venv/bin/python scripts/bench/bench_proxy.py [--rounds N] [--events N] [--warmup N] [--seed S]
                                              [--concurrent N] [--concurrent-rounds N] [--client chat]
                                              [--against OTHER_ADDON [--against-label LABEL]]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import harness  # scripts/bench/harness.py: the timing harness the benchmarks share

ROOT = Path(__file__).resolve().parent.parent.parent
ADDON = ROOT / "addon" / "tokunseba_addon.py"
BIN = Path(sys.executable).parent
SETUPS = ["direct", "bare", "bare-buffered", "pass-through", "retarget", "translated", "failover", "bare-reverse",
          "base-url"]  # + the --against tree's
ROUTED = ("pass-through", "retarget", "translated", "failover")  # the setups that run through a tokunseba
ROUTED_NOW: list[str] = list(ROUTED)  # those this run has (--client chat: pass-through only)
SHAPES = ("whole", "stream")
MODELS = {"direct": "claude-bench", "bare": "claude-bench", "bare-buffered": "claude-bench", "pass-through": "claude-bench",
          "retarget": "retarget-bench", "translated": "translate-bench", "failover": "failover-bench",
          "bare-reverse": "claude-bench", "base-url": "claude-bench"}


CLIENTS = ("anthropic", "chat")  # the client's protocol (--client)
CHAT_SETUPS = ("direct", "bare", "bare-buffered", "pass-through", "bare-reverse", "base-url")  # what a Chat client runs (no route)
CLIENT = ["anthropic"]  # --client


def model_of(setup: str) -> str:
    return MODELS[setup.split("@", 1)[0]] if CLIENT[0] == "anthropic" else "gpt-bench"

RULES = """\
endpoints:
  ant:
    protocol: anthropic
    url: http://127.0.0.1:{port}/v1
  oai:
    protocol: openai
    url: http://127.0.0.1:{port}/v1
    max_tokens_field: max_tokens
  small:  # answers every turn with a context-window error (/small/...), at once
    protocol: openai
    url: http://127.0.0.1:{port}/small/v1
    max_tokens_field: max_tokens
routes:
  - name: retarget
    when: {{client: anthropic, model: "retarget-*"}}
    to: ant
    model: bench-retargeted
  - name: translate
    when: {{client: anthropic, model: "translate-*"}}
    to: oai
    model: bench-local
  - name: failover-small
    when: {{client: anthropic, model: "failover-*"}}
    to: small
  - name: failover-next
    when: {{client: anthropic, model: "failover-*"}}
    to: oai
    model: bench-local
"""

# ---------------------------------------------------------------- the scripted upstream


def _sse(event: str | None, obj: dict) -> bytes:
    head = f"event: {event}\n" if event else ""
    return (head + "data: " + json.dumps(obj, separators=(",", ":")) + "\n\n").encode()


def anthropic_stream(n: int, model: str) -> list[bytes]:
    usage = {"input_tokens": 25, "output_tokens": 1}
    out = [_sse("message_start", {"type": "message_start", "message": {
        "id": "msg_bench", "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": usage}}),
        _sse("content_block_start", {"type": "content_block_start", "index": 0,
                                     "content_block": {"type": "text", "text": ""}})]
    out += [_sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                         "delta": {"type": "text_delta", "text": f"word{i} "}}) for i in range(n)]
    out += [_sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
            _sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                                   "usage": {"output_tokens": n}}),
            _sse("message_stop", {"type": "message_stop"})]
    return out


def chat_stream(n: int, model: str) -> list[bytes]:
    head = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1767225600, "model": model}

    def chunk(delta: dict, finish: str | None = None) -> bytes:
        return _sse(None, head | {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk({"content": f"word{i} "}) for i in range(n)]
    out += [chunk({}, "stop"), _sse(None, head | {"choices": [], "usage": {
        "prompt_tokens": 25, "completion_tokens": n, "total_tokens": 25 + n}}), b"data: [DONE]\n\n"]
    return out


def anthropic_whole(n: int, model: str) -> dict:
    return {"id": "msg_bench", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": "".join(f"word{i} " for i in range(n))}],
            "stop_reason": "end_turn", "stop_sequence": None, "usage": {"input_tokens": 25, "output_tokens": n}}


def chat_whole(n: int, model: str) -> dict:
    return {"id": "chatcmpl-bench", "object": "chat.completion", "created": 1767225600, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "".join(f"word{i} " for i in range(n))},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 25, "completion_tokens": n, "total_tokens": 25 + n}}


class UpstreamHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are separate writes: no 40 ms delayed-ACK stalls
    events = 60

    def log_message(self, *a) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
        if self.path.startswith("/small/"):  # llama-server's context-window error
            data = json.dumps({"error": {"code": 400, "message": "the request exceeds the available context size, "
                                         "try increasing it", "type": "exceed_context_size_error"}}).encode()
            self.send_response(400)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        model, n = body.get("model") or "bench", self.events
        chat = self.path.endswith("/chat/completions")
        if body.get("stream"):
            pieces = chat_stream(n, model) if chat else anthropic_stream(n, model)
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for p in pieces:  # one chunk per event, as a model server writes them
                self.wfile.write(b"%x\r\n%s\r\n" % (len(p), p))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            return
        data = json.dumps(chat_whole(n, model) if chat else anthropic_whole(n, model)).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class UpstreamServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512  # the concurrent phase connects many at once


def serve_upstream(events: int) -> None:
    UpstreamHandler.events = events
    server = UpstreamServer(("127.0.0.1", 0), UpstreamHandler)
    print(f"upstream listening at 127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


# ---------------------------------------------------------------- processes


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Child:
    """A child process whose first matching output line names its port. Its output goes to a
    file, not a pipe: a pipe would be drained by a thread of this process, which then takes the
    interpreter from the client's threads at every line the child prints, so a proxy that prints
    more lines a turn (tokunseba's console line beside mitmproxy's own) would look slower by what
    the benchmark itself spends reading them."""

    def __init__(self, cmd: list[str], pattern: str, env: dict | None = None, cwd: Path | None = None) -> None:
        fd, name = tempfile.mkstemp(prefix="tk-bench-child-", suffix=".log")
        self.log = Path(name)
        with os.fdopen(fd, "w") as out:
            # unbuffered: each line written as it is printed, as on a terminal
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}, cwd=cwd)
        deadline = time.time() + 60
        self.port = 0
        seen = b""
        with self.log.open("rb") as f:
            while time.time() < deadline:
                seen += f.read()
                whole = seen[:seen.rfind(b"\n") + 1]  # complete lines only: a port half written is not a port
                if m := re.search(pattern.encode(), whole):
                    self.port = int(m.group(1))
                    break
                if self.proc.poll() is not None:
                    sys.exit(f"bench_proxy: {cmd[0]} exited:\n" + self.output())
                time.sleep(0.02)
            else:
                self.stop()
                sys.exit(f"bench_proxy: {cmd[0]} did not start:\n" + self.output())

    def output(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.unlink(missing_ok=True)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc); 0.0 where it cannot be read."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def settle(pids: list[int], quiet_s: float = 0.01, most_s: float = 15.0) -> None:
    """Wait until none of ``pids`` spends more than ``quiet_s`` of CPU in half a second (at most ``most_s``)."""
    deadline = time.monotonic() + most_s
    before = [cpu_seconds(p) for p in pids]
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = [cpu_seconds(p) for p in pids]
        if all(b - a <= quiet_s for a, b in zip(before, now)):
            return
        before = now


def mitmdump(work: Path, *extra: str) -> Child:
    work.mkdir(parents=True, exist_ok=True)
    return Child([str(BIN / "mitmdump"), "--listen-host", "127.0.0.1", "-p", "0", "--set", f"confdir={work / 'conf'}",
                  "--set", "connection_strategy=lazy", *extra], r"proxy listening at .*:(\d+)", cwd=work)


# ---------------------------------------------------------------- the client


@dataclass
class Sample:
    total: float
    first_byte: float


@dataclass
class Results:
    samples: dict[tuple[str, str], list[Sample]] = field(default_factory=dict)
    failures: dict[tuple[str, str], list[str]] = field(default_factory=dict)


class Client:
    """One keep-alive connection per setup; absolute-form URIs when talking to a proxy."""

    def __init__(self, upstream_port: int, proxy_port: int | None, reverse_port: int | None = None) -> None:
        self.upstream = f"http://127.0.0.1:{upstream_port}"
        self.via = proxy_port
        self.reverse = reverse_port  # a reverse proxy (base URL): origin-form requests to it
        self.conn = self._connect()
        self.upstream_port = upstream_port

    def _connect(self) -> http.client.HTTPConnection:
        port = self.via or self.reverse or int(self.upstream.rsplit(":", 1)[1])
        return http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def turn(self, body: bytes, stream: bool) -> tuple[Sample, bytes, int]:
        chat = CLIENT[0] == "chat"
        target = (self.upstream if self.via else "") + ("/v1/chat/completions" if chat else "/v1/messages")
        headers = {"content-type": "application/json", "host": f"127.0.0.1:{self.upstream_port}"}
        headers.update({"authorization": "Bearer sk-bench-not-a-key"} if chat else
                       {"x-api-key": "sk-bench-not-a-key", "anthropic-version": "2023-06-01"})
        t0 = time.perf_counter()
        try:
            self.conn.request("POST", target, body=body, headers=headers)
            resp = self.conn.getresponse()
            parts = []
            first = None
            while chunk := resp.read1(65536):
                if first is None:
                    first = time.perf_counter()
                parts.append(chunk)
            end = time.perf_counter()
        except (OSError, http.client.HTTPException):
            self.conn.close()
            self.conn = self._connect()
            raise
        if resp.will_close:
            self.conn.close()
            self.conn = self._connect()
        data = b"".join(parts)
        return Sample(end - t0, (first or end) - t0), data, resp.status


def request_body(model: str, stream: bool, prompt_bytes: int) -> bytes:
    text = ("Summarise this line of benchmark text. " * (prompt_bytes // 39 + 1))[:prompt_bytes]
    extra = {"stream_options": {"include_usage": True}} if CLIENT[0] == "chat" and stream else {}
    return json.dumps({"model": model, "max_tokens": 256, "stream": stream, **extra,
                       "messages": [{"role": "user", "content": text}]}).encode()


def check(data: bytes, status: int, stream: bool) -> str | None:
    """Why a reply is not a complete, good reply in the client's protocol (None when it is)."""
    if status != 200:
        return f"status {status}: {data[:200]!r}"
    if CLIENT[0] == "chat":
        if stream:
            return None if data.rstrip().endswith(b"data: [DONE]") and b'"usage"' in data else f"stream: {data[-200:]!r}"
        try:
            obj = json.loads(data)
        except ValueError:
            return f"not JSON: {data[:200]!r}"
        return None if obj.get("object") == "chat.completion" and obj.get("usage") else f"not a completion: {data[:200]!r}"
    if stream:
        return None if b"event: message_stop" in data and b"event: error" not in data else f"stream: {data[-200:]!r}"
    try:
        obj = json.loads(data)
    except ValueError:
        return f"not JSON: {data[:200]!r}"
    return None if obj.get("type") == "message" and obj.get("content") else f"not a message: {data[:200]!r}"


def run(clients: dict[str, Client], rounds: int, warmup: int, prompt_bytes: int, rng: random.Random) -> Results:
    res = Results()
    cases = [(s, shape) for s in SETUPS for shape in SHAPES if s in ONLY or not ONLY]
    bodies = {c: request_body(model_of(c[0]), c[1] == "stream", prompt_bytes) for c in cases}
    for r in range(warmup + rounds):
        rng.shuffle(cases)
        for case in cases:
            try:
                sample, data, status = clients[case[0]].turn(bodies[case], case[1] == "stream")
                why = check(data, status, case[1] == "stream")
            except (OSError, http.client.HTTPException) as e:
                why = f"{type(e).__name__}: {e}"
            if r < warmup:
                continue
            if why is None:
                res.samples.setdefault(case, []).append(sample)
            else:
                res.failures.setdefault(case, []).append(why)
    return res


def run_concurrent(ports: dict[str, tuple[int | None, int | None]], upstream_port: int, n: int, rounds: int,
                   prompt_bytes: int, rng: random.Random) -> Results:
    """``n`` streams at once per setup and round, each on a new connection; setups shuffled."""
    res = Results()
    setups = [s for s in SETUPS if s != "direct" and (s in ONLY or not ONLY)]
    for _ in range(rounds):
        rng.shuffle(setups)
        for setup in setups:
            body = request_body(model_of(setup), True, prompt_bytes)
            start = threading.Barrier(n)
            out: list[tuple[Sample | None, str | None]] = [(None, None)] * n

            def one(i: int, setup: str = setup, body: bytes = body, start: threading.Barrier = start) -> None:
                c = Client(upstream_port, *ports[setup])
                start.wait()
                try:
                    sample, data, status = c.turn(body, True)
                    out[i] = (sample, check(data, status, True))
                except (OSError, http.client.HTTPException) as e:
                    out[i] = (None, f"{type(e).__name__}: {e}")
                finally:
                    c.conn.close()

            threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            for sample, why in out:
                if why is None and sample is not None:
                    res.samples.setdefault((setup, "stream"), []).append(sample)
                else:
                    res.failures.setdefault((setup, "stream"), []).append(why or "no reply")
    return res


def report_concurrent(res: Results, n: int) -> None:
    bare = [x.total for x in res.samples.get(("bare", "stream"), [])]
    print(f"{n} concurrent streams (ms): median, p95, p95 as a ratio to bare mitmdump's p95, streams lost")
    print(f"  {'setup':<{W}} {'n':>5} {'median':>8} {'p95':>8} {'p95 x bare':>11} {'lost':>5}")
    for setup in SETUPS[1:]:
        xs = [x.total for x in res.samples.get((setup, "stream"), [])]
        lost = len(res.failures.get((setup, "stream"), []))
        if not xs:
            print(f"  {setup:<{W}} {0:>5} {'-':>8} {'-':>8} {'-':>11} {lost:>5}")
            continue
        ratio = f"{p95(xs) / p95(bare):>11.2f}" if bare else f"{'-':>11}"
        print(f"  {setup:<{W}} {len(xs):>5} {statistics.median(xs) * 1e3:>8.2f} {p95(xs) * 1e3:>8.2f} {ratio} {lost:>5}")
    for setup, whys in sorted(res.failures.items()):
        print(f"  lost in {setup[0]}: {len(whys)} (first: {whys[0]})")
    print()


# ---------------------------------------------------------------- report


ONLY: set[str] = set()  # --only: run just these setups (to profile one setup's load)
W = 14  # width of the setup column (wider with --against)


p95 = harness.p95


def report(res: Results) -> None:
    for shape in SHAPES:
        metrics = [("turn", lambda x: x.total)] + ([("first byte", lambda x: x.first_byte)] if shape == "stream" else [])
        for label, get in metrics:
            bare = [get(x) for x in res.samples.get(("bare", shape), [])]
            print(f"{shape} turns, {label} (ms): median, p95; added over bare mitmdump (difference of medians, of p95s);"
                  f" ratio of medians to bare")
            print(f"  {'setup':<{W}} {'n':>5} {'median':>8} {'p95':>8} {'+median':>9} {'+p95':>9} {'x bare':>7}")
            for setup in SETUPS:
                xs = [get(x) for x in res.samples.get((setup, shape), [])]
                if not xs:
                    print(f"  {setup:<{W}} {0:>5} {'-':>8}")
                    continue
                med, hi = statistics.median(xs) * 1e3, p95(xs) * 1e3
                if bare:
                    bmed, bhi = statistics.median(bare) * 1e3, p95(bare) * 1e3
                    extra = f"{med - bmed:>+9.2f} {hi - bhi:>+9.2f} {med / bmed:>7.2f}"
                else:
                    extra = ""
                print(f"  {setup:<{W}} {len(xs):>5} {med:>8.2f} {hi:>8.2f} {extra}")
            if shape == "whole" and label == "turn":
                report_buffered(res)
            print()
    fails = sum(len(v) for v in res.failures.values())
    print(f"failed turns: {fails}")
    for (setup, shape), whys in sorted(res.failures.items()):
        print(f"  {setup} {shape}: {len(whys)} (first: {whys[0]})")


def report_buffered(res: Results) -> None:
    """Whole turns beside bare mitmdump with its defaults, which buffers the request as the addon
    must to route it (``bare`` streams it: ``stream_large_bodies=1``): the passed-through setups'
    medians as ratios to that one's."""
    base = [x.total for x in res.samples.get(("bare-buffered", "whole"), [])]
    if not base:
        return
    bmed = statistics.median(base)
    shown = [(s, statistics.median([x.total for x in xs])) for s in SETUPS
             if s.split("@", 1)[0] in ("pass-through", "base-url") and (xs := res.samples.get((s, "whole")))]
    if shown:
        print(f"  x bare-buffered ({bmed * 1e3:.2f} ms): " + ", ".join(f"{s} {m / bmed:.2f}" for s, m in shown))


def report_cpu(cpu: dict[str, tuple[float, list[str]]], res: Results) -> None:
    """CPU per turn of each proxy process (its setups' measured turns), as a ratio to bare mitmdump's."""
    per: dict[str, float] = {}
    for name, (secs, setups) in cpu.items():
        turns = sum(len(res.samples.get((s, sh), [])) + len(res.failures.get((s, sh), []))
                    for s in setups for sh in SHAPES if (s, sh) in res.samples or (s, sh) in res.failures)
        if turns and secs > 0:
            per[name] = secs / turns
    if not per:
        return
    bare = per.get("bare")
    print("\nproxy CPU per turn (user + system, whole and stream turns together, measured rounds):")
    for name, v in per.items():
        ratio = f"  x bare {v / bare:.2f}" if bare else ""
        print(f"  {name:<{W}} {v * 1e3:7.3f} ms  ({', '.join(cpu[name][1])}){ratio}")


def report_base_url(res: Results) -> None:
    """What a turn through the base-URL listener adds over bare reverse-mode mitmdump, beside
    what the proxy path adds over bare mitmdump (no route: pass-through both; medians, ms)."""
    print("\nbase URL vs proxy path (no route): median(base-url) - median(bare-reverse) beside "
          "median(pass-through) - median(bare)")
    for shape in SHAPES:
        med = {s: statistics.median([x.total for x in res.samples[(s, shape)]]) * 1e3
               for s in ("base-url", "bare-reverse", "pass-through", "bare") if res.samples.get((s, shape))}
        if len(med) < 4:
            print(f"  {shape}: not enough samples")
            continue
        print(f"  {shape:<6} base URL adds {med['base-url'] - med['bare-reverse']:+.2f} ms over bare reverse "
              f"({med['base-url']:.2f} vs {med['bare-reverse']:.2f}); proxy path adds "
              f"{med['pass-through'] - med['bare']:+.2f} ms over bare ({med['pass-through']:.2f} vs {med['bare']:.2f})")


def failed_attempts_ms(ledger: Path) -> dict[str, list[float]]:
    """Per shape, how long each failover turn's failed attempt took (turns.attempts, ms)."""
    import sqlite3

    out: dict[str, list[float]] = {"whole": [], "stream": []}
    try:
        con = sqlite3.connect(ledger)
        rows = con.execute("SELECT stream, attempts FROM turns WHERE attempts IS NOT NULL").fetchall()
        con.close()
    except sqlite3.Error as e:
        print(f"bench_proxy: cannot read the failover attempts: {e}")
        return out
    for stream, raw in rows:
        attempts = json.loads(raw)
        if len(attempts) > 1 and attempts[0].get("ms") is not None:
            out["stream" if stream else "whole"].append(attempts[0]["ms"])
    return out


def report_failover(res: Results, failed_ms: dict[str, list[float]]) -> None:
    """What failing over added beyond the failed attempt itself (medians, ms)."""
    if not res.samples.get(("failover", "whole")) and not res.samples.get(("failover", "stream")):
        return
    print("\nfailover: median(failover turn) - median(translated turn) - median(failed attempt, from the ledger)")
    for shape in SHAPES:
        fo = [x.total for x in res.samples.get(("failover", shape), [])]
        tr = [x.total for x in res.samples.get(("translated", shape), [])]
        att = failed_ms.get(shape) or []
        if not fo or not tr or not att:
            print(f"  {shape}: not enough samples")
            continue
        fmed, tmed, amed = statistics.median(fo) * 1e3, statistics.median(tr) * 1e3, statistics.median(att)
        print(f"  {shape:<6} failover {fmed:.2f} ms · translated {tmed:.2f} ms (x{fmed / tmed:.2f}) · failed attempt "
              f"{amed:.2f} ms (n={len(att)}) · added beyond it {fmed - tmed - amed:+.2f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog="Prints medians, p95s and ratios; "
                                 "everything it starts listens on 127.0.0.1 and is stopped at the end.")
    ap.add_argument("--rounds", type=int, default=200, help="measured rounds (default 200)")
    ap.add_argument("--warmup", type=int, default=10, help="rounds run first and not counted (default 10)")
    ap.add_argument("--events", type=int, default=60, help="text events per streamed reply (default 60)")
    ap.add_argument("--prompt-bytes", type=int, default=2000, help="size of the user message (default 2000)")
    ap.add_argument("--seed", type=int, default=None, help="shuffle seed (default: random, printed)")
    ap.add_argument("--concurrent", type=int, default=0, metavar="N",
                    help="also run N streams at once per setup (default 0: not run)")
    ap.add_argument("--concurrent-rounds", type=int, default=5, help="rounds of the concurrent phase (default 5)")
    ap.add_argument("--against", type=Path, default=None, metavar="OTHER_ADDON",
                    help="also run another tree's tokunseba (its addon/tokunseba_addon.py) in the same rounds")
    ap.add_argument("--against-label", default="other", help="suffix of its setups' names (default: other)")
    ap.add_argument("--against-set", action="append", default=[], metavar="OPTION=VALUE",
                    help="a mitmproxy option for the --against proxy only (repeatable): e.g. this tree as --against "
                         "with flow_detail=0, or tokunseba_console=off, to weigh what one part costs")
    ap.add_argument("--only", default="", metavar="SETUP,...",
                    help="run only these setups (e.g. retarget, to profile its load alone); default: all")
    ap.add_argument("--client", choices=CLIENTS, default="anthropic",
                    help="the client's protocol (default anthropic); chat: OpenAI Chat Completions, in the setups "
                         f"that need no route ({', '.join(CHAT_SETUPS)})")
    ap.add_argument("--serve-upstream", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rounds < 1 or args.warmup < 0 or args.events < 1 or args.prompt_bytes < 1:
        ap.error("--rounds, --events and --prompt-bytes must be at least 1, --warmup at least 0")
    if args.concurrent < 0 or args.concurrent_rounds < 1:
        ap.error("--concurrent must be at least 0 and --concurrent-rounds at least 1")
    if args.against is not None and not args.against.is_file():
        ap.error(f"--against: {args.against} is not a file (give another tree's addon/tokunseba_addon.py)")
    ONLY.update(x.strip() for x in args.only.split(",") if x.strip())
    CLIENT[0] = args.client
    if args.client == "chat":
        wrong = sorted(s for s in ONLY if s.split("@", 1)[0] not in CHAT_SETUPS)
        if wrong:
            ap.error(f"--client chat runs only {', '.join(CHAT_SETUPS)} (and pass-through@LABEL), not {', '.join(wrong)}")
        SETUPS[:] = [s for s in SETUPS if s in CHAT_SETUPS]
        ROUTED_NOW[:] = ["pass-through"]
    else:
        ROUTED_NOW[:] = list(ROUTED)
    if args.serve_upstream:
        serve_upstream(args.events)
        return
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    children: list[Child] = []
    with tempfile.TemporaryDirectory(prefix="tk-bench-proxy-") as tmp:
        work = Path(tmp)
        try:
            up = Child([sys.executable, __file__, "--serve-upstream", "--events", str(args.events)],
                       r"upstream listening at 127\.0\.0\.1:(\d+)")
            children.append(up)
            bare = mitmdump(work / "bare", "--set", "stream_large_bodies=1")
            children.append(bare)
            buffered = mitmdump(work / "bare-buffered")  # mitmproxy's defaults: nothing streamed
            children.append(buffered)
            bare_rev = Child([str(BIN / "mitmdump"), "--listen-host", "127.0.0.1", "--mode",
                              f"reverse:http://127.0.0.1:{up.port}@0", "--set", f"confdir={work / 'bare-rev' / 'conf'}",
                              "--set", "connection_strategy=lazy", "--set", "stream_large_bodies=1"],
                             r"reverse proxy to .* listening at .*:(\d+)")
            children.append(bare_rev)
            rules = work / "rules.yaml"
            rules.write_text(RULES.format(port=up.port))
            rev_port = free_port()  # mitmproxy takes one listener per port: port 0 only once
            provider = "openai" if args.client == "chat" else "anthropic"  # what the upstream's host speaks
            tk = mitmdump(work / "tokunseba", "-s", str(ADDON), "--set", f"tokunseba_rules={rules}",
                          "--set", f"tokunseba_ledger={work / 'ledger.db'}",
                          "--set", f"tokunseba_provider_hosts=127.0.0.1:{up.port}={provider}",
                          "--mode", "regular", "--mode", f"reverse:http://127.0.0.1:{up.port}@{rev_port}")
            children.append(tk)
            clients = {"direct": Client(up.port, None), "bare": Client(up.port, bare.port),
                       "bare-buffered": Client(up.port, buffered.port),
                       "bare-reverse": Client(up.port, None, bare_rev.port), "base-url": Client(up.port, None, rev_port)}
            ports: dict[str, tuple[int | None, int | None]] = {"bare": (bare.port, None),
                                                                "bare-buffered": (buffered.port, None),
                                                                "bare-reverse": (None, bare_rev.port),
                                                                "base-url": (None, rev_port)}
            for s in ROUTED_NOW:
                clients[s], ports[s] = Client(up.port, tk.port), (tk.port, None)
            if args.against is not None:
                global W
                other = mitmdump(work / "against", "-s", str(args.against.resolve()), "--set", f"tokunseba_rules={rules}",
                                 "--set", f"tokunseba_ledger={work / 'ledger-against.db'}",
                                 *[x for kv in args.against_set for x in ("--set", kv)],
                                 "--set", f"tokunseba_provider_hosts=127.0.0.1:{up.port}={provider}")
                children.append(other)
                for s in [s for s in ROUTED_NOW if s != "failover"]:  # no failover there
                    name = f"{s}@{args.against_label}"
                    SETUPS.append(name)
                    clients[name], ports[name] = Client(up.port, other.port), (other.port, None)
                W = max(W, max(len(s) for s in SETUPS))
            print(f"bench_proxy: {args.rounds} rounds (+{args.warmup} warm-up) of {len(SETUPS) * len(SHAPES)} turns,"
                  f" shuffled each round (seed {seed}); {args.events} events per stream;"
                  f" {args.prompt_bytes}-byte prompt; {args.client} client; cpus={os.cpu_count()}")
            rng = random.Random(seed)
            serving = {"bare": (bare, ["bare"]), "bare-buffered": (buffered, ["bare-buffered"]),
                       "bare-reverse": (bare_rev, ["bare-reverse"]),
                       "tokunseba": (tk, [*ROUTED_NOW, "base-url"])}
            if args.against is not None:
                serving[f"tokunseba@{args.against_label}"] = (other, [s for s in SETUPS if "@" in s])
            run(clients, 0, args.warmup, args.prompt_bytes, rng)  # warm-up, not counted
            settle([ch.proc.pid for ch, _ in serving.values()])  # start-up's background work (the price library) done
            cpu0 = {name: cpu_seconds(ch.proc.pid) for name, (ch, _) in serving.items()}
            res = run(clients, args.rounds, 0, args.prompt_bytes, rng)
            cpu = {name: (cpu_seconds(ch.proc.pid) - cpu0[name], [s for s in setups if s in ONLY or not ONLY])
                   for name, (ch, setups) in serving.items()}
            conc = None
            if args.concurrent:
                conc = run_concurrent(ports, up.port, args.concurrent, args.concurrent_rounds, args.prompt_bytes, rng)
        finally:
            for c in reversed(children):
                c.stop()
        failed_ms = failed_attempts_ms(work / "ledger.db")
    report(res)
    report_cpu(cpu, res)
    report_failover(res, failed_ms)
    report_base_url(res)
    if conc is not None:
        print()
        report_concurrent(conc, args.concurrent)


if __name__ == "__main__":
    main()
