"""The mitmweb display redaction (webview/redact.py): header values, URLs and known secrets in
free text. (The presentation it serves: tests/webview/test_view.py.)"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokunseba.webview.redact import (
    REDACTED,
    credential_values,
    redact_header_value,
    redact_headers,
    redact_values,
    redact_url,
)

KEY = "sk-ant-api03-SECRETSECRET"


@pytest.mark.parametrize("name,value,shown", [
    ("x-api-key", KEY, REDACTED),
    ("Authorization", f"Bearer {KEY}", f"Bearer {REDACTED}"),
    ("authorization", f"Basic {KEY}", f"Basic {REDACTED}"),
    ("x-goog-api-key", KEY, REDACTED),
    ("Cookie", "session=abc", REDACTED),
    ("x-custom-token", "t0k3n-value", REDACTED),
    ("content-type", "application/json", "application/json"),
    ("anthropic-version", "2023-06-01", "2023-06-01"),
])
def test_header_values(name, value, shown):
    assert redact_header_value(name, value) == shown


def test_headers_keep_order_and_names():
    assert redact_headers([("host", "h"), ("x-api-key", KEY)]) == [["host", "h"], ["x-api-key", REDACTED]]


@pytest.mark.parametrize("url,shown", [
    ("https://generativelanguage.googleapis.com/v1beta/models/g:generateContent?key=AIzaSECRET&alt=sse",
     "https://generativelanguage.googleapis.com/v1beta/models/g:generateContent?key=<redacted>&alt=sse"),
    ("https://user:pw@example.com/v1?x=1", "https://<redacted>@example.com/v1?x=1"),
    ("http://127.0.0.1:8/v1/chat/completions", "http://127.0.0.1:8/v1/chat/completions"),
])
def test_urls(url, shown):
    assert redact_url(url) == shown


def test_known_values_are_found_and_replaced_in_free_text():
    found = credential_values([("authorization", f"Bearer {KEY}"), ("x-api-key", "short"), ("accept", "x" * 40)],
                              ["https://h/v1?key=AIzaSECRETVALUE"])
    assert found == {KEY, "AIzaSECRETVALUE"}  # too-short values and non-credential headers are not searched
    assert redact_values(f"bad key {KEY} and AIzaSECRETVALUE", found) == f"bad key {REDACTED} and {REDACTED}"


@given(st.text(), st.sets(st.text(min_size=8, max_size=20), max_size=3))
def test_no_known_secret_survives(text, secrets):
    out = redact_values(text + "".join(secrets), secrets)
    assert all(s not in out or s in REDACTED for s in secrets)
