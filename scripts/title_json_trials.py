#!/usr/bin/env python3
"""How often the real llama-server, constrained by the translated schema, answers Claude Code's
title turn with the schema's whole object within the endpoint's cap (issue 41; docs/dev/protocols.md
§F, "Constrained is not bounded").

The request is the one tests/e2e/test_structured_output_localmodel_e2e.py sends: the captured title
turn (tests/data/fixtures/claude-code-title-haiku.json, temperature 1, streamed, its
`output_config.format` schema `{title: string}`) translated by `tokunseba.translate.request` for the
shipped local endpoint with its cap lowered to --max-tokens. It goes N times to the server; an
answer counts as valid when the server ended it itself (finish "stop") and it parses as a JSON
object whose only key is `title`, a string. A cut one (finish "length") is not valid.

By default the server is started here with scripts/localmodel.sh (a private state folder, a free
port), so the sampler defaults measured are the script's own, and stopped at the end. --url uses a
server already running. --set NAME=VALUE adds a llama-server sampler parameter to the request
(top_k, min_p, repeat_penalty, dry_multiplier, ...): llama-server fills every parameter a request
leaves out from its command-line defaults, so a parameter in the request measures the flag of the
same name (`--top-k`, `--min-p`, `--dry-multiplier`, ...) without a restart per candidate; the
proxy itself never adds one. Each --set must be a parameter the translated request does not carry
(temperature, max_tokens, response_format are the client's and the endpoint's).

    .venv/bin/python scripts/title_json_trials.py                    # 20 runs, shipped defaults
    .venv/bin/python scripts/title_json_trials.py --set min_p=0.2 --set top_k=10 -n 20
    .venv/bin/python scripts/title_json_trials.py --url http://127.0.0.1:28431/v1 -n 40 -v

It prints one line per answer with -v, then `valid k/N` with the answers' token counts and wall
time. Exit status 0 when every answer is valid.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests/data/fixtures/claude-code-title-haiku.json"
LOCALMODEL = ROOT / "scripts/localmodel.sh"
# agents-local.yaml's endpoint (where Claude Code's title turns go); its cap comes from --max-tokens
ENDPOINT = {"model": "gemma-3-270m", "max_tokens_field": "max_tokens", "stop": ["<|im_end|>", "\n\n"],
            "endpoint": "local"}


def title_request(max_tokens: int) -> dict:
    """The title turn's Chat request, as the proxy translates it for the local endpoint."""
    sys.path.insert(0, str(ROOT / "addon"))
    from tokunseba import translate

    body = json.loads(FIXTURE.read_text())["body"]
    return dict(translate.request("anthropic", "openai", body, max_tokens=max_tokens, **ENDPOINT).body)


def answer(url: str, body: dict) -> tuple[str, str | None, int]:
    """The streamed reply's text, finish reason and completion tokens."""
    import httpx

    text, finish, tokens = [], None, 0
    with httpx.stream("POST", f"{url}/chat/completions", json=body, timeout=600) as r:
        if r.status_code != 200:
            raise SystemExit(f"title_json_trials: error: the server answered {r.status_code}: {r.read()[:300]!r}")
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[6:])
            tokens = (event.get("usage") or {}).get("completion_tokens", tokens)
            for choice in event.get("choices") or ():
                text.append((choice.get("delta") or {}).get("content") or "")
                finish = choice.get("finish_reason") or finish
    return "".join(text), finish, tokens


def valid(text: str, finish: str | None) -> bool:
    """The schema's whole object, closed by the model within the cap."""
    if finish != "stop":
        return False
    try:
        doc = json.loads(text)
    except ValueError:
        return False
    return isinstance(doc, dict) and set(doc) == {"title"} and isinstance(doc["title"], str)


def parse_set(items: list[str], request: dict) -> dict:
    extra = {}
    for item in items:
        name, sep, raw = item.partition("=")
        if not sep or not name:
            raise SystemExit(f"title_json_trials: error: --set wants NAME=VALUE, got {item!r}")
        if name in request:
            raise SystemExit(f"title_json_trials: error: {name!r} is in the translated request already "
                             f"(the client's or the endpoint's); --set only what it leaves to the server")
        try:
            extra[name] = json.loads(raw)
        except ValueError:
            extra[name] = raw
    return extra


def start_server(state: str) -> str:
    p = subprocess.run([str(LOCALMODEL), "start"], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "LOCALMODEL_STATE_DIR": state})
    if p.returncode != 0:
        raise SystemExit(f"title_json_trials: error: scripts/localmodel.sh start failed:\n{p.stderr[-2000:]}")
    return p.stdout.strip().splitlines()[-1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    ap.add_argument("-n", "--runs", type=int, default=20, help="answers to ask for (default 20)")
    ap.add_argument("--max-tokens", type=int, default=128,
                    help="the endpoint's cap (default 128, the e2e test's; agents-local.yaml ships 512)")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="a llama-server sampler parameter the request leaves to the server (repeatable)")
    ap.add_argument("--url", help="a running llama-server's base URL (…/v1); default: start one here")
    ap.add_argument("--parallel", type=int, default=2,
                    help="requests at once (default 2: localmodel.sh's llama-server has 2 slots)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every answer")
    args = ap.parse_args()
    if args.runs < 1 or args.parallel < 1 or args.max_tokens < 1:
        ap.error("--runs, --parallel and --max-tokens must be positive")

    request = title_request(args.max_tokens)
    body = {**request, **parse_set(args.set, request)}
    with tempfile.TemporaryDirectory(prefix="title-trials-") as state:
        url = args.url or start_server(state)
        try:
            t0 = time.monotonic()
            with ThreadPoolExecutor(args.parallel) as pool:
                answers = list(pool.map(lambda _: answer(url, body), range(args.runs)))
            wall = time.monotonic() - t0
        finally:
            if not args.url:
                subprocess.run([str(LOCALMODEL), "stop"], capture_output=True, timeout=60,
                               env={**os.environ, "LOCALMODEL_STATE_DIR": state})
    ok = [valid(text, finish) for text, finish, _ in answers]
    if args.verbose:
        for good, (text, finish, tokens) in zip(ok, answers):
            print(f"{'ok ' if good else 'BAD'} {finish:6} {tokens:4} {text[:160]!r}")
    tokens = sorted(t for _, _, t in answers)
    settings = " ".join(args.set) or "server defaults"
    print(f"{settings}: valid {sum(ok)}/{args.runs} (cap {args.max_tokens}; tokens median "
          f"{tokens[len(tokens) // 2]}, max {tokens[-1]}; {wall:.0f} s)")
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
