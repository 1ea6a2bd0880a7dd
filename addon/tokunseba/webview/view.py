"""What mitmweb shows of a turn (issue 14): the flow's mark and comment once the turn has
ended, the record of the client's original request kept in the flow's metadata, and the
text of the `tokunseba-original` content view.

Pure presentation: no mitmproxy import (proxy/mitm.py holds the thin glue), nothing here changes
what is sent. Everything shown passes through `webview/redact.py`, so no key reaches the screen
or a comment: header values, URL query credentials and known key values in free text.

Contract:
- `original_record(...)` is a plain dict (saved with the flow): method, the client's URL,
  its headers redacted, the endpoint's URL (redacted) and name, and whether the flow's
  request was rewritten.
- `final_mark(...)`/`final_comment(...)` state the outcome as the ledger counts it
  (`ledger._kind`): a turn whose status is >= 400, or that carries an error, shows the
  error mark and the error text.
- `original_view_text(...)` never raises: a flow tokunseba did not rewrite, or the
  response side, gets a plain sentence saying so.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from ..outcomes import TurnOutcome
from .redact import credential_values, redact_headers, redact_url, redact_values

# outcome -> mitmweb marker (emoji shortcode; mitmweb shows the emoji)
MARKS = {"pass_through": ":white_circle:", "retargeted": ":arrow_right:", "translated": ":repeat:",
         "capped": ":scissors:", "refused": ":no_entry:", "error": ":x:", "cancelled": ":stop_button:"}
# outcome class -> the emoji a comment's headline starts with (the marks' own pictures)
EMOJI = {"pass_through": "⚪", "retargeted": "➡️", "translated": "🔁", "capped": "✂️", "refused": "⛔",
         "error": "❌", "cancelled": "⏹️"}
HEADLINE_MAX = 90  # characters of the reason in a headline (the details follow it)
RECORD_KEY = "tokunseba.original"  # flow.metadata: original_record()
ORIGINAL_KEY = "tokunseba.original_request"  # flow.metadata: the client's body as text, when tokunseba changed it
CLIENT_KEY = "tokunseba.client"  # flow.metadata: the client's name on the console line (turn/console_line.py)
MAX_COMMENT_ERROR = 300  # characters of an error message kept in a comment
NOT_REWRITTEN = ("not rewritten by tokunseba: the request body above is exactly what the client sent"
                 " (this view shows the client's original request only for turns tokunseba translated"
                 " or changed).")
RESPONSE_SIDE = ("tokunseba-original shows the client's original request: open it under the Request tab."
                 " This response is what the client received.")


def original_record(*, method: str, url: str, headers: Iterable[tuple[str, str]], rewritten: bool,
                    endpoint: str | None = None, endpoint_url: str | None = None,
                    target_protocol: str | None = None) -> dict:
    """The client's request line and headers (credentials redacted) and where the turn went."""
    return {"method": method, "url": redact_url(url), "headers": redact_headers(headers), "rewritten": rewritten,
            "endpoint": endpoint, "endpoint_url": redact_url(endpoint_url) if endpoint_url else None,
            "target_protocol": target_protocol}


def web_outcome(ledger_outcome: str | None, status: int | None, error: str | None) -> str:
    """The outcome class shown in mitmweb, as the ledger's stats count it."""
    if ledger_outcome in ("refused", "cancelled"):
        return ledger_outcome
    if ledger_outcome == "error" or (status or 0) >= 400 or error:
        return "error"
    return ledger_outcome or "error"


def final_mark(outcome: str) -> str:
    return MARKS.get(outcome, MARKS["error"])


def headline(outcome: str, status: int | None, *, chain: str | None = None, error: str | None = None,
             note: str | None = None) -> str:
    """The short reason a comment starts with, so a narrow column shows it: the outcome's
    emoji and status word, then the chain of attempts when the turn failed over (``🔁
    translated 200 · local (429) → big``, ``❌ error 429 · local (429) → api.anthropic.com
    (unreachable)``), else a failed turn's error, cut short (``❌ error 529: Overloaded``), or a
    capped turn's ``note`` (``✂️ capped 200: cut by endpoint local's cap (max_tokens 512; …)``)."""
    emoji = EMOJI.get(outcome, EMOJI["error"])
    word = "error mid-stream" if outcome == "error" and status is not None and status < 400 else outcome
    head = f"{emoji} {word.replace('_', '-')}" + (f" {status}" if status is not None and word != "error mid-stream"
                                                  else "")
    if chain:
        head = f"{head} · {chain}"
    if note:
        return f"{head}: {note}"
    if chain:
        return head
    if outcome in ("pass_through", "retargeted", "translated", "capped"):
        return head
    text = " ".join((error or "no error text").split()).removeprefix("tokunseba: ")
    return f"{head}: {text if len(text) <= HEADLINE_MAX else text[:HEADLINE_MAX] + '…'}"


def final_comment(summary: str, *, outcome: str, status: int | None, error: str | None,
                  plumbing: Iterable[str] = (), endpoint_url: str | None = None,
                  secrets: Iterable[str] = (), request_id: str | None = None,
                  head: str | None = None) -> str:
    """`tk-… · easy-turns → local · anthropic→openai · dropped: thinking · added: max_tokens ·
    sent to http://…/v1/chat/completions`: the request id first (``~comment tk-…`` finds the
    turn; ``tokunseba explain`` takes it), then a failed turn's error, `error 400: … · `
    (`error mid-stream: … · ` when the status line had already left), so the flow list's
    comment column shows both. With ``head`` (``headline``), the comment starts with that
    short reason, before the request id."""
    parts = [summary] if summary else []
    added = _unique(plumbing)
    if added:
        parts.append("added: " + ", ".join(added))
    if endpoint_url:
        parts.append("sent to " + redact_url(endpoint_url))
    if outcome in ("error", "cancelled") and f"{outcome}:" not in summary:  # the whole error, after the headline
        if outcome == TurnOutcome.CANCELLED:
            what = "cancelled"
        elif status is not None and status < 400:  # the status line had left: the stream broke later
            what = "error mid-stream"
        else:
            what = "error" + (f" {status}" if status else "")
        text = " ".join((error or "no error text").split())
        if len(text) > MAX_COMMENT_ERROR:
            text = text[:MAX_COMMENT_ERROR] + "…"
        parts.insert(0, f"{what}: {text}")
    if request_id:
        parts.insert(0, request_id)
    if head:  # the short reason first, the details after it
        parts.insert(0, head)
    return redact_values(" · ".join(parts), secrets)


def error_message(body: bytes | None) -> str | None:
    """The message of an error envelope in any of the four protocols, if the body is one."""
    try:
        obj = json.loads(body or b"")
    except (ValueError, UnicodeDecodeError):
        return None
    if isinstance(obj, list) and obj:  # Gemini may wrap its error in a list
        obj = obj[0]
    err = obj.get("error") if isinstance(obj, dict) else None
    if isinstance(err, dict) and isinstance(err.get("message"), str):
        return err["message"]
    if isinstance(err, str):
        return err
    return None


def secrets_of(headers: Iterable[tuple[str, str]], urls: Iterable[str | None] = ()) -> set[str]:
    return credential_values(headers, [u for u in urls if u])


def original_view_text(record: dict | None, original_body: str | None, *, is_request: bool,
                       truncated: bool = False) -> str:
    """The `tokunseba-original` view: request line, headers (redacted), where the turn went,
    then the client's body as indented JSON (as sent when it is not JSON)."""
    if not is_request:
        return RESPONSE_SIDE
    if record is None or not record.get("rewritten"):
        return NOT_REWRITTEN
    lines = [f"{record.get('method', 'POST')} {record.get('url', '?')}"]
    if record.get("endpoint_url"):
        via = ", ".join(x for x in (record.get("endpoint"), record.get("target_protocol")) if x)
        lines.append(f"# sent to {record['endpoint_url']}" + (f" ({via})" if via else ""))
    lines += [f"{k}: {v}" for k, v in record.get("headers") or []]
    lines.append("")
    if original_body is None:
        lines.append("(the client's body was not kept)")
    else:
        lines.append(pretty_json(original_body))
        if truncated:
            lines.append("… (cut: only the first bytes of the client's body are kept)")
    return "\n".join(lines)


def pretty_json(text: str) -> str:
    """Indented JSON, keys in the client's order, non-ASCII kept; the text itself when it
    is not JSON (a view shows, it never fails)."""
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text


def _unique(items: Iterable[str]) -> list[str]:
    out: list[str] = []
    for i in items:
        if i not in out:
            out.append(i)
    return out
