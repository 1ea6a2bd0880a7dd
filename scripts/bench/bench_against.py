#!/usr/bin/env python3
"""Benchmark this tree's translators against another checkout's, interleaved in one run.

Each round runs one subprocess per tree (which one goes first alternates) measuring, in CPU time
(``time.process_time``, so a loaded machine disturbs it less), the Claude Code main turn's
request path (bytes -> Chat request bytes) and a 2,000-event Chat stream translated to
Anthropic, each as a ratio to orjson loads + dumps of the same data, and whole replies: every
(upstream, client) pair of the four protocols, for two replies each (this tree's
bench_translate.py replies: 'hi', and 640 characters of text with a tool call, each in its
upstream API's own shape), translate.reply bytes -> bytes as a ratio to the stdlib's
json.loads + json.dumps of the upstream's reply. Inside a round, each ratio is the median of
``--samples`` pairs (variant sample, floor sample, back to back, order alternating), so a
moment when the shared machine gets busier moves both sides of a pair together. Prints every
round (its 'reply x json' column: the Chat reply 'hi' for an Anthropic client; 'worst reply':
the highest whole-reply ratio of the round), the median per tree, and then every pair's median
whole-reply ratio for both trees. Works with trees from before the codec registry
(make_stream_translator / anthropic_to_chat) and after (translate.stream / translate.request).

Usage: .venv/bin/python scripts/bench/bench_against.py OTHER_ADDON_DIR [--rounds N] [--samples N] [--whole-only]
                                                [--pair UPSTREAM:CLIENT ...]
e.g.   git archive main | tar -x -C /tmp/main && .venv/bin/python scripts/bench/bench_against.py /tmp/main/addon
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent.parent / "addon"
BENCH = Path(__file__).resolve().parent  # scripts/bench: this tree's bench_translate and harness

MEASURE = r'''
import statistics, sys, time, timeit
SAMPLES = int(sys.argv[2])
sys.path.insert(0, sys.argv[1])
import orjson
from tokunseba import jsonc, translate
sys.path.insert(0, sys.argv[1] + "/../scripts")  # a checkout from before scripts/bench/
sys.path.insert(0, sys.argv[1] + "/../scripts/bench")
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
def paired(fn, floor, nf, nb):
    """Median over samples of (fn / floor), each pair measured back to back (order alternating),
    so a busy moment of the machine moves both sides of a ratio together."""
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
def ratio(fn, floor):
    return paired(fn, floor, timeit.Timer(fn, timer=time.process_time).autorange()[0],
                  timeit.Timer(floor, timer=time.process_time).autorange()[0])
# whole replies: every (upstream, client) pair, each next to the stdlib json floor (json.loads +
# json.dumps of the upstream reply's bytes); the replies come from this tree's bench_translate
# (a file written by the parent), so both trees translate the same bytes. A sample is ~SAMPLE_S
# of calls (calibrated once per variant), not autorange's 0.2 s: 24 pairs stay affordable.
import json, pickle
WHOLE_ONLY = sys.argv[4] == "1"
replies = pickle.load(open(sys.argv[3], "rb"))  # [(size, upstream, client, bytes)]
SAMPLE_S = 0.02
def calibrated(fn):
    n = 1
    while True:
        t0 = time.process_time()
        for _ in range(n):
            fn()
        took = time.process_time() - t0
        if took >= SAMPLE_S / 4:
            return max(1, round(n * SAMPLE_S / max(took, 1e-9)))
        n *= 4
def short_ratio(fn, floor):
    return paired(fn, floor, calibrated(fn), calibrated(floor))
whole = []
for size, up, cl, body in replies:
    if callable(getattr(translate, "reply", None)):
        translate.reply(up, cl, body, created=1767225600)  # warm: a codec imported on first use is not timed
        whole.append(short_ratio(lambda: translate.reply(up, cl, body, created=1767225600),
                                 lambda: json.dumps(json.loads(body))))
    else:
        whole.append(float("nan"))
if not WHOLE_ONLY:
    req(), stream()  # warm: a codec imported on first use is not timed
first = ("nan", "nan") if WHOLE_ONLY else (ratio(req, floor_req), ratio(stream, floor_stream))
print(*first, *whole)
'''


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("other", type=Path, help="the other checkout's addon/ directory")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    ap.add_argument("--samples", type=int, default=9,
                    help="samples per ratio inside a round, each next to a floor sample (default 9)")
    ap.add_argument("--whole-only", action="store_true",
                    help="measure only the whole-reply pairs (request and stream print nan)")
    ap.add_argument("--pair", action="append", metavar="UPSTREAM:CLIENT",
                    help="whole replies of this pair only (repeatable), e.g. gemini:openai-responses")
    args = ap.parse_args()
    if args.rounds < 1 or args.samples < 1:
        ap.error("--rounds and --samples must be at least 1")
    if not (args.other / "tokunseba" / "translate").is_dir():
        ap.error(f"{args.other} is no addon/ directory (no tokunseba/translate inside)")
    trees = {"this tree": HERE, "other": args.other.resolve()}
    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(BENCH))
    import bench_translate as B  # this tree's replies, for both trees

    raw = B.whole_reply_bytes()
    pairs = [(size, up, cl) for size in B.SIZES for up, cl in B.whole_pairs()
             if not args.pair or f"{up}:{cl}" in args.pair]
    if not pairs:
        ap.error(f"--pair: no such pair; pairs are UPSTREAM:CLIENT of {', '.join(B.UPSTREAM_REPLIES)}")
    # the first table's reply column: the Chat reply 'hi' for an Anthropic client (else the first pair)
    first = pairs.index(("small", "openai", "anthropic")) if ("small", "openai", "anthropic") in pairs else 0
    got: dict[str, list[list[float]]] = {k: [] for k in trees}
    with tempfile.TemporaryDirectory() as tmp:
        replies = Path(tmp) / "replies.pickle"
        replies.write_bytes(pickle.dumps([(size, up, cl, raw[(size, up)]) for size, up, cl in pairs]))
        print(f"{'round':<6} {'tree':<10} {'request x orjson':>17} {'stream x orjson':>16} {'reply x json':>13} "
              f"{'worst reply':>12}")
        for r in range(args.rounds):
            order = list(trees.items())
            for name, path in order if r % 2 == 0 else order[::-1]:  # who goes first alternates
                out = subprocess.run([sys.executable, "-c", MEASURE, str(path), str(args.samples), str(replies),
                                      "1" if args.whole_only else "0"], capture_output=True, text=True, check=True)
                row = [float(x) for x in out.stdout.split()]
                got[name].append(row)
                print(f"{r + 1:<6} {name:<10} {row[0]:>17.2f} {row[1]:>16.2f} {row[2 + first]:>13.2f} "
                      f"{max(row[2:]):>12.2f}")
    med = {name: [statistics.median(col) for col in zip(*rows)] for name, rows in got.items()}
    for name, m in med.items():
        print(f"median {name:<10} {m[0]:>10.2f} {m[1]:>16.2f} {m[2 + first]:>13.2f} {max(m[2:]):>12.2f}")
    print(f"\nwhole reply x json (json.loads + json.dumps of the upstream's reply), median of {args.rounds} rounds:")
    print(f"  {'upstream -> client':<26} {'reply':<6} {'this tree':>10} {'other':>8} {'this/other':>11}")
    for i, (size, up, cl) in enumerate(pairs):
        this, other = med["this tree"][2 + i], med["other"][2 + i]
        print(f"  {B.LABEL[up] + ' -> ' + B.LABEL[cl]:<26} {size:<6} {this:>10.2f} {other:>8.2f} {this / other:>11.2f}")


if __name__ == "__main__":
    main()
