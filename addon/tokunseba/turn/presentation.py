"""What mitmweb (and a saved flow) shows of a turn: the flow as the client sent it, and how
the turn ended.

Contract: functions over one flow and its ``FlowState`` (mitmproxy's flow, request and
headers are passed in and read or written by attribute; this module never imports
mitmproxy). ``record_original`` keeps the client's request line and headers (redacted) in the
flow's metadata and notes the key values its comment must not show; ``show_client_url``
puts the client's own URL back on the flow once the request has left and redacts the key
tokunseba added; ``present`` sets the flow's mark and comment to the outcome as the ledger
counts it. The adapter pushes the change to mitmweb's open pages. Never on the wire.
"""

from __future__ import annotations

import logging
from typing import Any

from ..credentials import is_credential_header
from ..webview import redact_header_value, redact_values
from ..webview import (
    RECORD_KEY,
    error_message,
    final_comment,
    final_mark,
    headline,
    original_record,
    secrets_of,
    web_outcome,
)
from ..outcomes import outcome_class
from .flowstate import FlowState
from .target import set_target

log = logging.getLogger("tokunseba")

MAX_ORIGINAL = 4 * 1024 * 1024


def record_original(flow: Any, state: FlowState, client_url: str, client_headers: Any, *, as_sent: bool = False) -> bool:
    """Keep the client's request line and headers (redacted) in the flow's metadata, and the
    key values the comment must not show. True when the flow was rewritten (URL, headers or
    body): its client's own request is what a replay must send. ``as_sent``: the request
    left as the client sent it (turn/target.py ``leaves_as_sent``): not rewritten, nothing to compare."""
    req, turn = flow.request, state.turn
    body_changed = turn.body is not None
    # the cheap test first: a changed body (every translated turn) needs no URL built nor headers compared
    rewritten = turn.local is None and not as_sent and (body_changed or req.url != client_url
                                                        or req.headers != client_headers)
    exact = len(turn.original_body) <= MAX_ORIGINAL and _is_utf8(turn.original_body)
    sent = list(client_headers.items(multi=True))  # a generator in mitmproxy: read once, used twice
    flow.metadata[RECORD_KEY] = {
        **original_record(method=req.method, url=client_url, headers=sent,
                          rewritten=rewritten, endpoint=turn.endpoint.name if turn.endpoint else None,
                          endpoint_url=turn.url, target_protocol=turn.target_protocol),
        "client_protocol": turn.client_protocol, "body_changed": body_changed, "body_exact": exact}
    shown = state.shown
    assert shown is not None
    shown.secrets = secrets_of(sent if as_sent else [*sent, *req.headers.items(multi=True)], [client_url, turn.url])
    shown.added_keys = [k for k in turn.set_headers if is_credential_header(k)] if turn.local is None else []
    flow.comment = redact_values(flow.comment, shown.secrets)
    return bool(rewritten)


def show_client_url(flow: Any, state: FlowState) -> None:
    """Once the request has left: the flow shows the URL the client asked for (the comment
    and the tokunseba-original view name the endpoint the turn really went to), and the
    endpoint key tokunseba added is redacted in the flow (mitmweb, saved flow files)."""
    shown = state.shown
    try:
        if shown is None:
            return
        if shown.client_target is not None:
            set_target(flow.request, shown.client_target)
        elif shown.client_url and flow.request.url != shown.client_url:
            flow.request.url = shown.client_url
        if shown.added_keys:  # one pass over the raw fields (a name lookup in mitmproxy's Headers scans them all)
            headers = flow.request.headers
            added = {k.lower().encode("utf-8", "surrogateescape") for k in shown.added_keys}
            headers.fields = tuple((k, _redacted(k, v)) if k.lower() in added else (k, v) for k, v in headers.fields)
    except Exception:
        log.exception("tokunseba: could not restore the client's URL on the flow")


def present(flow: Any, state: FlowState, ledger_outcome: str | None, status: int | None,
            note: str | None = None) -> bool:
    """The turn has ended: its mark and comment state the outcome as the ledger counts it (and
    ``note``: why a ``capped`` turn is, turn/cap_note.py). False when that failed (logged)."""
    turn, shown, state.shown = state.turn, state.shown, None
    try:
        error = turn.error
        if error is None and status is not None and status >= 400 and flow.response is not None \
                and flow.response.raw_content is not None:
            error = error_message(flow.response.get_content(strict=False))
        outcome = web_outcome(ledger_outcome, status, error)
        cls = outcome_class(ledger_outcome, status, error)  # the one vocabulary (outcomes.py), as `log` says it
        plumbing = (turn.translation.plumbing if turn.translation else []) + turn.plumbing_headers
        flow.marked = final_mark(outcome)
        head = headline(cls, status, chain=turn.failed_over, error=error, note=note)
        flow.comment = final_comment(turn.summary(), request_id=turn.request_id, outcome=outcome, status=status,
                                     error=error, plumbing=plumbing, endpoint_url=turn.url,
                                     secrets=shown.secrets if shown else (), head=head)
        return True
    except Exception:
        log.exception("tokunseba: could not update the flow's mark and comment")
        return False


def _redacted(name: bytes, value: bytes) -> bytes:
    """A raw header field's value with its credential redacted (``redact_header_value``)."""
    return redact_header_value(name.decode("utf-8", "surrogateescape"),
                               value.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")


def _is_utf8(data: bytes) -> bool:
    if data.isascii():  # one C pass, no 48 KB string made: most request bodies
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
