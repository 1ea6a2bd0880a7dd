"""What mitmweb shows of a turn: ``view`` (marks, comments and the tokunseba-original
content view), ``redact`` (credentials hidden from what is displayed), ``style`` (the
column widths and styles tokunseba sets in the page).

Contract: presentation only; the proxy path calls it, nothing here changes a flow's bytes.
"""

from __future__ import annotations

from .redact import redact_header_value, redact_values
from .style import styled_first_chunk
from .view import (CLIENT_KEY, MARKS, ORIGINAL_KEY, RECORD_KEY, error_message, final_comment, final_mark, headline, original_record,
                   original_view_text, secrets_of, web_outcome)

__all__ = [
    "redact_header_value", "redact_values", "styled_first_chunk", "MARKS", "RECORD_KEY", "ORIGINAL_KEY", "CLIENT_KEY", "error_message",
    "final_comment", "final_mark", "headline", "original_record", "original_view_text", "secrets_of", "web_outcome",
]
