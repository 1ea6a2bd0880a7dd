#!/usr/bin/env python3
"""Benchmark: translation cost next to the JSON floor, measured side by side in one run.

Request: the Claude Code main turn (tests/data/fixtures/claude-code-print-main-turn.json, 48.5 KB) through
the whole request path (parse bytes -> translate.request -> serialise bytes), next to one
json.loads + json.dumps of the same bytes (stdlib) and one orjson loads + dumps.
Gemini rows: the same turn to a Gemini endpoint, the same stream to a Gemini client.
Codex: the default-model turn of Codex 0.171.0 (tests/data/codex/default-turn.json, 74 KB: its
tools in an additional_tools item, namespaced, the freeform exec) to a Chat, an Anthropic and a
Gemini endpoint, bytes -> bytes, next to the same two floors of its own bytes.
Stream: a 2,000-event Chat stream translated to Anthropic SSE, fed one event per feed() call,
per-event cost next to json.loads + json.dumps (and orjson) of each event's data.
Whole reply: a whole reply of each upstream protocol (Chat, Anthropic, Responses, Gemini, each
in its API's own shape, the same content) translated for each other client protocol
(translate.reply, bytes -> bytes: decode -> neutral Message -> encode), next to json.loads +
json.dumps of the upstream reply's bytes; twice: the small reply of bench_proxy.py /
bench_hooks.py ('hi'), and one with 640 characters of text and a tool call.

The variants of each table are interleaved inside one run: every round runs each variant once
(a sample of a fixed number of calls, calibrated once to about --sample-ms), in a fresh shuffled
order; the table reports each variant's median over the rounds, and its ratios are the medians
of the per-round ratios (variant / floor measured in the same round), so a machine that gets
busier or quieter during the run moves the floor and the variant together.
Not a test: it prints, it asserts nothing.
Usage: .venv/bin/python scripts/bench/bench_translate.py [--rounds N] [--sample-ms MS] [--seed S] [--only codex|whole|...]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

import harness  # scripts/bench/harness.py: the timing harness the benchmarks share

import orjson

from tokunseba import jsonc
from tokunseba import translate
from tokunseba.translate import parse_body

ROOT = Path(__file__).resolve().parent.parent.parent
FIXTURE = "claude-code-print-main-turn.json"


def fixture_bytes() -> bytes:
    path = ROOT / "tests" / "data" / "fixtures" / FIXTURE
    if not path.exists():
        sys.exit(f"bench_translate: fixture {path} not found")
    return jsonc.dumpb(json.loads(path.read_text())["body"])


Variant = tuple[str, "Callable[[], object]", int]  # name, one call, input units per call


def interleave(variants: list[Variant], rounds: int, sample_s: float, rng: random.Random) -> list[list[float]]:
    """Seconds per unit of each variant, one sample per round, variants shuffled every round."""
    return harness.interleave([fn for _, fn, _ in variants], rounds, sample_s, rng,
                              units=[units for _, _, units in variants])


def request_variants() -> list[Variant]:
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
        ("floor: json.loads + json.dumps (stdlib)", lambda: json.dumps(json.loads(raw)), 1),
        ("floor: orjson.loads + orjson.dumps", lambda: orjson.dumps(orjson.loads(raw)), 1),
        ("anthropic_to_chat only (dict -> dict)", lambda: a2c(body), 1),
        ("A->Chat request path: bytes -> bytes", full_path, 1),
        ("Chat->A (translated body) dict -> bytes", reverse_path, 1),
        ("A->Gemini request path: bytes -> bytes",
         lambda: jsonc.dumpb(translate.request("anthropic", "gemini", parse_body(raw)).body), 1),
        ("A->Responses request path: bytes -> bytes", a2r_path, 1),
        ("Responses->A (translated body) dict -> bytes", r2a_path, 1),
    ]


def chat_stream_events(n: int = 2000) -> list[bytes]:
    """A Chat stream of ``n`` SSE events: role chunk, text, one tool call in fragments,
    finish chunk, usage chunk and [DONE] (shape of docs/dev/protocols.md B.5)."""
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


def stream_variants() -> list[Variant]:
    events = chat_stream_events()
    payloads = [e[6:-2] for e in events if e != b"data: [DONE]\n\n"]
    n = len(events)

    def translated() -> None:
        t = translate.stream("openai", "anthropic")
        out = [t.feed(e) for e in events]
        out.append(t.close())

    def to_gemini() -> None:
        t = translate.stream("openai", "gemini")
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
        ("floor: json.loads + json.dumps (stdlib)", floor_stdlib, n),
        ("floor: orjson.loads + orjson.dumps", floor_orjson, n),
        ("Chat -> Anthropic stream translation", translated, n),
        ("Chat -> Gemini stream translation", to_gemini, n),
        ("Chat -> Responses stream translation", per_event("openai", "openai-responses", events), n),
        (f"Responses -> Anthropic ({len(resp_events):,} events)", per_event("openai-responses", "anthropic", resp_events),
         len(resp_events)),
    ]


TOOL_ARGS = {"command": "ls -l", "description": "list"}
TOOL_TEXT = "Let me look at the files first. " * 20  # 640 characters


def chat_reply(text: str = "hi", tool: bool = False) -> dict:
    """A whole Chat reply: by default the one bench_proxy.py / bench_hooks.py's upstream sends
    (2 tokens of text); ``tool``: with one tool call (finish_reason tool_calls)."""
    msg: dict = {"role": "assistant", "content": text}
    if tool:
        msg["tool_calls"] = [{"id": "call_bench", "type": "function",
                              "function": {"name": "Bash", "arguments": json.dumps(TOOL_ARGS)}}]
    return {"id": "chatcmpl-bench", "object": "chat.completion", "created": 1767225600, "model": "gpt-bench",
            "choices": [{"index": 0, "message": msg, "logprobs": None, "finish_reason": "tool_calls" if tool else "stop"}],
            "usage": {"prompt_tokens": 2610, "completion_tokens": 58, "total_tokens": 2668}}


def anthropic_reply(text: str = "hi", tool: bool = False) -> dict:
    """The same reply as the Messages API sends it (its usage shape as of 2026: cache counts,
    cache_creation, service_tier)."""
    content: list[dict] = [{"type": "text", "text": text}]
    if tool:
        content.append({"type": "tool_use", "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "name": "Bash", "input": TOOL_ARGS})
    return {"id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
            "content": content, "stop_reason": "tool_use" if tool else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 562, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 2048,
                      "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
                      "output_tokens": 58, "service_tier": "standard"}}


def responses_reply(text: str = "hi", tool: bool = False) -> dict:
    """The same reply as OpenAI's Responses API sends it (every top-level key it writes)."""
    output: list[dict] = [{"id": "msg_68af1c2f3e0c81a0", "type": "message", "status": "completed",
                           "content": [{"type": "output_text", "annotations": [], "text": text}], "role": "assistant"}]
    if tool:
        output.append({"id": "fc_68af1c30a1d881a0", "type": "function_call", "status": "completed",
                       "arguments": json.dumps(TOOL_ARGS), "call_id": "call_Qm3wXb7Hc1Lz", "name": "Bash"})
    return {"id": "resp_68af1c2e9b8c81a0", "object": "response", "created_at": 1767225600, "status": "completed",
            "error": None, "incomplete_details": None, "instructions": None, "max_output_tokens": None,
            "model": "gpt-5.1-codex", "output": output, "parallel_tool_calls": True, "previous_response_id": None,
            "reasoning": {"effort": None, "summary": None}, "store": True, "temperature": 1.0,
            "text": {"format": {"type": "text"}}, "tool_choice": "auto", "tools": [], "top_p": 1.0,
            "truncation": "disabled",
            "usage": {"input_tokens": 2610, "input_tokens_details": {"cached_tokens": 2048}, "output_tokens": 58,
                      "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 2668},
            "user": None, "metadata": {}}


def gemini_reply(text: str = "hi", tool: bool = False) -> dict:
    """The same reply as Gemini's generateContent sends it (a function call has no id)."""
    parts: list[dict] = [{"text": text}]
    if tool:
        parts.append({"functionCall": {"name": "Bash", "args": TOOL_ARGS}})
    return {"candidates": [{"content": {"parts": parts, "role": "model"}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 2610, "candidatesTokenCount": 58, "totalTokenCount": 2668,
                              "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 2610}]},
            "modelVersion": "gemini-2.5-flash", "responseId": "5c57ea85fbfd4c1da55486"}


# every upstream protocol's whole reply, by protocol name; the same content in each
UPSTREAM_REPLIES = {"openai": chat_reply, "anthropic": anthropic_reply, "openai-responses": responses_reply,
                    "gemini": gemini_reply}
LABEL = {"openai": "Chat", "anthropic": "Anthropic", "openai-responses": "Responses", "gemini": "Gemini"}
SIZES = {"small": {}, "tool": {"text": TOOL_TEXT, "tool": True}}  # the proxy benchmarks' 'hi'; text + a tool call


def whole_reply_bytes() -> dict[tuple[str, str], bytes]:
    """{(size, upstream protocol): the upstream's whole reply, bytes}."""
    return {(size, up): jsonc.dumpb(make(**kw)) for size, kw in SIZES.items() for up, make in UPSTREAM_REPLIES.items()}


def whole_pairs() -> list[tuple[str, str]]:
    """Every (upstream, client) pair the codec registry translates, upstream first."""
    return [(up, cl) for up in UPSTREAM_REPLIES for cl in UPSTREAM_REPLIES if up != cl]


def reply_variants(upstream: str, size: str) -> list[Variant]:
    """A whole ``upstream`` reply (bytes) -> each other client protocol's reply (bytes), next to the floors."""
    raw = whole_reply_bytes()[(size, upstream)]
    what = "text 'hi' (the proxy benchmarks' reply)" if size == "small" else "640 characters of text and a tool call"
    print(f"whole reply: {'an' if upstream == 'anthropic' else 'a'} {LABEL[upstream]} reply, {what}, {len(raw):,} bytes, translate.reply (bytes -> bytes)")

    def to(client: str):
        return lambda: translate.reply(upstream, client, raw, created=1767225600).body

    return [
        ("floor: json.loads + json.dumps (stdlib)", lambda: json.dumps(json.loads(raw)), 1),
        ("floor: orjson.loads + orjson.dumps", lambda: orjson.dumps(orjson.loads(raw)), 1),
        *((f"{LABEL[upstream]} -> {LABEL[client]} whole reply", to(client), 1)
          for up, client in whole_pairs() if up == upstream),
    ]


CODEX_TURN = ROOT / "tests" / "data" / "codex" / "default-turn.json"


def codex_variants() -> list[Variant]:
    """Codex's default-model turn through the whole request path to each other protocol."""
    raw = jsonc.dumpb(json.loads(CODEX_TURN.read_text()))

    def to(target: str):
        return lambda: jsonc.dumpb(translate.request("openai-responses", target, parse_body(raw), max_tokens=4096).body)

    print(f"request: Codex's default-model turn ({CODEX_TURN.name}), {len(raw):,} bytes")
    return [
        ("floor: json.loads + json.dumps (stdlib)", lambda: json.dumps(json.loads(raw)), 1),
        ("floor: orjson.loads + orjson.dumps", lambda: orjson.dumps(orjson.loads(raw)), 1),
        *((f"Codex->{name} request path: bytes -> bytes", to(target), 1)
          for name, target in (("Chat", "openai"), ("Anthropic", "anthropic"), ("Gemini", "gemini"))),
    ]


def table(variants: list[Variant], samples: list[list[float]]) -> None:
    """Median µs per unit, p95, and the median per-round ratio to each floor (rows 0 and 1)."""
    stdlib, orj = samples[0], samples[1]
    print(f"  {'case':<42} {'µs med':>9} {'µs p95':>9} {'x stdlib':>9} {'x orjson':>9}   ({len(stdlib)} rounds)")
    for (name, _, _), xs in zip(variants, samples):
        p95 = sorted(xs)[max(0, -(-95 * len(xs) // 100) - 1)]
        r_std = statistics.median(a / b for a, b in zip(xs, stdlib))
        r_orj = statistics.median(a / b for a, b in zip(xs, orj))
        print(f"  {name:<42} {statistics.median(xs) * 1e6:>9.1f} {p95 * 1e6:>9.1f} {r_std:>9.2f} {r_orj:>9.2f}")
    print()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=41, help="interleaved rounds; medians are reported (default 41)")
    ap.add_argument("--sample-ms", type=float, default=20.0,
                    help="about how long one sample of one variant runs, in ms (default 20)")
    ap.add_argument("--seed", type=int, default=None, help="shuffle seed (default: random, printed)")
    ap.add_argument("--only", choices=("request", "codex", "stream", "whole"), default=None,
                    help="run one kind of table only (codex: Codex's default-model turn to each protocol; "
                         "whole: the whole-reply tables, every pair)")
    args = ap.parse_args()
    if args.rounds < 1 or args.sample_ms <= 0:
        ap.error("--rounds must be at least 1 and --sample-ms positive")
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    print(f"interleaved: {args.rounds} rounds, ~{args.sample_ms:g} ms per sample, shuffle seed {seed}")
    makers = [m for kind, m in (("request", request_variants), ("codex", codex_variants), ("stream", stream_variants))
              if args.only in (None, kind)]
    if args.only in (None, "whole"):
        makers += [(lambda u=up, s=size: reply_variants(u, s)) for size in SIZES for up in UPSTREAM_REPLIES]
    for make in makers:
        variants = make()
        for _, call, _ in variants:  # untimed: a codec is imported on its first use, not measured as translation
            call()
        table(variants, interleave(variants, args.rounds, args.sample_ms / 1000, rng))


if __name__ == "__main__":
    main()
