#!/usr/bin/env python3
"""Benchmark this tree's translators against another checkout's, interleaved in one run.

Each round runs one subprocess per tree (which one goes first alternates) measuring, in CPU time
(``time.process_time``, so a loaded machine disturbs it less), the Claude Code main turn's
request path (bytes -> Chat request bytes) and a 2,000-event Chat stream translated to
Anthropic, each as a ratio to orjson loads + dumps of the same data, and a whole Chat reply
(the proxy benchmarks' 2-token reply) translated for an Anthropic client (translate.reply,
bytes -> bytes) as a ratio to the stdlib's json.loads + json.dumps of it: inside a round, each
ratio is the median of ``--samples`` pairs (variant sample, floor sample, back to back, order
alternating), so a moment when the shared machine gets busier moves both sides of a pair
together. Prints every round and the median per tree. Works with trees from before the codec
registry (make_stream_translator / anthropic_to_chat) and after (translate.stream /
translate.request).

Usage: .venv/bin/python scripts/bench_against.py OTHER_ADDON_DIR [--rounds N] [--samples N]
e.g.   git archive main | tar -x -C /tmp/main && .venv/bin/python scripts/bench_against.py /tmp/main/addon
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent / "addon"

MEASURE = r'''
import statistics, sys, time, timeit
SAMPLES = int(sys.argv[2])
sys.path.insert(0, sys.argv[1])
import orjson
from tokunseba import jsonc, translate
sys.path.insert(0, sys.argv[1] + "/../scripts")
import bench_translate as B
events, raw = B.chat_stream_events(), B.fixture_bytes()
if callable(getattr(translate, "stream", None)):
    mk = translate.stream
    req = lambda: jsonc.dumpb(translate.request("anthropic", "openai", translate.parse_body(raw), max_tokens=4096).body)
else:
    from tokunseba.translate.stream import make_stream_translator as mk
    from tokunseba.translate.request import anthropic_to_chat, parse_body
    req = lambda: jsonc.dumpb(anthropic_to_chat(parse_body(raw), max_tokens_cap=4096).body)
def stream():
    t = mk("openai", "anthropic")
    for e in events:
        t.feed(e)
    t.close()
payloads = [e[6:-2] for e in events if e != b"data: [DONE]\n\n"]
def floor_stream():
    for p in payloads:
        orjson.dumps(orjson.loads(p))
floor_req = lambda: orjson.dumps(orjson.loads(raw))
def sample(fn, n):
    t0 = time.process_time()
    for _ in range(n):
        fn()
    return (time.process_time() - t0) / n
def ratio(fn, floor):
    """Median over samples of (fn / floor), each pair measured back to back (order alternating),
    so a busy moment of the machine moves both sides of a ratio together."""
    nf, _ = timeit.Timer(fn, timer=time.process_time).autorange()
    nb, _ = timeit.Timer(floor, timer=time.process_time).autorange()
    rs = []
    for i in range(SAMPLES):
        if i % 2:
            b = sample(floor, nb)
            a = sample(fn, nf)
        else:
            a = sample(fn, nf)
            b = sample(floor, nb)
        rs.append(a / b)
    return statistics.median(rs)
# a whole Chat reply (bench_translate.chat_reply(): the proxy benchmarks' 2-token reply) to an
# Anthropic client, next to the stdlib json floor (json.loads + json.dumps of the reply's bytes)
import json
reply_raw = json.dumps({"id": "chatcmpl-bench", "object": "chat.completion", "created": 1767225600, "model": "gpt-bench",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "logprobs": None, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 2610, "completion_tokens": 58, "total_tokens": 2668}}, separators=(",", ":")).encode()
if callable(getattr(translate, "reply", None)):
    whole = lambda: translate.reply("openai", "anthropic", reply_raw, created=1767225600)
    print(ratio(req, floor_req), ratio(stream, floor_stream), ratio(whole, lambda: json.dumps(json.loads(reply_raw))))
else:
    print(ratio(req, floor_req), ratio(stream, floor_stream), "nan")
'''


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("other", type=Path, help="the other checkout's addon/ directory")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    ap.add_argument("--samples", type=int, default=9,
                    help="samples per ratio inside a round, each next to a floor sample (default 9)")
    args = ap.parse_args()
    if args.rounds < 1 or args.samples < 1:
        ap.error("--rounds and --samples must be at least 1")
    if not (args.other / "tokunseba" / "translate").is_dir():
        ap.error(f"{args.other} is no addon/ directory (no tokunseba/translate inside)")
    trees = {"this tree": HERE, "other": args.other.resolve()}
    got: dict[str, list[tuple[float, float, float]]] = {k: [] for k in trees}
    print(f"{'round':<6} {'tree':<10} {'request x orjson':>17} {'stream x orjson':>16} {'reply x json':>13}")
    for r in range(args.rounds):
        order = list(trees.items())
        for name, path in order if r % 2 == 0 else order[::-1]:  # who goes first alternates
            out = subprocess.run([sys.executable, "-c", MEASURE, str(path), str(args.samples)],
                                 capture_output=True, text=True, check=True)
            req, stream, whole = map(float, out.stdout.split())
            got[name].append((req, stream, whole))
            print(f"{r + 1:<6} {name:<10} {req:>17.2f} {stream:>16.2f} {whole:>13.2f}")
    for name, rows in got.items():
        print(f"median {name:<10} {statistics.median(x for x, _, _ in rows):>10.2f} "
              f"{statistics.median(y for _, y, _ in rows):>16.2f} {statistics.median(z for _, _, z in rows):>13.2f}")


if __name__ == "__main__":
    main()
