"""The pure mitmweb presentation (webview/view.py); its display redaction is tests/webview/test_redact.py."""

from __future__ import annotations

import json

import pytest

from tokunseba.webview.redact import REDACTED
from tokunseba.webview.view import (
    MARKS,
    NOT_REWRITTEN,
    RESPONSE_SIDE,
    error_message,
    final_comment,
    final_mark,
    original_record,
    original_view_text,
    pretty_json,
    web_outcome,
)

KEY = "sk-ant-api03-SECRETSECRET"


@pytest.mark.parametrize("ledger,status,error,shown", [
    ("translated", 200, None, "translated"),
    ("translated", 200, "upstream connection broke", "error"),
    ("translated", 400, None, "error"),
    ("pass_through", 529, None, "error"),
    ("refused", 400, "no translator", "refused"),
    ("cancelled", None, "Client disconnected.", "cancelled"),
    ("error", None, "boom", "error"),
    ("retargeted", 200, None, "retargeted"),
])
def test_outcome_as_the_ledger_counts_it(ledger, status, error, shown):
    assert web_outcome(ledger, status, error) == shown
    assert final_mark(shown) == MARKS[shown]


def test_comment_lists_plumbing_next_to_drops_and_the_error():
    c = final_comment("easy-turns → local · anthropic→openai · dropped: thinking", outcome="error", status=400,
                      error=f"prompt is too long ({KEY})", plumbing=["stream_options.include_usage", "max_tokens",
                                                                      "max_tokens"],
                      endpoint_url="http://127.0.0.1:9/v1/chat/completions", secrets={KEY})
    assert c == (f"error 400: prompt is too long ({REDACTED}) · easy-turns → local · anthropic→openai · dropped: "
                 "thinking · added: stream_options.include_usage, max_tokens · sent to http://127.0.0.1:9/v1/chat/completions")
    # an outcome the summary already states is not repeated; long errors are cut
    assert final_comment("r → x · refused: no translator", outcome="refused", status=400, error="no translator") \
        == "r → x · refused: no translator"
    long = final_comment("s", outcome="error", status=None, error="x" * 1000)
    assert long.startswith("error: xxx") and long.endswith("… · s") and len(long) < 400


@pytest.mark.parametrize("body,msg", [
    (b'{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long"}}', "prompt is too long"),
    (b'{"error":{"message":"slow down","type":"rate_limit"}}', "slow down"),
    (b'[{"error":{"code":400,"message":"bad","status":"INVALID_ARGUMENT"}}]', "bad"),
    (b'{"error":"plain"}', "plain"),
    (b"<html>502</html>", None),
    (b'{"ok":true}', None),
    (None, None),
])
def test_error_message_of_any_envelope(body, msg):
    assert error_message(body) == msg


def test_original_view_text():
    rec = original_record(method="POST", url="https://api.anthropic.com/v1/messages",
                          headers=[("x-api-key", KEY), ("content-type", "application/json")], rewritten=True,
                          endpoint="local", endpoint_url="http://127.0.0.1:9/v1/chat/completions",
                          target_protocol="openai")
    body = '{"model":"m","thinking":{"type":"enabled"},"messages":[{"role":"user","content":"été"}]}'
    text = original_view_text(rec, body, is_request=True)
    assert text.split("\n\n", 1)[0].splitlines() == [
        "POST https://api.anthropic.com/v1/messages",
        "# sent to http://127.0.0.1:9/v1/chat/completions (local, openai)",
        f"x-api-key: {REDACTED}", "content-type: application/json"]
    assert json.loads(text.split("\n\n", 1)[1]) == json.loads(body) and '"été"' in text and KEY not in text
    assert '\n  "thinking": {' in text  # one field a line
    assert original_view_text(rec, body, is_request=False) == RESPONSE_SIDE
    assert original_view_text(None, None, is_request=True) == NOT_REWRITTEN
    assert original_view_text({**rec, "rewritten": False}, body, is_request=True) == NOT_REWRITTEN
    assert original_view_text(rec, body[:20], is_request=True, truncated=True).endswith(
        "… (cut: only the first bytes of the client's body are kept)")


def test_pretty_json_keeps_what_is_not_json():
    assert pretty_json('{"b":1,"a":[1]}') == '{\n  "b": 1,\n  "a": [\n    1\n  ]\n}'
    assert pretty_json("not json {") == "not json {"


def test_comment_starts_with_the_request_id_then_the_error():
    c = final_comment("easy-turns → local · anthropic→openai", request_id="tk-0123456789abcdef01234567",
                      outcome="error", status=400, error="prompt is too long")
    assert c == "tk-0123456789abcdef01234567 · error 400: prompt is too long · easy-turns → local · anthropic→openai"


def test_the_comment_starts_with_the_short_reason():
    from tokunseba.webview.view import final_comment, headline

    head = headline("error", 429, chain="local (429) → api.anthropic.com (unreachable)", error="tokunseba: local …")
    assert head == "❌ error 429 · local (429) → api.anthropic.com (unreachable)"
    assert headline("translated", 200, chain="local (429) → anthropic") == "🔁 translated 200 · local (429) → anthropic"
    assert headline("translated", 200) == "🔁 translated 200"
    assert headline("pass_through", 200) == "⚪ pass-through 200"
    long = "tokunseba: cannot reach api.anthropic.com:443: connection refused; " + "x" * 200
    short = headline("error", 502, error=long)
    assert short.startswith("❌ error 502: cannot reach api.anthropic.com:443: connection refused") and short.endswith("…")
    assert len(short) < 120
    assert headline("error", 200, error="cut") == "❌ error mid-stream: cut"
    comment = final_comment("small → local", outcome="error", status=502, error=long, request_id="tk-1", head=short)
    assert comment.startswith(short + " · tk-1 · error 502: " + long[:40])  # the details, whole, after it
