"""Credential redaction for what tokunseba shows in mitmweb (issue 14): header values,
URL query parameters and known secret values in free text.

A display-only helper: it never touches what is sent, only the text tokunseba puts in
front of a user (the `tokunseba-original` view, flow comments). Which names are
credentials, the redaction marker and the endpoints' known keys come from credentials.py; what
is here is the display side: header values keeping their auth scheme word, URLs, and the
secret values of one flow searched for in free text.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..credentials import KNOWN_SECRETS, REDACTED, is_credential_header, is_secret_param

AUTH_SCHEMES = ("bearer ", "basic ", "token ")
MIN_SECRET_LEN = 8  # shorter values are not searched for in free text (too many false hits)


def redact_header_value(name: str, value: str) -> str:
    """The value with any credential replaced; an auth scheme word (`Bearer`) is kept."""
    if not is_credential_header(name):
        return value
    low = value.lower()
    for scheme in AUTH_SCHEMES:
        if low.startswith(scheme):
            return value[: len(scheme)] + REDACTED
    return REDACTED


def redact_headers(headers: Iterable[tuple[str, str]]) -> list[list[str]]:
    return [[k, redact_header_value(k, v)] for k, v in headers]


def redact_url(url: str) -> str:
    """The URL with credential query parameters and any user:password part replaced."""
    try:
        u = urlsplit(url)
    except ValueError:
        return url
    netloc = u.netloc
    if "@" in netloc:
        netloc = REDACTED + "@" + netloc.rsplit("@", 1)[1]
    query = u.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(is_secret_param(k) for k, _ in pairs):
            query = urlencode([(k, REDACTED if is_secret_param(k) else v) for k, v in pairs], safe="<>")
    return urlunsplit((u.scheme, netloc, u.path, query, u.fragment))


def credential_values(headers: Iterable[tuple[str, str]], urls: Iterable[str] = ()) -> set[str]:
    """The secret values carried by these headers and URLs (auth scheme word removed), to
    be searched for in free text such as an upstream's error message."""
    found: set[str] = set()
    for k, v in headers:
        if is_credential_header(k):
            low = v.lower()
            for scheme in AUTH_SCHEMES:
                if low.startswith(scheme):
                    v = v[len(scheme):]
                    break
            found.add(v.strip())
    for url in urls:
        try:
            pairs = parse_qsl(urlsplit(url).query, keep_blank_values=True)
        except ValueError:
            continue
        found.update(v for k, v in pairs if is_secret_param(k))
    return {s for s in found if len(s) >= MIN_SECRET_LEN}


def redact_values(text: str, secrets: Iterable[str]) -> str:
    """Free text with every occurrence of the given secret values replaced (longest first)."""
    for s in sorted(secrets, key=len, reverse=True):
        if s and s in text:
            text = text.replace(s, REDACTED)
    return KNOWN_SECRETS.redact_text(text)  # and the endpoints' own keys (credentials.py)
