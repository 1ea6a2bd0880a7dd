"""A local model's fitness in numbers, for `tokunseba models --probe`: its context window where
the server says it, and its prompt throughput (prefill), which decides whether a long turn (a
subagent's 20k-token prompt) can go local at all: at 350 prompt tokens/s a 20k-token turn waits
about a minute before its first token.

``probe_fitness(ep, env, timeout, prefill=...)`` asks a loopback endpoint (never a paid provider:
a long prompt costs money there):

- its context window: ``GET {origin}/props`` where a server answers it (``CONTEXT_SOURCES``:
  llama-server's ``default_generation_settings.n_ctx``); None when no server says it;
- with ``prefill`` (`models --probe --prefill`: it takes a while on a slow machine, so it is
  asked for), its prompt throughput: one turn of about ``PROMPT_WORDS`` words opening with random text (so
  no prompt cache serves it), ``max_tokens: 1``, sent as a
  shadow is (shadow/turns.py ``build_request``: the endpoint's protocol, its own key). Measured by
  the server's own timings where it reports them (``SERVER_TIMINGS``: llama-server's
  ``timings.prompt_per_second``), else the prompt tokens the endpoint reported divided by the
  wall-clock time to the whole reply (one output token included: said so).

Nothing is estimated: a number the server did not give stays None, with why.
"""

from __future__ import annotations

import os
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from .. import jsonc
from ..addresses import is_loopback

PROMPT_WORDS = 800  # ~900 tokens: long enough that prefill, not the round trip, dominates
SENTENCE = "The quick brown fox jumps over the lazy dog while the patient reader counts every word. "
LONG_TURN = 20_000  # the prompt a subagent turn may carry: said as seconds before its first token

# where a server says its context window: (path at the server's origin, keys to the number, who says it)
CONTEXT_SOURCES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("/props", ("default_generation_settings", "n_ctx"), "llama-server /props"),  # llama.cpp's server
    ("/props", ("n_ctx",), "llama-server /props"),  # older llama-server builds
)
# where a reply carries the server's own prefill timing: (keys to tokens, keys to tokens/s, who)
SERVER_TIMINGS: tuple[tuple[tuple[str, ...], tuple[str, ...], str], ...] = (
    (("timings", "prompt_n"), ("timings", "prompt_per_second"), "llama-server timings"),
)


def _dig(data: Any, keys: tuple[str, ...]) -> Any:
    for k in keys:
        data = data.get(k) if isinstance(data, dict) else None
    return data


def _get_json(url: str, timeout: float) -> Any:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(urllib.request.Request(url, headers={"accept": "application/json"}), timeout=timeout) as r:
        return jsonc.loads(r.read())


def context_window(ep: Any, timeout: float) -> tuple[int | None, str]:
    """(tokens, who said it) or (None, why not)."""
    parts = urlsplit(ep.url)
    origin = f"{parts.scheme}://{parts.netloc}"
    tried: list[str] = []
    got: dict[str, Any] = {}  # path -> its JSON, each path asked once
    for path, keys, who in CONTEXT_SOURCES:
        if path not in got:
            try:
                got[path] = _get_json(origin + path, timeout)
            except (urllib.error.URLError, OSError, jsonc.JSONDecodeError, UnicodeDecodeError) as e:
                got[path] = None
                tried.append(f"{path}: {getattr(e, 'code', None) or type(e).__name__}")
        if got[path] is None:
            continue
        n = _dig(got[path], keys)
        if isinstance(n, int) and not isinstance(n, bool) and n > 0:
            return n, who
        tried.append(f"{path}: no {'.'.join(keys)}")
    return None, "the server does not say (" + "; ".join(dict.fromkeys(tried)) + ")"


def prompt_throughput(ep: Any, env: Mapping[str, str], timeout: float, words: int = PROMPT_WORDS) -> dict[str, Any]:
    """One long prompt, one output token: its prompt tokens and tokens per second."""
    from ..neutral import Usage
    from ..protocols import openai_chat
    from ..routing import target_kind
    from ..shadow import facts_of_reply
    from ..shadow import build_request

    CHAT = openai_chat.PROTOCOL  # the probe turn is written as a Chat request
    # a fresh start: a server's prompt cache (llama-server keeps the last prompt) cannot serve it
    text = f"Probe {os.urandom(8).hex()}. " + (SENTENCE * (words // len(SENTENCE.split()) + 1)).strip()
    body = jsonc.dumpb({"model": ep.model or "probe", "max_tokens": 1, "temperature": 0,
                        "messages": [{"role": "user", "content": text}]})
    out: dict[str, Any] = {"prompt_tokens": None, "prompt_tokens_per_s": None, "measured_by": None, "error": None,
                           "wall_s": None}
    try:
        req = build_request(CHAT, target_kind(CHAT) or "", body, ep, env)
    except Exception as e:  # a protocol the probe cannot write (Gemini): said, never raised
        out["error"] = f"cannot send a probe turn there: {getattr(e, 'message', e)}"
        return out
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    t0 = time.monotonic()
    try:
        with opener.open(urllib.request.Request(req.url, data=req.body, headers=req.headers, method="POST"),
                         timeout=timeout) as r:
            raw = r.read()
    except urllib.error.HTTPError as e:
        out["error"] = f"HTTP {e.code}: {e.read()[:200].decode('utf-8', 'replace')}"
        return out
    except (urllib.error.URLError, OSError) as e:
        out["error"] = f"no reply: {getattr(e, 'reason', e)}"
        return out
    wall = time.monotonic() - t0
    out["wall_s"] = round(wall, 3)
    try:
        data = jsonc.loads(raw)
    except (jsonc.JSONDecodeError, UnicodeDecodeError):
        data = None
    for n_keys, rate_keys, who in SERVER_TIMINGS:
        n, rate = _dig(data, n_keys), _dig(data, rate_keys)
        if isinstance(n, int) and isinstance(rate, (int, float)) and rate > 0:
            out.update(prompt_tokens=n, prompt_tokens_per_s=round(float(rate), 1), measured_by=who)
            return out
    facts = facts_of_reply(ep.protocol, raw, 200)
    if facts.usage and facts.usage_protocol:
        n = Usage(facts.usage_protocol, facts.usage).fields().get("input")
        if n:
            out.update(prompt_tokens=n, prompt_tokens_per_s=round(n / wall, 1),
                       measured_by="reported prompt tokens / wall clock (one output token included)")
            return out
    out["error"] = "the endpoint reported no prompt tokens and no timings: nothing to measure by"
    return out


def probe_fitness(ep: Any, env: Mapping[str, str], timeout: float, *, prefill: bool = True) -> dict[str, Any] | None:
    """The fitness of a loopback endpoint; None for any other (not probed: a long prompt costs money)."""
    if not is_loopback(ep.host):
        return None
    ctx, said = context_window(ep, timeout)
    measured = prompt_throughput(ep, env, max(timeout, 120.0)) if prefill else {
        "prompt_tokens": None, "prompt_tokens_per_s": None, "measured_by": None, "wall_s": None,
        "error": "not measured (models --probe --prefill)"}
    out = {"context_tokens": ctx, "context_from": said, **measured}
    rate = out["prompt_tokens_per_s"]
    out["seconds_before_first_token_at_20k"] = round(LONG_TURN / rate, 1) if rate else None
    return out


FITNESS_HEAD = ["ENDPOINT", "CONTEXT", "SAID BY", "PROMPT TOKENS", "PROMPT TOK/S", "20K-TOKEN PREFILL", "MEASURED BY"]
FITNESS_NOTE = ("(loopback endpoints only; --prefill sends each one prompt of ~900 tokens, max_tokens 1; give the "
                "window to the rules as the endpoint's context_tokens: and `tokunseba env --rules FILE` prints Claude "
                "Code's settings for it)")


def fitness_rows(report: dict) -> list[list[str]]:
    """The rows of `models --probe`'s fitness table (read.render_models prints them)."""
    rows = []
    for e in report["endpoints"]:
        f = e.get("fitness")
        if f is None or (f["context_tokens"] is None and f["prompt_tokens_per_s"] is None):
            continue  # nothing measured there (its JSON says why)
        rate = f"{f['prompt_tokens_per_s']:g}" if f["prompt_tokens_per_s"] else f"- ({f['error']})"
        if f["error"] and f["error"].startswith("not measured"):
            rate = "- (--prefill)"
        wait = f"{f['seconds_before_first_token_at_20k']:g} s" if f["seconds_before_first_token_at_20k"] else "-"
        rows.append([e["name"], str(f["context_tokens"]) if f["context_tokens"] else "-", f["context_from"],
                     str(f["prompt_tokens"] or "-"), rate, wait, f["measured_by"] or "-"])
    return rows
