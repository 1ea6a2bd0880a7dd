"""What mitmweb shows of a turn: ``view`` (marks, comments and the tokunseba-original
content view), ``redact`` (credentials hidden from what is displayed), ``style`` (the
column widths and styles tokunseba sets in the page).

Contract: presentation only; the proxy path calls it, nothing here changes a flow's bytes.
"""
