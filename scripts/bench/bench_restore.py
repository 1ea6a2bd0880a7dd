#!/usr/bin/env python3
"""Benchmark: what restoring provider state costs a translated request (issue 18), measured
side by side in one run.

The request is a Claude Code-style tool loop of 40 messages (a user turn, then 19 rounds of
an assistant tool_use + its tool_result, then the last tool_result), translated Anthropic ->
Chat for a DeepSeek-style endpoint, the way a routed turn is (turn.translate_for_endpoint):

- "no store": today's path, nothing restored (tokunseba_reasoning_store=off);
- "restore, memory": the store's cache holds the 19 calls' reasoning (the running proxy);
- "restore, SQLite": the cache emptied before each call, so every key is read from the file
  (a restarted proxy's first turn of a loop);
- "restore, none stored": the 19 keys looked up, none known (a loop of an endpoint that keeps
  no state);
- "restore, other origin": all 19 known but made by another endpoint: withheld.

Capture: a 400-event DeepSeek stream (reasoning, then a tool call) translated to an Anthropic
client, with and without the capture tap (kept at its stop, memory store).

The variants of each table are interleaved: every round runs each once (a sample calibrated to
about --sample-ms), in a fresh shuffled order; each reports its median over the rounds and the
median of its per-round difference and ratio against the baseline of the same round.
Not a test: it prints, it asserts nothing. Target (issue 18): restore adds <= 0.3 ms per request.
Usage: .venv/bin/python scripts/bench/bench_restore.py [--rounds N] [--sample-ms MS] [--seed S]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import harness  # scripts/bench/harness.py: the timing harness the benchmarks share

from tokunseba import jsonc, translate
from tokunseba.reasoning.state import Capture, Record, call_key
from tokunseba.reasoning.store import Keeper, ReasoningStore

CALLS = 19
TARGET_MS = 0.3


def loop_body() -> dict:
    msgs: list[dict] = [{"role": "user", "content": "fix the failing test in tests/test_app.py, then run the suite"}]
    for i in range(CALLS):
        msgs.append({"role": "assistant", "content": [
            {"type": "text", "text": f"Step {i}: I will look at the next file."},
            {"type": "tool_use", "id": f"call_ds{i:04d}", "name": "Bash", "input": {"command": f"sed -n 1,80p f{i}.py"}}]})
        msgs.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"call_ds{i:04d}", "content": "x = 1\n" * 40}]})
    assert len(msgs) == 39
    msgs.append({"role": "user", "content": "and the last one"})  # 40 messages
    return {"model": "claude-sonnet-4-5", "max_tokens": 8000, "stream": True, "messages": msgs,
            "tools": [{"name": "Bash", "description": "run a command", "input_schema": {
                "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}]}


def records(endpoint: str) -> list[tuple[str, Record]]:
    now = time.time()
    return [(call_key(f"call_ds{i:04d}"), Record(endpoint, "deepseek-reasoner", "openai", {
        "field": "reasoning_content", "text": f"The user wants step {i}; reading the file is next. " * 8},
        f"tk-{i:024x}", now)) for i in range(CALLS)]


def ds_stream(n: int = 400) -> list[bytes]:
    head = {"id": "ds-bench", "object": "chat.completion.chunk", "created": 1, "model": "deepseek-reasoner"}

    def chunk(delta: dict, finish=None) -> bytes:
        return b"data: " + jsonc.dumpb(head | {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}) + b"\n\n"

    out = [chunk({"role": "assistant", "content": None, "reasoning_content": ""})]
    out += [chunk({"reasoning_content": f"thought {i} "}) for i in range(n - 6)]
    out.append(chunk({"tool_calls": [{"index": 0, "id": "call_bench", "type": "function",
                                      "function": {"name": "Bash", "arguments": ""}}]}))
    out.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"command": "ls"}'}}]}))
    out.append(chunk({}, "tool_calls"))
    out.append(b"data: " + jsonc.dumpb(head | {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 9,
                                                                          "total_tokens": 18}}) + b"\n\n")
    out.append(b"data: [DONE]\n\n")
    return out


def interleave(variants, rounds: int, sample_s: float, rng: random.Random) -> list[list[float]]:
    """Seconds per call of each ``(name, fn)`` variant (scripts/bench/harness.py)."""
    return harness.interleave([fn for _, fn in variants], rounds, sample_s, rng)


def report(title: str, variants, samples, unit_ms: bool = True) -> None:
    base = samples[0]
    print(f"\n{title}")
    print(f"  {'variant':<34} {'median':>10} {'+ over baseline':>16} {'x baseline':>11}")
    for (name, _), s in zip(variants, samples):
        med = statistics.median(s) * 1000
        diff = statistics.median(a - b for a, b in zip(s, base)) * 1000
        ratio = statistics.median(a / b for a, b in zip(s, base))
        print(f"  {name:<34} {med:>8.3f} ms {diff:>+13.3f} ms {ratio:>10.2f}x")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    harness.interleave_args(ap, rounds=15, sample_ms=60.0)
    a = harness.parse_interleave_args(ap, argv)
    seed, rng = harness.seeded(a.seed)
    body = loop_body()
    print(f"bench_restore: interleaved: {a.rounds} rounds, ~{a.sample_ms:g} ms per sample, shuffle seed {seed}")
    print(f"request: Anthropic tool loop of {len(body['messages'])} messages ({CALLS} tool calls), "
          f"{len(jsonc.dumpb(body)):,} bytes, -> Chat (DeepSeek-style endpoint)")
    with tempfile.TemporaryDirectory() as tmp:
        mem = Keeper(ReasoningStore(None))
        mem.store.put(records("ds"))
        disk = Keeper(ReasoningStore(Path(tmp) / "reasoning.db"))
        disk.store.put(records("ds"))
        empty = Keeper(ReasoningStore(None))
        other = Keeper(ReasoningStore(None))
        other.store.put(records("elsewhere"))

        def run(keeper=None, before=None):
            def once():
                if before is not None:
                    before()
                restore = (lambda conv: keeper.restore(conv, "ds", "deepseek-reasoner", "openai")) if keeper else None
                return jsonc.dumpb(translate.request("anthropic", "openai", body, model="deepseek-reasoner",
                                                     max_tokens=8000, restore=restore).body)
            return once

        def cold():
            disk.store._cache.clear()
            disk.store._absent.clear()

        check = jsonc.loads(run(mem)())
        assert sum(1 for m in check["messages"] if m.get("reasoning_content")) == CALLS, "restore did not happen"
        variants = [("no store (baseline)", run()), ("restore, memory", run(mem)),
                    ("restore, SQLite (cache emptied)", run(disk, cold)), ("restore, none stored", run(empty)),
                    ("restore, other origin (withheld)", run(other))]
        samples = interleave(variants, a.rounds, a.sample_ms / 1000, rng)
        report("request translation (bytes out), per request", variants, samples)
        worst = max(statistics.median(x - y for x, y in zip(s, samples[0])) * 1000 for s in samples[1:])
        print(f"  restore adds at most {worst:.3f} ms per request (target <= {TARGET_MS} ms): "
              f"{'within' if worst <= TARGET_MS else 'OVER'} target")

        events = ds_stream()

        def stream(tap: bool):
            def once():
                t = translate.stream("openai", "anthropic")
                if tap:
                    t.tap = mem.capture("openai", "ds", "deepseek-reasoner", "tk-bench").on
                for e in events:
                    t.feed(e)
                t.close()
            return once

        sv = [("stream, no capture (baseline)", stream(False)), ("stream + capture, kept at its stop", stream(True))]
        ss = interleave(sv, a.rounds, a.sample_ms / 1000, rng)
        report(f"DeepSeek stream of {len(events)} events -> Anthropic client, per reply", sv, ss)
    return 0


if __name__ == "__main__":
    sys.exit(main())
