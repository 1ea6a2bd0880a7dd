"""mitmweb's flow list, made wide enough for tokunseba's comment.

mitmweb 12 gives its optional Comment column a fixed 150 px (``.flow-table .col-comment``
in its stylesheet): a turn's comment (request id, error, route → endpoint, fields left
behind) is cut after about 20 characters. ``CommentColumnStyle`` is a tornado output
transform the adapter adds to mitmweb's web application: it adds ``STYLE`` (the column at
``COMMENT_WIDTH`` of the table, the rest as mitmweb draws it) to the page mitmweb serves at
``/``, before ``</head>``, and fixes that reply's ``Content-Length``. mitmweb's
Content-Security-Policy allows inline styles (``style-src 'self' 'unsafe-inline'``).
Nothing else changes: other replies pass untouched.
"""

from __future__ import annotations

import tornado.web

COMMENT_WIDTH = "40%"
STYLE = (f"<style id=\"tokunseba-style\">.flow-table .col-comment{{width:{COMMENT_WIDTH}}}</style>").encode()


def with_style(html: bytes) -> bytes:
    """``html`` with ``STYLE`` before its ``</head>`` (once; unchanged without a head)."""
    if STYLE in html or b"</head>" not in html:
        return html
    return html.replace(b"</head>", STYLE + b"</head>", 1)


class CommentColumnStyle(tornado.web.OutputTransform):
    """Adds ``STYLE`` to mitmweb's page (an HTML reply whose first chunk has ``</head>``)."""

    def transform_first_chunk(self, status_code, headers, chunk, finishing):
        if headers.get("Content-Type", "").startswith("text/html") and b"</head>" in chunk:
            styled = with_style(chunk)
            if styled is not chunk and "Content-Length" in headers:
                headers["Content-Length"] = str(len(styled))
            chunk = styled
        return status_code, headers, chunk
