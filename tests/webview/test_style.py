"""mitmweb's flow list made wide enough for tokunseba's comment (webview/style.py): the style added
once before ``</head>`` of mitmweb's page, its Content-Length fixed; anything else untouched."""

from __future__ import annotations

from tokunseba.webview.style import COMMENT_WIDTH, STYLE, styled_first_chunk, with_style

PAGE = b"<!doctype html><html><head><title>mitmweb</title></head><body></body></html>"


def test_the_style_sets_the_comment_column_width():
    assert b".flow-table .col-comment{width:" + COMMENT_WIDTH.encode() + b"}" in STYLE
    assert STYLE.startswith(b"<style") and STYLE.endswith(b"</style>")


def test_with_style_adds_it_once_before_the_head_closes():
    styled = with_style(PAGE)
    assert styled == PAGE.replace(b"</head>", STYLE + b"</head>")
    assert with_style(styled) is styled  # once
    body = b"<html><body>no head</body></html>"
    assert with_style(body) is body


def test_the_first_chunk_of_mitmwebs_page_is_styled_and_its_length_fixed():
    headers = {"Content-Type": "text/html; charset=UTF-8", "Content-Length": str(len(PAGE))}
    status, out_headers, chunk = styled_first_chunk(200, headers, PAGE)
    assert status == 200 and STYLE in chunk
    assert out_headers["Content-Length"] == str(len(chunk)) == str(len(PAGE) + len(STYLE))


def test_other_replies_pass_untouched():
    js = {"Content-Type": "application/javascript", "Content-Length": "10"}
    assert styled_first_chunk(200, js, b"</head>...") == (200, {"Content-Type": "application/javascript",
                                                               "Content-Length": "10"}, b"</head>...")
    html_no_head = {"Content-Type": "text/html", "Content-Length": "4"}
    assert styled_first_chunk(200, html_no_head, b"<p/>") == (200, {"Content-Type": "text/html", "Content-Length": "4"},
                                                              b"<p/>")
    chunked = {"Content-Type": "text/html"}  # no Content-Length: none is added
    _, out, chunk = styled_first_chunk(200, chunked, PAGE)
    assert STYLE in chunk and "Content-Length" not in out
