#!/usr/bin/env python3
"""Benchmark: the addon's own work per turn on mitmproxy's event loop, hook by hook.

Drives the real ``Tokunseba`` addon (and ``DisplayRedaction``) through mitmproxy's test
context, on real ``HTTPFlow`` objects, with a real ledger (its writer thread) and a loopback
TCP server standing in for the endpoints (the relay's pool keeps its connections). Per turn
it times, in microseconds:

  request    the request hook, until it returns (mitmproxy sends the request on then)
  reply      responseheaders + response + DisplayRedaction.response on a whole JSON reply

for three turns: pass-through (no route matches), retarget (same protocol, model rewritten)
and translated (Anthropic -> Chat). By default nothing listens to the log (the ``tokunseba``
logger's INFO lines, the console line among them, are not emitted); with ``--termlog`` each
child logs as mitmdump does (the root logger at DEBUG, mitmproxy's own terminal handler at
INFO, writing to /dev/null, or to $BENCH_HOOKS_LOG), so the console line is built, redacted,
formatted and written per turn.
Each tree runs in its own child process (this checkout,
and with ``--against OTHER_ROOT`` another checkout's ``addon/``); the parent asks them in
turn, in a shuffled order each round, for a batch of turns, so noise from the machine's other
tenants falls on both alike. It prints medians and p95s per (tree, turn, hook) and, with
``--against``, each median as a ratio to the other tree's.

Not a test: it prints, it asserts nothing. The wire (sockets, mitmproxy's own work) is
``bench_proxy.py``'s business.
Usage: .venv/bin/python scripts/bench/bench_hooks.py [--rounds N] [--batch N] [--seed S] [--termlog] [--prompt-bytes N]
                                              [--against OTHER_ROOT [--against-label LABEL]]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

import harness  # scripts/bench/harness.py: the timing harness the benchmarks share

ROOT = Path(__file__).resolve().parent.parent.parent
KINDS = {"pass-through": "opus-bench", "retarget": "retarget-bench", "translated": "claude-bench"}
HOOKS = ("request", "reply")
RULES = """\
endpoints:
  oai:
    protocol: openai
    url: http://127.0.0.1:{port}/v1
    key_env: TK_BENCH_EP_KEY
    count_tokens: none  # the bench sends no counts
  ant:
    protocol: anthropic
    url: http://127.0.0.1:{port}/v1
    key_env: TK_BENCH_EP_KEY
routes:
  - name: retarget
    when: {{client: anthropic, model: "retarget-*"}}
    to: ant
    model: other-model
  - name: easy-turns
    when: {{client: anthropic, model: "claude-*"}}
    to: oai
"""
ANTHROPIC_REPLY = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
                   "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn", "stop_sequence": None,
                   "usage": {"input_tokens": 3, "output_tokens": 2}}
CHAT_REPLY = {"id": "c", "object": "chat.completion", "created": 1, "model": "m",
              "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
              "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}


# ---------------------------------------------------------------- the child: one tree


def child(tree: Path, termlog: bool = False, prompt_bytes: int = 2000) -> None:
    """Serve batches: read ``N`` lines from stdin, answer each with one JSON line of samples."""
    sys.path.insert(0, str(tree / "addon"))
    import asyncio
    import logging
    import time

    if termlog:  # as mitmdump logs (mitmproxy/tools/main.py, addons/termlog.py), into /dev/null
        from mitmproxy.addons.termlog import TermLogHandler

        logging.getLogger().setLevel(logging.DEBUG)
        console = open(os.environ.get("BENCH_HOOKS_LOG", os.devnull), "w")
        handler = TermLogHandler(console)
        handler.setLevel(logging.INFO)
        handler.install()

    from mitmproxy import http
    from mitmproxy.addons.proxyserver import Proxyserver
    from mitmproxy.test import taddons, tflow, tutils

    try:
        from tokunseba.proxy.mitm import DisplayRedaction, Tokunseba
    except ModuleNotFoundError:  # a tree from before the packages (issue 23)
        from tokunseba.mitm import DisplayRedaction, Tokunseba  # type: ignore[no-redef]

    def flow(model: str) -> http.HTTPFlow:
        body = json.dumps({"model": model, "max_tokens": 50, "metadata": {"user_id": "u-1"},
                           "messages": [{"role": "user", "content": "Summarise: " + "word " * (prompt_bytes // 5)}]}).encode()
        headers = http.Headers([(k.encode(), v.encode()) for k, v in (
            ("host", "api.anthropic.com"), ("x-api-key", "sk-ant-bench-0001"), ("anthropic-version", "2023-06-01"),
            ("content-type", "application/json"), ("content-length", str(len(body))),
            ("user-agent", "Anthropic/Python 0.40.0"), ("accept", "application/json"))])
        req = tutils.treq(scheme=b"https", host="api.anthropic.com", port=443, method=b"POST", path=b"/v1/messages",
                          headers=headers, content=body)
        return tflow.tflow(req=req)

    async def main() -> None:
        os.environ["TK_BENCH_EP_KEY"] = "sk-bench-endpoint-0002"
        held = []  # the endpoint's side of the relay's connections, kept open
        server = await asyncio.start_server(lambda r, w: held.append(w), "127.0.0.1", 0)
        work = Path(tempfile.mkdtemp(prefix="bench_hooks_"))
        (work / "rules.yaml").write_text(RULES.format(port=server.sockets[0].getsockname()[1]))
        addon = Tokunseba()
        shown = DisplayRedaction(addon)
        with taddons.context(Proxyserver(), addon) as tctx:
            tctx.configure(addon, tokunseba_rules=str(work / "rules.yaml"), tokunseba_ledger=str(work / "ledger.db"))
            await addon.running()
            if getattr(addon, "reach", None) is not None:
                # the healthy path: the provider host answered a turn lately (proxy/provider_reach.py),
                # so a pass-through turn is not held for a connect to it (none answers here)
                addon.reach.answered("api.anthropic.com", 443)
            for line in sys.stdin:
                n = int(line)
                out: dict[str, dict[str, list[float]]] = {k: {h: [] for h in HOOKS} for k in KINDS}
                for kind, model in KINDS.items():
                    for _ in range(n):
                        f = flow(model)
                        t0 = time.perf_counter()
                        await addon.request(f)
                        t1 = time.perf_counter()
                        await asyncio.sleep(0)
                        f.response = tutils.tresp(status_code=200, content=None,
                                                  headers=http.Headers(content_type="application/json"))
                        reply = json.dumps(CHAT_REPLY if kind == "translated" else ANTHROPIC_REPLY).encode()
                        t2 = time.perf_counter()
                        addon.responseheaders(f)
                        f.response.content = reply  # as mitmproxy buffers it between the two hooks (not timed)
                        t3 = time.perf_counter()
                        addon.response(f)
                        shown.response(f)
                        t4 = time.perf_counter()
                        f.live = False  # mitmproxy wrote the reply: the completion is recorded
                        for _ in range(3):  # run what the hooks scheduled (the ledger's records)
                            await asyncio.sleep(0)
                        out[kind]["request"].append((t1 - t0) * 1e6)
                        out[kind]["reply"].append((t3 - t2 + t4 - t3) * 1e6)
                addon.ledger.flush(10)
                print(json.dumps(out), flush=True)
            addon.done()
        server.close()

    asyncio.run(main())
    if termlog:  # closed here: the proxy froze its start-up objects out of the collector (proxy/mitm.py
        console.close()  # settle_process), so the file's buffer would not be flushed at exit


# ---------------------------------------------------------------- the parent


pct, median = harness.pct, harness.median


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="Everything it starts listens on 127.0.0.1 and is stopped at the end.")
    ap.add_argument("--rounds", type=int, default=20, help="rounds (default 20); each asks every tree for a batch")
    ap.add_argument("--batch", type=int, default=50, help="turns of each kind per tree and round (default 50)")
    ap.add_argument("--warmup", type=int, default=1, help="rounds run first and not counted (default 1)")
    ap.add_argument("--seed", type=int, default=None, help="shuffle seed (default: random, printed)")
    ap.add_argument("--against", type=Path, help="another checkout's root (its addon/ is measured too)")
    ap.add_argument("--against-label", default="other", help="its name in the table (default: other)")
    ap.add_argument("--termlog", action="store_true",
                    help="log as mitmdump does (root at DEBUG, its terminal handler at INFO into /dev/null): "
                         "the console line is emitted per turn")
    ap.add_argument("--prompt-bytes", type=int, default=2000,
                    help="about how many bytes of prompt text each request carries (default 2000; "
                         "48000 is the size of Claude Code's main turn, where per-byte work shows)")
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        child(args.child, args.termlog, args.prompt_bytes)
        return 0
    if args.rounds < 1 or args.batch < 1 or args.warmup < 0 or args.prompt_bytes < 0:
        ap.error("--rounds and --batch must be 1 or more, --warmup and --prompt-bytes 0 or more")
    if args.against is not None and not any((args.against / "addon" / "tokunseba" / p).is_file()
                                            for p in ("proxy/mitm.py", "mitm.py")):
        ap.error(f"--against {args.against}: no addon/tokunseba/proxy/mitm.py (or mitm.py, a tree from before "
                 "the packages) there")
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    trees = {"this": ROOT}
    if args.against is not None:
        trees[args.against_label] = args.against.resolve()
    procs = {name: subprocess.Popen([sys.executable, __file__, "--child", str(path)]
                                    + (["--termlog"] if args.termlog else [])
                                    + ["--prompt-bytes", str(args.prompt_bytes)], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, text=True, cwd=str(path))
             for name, path in trees.items()}
    samples = {name: {k: {h: [] for h in HOOKS} for k in KINDS} for name in trees}
    try:
        order = list(trees)
        for r in range(args.warmup + args.rounds):
            rng.shuffle(order)
            for name in order:
                p = procs[name]
                try:
                    p.stdin.write(f"{args.batch}\n")
                    p.stdin.flush()
                    line = p.stdout.readline()
                except BrokenPipeError:  # it died before it was asked
                    line = ""
                if not line:
                    print(f"bench_hooks: the {name} tree's child died", file=sys.stderr)
                    return 1
                if r < args.warmup:
                    continue
                for kind, hooks in json.loads(line).items():
                    for hook, values in hooks.items():
                        samples[name][kind][hook] += values
    finally:
        for p in procs.values():
            try:
                p.stdin.close()
            except BrokenPipeError:
                pass
        for p in procs.values():
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
    print(f"bench_hooks: {args.rounds} rounds (+{args.warmup} warm-up) of {args.batch} turns per kind and tree, "
          f"trees in a shuffled order each round (seed {seed}); microseconds per turn"
          + ("; logging as mitmdump (--termlog)" if args.termlog else "")
          + f"; about {args.prompt_bytes} bytes of prompt per request")
    other = args.against_label if args.against is not None else None
    head = f"  {'tree':<12} {'turn':<13} {'hook':<8} {'n':>6} {'median':>8} {'p95':>8}"
    print(head + (f" {'x ' + other:>10}" if other else ""))
    for kind in KINDS:
        for hook in HOOKS:
            for name in trees:
                v = samples[name][kind][hook]
                row = f"  {name:<12} {kind:<13} {hook:<8} {len(v):>6} {median(v):>8.1f} {pct(v, 95):>8.1f}"
                if other:
                    row += f" {median(v) / median(samples[other][kind][hook]):>10.2f}"
                print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
