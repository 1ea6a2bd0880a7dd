"""mitmweb's flow list, made wide enough for tokunseba's comment.

mitmweb 12 gives its optional Comment column a fixed 150 px (``.flow-table .col-comment``
in its stylesheet): a turn's comment (request id, error, route → endpoint, fields left
behind) is cut after about 20 characters. The adapter adds a tornado output transform to
mitmweb's web application (proxy/web.py ``comment_column_style``: only the adapter imports
tornado) whose first chunk is ``styled_first_chunk``'s: ``STYLE`` (the column at
``COMMENT_WIDTH`` of the table, the rest as mitmweb draws it) added to the page mitmweb serves
at ``/``, before ``</head>``, and that reply's ``Content-Length`` fixed. mitmweb's
Content-Security-Policy allows inline styles (``style-src 'self' 'unsafe-inline'``).
Nothing else changes: other replies pass untouched.
"""

from __future__ import annotations

COMMENT_WIDTH = "40%"
STYLE = (f"<style id=\"tokunseba-style\">.flow-table .col-comment{{width:{COMMENT_WIDTH}}}</style>").encode()


def with_style(html: bytes) -> bytes:
    """``html`` with ``STYLE`` before its ``</head>`` (once; unchanged without a head)."""
    if STYLE in html or b"</head>" not in html:
        return html
    return html.replace(b"</head>", STYLE + b"</head>", 1)


def styled_first_chunk(status_code, headers, chunk):
    """A tornado output transform's first chunk: mitmweb's page (an HTML reply whose first
    chunk has ``</head>``) with ``STYLE``, its ``Content-Length`` fixed; anything else as it is."""
    if headers.get("Content-Type", "").startswith("text/html") and b"</head>" in chunk:
        styled = with_style(chunk)
        if styled is not chunk and "Content-Length" in headers:
            headers["Content-Length"] = str(len(styled))
        chunk = styled
    return status_code, headers, chunk
