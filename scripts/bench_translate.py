#!/usr/bin/env python3
"""Benchmark: translation cost next to the JSON floor, measured side by side in one run.

Request: the Claude Code main turn (fixtures/claude-code-print-main-turn.json, 48.5 KB) through
the whole request path (parse bytes -> translate.request -> serialise bytes), next to one
json.loads + json.dumps of the same bytes (stdlib) and one orjson loads + dumps.
Stream: a 2,000-event Chat stream translated to Anthropic SSE, fed one event per feed() call,
per-event cost next to json.loads + json.dumps (and orjson) of each event's data.

Timings are the minimum over repeats (timeit style). Not a test: it prints, it asserts nothing.
Usage: .venv/bin/python scripts/bench_translate.py [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import sys
import timeit
from pathlib import Path

import orjson

from tokunseba import jsonc
from tokunseba import translate
from tokunseba.translate import parse_body

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = "claude-code-print-main-turn.json"


def fixture_bytes() -> bytes:
    for base in (ROOT.parent / "shared" / "fixtures", Path("/work/shared/fixtures")):
        if (base / FIXTURE).exists():
            return jsonc.dumpb(json.loads((base / FIXTURE).read_text())["body"])
    sys.exit(f"bench_translate: fixture {FIXTURE} not found")


def best(fn, repeat: int) -> float:
    """Seconds per call: min over ``repeat`` runs of an auto-ranged loop."""
    timer = timeit.Timer(fn)
    number, _ = timer.autorange()
    return min(timer.repeat(repeat=repeat, number=number)) / number


def bench_request(repeat: int) -> list[tuple[str, float]]:
    raw = fixture_bytes()
    body = parse_body(raw)
    chat_body = translate.request("anthropic", "openai", body).body

    def a2c(b: dict) -> dict:
        return translate.request("anthropic", "openai", b, max_tokens=4096).body

    def full_path() -> bytes:
        return jsonc.dumpb(a2c(parse_body(raw)))

    def reverse_path() -> bytes:
        return jsonc.dumpb(translate.request("openai", "anthropic", chat_body).body)

    def a2r_path() -> bytes:
        return jsonc.dumpb(translate.request("anthropic", "openai-responses", parse_body(raw), max_tokens=4096).body)

    resp_body = translate.request("anthropic", "openai-responses", body).body

    def r2a_path() -> bytes:
        return jsonc.dumpb(translate.request("openai-responses", "anthropic", resp_body).body)

    print(f"request: {FIXTURE}, {len(raw):,} bytes (json codec in the core: {jsonc.CODEC})")
    return [
        ("floor: json.loads + json.dumps (stdlib)", best(lambda: json.dumps(json.loads(raw)), repeat)),
        ("floor: orjson.loads + orjson.dumps", best(lambda: orjson.dumps(orjson.loads(raw)), repeat)),
        ("anthropic_to_chat only (dict -> dict)", best(lambda: a2c(body), repeat)),
        ("A->Chat request path: bytes -> bytes", best(full_path, repeat)),
        ("Chat->A (translated body) dict -> bytes", best(reverse_path, repeat)),
        ("A->Responses request path: bytes -> bytes", best(a2r_path, repeat)),
        ("Responses->A (translated body) dict -> bytes", best(r2a_path, repeat)),
    ]


def chat_stream_events(n: int = 2000) -> list[bytes]:
    """A Chat stream of ``n`` SSE events: role chunk, text, one tool call in fragments,
    finish chunk, usage chunk and [DONE] (shape of protocols.md B.5)."""
    head = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1767225600, "model": "gpt-bench"}

    def chunk(delta: dict, finish: str | None = None) -> dict:
        return head | {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}], "usage": None}

    body = [chunk({"role": "assistant", "content": ""})]
    n_text = (n - 5) // 2
    n_args = n - 5 - n_text
    body += [chunk({"content": f"word{i} "}) for i in range(n_text)]
    body.append(chunk({"tool_calls": [{"index": 0, "id": "call_bench", "type": "function", "function": {"name": "Bash", "arguments": ""}}]}))
    body += [chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"command": "ls' if i == 0 else (' -l"}' if i == n_args - 1 else " -l")}}]})
             for i in range(n_args)]
    body.append(chunk({}, "tool_calls"))
    body.append(head | {"choices": [], "usage": {"prompt_tokens": 2610, "completion_tokens": 58, "total_tokens": 2668,
                                                   "prompt_tokens_details": {"cached_tokens": 2048}}})
    events = [b"data: " + jsonc.dumpb(c) + b"\n\n" for c in body] + [b"data: [DONE]\n\n"]
    assert len(events) == n, len(events)
    return events


def bench_stream(repeat: int) -> list[tuple[str, float]]:
    events = chat_stream_events()
    payloads = [e[6:-2] for e in events if e != b"data: [DONE]\n\n"]
    n = len(events)

    def translated() -> None:
        t = translate.stream("openai", "anthropic")
        out = [t.feed(e) for e in events]
        out.append(t.close())

    def floor_stdlib() -> None:
        for p in payloads:
            json.dumps(json.loads(p))

    def floor_orjson() -> None:
        for p in payloads:
            orjson.dumps(orjson.loads(p))

    t = translate.stream("openai", "anthropic")
    out = b"".join([t.feed(e) for e in events] + [t.close()])
    print(f"stream: {n:,} Chat events ({sum(map(len, events)):,} bytes) -> {out.count(b'event: '):,} Anthropic events "
          f"({len(out):,} bytes), one feed() per event; figures per input event")
    # the same reply as a Responses upstream streams it (the Chat stream translated for a
    # Responses client), for the new pairs
    r = translate.stream("openai", "openai-responses", created=1767225600)
    resp = b"".join([r.feed(e) for e in events] + [r.close()])
    resp_events = [e + b"\n\n" for e in resp.split(b"\n\n") if e]

    def per_event(upstream: str, client: str, evs: list[bytes]):
        def run() -> None:
            t = translate.stream(upstream, client)
            for e in evs:
                t.feed(e)
            t.close()
        return run

    return [
        ("floor: json.loads + json.dumps (stdlib)", best(floor_stdlib, repeat) / n),
        ("floor: orjson.loads + orjson.dumps", best(floor_orjson, repeat) / n),
        ("Chat -> Anthropic stream translation", best(translated, repeat) / n),
        ("Chat -> Responses stream translation", best(per_event("openai", "openai-responses", events), repeat) / n),
        (f"Responses -> Anthropic ({len(resp_events):,} events)",
         best(per_event("openai-responses", "anthropic", resp_events), repeat) / len(resp_events)),
    ]


def table(rows: list[tuple[str, float]]) -> None:
    stdlib, orj = rows[0][1], rows[1][1]
    print(f"  {'case':<42} {'µs':>9} {'x stdlib':>9} {'x orjson':>9}")
    for name, sec in rows:
        print(f"  {name:<42} {sec * 1e6:>9.1f} {sec / stdlib:>9.2f} {sec / orj:>9.2f}")
    print()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7, help="timeit repeats; the minimum is reported (default 7)")
    args = ap.parse_args()
    table(bench_request(args.repeat))
    table(bench_stream(args.repeat))


if __name__ == "__main__":
    main()
