"""The story the read commands are tested on: five turns written to a ledger through the proxy's
own interface (translated, passed through, refused, an upstream error, one ten days old), the CLI
run in-process, and the output scrubbed of timestamps and paths."""

from __future__ import annotations

import re
import textwrap
import time
from pathlib import Path

import pytest

from tokunseba.cli.main import main
from tokunseba.ledger import Ledger

TIME = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def scrub(text: str, *paths: Path | str) -> str:
    """Timestamps -> a placeholder of the same width (keeps the alignment); paths -> names."""
    text = TIME.sub("YYYY-MM-DD hh:mm:ss", text)
    for p in paths:
        text = text.replace(str(p), "<PATH>")
    return text


def expected(s: str) -> str:
    return textwrap.dedent(s).lstrip("\n")


# ---------------------------------------------------------------- the story in the ledger

T1_TRACE = [
    {"route": "codex-local", "matched": False, "reasons": ["client 'anthropic' is not openai-responses"],
     "refused": None, "unreachable": False},
    {"route": "easy-turns", "matched": True,
     "reasons": ["client 'anthropic' is anthropic", "model 'claude-haiku-4-5' matches '*haiku*'",
                 "tools: request declares no tools, as the rule wants"],
     "refused": None, "unreachable": False},
]


def write_story(path: Path, now: float) -> None:
    """Four turns in the last hour (translated, passed through, refused, upstream error),
    one ten days old. Written through the same interface the proxy uses."""
    led = Ledger(path)
    t = now - 600
    led.start_turn("tk-0a1b2c3d", started_at=t, client_protocol="anthropic", host="api.anthropic.com",
                   path="/v1/messages?beta=true", requested_model="claude-haiku-4-5", stream=True)
    led.update_turn("tk-0a1b2c3d", rule="easy-turns", endpoint="local", target_protocol="openai",
                    model_used="gemma-3-270m", outcome="translated", trace=T1_TRACE)
    led.event("tk-0a1b2c3d", "routed", {"decision": "route", "rule": "easy-turns", "endpoint": "local",
                                        "url": "http://127.0.0.1:8080/v1"}, ts=t)
    led.event("tk-0a1b2c3d", "protocol_translated", {
        "from": "anthropic", "to": "openai", "dropped": ["thinking", "metadata.user_id"],
        "plumbing": ["stream_options.include_usage"], "converted": ["system -> messages[0]"], "warnings": []}, ts=t)
    led.update_turn("tk-0a1b2c3d", status=200, latency_ms=250.0, ttfb_ms=40.0, usage_protocol="openai",
                    usage_reported={"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150,
                                    "prompt_tokens_details": {"cached_tokens": 100}},
                    usage_client={"input_tokens": 20, "cache_read_input_tokens": 100, "output_tokens": 30})
    led.event("tk-0a1b2c3d", "completed", {"status": 200, "latency_ms": 250.0, "ttfb_ms": 40.0,
                                           "usage": {"prompt_tokens": 120, "completion_tokens": 30}}, ts=t + 0.25)

    t = now - 500
    led.start_turn("tk-0a9f8e7d", started_at=t, client_protocol="openai", host="api.openai.com",
                   path="/v1/chat/completions", requested_model="gpt-4o-mini", stream=False)
    led.update_turn("tk-0a9f8e7d", outcome="pass_through", model_used="gpt-4o-mini", trace=[
        {"route": "easy-turns", "matched": False, "reasons": ["client 'openai' is not anthropic"],
         "refused": None, "unreachable": False}])
    led.event("tk-0a9f8e7d", "routed", {"decision": "pass", "reason": "no route matched"}, ts=t)
    led.update_turn("tk-0a9f8e7d", status=200, latency_ms=100.0, ttfb_ms=100.0, usage_protocol="openai",
                    usage_reported={"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16})

    t = now - 400
    led.start_turn("tk-7c6d5e4f", started_at=t, client_protocol="anthropic", host="api.anthropic.com",
                   path="/v1/messages", requested_model="claude-sonnet-4-5", stream=True)
    led.update_turn("tk-7c6d5e4f", rule="to-gemini", endpoint="gemini", target_protocol="gemini", outcome="refused",
                    status=400, latency_ms=0.5, usage_reported=None,
                    error="route to-gemini refused: no translator from anthropic to gemini", trace=[
                        {"route": "to-gemini", "matched": True, "reasons": ["model 'claude-sonnet-4-5' matches '*sonnet*'"],
                         "refused": "no translator from anthropic to gemini", "unreachable": False}])
    led.event("tk-7c6d5e4f", "route_refused", {"rule": "to-gemini", "target": "gemini",
                                               "reason": "no translator from anthropic to gemini"}, ts=t)

    t = now - 300
    led.start_turn("tk-8d9e0f1a", started_at=t, client_protocol="anthropic", host="api.anthropic.com",
                   path="/v1/messages", requested_model="claude-opus-4-1", stream=True)
    led.update_turn("tk-8d9e0f1a", outcome="pass_through", model_used="claude-opus-4-1", trace=[])
    led.event("tk-8d9e0f1a", "upstream_error", {"status": 529, "message": "Overloaded"}, ts=t + 0.3)
    led.update_turn("tk-8d9e0f1a", status=529, latency_ms=300.0, ttfb_ms=300.0, usage_reported=None,
                    error="upstream 529: Overloaded")
    led.event("tk-8d9e0f1a", "completed", {"status": 529, "latency_ms": 300.0, "ttfb_ms": 300.0, "usage": None},
              ts=t + 0.3)

    t = now - 10 * 86400
    led.start_turn("tk-01dd01dd", started_at=t, client_protocol="anthropic", host="api.anthropic.com",
                   path="/v1/messages", requested_model="claude-haiku-4-5", stream=False)
    led.update_turn("tk-01dd01dd", outcome="pass_through", model_used="claude-haiku-4-5", status=200,
                    latency_ms=900.0, ttfb_ms=900.0, usage_protocol="anthropic",
                    usage_reported={"input_tokens": 5, "output_tokens": 1})
    led.close()


@pytest.fixture
def story(tmp_path) -> Path:
    path = tmp_path / "story.db"
    write_story(path, time.time())
    return path
